"""Read restrictions (issue 51, docs/read-restrictions.md): attaching, removing and listing them,
and marking a principal as a trusted engine.

A restriction is set like a grant: ``manage-grants`` on its securable (a warehouse, a namespace,
a table or a view); trusting an engine is an administrator's. The checks of the rules
(app/rules/restrictions/policies.py) run before anything is written; a restriction on one table
or view is also checked against its current schema (a filter that does not bind, a column that
does not exist, an action its type does not take: 400). Every change enters the change feed in
its transaction and bumps the authorization version (the trigger of migration 0031), so every
worker's cached decisions carry it within a poll.

What a restriction does to reads is decided where the reads are: loadTable, loadCredentials and
signing (app/tables/access.py ``TableStorageAccess.restrictions_for_storage``), the console's
preview and scan planning.
"""

from __future__ import annotations

from typing import Any

from app.events.changes import management_events
from app.ground.errors import NotFound
from app.management.rights import ManagementRights, rules_securable
from app.namespaces.warehouses import WarehouseDirectory
from app.protection.service import mark_view, parse_securable
from app.rules import table as table_rules
from app.rules.contract.management import ReadRestrictionPolicy, ReadRestrictionTarget
from app.rules.privileges import Kind, Privilege, Securable, chain
from app.rules.restrictions.policies import ColumnRule, check_against, check_policy
from storage.protection_rows import ProtectionMark
from storage.repository import CatalogRepository
from storage.restriction_rows import RestrictionRow, RestrictionRows, UnknownRole


class RestrictionService:
    def __init__(
        self,
        rows: RestrictionRows,
        repository: CatalogRepository,
        warehouses: WarehouseDirectory,
        *,
        rights: ManagementRights,
    ) -> None:
        self.rows = rows
        self.repository = repository  # an entry's metadata: a table's restriction is checked against it
        self.warehouses = warehouses
        self.rights = rights

    def set(self, warehouse: str, policy: ReadRestrictionPolicy) -> dict[str, Any]:
        stored = parse_securable(warehouse, policy.securable)
        target = _target(warehouse, stored, policy.grantee.type, policy.grantee.name)
        who = self.rights.require_privilege(
            "set-read-restriction", target, Privilege.MANAGE_GRANTS, rules_securable(stored)
        )
        row_filter, columns = check_policy(policy.row_filter, [(c.name, c.action) for c in policy.columns or ()])
        self._check_entry(warehouse, stored, row_filter, columns)
        columns_json = [{"name": rule.name, "action": rule.action} for rule in columns]
        events = management_events(
            "x-set-read-restriction", {**target, "row-filter": row_filter, "columns": columns_json}
        )
        try:
            self.rows.set(
                stored, policy.grantee.type, policy.grantee.name, row_filter, columns_json, who, events=events
            )
        except UnknownRole:
            raise NotFound(f"Role does not exist: {policy.grantee.name}") from None
        return restriction_view(
            RestrictionRow(stored, policy.grantee.type, policy.grantee.name, row_filter, columns_json, who)
        )

    def remove(self, warehouse: str, request: ReadRestrictionTarget) -> None:
        stored = parse_securable(warehouse, request.securable)
        target = _target(warehouse, stored, request.grantee.type, request.grantee.name)
        self.rights.require_privilege(
            "remove-read-restriction", target, Privilege.MANAGE_GRANTS, rules_securable(stored)
        )
        events = management_events("x-remove-read-restriction", target)
        if not self.rows.remove(stored, request.grantee.type, request.grantee.name, events=events):
            raise NotFound(f"No read restriction for {request.grantee.type} {request.grantee.name} there")

    def on_table(self, warehouse: str, namespace: tuple[str, ...], name: str) -> list[dict[str, Any]]:
        """The restrictions attached to a table or above it (the console's table page), under
        ``manage-grants`` on the table, as the listing."""
        table = Securable.of_entry(Kind.TABLE, warehouse, namespace, name)
        target = {"warehouse": warehouse, "type": "table", "namespace": list(namespace), "name": name}
        self.rights.require_privilege("list-read-restrictions", target, Privilege.MANAGE_GRANTS, table)
        nodes = set(chain(table.key))
        row = self.warehouses.get(warehouse)
        return [
            restriction_view(found)
            for found in self.rows.in_warehouse(row.id)
            if (found.securable.warehouse, tuple(found.securable.namespace), found.securable.name) in nodes
        ]

    def list(self, warehouse: str) -> list[dict[str, Any]]:
        row = self.warehouses.get(warehouse)
        return [restriction_view(found) for found in self.rows.in_warehouse(row.id)]

    def _check_entry(self, warehouse: str, stored: Any, row_filter: Any, columns: tuple[ColumnRule, ...]) -> None:
        """One on a table is checked against the table's current schema. One on a view applies to
        the tables read through it (loadTable's ``referenced-by``), bound to each one's schema
        where it is read (failing closed), so it is not checked against the view's own; the view
        must exist (its row: storage's NotFound)."""
        row = self.warehouses.get(warehouse)
        if row.federation is not None:  # its tables live in the remote: bound where a load applies them
            return
        if stored.type != "table":
            return
        entry = self.repository.load_entry(row.id, tuple(stored.namespace), stored.name)
        if entry is None or entry.kind != "table":
            raise NotFound(f"Table does not exist: {'.'.join((*stored.namespace, stored.name))}")
        check_against(table_rules.parse_metadata(entry.metadata).schema(), row_filter, columns)


def _target(warehouse: str, stored: Any, grantee_type: str, grantee: str) -> dict[str, Any]:
    mark = mark_view(ProtectionMark(stored.type, stored.namespace, stored.name))
    return {"warehouse": warehouse, **mark, "grantee": {"type": grantee_type, "name": grantee}}


def restriction_view(row: RestrictionRow) -> dict[str, Any]:
    securable = row.securable
    view: dict[str, Any] = {
        "securable": mark_view(ProtectionMark(securable.type, securable.namespace, securable.name)),
        "grantee": {"type": row.grantee_type, "name": row.grantee},
        "columns": row.columns,
    }
    if row.row_filter is not None:
        view["row-filter"] = row.row_filter
    if row.created_by is not None:
        view["created-by"] = row.created_by
    return view
