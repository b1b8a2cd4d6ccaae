"""Roles, their members and their grants in PostgreSQL (SQL only); with the managed warehouses,
whose statements live in ``storage/warehouses.py`` (``ManagementRows`` derives from ``WarehouseRows``
so that the management service reaches all it manages through one object).

The rules (who may manage, what a valid name or privilege is, encryption of storage keys) live in
``app/management/service.py`` (principals' and roles': ``app/management/identities.py``). Every
change bumps ``auth_state.version`` in the same transaction, so every worker drops what it cached
(decisions, warehouse rows) within a poll (app/edge/auth/state.py): for roles, members and grants
the triggers of migration 0011 do it (whoever writes), for warehouses ``storage/warehouses.py``.
Listings are keyset-paginated: ``after`` is the last key of the previous page, ``limit`` rows at most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.ground.errors import NotFound
from storage.db import Connection, Database
from storage.events import ChangeEvent, record_events
from storage.warehouses import WarehouseRows


@dataclass(frozen=True)
class Securable:
    """What a grant is on, by name: ``type`` is catalog, warehouse, namespace, table or view."""

    type: str
    warehouse: str | None = None
    namespace: tuple[str, ...] = ()
    name: str | None = None


@dataclass(frozen=True)
class GrantRow:
    id: int
    role: str
    privilege: str
    securable: Securable


@dataclass(frozen=True)
class RoleRow:
    name: str
    created_at: str
    trusted_engine: bool = False


class ManagementRows(WarehouseRows):
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- roles ------------------------------------------------------------------------------

    def create_role(self, name: str, *, events: Sequence[ChangeEvent]) -> RoleRow | None:
        """The new role; None when the name is taken. Each change of this module writes its
        ``events`` in its transaction when it changes something (storage/events.py)."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO role (name) VALUES (%s) ON CONFLICT (name) DO NOTHING"
                " RETURNING name, created_at, trusted_engine",
                (name,),
            ).fetchone()
            if row:
                record_events(conn, events)
        return _role(row) if row else None

    def get_role(self, name: str) -> RoleRow | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT name, created_at, trusted_engine FROM role WHERE name = %s", (name,)).fetchone()
        return _role(row) if row else None

    def set_role_trusted_engine(self, name: str, trusted: bool, *, events: Sequence[ChangeEvent]) -> RoleRow | None:
        """Mark a role's holders as trusted engines (or not), with ``events``; None: no such role."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE role SET trusted_engine = %s WHERE name = %s RETURNING name, created_at, trusted_engine",
                (trusted, name),
            ).fetchone()
            if row:
                record_events(conn, events)
        return _role(row) if row else None

    def list_roles(self, after: str | None, limit: int | None) -> list[str]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT name FROM role WHERE %(after)s::text IS NULL OR name > %(after)s ORDER BY name LIMIT %(limit)s",
                {"after": after, "limit": limit},
            ).fetchall()
        return [row["name"] for row in rows]

    def delete_role(self, name: str, *, events: Sequence[ChangeEvent]) -> bool:
        """Its memberships and grants go with it (ON DELETE CASCADE)."""
        with self.db.transaction() as conn:
            row = conn.execute("DELETE FROM role WHERE name = %s RETURNING id", (name,)).fetchone()
            if row:
                record_events(conn, events)
        return row is not None

    # -- members ----------------------------------------------------------------------------

    def add_member(self, role: str, principal: str, *, events: Sequence[ChangeEvent]) -> bool | None:
        """True when added, False when already a member (or the principal is not a live one of our
        own), None when the role does not exist.

        The principal's row is locked FOR SHARE: a deletion (storage/principals.py), which updates
        that row and then removes its memberships, either commits first (then nothing is added)
        or waits for this insert and removes it too. No membership outlives its principal.
        """
        with self.db.transaction() as conn:
            role_id = _role_id(conn, role)
            if role_id is None:
                return None
            live = conn.execute(
                "SELECT 1 FROM principal WHERE client_id = %s AND deleted_at IS NULL FOR SHARE", (principal,)
            ).fetchone()
            if live is None:
                return False
            row = conn.execute(
                "INSERT INTO role_member (role_id, principal) VALUES (%s, %s) ON CONFLICT DO NOTHING RETURNING role_id",
                (role_id, principal),
            ).fetchone()
            if row:
                record_events(conn, events)
        return row is not None

    def remove_member(self, role: str, principal: str, *, events: Sequence[ChangeEvent]) -> bool | None:
        """True when removed, False when not a member, None when the role does not exist."""
        with self.db.transaction() as conn:
            role_id = _role_id(conn, role)
            if role_id is None:
                return None
            row = conn.execute(
                "DELETE FROM role_member WHERE role_id = %s AND principal = %s RETURNING role_id", (role_id, principal)
            ).fetchone()
            if row:
                record_events(conn, events)
        return row is not None

    def list_members(self, role: str, after: str | None, limit: int | None) -> list[str] | None:
        """Principals holding the role; None when the role does not exist."""
        with self.db.connection() as conn:
            role_id = _role_id(conn, role)
            if role_id is None:
                return None
            rows = conn.execute(
                "SELECT principal FROM role_member WHERE role_id = %(role)s"
                " AND (%(after)s::text IS NULL OR principal > %(after)s) ORDER BY principal LIMIT %(limit)s",
                {"role": role_id, "after": after, "limit": limit},
            ).fetchall()
        return [row["principal"] for row in rows]

    def roles_of(self, principal: str) -> list[str]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT r.name FROM role_member m JOIN role r ON r.id = m.role_id"
                " WHERE m.principal = %s ORDER BY r.name",
                (principal,),
            ).fetchall()
        return [row["name"] for row in rows]

    # -- grants -----------------------------------------------------------------------------

    def add_grant(self, role: str, privilege: str, securable: Securable, *, events: Sequence[ChangeEvent]) -> GrantRow:
        """The grant (the existing one when it was granted before). NotFound for an unknown role
        or securable."""
        with self.db.transaction() as conn:
            role_id = _require_role(conn, role)
            target = grant_target(conn, securable)
            row = conn.execute(
                "INSERT INTO role_grant (role_id, privilege, securable, warehouse_id, namespace_id, entry_id,"
                " remote_path, remote_name) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT DO NOTHING RETURNING id",
                (role_id, privilege, securable.type, *target),
            ).fetchone()
            if row is not None:
                record_events(conn, events)
            else:  # granted before: the existing grant
                row = conn.execute(
                    "SELECT id FROM role_grant WHERE role_id = %s AND privilege = %s AND securable = %s" + SAME_TARGET,
                    (role_id, privilege, securable.type, *target),
                ).fetchone()
        return GrantRow(row["id"], role, privilege, securable)

    def remove_grant(self, role: str, privilege: str, securable: Securable, *, events: Sequence[ChangeEvent]) -> bool:
        """False when there was no such grant. NotFound for an unknown role or securable."""
        with self.db.transaction() as conn:
            role_id = _require_role(conn, role)
            target = grant_target(conn, securable)
            row = conn.execute(
                "DELETE FROM role_grant WHERE role_id = %s AND privilege = %s AND securable = %s"
                + SAME_TARGET
                + " RETURNING id",
                (role_id, privilege, securable.type, *target),
            ).fetchone()
            if row is not None:
                record_events(conn, events)
        return row is not None

    def grants_of_role(self, role: str, after: int | None, limit: int | None) -> list[GrantRow]:
        with self.db.connection() as conn:
            role_id = _require_role(conn, role)
            rows = conn.execute(
                GRANT_SELECT + " WHERE g.role_id = %(role)s AND (%(after)s::bigint IS NULL OR g.id > %(after)s)"
                " ORDER BY g.id LIMIT %(limit)s",
                {"role": role_id, "after": after, "limit": limit},
            ).fetchall()
        return [_grant(row) for row in rows]

    def grants_on(self, securable: Securable, after: int | None, limit: int | None) -> list[GrantRow]:
        """Grants on exactly this securable (not those inherited from above it)."""
        with self.db.connection() as conn:
            warehouse_id, namespace_id, entry_id, path, name = grant_target(conn, securable)
            rows = conn.execute(
                GRANT_SELECT + " WHERE g.securable = %(type)s AND g.warehouse_id IS NOT DISTINCT FROM %(wh)s"
                " AND g.namespace_id IS NOT DISTINCT FROM %(ns)s AND g.entry_id IS NOT DISTINCT FROM %(entry)s"
                " AND g.remote_path IS NOT DISTINCT FROM %(path)s::text[]"
                " AND g.remote_name IS NOT DISTINCT FROM %(name)s::text"
                " AND (%(after)s::bigint IS NULL OR g.id > %(after)s) ORDER BY g.id LIMIT %(limit)s",
                {
                    "type": securable.type,
                    "wh": warehouse_id,
                    "ns": namespace_id,
                    "entry": entry_id,
                    "path": path,
                    "name": name,
                    "after": after,
                    "limit": limit,
                },
            ).fetchall()
        return [_grant(row) for row in rows]


GRANT_SELECT = (
    "SELECT g.id, r.name AS role, g.privilege, g.securable, w.name AS warehouse,"
    " COALESCE(n.path, g.remote_path) AS namespace, COALESCE(e.name, g.remote_name) AS entry"
    " FROM role_grant g JOIN role r ON r.id = g.role_id"
    " LEFT JOIN warehouse w ON w.id = g.warehouse_id LEFT JOIN namespace n ON n.id = g.namespace_id"
    " LEFT JOIN catalog_entry e ON e.id = g.entry_id"
)


def _role(row: dict[str, Any]) -> RoleRow:
    return RoleRow(row["name"], row["created_at"].isoformat(), bool(row.get("trusted_engine")))


def _grant(row: dict[str, Any]) -> GrantRow:
    securable = Securable(row["securable"], row["warehouse"], tuple(row["namespace"] or ()), row["entry"])
    return GrantRow(row["id"], row["role"], row["privilege"], securable)


def _role_id(conn: Connection, name: str) -> int | None:
    row = conn.execute("SELECT id FROM role WHERE name = %s", (name,)).fetchone()
    return row["id"] if row else None


def _require_role(conn: Connection, name: str) -> int:
    role_id = _role_id(conn, name)
    if role_id is None:
        raise NotFound(f"Role does not exist: {name}")
    return role_id


# The grant's target, as ``grant_target`` gives it, compared column by column.
SAME_TARGET = (
    " AND warehouse_id IS NOT DISTINCT FROM %s AND namespace_id IS NOT DISTINCT FROM %s"
    " AND entry_id IS NOT DISTINCT FROM %s AND remote_path IS NOT DISTINCT FROM %s::text[]"
    " AND remote_name IS NOT DISTINCT FROM %s::text"
)

GrantTarget = tuple[int | None, int | None, int | None, list[str] | None, str | None]


def grant_target(conn: Connection, securable: Securable) -> GrantTarget:
    """(warehouse id, namespace id, entry id, remote path, remote name) of a grant's securable: by
    ids for a native warehouse (NotFound if missing), by path inside a federated one (migration
    0029: its objects live in the remote catalog, which Growler does not ask here)."""
    if securable.type in ("namespace", "table", "view") and securable.warehouse is not None:
        row = conn.execute(
            "SELECT id FROM warehouse WHERE name = %s AND federation IS NOT NULL", (securable.warehouse,)
        ).fetchone()
        if row is not None:
            name = securable.name if securable.type != "namespace" else None
            return row["id"], None, None, list(securable.namespace), name
    return (*securable_ids(conn, securable), None, None)


def securable_ids(conn: Connection, securable: Securable) -> tuple[int | None, int | None, int | None]:
    """(warehouse id, namespace id, entry id) of a securable named by its parts; NotFound if missing."""
    if securable.type == "catalog":
        return None, None, None
    row = conn.execute("SELECT id FROM warehouse WHERE name = %s", (securable.warehouse,)).fetchone()
    if row is None:
        raise NotFound(f"Warehouse does not exist: {securable.warehouse}")
    warehouse_id = row["id"]
    if securable.type == "warehouse":
        return warehouse_id, None, None
    row = conn.execute(
        "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s", (warehouse_id, list(securable.namespace))
    ).fetchone()
    if row is None:
        raise NotFound(f"Namespace does not exist: {'.'.join(securable.namespace)}")
    namespace_id = row["id"]
    if securable.type == "namespace":
        return warehouse_id, namespace_id, None
    row = conn.execute(
        "SELECT id FROM catalog_entry WHERE namespace_id = %s AND name = %s AND kind = %s",
        (namespace_id, securable.name, securable.type),
    ).fetchone()
    if row is None:
        kind = "Table" if securable.type == "table" else "View"
        raise NotFound(f"{kind} does not exist: {'.'.join((*securable.namespace, str(securable.name)))}")
    return warehouse_id, namespace_id, row["id"]
