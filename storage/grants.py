"""What one principal holds, read for the authorizer (SQL only; the rules live in app/rules/privileges.py).

Roles, memberships and grants are written by the management API alone (storage/management_rows.py);
this module is the read side the authorizer needs on a cache miss: one query for a principal's
admin flag and every grant of every role it holds. Grants point at ids (0010) and are read back as
paths (the warehouse's name, the namespace's path, the entry's name), which is what a decision needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from storage.db import Database
from storage.management_rows import GRANT_SELECT, GrantRow, Securable
from storage.restriction_rows import RESTRICTION_SELECT


@dataclass(frozen=True)
class RestrictionOf:
    """A read restriction the principal is subject to, on a securable named by its path."""

    securable: Securable
    row_filter: Any | None
    columns: list[dict[str, str]]


@dataclass(frozen=True)
class Holdings:
    """What one principal holds: the admin flag (own principals only) and its roles' grants."""

    admin: bool
    grants: list[GrantRow]
    restrictions: list[RestrictionOf] = field(default_factory=list)
    roles: tuple[str, ...] = ()  # every role held (with grants or not): a row filter may name them
    trusted_engine: bool = False


# One round trip: the admin flag and every grant of every role the principal holds: by membership
# for a principal of our own, by its token's roles claim for an IdP's. Memberships name our own
# principals only, so an IdP subject that happens to carry an own principal's name holds nothing
# of its. One row, even with no grants.
_HOLDINGS = (
    "WITH held AS ("
    "  SELECT role_id FROM role_member WHERE principal = %(principal)s AND %(own)s"
    "  UNION SELECT id FROM role WHERE name = ANY(%(claimed)s)"
    "), granted AS (" + GRANT_SELECT + " JOIN held h ON h.role_id = g.role_id)"
    " SELECT EXISTS (SELECT 1 FROM principal WHERE client_id = %(principal)s AND is_admin AND deleted_at IS NULL"
    "                AND %(own)s) AS admin,"
    " COALESCE((SELECT json_agg(json_build_array(id, role, privilege, securable, warehouse, namespace, entry))"
    "           FROM granted), '[]'::json) AS grants,"
    # the read restrictions on the principal (by name) or a role it holds (storage/restriction_rows.py)
    " COALESCE((SELECT json_agg(json_build_array(securable, warehouse, namespace, entry, row_filter, columns))"
    "           FROM (" + RESTRICTION_SELECT + " WHERE r.role_id IN (SELECT role_id FROM held)"
    "                 OR r.principal = %(principal)s) restricted), '[]'::json) AS restrictions,"
    " ARRAY(SELECT r.name FROM role r JOIN held h ON h.role_id = r.id ORDER BY r.name) AS roles,"
    # a trusted engine: marked itself (a principal of our own), or holding a marked role (0034)
    " (EXISTS (SELECT 1 FROM principal WHERE client_id = %(principal)s AND trusted_engine AND deleted_at IS NULL"
    "          AND %(own)s)"
    "  OR EXISTS (SELECT 1 FROM role r JOIN held h ON h.role_id = r.id WHERE r.trusted_engine)) AS trusted_engine"
)


def _row(values: Any) -> GrantRow:
    grant_id, role, privilege, securable, warehouse, namespace, entry = values
    return GrantRow(grant_id, role, privilege, Securable(securable, warehouse, tuple(namespace or ()), entry))


class GrantRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def holdings(self, principal: str, claimed_roles: tuple[str, ...] = (), *, own: bool = True) -> Holdings:
        """The principal's admin flag (``own``: a principal of Growler's own) and its grants."""
        with self.db.connection() as conn:
            row = conn.execute(
                _HOLDINGS, {"principal": principal, "claimed": list(claimed_roles), "own": own}
            ).fetchone()
        restrictions = [
            RestrictionOf(Securable(kind, warehouse, tuple(namespace or ()), entry), row_filter, list(columns))
            for kind, warehouse, namespace, entry, row_filter, columns in row["restrictions"]
        ]
        return Holdings(
            bool(row["admin"]),
            [_row(values) for values in row["grants"]],
            restrictions,
            tuple(row["roles"]),
            bool(row["trusted_engine"]),
        )
