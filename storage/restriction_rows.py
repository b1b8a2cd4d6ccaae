"""Read restrictions' rows (migration 0031; the rules are app/rules/restrictions/, the service
app/restrictions/service.py). SQL only.

A restriction points at ids like a grant (``grant_target``; by path in a federated warehouse,
migration 0038), so it follows a rename and leaves with what it is on; the recycle bin keeps those
of a dropped table or namespace and gives them back on undrop (storage/bin_rows.py calls
``bin_restrictions`` and ``restore_restrictions``).
Every change bumps ``auth_state.version`` by trigger: the authorizer caches them with the grants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import Connection
from psycopg.types.json import Jsonb

from storage.db import Database
from storage.events import ChangeEvent, record_events
from storage.management_rows import SAME_TARGET, Securable, grant_target


@dataclass(frozen=True)
class RestrictionRow:
    securable: Securable
    grantee_type: str  # "role" | "principal"
    grantee: str
    row_filter: Any | None
    columns: list[dict[str, str]]
    created_by: str | None


class UnknownRole(LookupError):
    pass


# Resolved to paths, as the grants are (GRANT_SELECT): a restriction's node in the grants' tree.
RESTRICTION_SELECT = (
    "SELECT r.securable, w.name AS warehouse, coalesce(n.path, r.remote_path) AS namespace,"
    " coalesce(e.name, r.remote_name) AS entry, r.row_filter, r.columns,"
    " ro.name AS role, r.principal, r.created_by"
    " FROM read_restriction r JOIN warehouse w ON w.id = r.warehouse_id"
    " LEFT JOIN namespace n ON n.id = r.namespace_id LEFT JOIN catalog_entry e ON e.id = r.entry_id"
    " LEFT JOIN role ro ON ro.id = r.role_id"
)
_COLUMNS = (
    "role_id, principal, securable, warehouse_id, namespace_id, entry_id, row_filter, columns, created_by, created_at"
)


class RestrictionRows:
    def __init__(self, db: Database) -> None:
        self.db = db

    def set(
        self,
        securable: Securable,
        grantee_type: str,
        grantee: str,
        row_filter: Any | None,
        columns: list[dict[str, str]],
        created_by: str | None,
        *,
        events: Sequence[ChangeEvent],
    ) -> None:
        """Attach (or replace) the grantee's restriction on the securable, with ``events``.
        NotFound (the securable), UnknownRole."""
        with self.db.transaction() as conn:
            target = grant_target(conn, securable)  # ids, or a path in a federated warehouse (0038)
            role_id = _role_id(conn, grantee) if grantee_type == "role" else None
            principal = grantee if grantee_type == "principal" else None
            conn.execute(
                "DELETE FROM read_restriction WHERE role_id IS NOT DISTINCT FROM %s"
                " AND principal IS NOT DISTINCT FROM %s AND securable = %s" + SAME_TARGET,
                (role_id, principal, securable.type, *target),
            )
            conn.execute(
                "INSERT INTO read_restriction (role_id, principal, securable, warehouse_id, namespace_id, entry_id,"
                " remote_path, remote_name, row_filter, columns, created_by)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    role_id,
                    principal,
                    securable.type,
                    *target,
                    Jsonb(row_filter) if row_filter is not None else None,
                    Jsonb(columns),
                    created_by,
                ),
            )
            record_events(conn, events)

    def remove(self, securable: Securable, grantee_type: str, grantee: str, *, events: Sequence[ChangeEvent]) -> bool:
        """Remove the grantee's restriction on the securable; False when it had none there."""
        with self.db.transaction() as conn:
            target = grant_target(conn, securable)
            removed = conn.execute(
                "DELETE FROM read_restriction r USING (SELECT %s::text AS kind, %s::text AS name) g"
                " WHERE (CASE WHEN g.kind = 'role' THEN r.role_id = (SELECT id FROM role WHERE name = g.name)"
                "        ELSE r.principal = g.name END)"
                " AND r.securable = %s" + SAME_TARGET + " RETURNING r.id",
                (grantee_type, grantee, securable.type, *target),
            ).fetchone()
            if removed is not None:
                record_events(conn, events)
        return removed is not None

    def in_warehouse(self, warehouse_id: int) -> list[RestrictionRow]:
        with self.db.connection() as conn:
            rows = conn.execute(
                RESTRICTION_SELECT + " WHERE r.warehouse_id = %s ORDER BY r.id", (warehouse_id,)
            ).fetchall()
        return [_row(row) for row in rows]


def _role_id(conn: Connection, name: str) -> int:
    row = conn.execute("SELECT id FROM role WHERE name = %s", (name,)).fetchone()
    if row is None:
        raise UnknownRole(name)
    return int(row["id"])


def _row(row: dict[str, Any]) -> RestrictionRow:
    securable = Securable(row["securable"], row["warehouse"], tuple(row["namespace"] or ()), row["entry"])
    grantee_type, grantee = ("role", row["role"]) if row["role"] is not None else ("principal", row["principal"])
    return RestrictionRow(securable, grantee_type, grantee, row["row_filter"], list(row["columns"]), row["created_by"])


# -- the recycle bin's half (called inside its transactions) -------------------------------------


def bin_restrictions(conn: Connection, unit_id: int, where: str, ids: Any) -> None:
    """Move the restrictions on what a unit holds into the bin: ``where`` is ``entry_id`` (a table
    or view) or ``namespace_id`` (a namespace and everything in it), ``ids`` one id or an array."""
    column = {"entry_id": "entry_id = %s", "namespace_id": "namespace_id = ANY(%s)"}[where]
    conn.execute(
        f"INSERT INTO bin_read_restriction (id, unit_id, {_COLUMNS}) SELECT id, %s, {_COLUMNS}"
        f" FROM read_restriction WHERE {column}",
        (unit_id, ids),
    )


def restore_restrictions(conn: Connection, unit_id: int, namespace_id: int | None = None) -> None:
    """Give a unit's restrictions back (an undrop); ``namespace_id``: the namespace an undropped
    table or view lands in (a namespace unit's own ids come back unchanged)."""
    namespace = "%s" if namespace_id is not None else "namespace_id"
    args: tuple[Any, ...] = (namespace_id, unit_id) if namespace_id is not None else (unit_id,)
    conn.execute(
        f"INSERT INTO read_restriction (id, {_COLUMNS}) OVERRIDING SYSTEM VALUE"
        f" SELECT id, role_id, principal, securable, warehouse_id, {namespace}, entry_id, row_filter, columns,"
        " created_by, created_at FROM bin_read_restriction WHERE unit_id = %s ON CONFLICT DO NOTHING",
        args,
    )
