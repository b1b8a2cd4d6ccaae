"""Roles, memberships and grants in PostgreSQL (SQL only; the rules live in app/rules/privileges.py).

Grants point at ids (0010) and are read back as paths: the warehouse's name, the namespace's
path and the entry's name, which is what a decision needs. Every write bumps
``auth_state.version`` by trigger (0011), in the same transaction, so every worker's cached
decisions are dropped within a poll.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import errors as pg_errors

from storage.db import Connection, Database

SECURABLES = ("catalog", "warehouse", "namespace", "table", "view")


@dataclass(frozen=True)
class GrantRow:
    role: str
    privilege: str
    securable: str  # catalog, warehouse, namespace, table or view
    warehouse: str | None
    namespace: tuple[str, ...] | None
    name: str | None


@dataclass(frozen=True)
class Holdings:
    """What one principal holds: the admin flag (own principals only) and its roles' grants."""

    admin: bool
    grants: list[GrantRow]


class UnknownSecurable(LookupError):
    """The warehouse, namespace, table or view a grant names does not exist."""


_GRANT_COLUMNS = (
    "SELECT r.name AS role, g.privilege, g.securable, w.name AS warehouse, n.path AS namespace, e.name AS name"
    " FROM role_grant g JOIN role r ON r.id = g.role_id"
    " LEFT JOIN warehouse w ON w.id = g.warehouse_id"
    " LEFT JOIN namespace n ON n.id = g.namespace_id"
    " LEFT JOIN catalog_entry e ON e.id = g.entry_id"
)

# One round trip: the admin flag and every grant of every role the principal holds, by
# membership or named in its token's roles claim. One row, even with no grants.
_HOLDINGS = (
    "WITH held AS ("
    "  SELECT role_id FROM role_member WHERE principal = %(principal)s"
    "  UNION SELECT id FROM role WHERE name = ANY(%(claimed)s)"
    "), granted AS (" + _GRANT_COLUMNS + " JOIN held h ON h.role_id = g.role_id)"
    " SELECT EXISTS (SELECT 1 FROM principal WHERE client_id = %(principal)s AND is_admin AND deleted_at IS NULL"
    "                AND %(own)s) AS admin,"
    " COALESCE((SELECT json_agg(json_build_array(role, privilege, securable, warehouse, namespace, name))"
    "           FROM granted), '[]'::json) AS grants"
)


def _row(values: Any) -> GrantRow:
    role, privilege, securable, warehouse, namespace, name = values
    return GrantRow(role, privilege, securable, warehouse, tuple(namespace) if namespace is not None else None, name)


class GrantRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- read side: the authorizer's one lookup on a cache miss ------------------------------

    def holdings(self, principal: str, claimed_roles: tuple[str, ...] = (), *, own: bool = True) -> Holdings:
        """The principal's admin flag (``own``: a principal of Growler's own) and its grants."""
        with self.db.connection() as conn:
            row = conn.execute(
                _HOLDINGS, {"principal": principal, "claimed": list(claimed_roles), "own": own}
            ).fetchone()
        return Holdings(bool(row["admin"]), [_row(values) for values in row["grants"]])

    def list_grants(
        self,
        *,
        role: str | None = None,
        securable: str | None = None,
        warehouse: str | None = None,
        namespace: tuple[str, ...] | None = None,
        name: str | None = None,
    ) -> list[GrantRow]:
        """Grants of one role, or on one securable (``securable`` and its path), or both."""
        clauses, params = [], []
        if role is not None:
            clauses.append("r.name = %s")
            params.append(role)
        if securable is not None:
            clauses.append("g.securable = %s AND w.name IS NOT DISTINCT FROM %s")
            params.extend([securable, warehouse])
            clauses.append("n.path IS NOT DISTINCT FROM %s AND e.name IS NOT DISTINCT FROM %s")
            params.extend([list(namespace) if namespace is not None else None, name])
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        with self.db.connection() as conn:
            rows = conn.execute(
                _GRANT_COLUMNS + where + " ORDER BY r.name, g.securable, w.name, n.path, e.name, g.privilege",
                params,
            ).fetchall()
        return [_row(tuple(row.values())) for row in rows]

    def roles_of(self, principal: str) -> list[str]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT r.name FROM role r JOIN role_member m ON m.role_id = r.id WHERE m.principal = %s"
                " ORDER BY r.name",
                (principal,),
            ).fetchall()
        return [row["name"] for row in rows]

    # -- write side (the management API's) -----------------------------------------------------

    def create_role(self, name: str) -> bool:
        """False when the name is taken."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO role (name) VALUES (%s) ON CONFLICT (name) DO NOTHING RETURNING id", (name,)
            ).fetchone()
        return row is not None

    def delete_role(self, name: str) -> bool:
        """Its memberships and grants go with it."""
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM role WHERE name = %s", (name,)).rowcount == 1

    def add_member(self, role: str, principal: str) -> bool:
        """False when there is no such role; adding a member twice is not an error."""
        with self.db.transaction() as conn:
            found = conn.execute("SELECT id FROM role WHERE name = %s", (role,)).fetchone()
            if found is None:
                return False
            conn.execute(
                "INSERT INTO role_member (role_id, principal) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                (found["id"], principal),
            )
        return True

    def remove_member(self, role: str, principal: str) -> bool:
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "DELETE FROM role_member m USING role r WHERE m.role_id = r.id AND r.name = %s AND m.principal = %s",
                (role, principal),
            )
        return cursor.rowcount == 1

    def grant(
        self,
        role: str,
        privilege: str,
        securable: str,
        warehouse: str | None = None,
        namespace: tuple[str, ...] | None = None,
        name: str | None = None,
    ) -> bool:
        """Grant ``privilege`` on the securable named by its path; False when it was held already.

        Raises LookupError for an unknown role and UnknownSecurable for a path that does not exist.
        """
        with self.db.transaction() as conn:
            role_id = _role_id(conn, role)
            ids = _securable_ids(conn, securable, warehouse, namespace, name)
            try:
                row = conn.execute(
                    "INSERT INTO role_grant (role_id, privilege, securable, warehouse_id, namespace_id, entry_id)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING id",
                    (role_id, privilege, securable, *ids),
                ).fetchone()
            except pg_errors.CheckViolation as exc:
                raise UnknownSecurable(f"invalid securable {securable!r}") from exc
        return row is not None

    def revoke(
        self,
        role: str,
        privilege: str,
        securable: str,
        warehouse: str | None = None,
        namespace: tuple[str, ...] | None = None,
        name: str | None = None,
    ) -> bool:
        """False when the grant was not held (or its securable does not exist any more)."""
        with self.db.transaction() as conn:
            role_id = _role_id(conn, role)
            try:
                ids = _securable_ids(conn, securable, warehouse, namespace, name)
            except UnknownSecurable:
                return False
            cursor = conn.execute(
                "DELETE FROM role_grant WHERE role_id = %s AND privilege = %s AND securable = %s"
                " AND warehouse_id IS NOT DISTINCT FROM %s AND namespace_id IS NOT DISTINCT FROM %s"
                " AND entry_id IS NOT DISTINCT FROM %s",
                (role_id, privilege, securable, *ids),
            )
        return cursor.rowcount == 1


def _role_id(conn: Connection, role: str) -> int:
    found = conn.execute("SELECT id FROM role WHERE name = %s", (role,)).fetchone()
    if found is None:
        raise LookupError(f"Role does not exist: {role}")
    return int(found["id"])


def _securable_ids(
    conn: Connection, securable: str, warehouse: str | None, namespace: tuple[str, ...] | None, name: str | None
) -> tuple[int | None, int | None, int | None]:
    """(warehouse_id, namespace_id, entry_id) of the securable, or UnknownSecurable."""
    if securable not in SECURABLES:
        raise UnknownSecurable(f"invalid securable {securable!r}")
    if securable == "catalog":
        return None, None, None
    found = conn.execute("SELECT id FROM warehouse WHERE name = %s", (warehouse,)).fetchone()
    if found is None:
        raise UnknownSecurable(f"Warehouse does not exist: {warehouse}")
    warehouse_id = int(found["id"])
    if securable == "warehouse":
        return warehouse_id, None, None
    found = conn.execute(
        "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s", (warehouse_id, list(namespace or ()))
    ).fetchone()
    if found is None:
        raise UnknownSecurable(f"Namespace does not exist: {'.'.join(namespace or ())}")
    namespace_id = int(found["id"])
    if securable == "namespace":
        return warehouse_id, namespace_id, None
    found = conn.execute(
        "SELECT id FROM catalog_entry WHERE namespace_id = %s AND name = %s AND kind = %s",
        (namespace_id, name, securable),
    ).fetchone()
    if found is None:
        raise UnknownSecurable(f"{securable.capitalize()} does not exist: {'.'.join((*(namespace or ()), name or ''))}")
    return warehouse_id, namespace_id, int(found["id"])
