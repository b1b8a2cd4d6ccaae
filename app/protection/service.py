"""Deletion protection (issue 35): marks on a warehouse, namespace, table or view.

While a mark is on an entry, one of its namespaces or its warehouse, drop, purge, unregister,
rename and recursive drop answer 409 for every principal, administrators included: the check runs
inside each destructive statement's transaction (storage/protection_rows.py), so no principal's
privileges reach past it. Setting, removing and listing marks need ``manage-grants`` on the
securable (app/management/rights.py). ``protect`` and ``unprotect`` are where a change event
(issue 36) belongs; each is logged and counted (app/catalog/deletion.py).

In a federated warehouse a mark on a namespace, table or view is kept by path (the object is the
remote's, checked to exist there when marked) and refuses the forwarded drop, purge and rename,
and a move home that would drop the remote's copy (app/federation/service.py).

A mark also reaches a table's storage (issue 46, docs/recycle-bin.md "Protection"): the signer
signs no delete and STS credentials carry no s3:DeleteObject for a protected table (the mark read
with the table's row: storage/staged.py), a commit that moves its files is refused
(storage/entries.py ``swap_metadata``), delete-after-commit keeps its files, and a mark on a binned
unit's namespace or warehouse refuses its purge and holds its expiry (storage/bin_rows.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.catalog.deletion import protection_changed
from app.events.changes import management_events
from app.ground.errors import BadRequest, NoSuchWarehouse, NotFound
from app.management.rights import ManagementRights, rules_securable
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.contract.management import ProtectionMark as ProtectionMarkShape
from app.rules.identifiers import check_name, check_namespace
from app.rules.privileges import Privilege
from app.rules.requests.management import SecurableRef
from storage.management_rows import Securable as StoredSecurable
from storage.protection_rows import ProtectionMark, ProtectionRows
from storage.warehouses import WarehouseRow

KINDS = ("warehouse", "namespace", "table", "view")


class ProtectionService:
    def __init__(
        self,
        rows: ProtectionRows,
        warehouses: WarehouseDirectory,
        *,
        rights: ManagementRights,
        remote_exists: Callable[[str, str, tuple[str, ...], str | None], None],
    ) -> None:
        self.marks_rows = rows
        self.warehouses = warehouses
        self.rights = rights  # the management API's rights (app/management/rights.py)
        # a federated warehouse's object exists in its remote (FederationService.require_exists)
        self.remote_exists = remote_exists

    def protect(self, warehouse_name: str, securable: SecurableRef) -> None:
        self._set(warehouse_name, securable, True)

    def unprotect(self, warehouse_name: str, securable: SecurableRef) -> None:
        self._set(warehouse_name, securable, False)

    def marks(self, warehouse_name: str) -> list[ProtectionMark]:
        return self.marks_rows.marks(self._warehouse(warehouse_name).id)

    def _set(self, warehouse_name: str, securable: SecurableRef, protected: bool) -> None:
        action = "protect" if protected else "unprotect"
        stored = parse_securable(warehouse_name, securable)
        target = {"warehouse": warehouse_name, **mark_view(ProtectionMark(stored.type, stored.namespace, stored.name))}
        self.rights.require_privilege(action, target, Privilege.MANAGE_GRANTS, rules_securable(stored))
        warehouse = self._warehouse(warehouse_name)
        events = management_events(f"x-{action}", target)
        if warehouse.federation is not None and stored.type != "warehouse":  # the remote's object, by path
            if protected:
                self.remote_exists(warehouse_name, stored.type, stored.namespace, stored.name)
            self.marks_rows.set_federated_mark(
                warehouse.id, stored.type, stored.namespace, stored.name, protected, events=events
            )
        else:
            self.marks_rows.set_mark(warehouse.id, stored.type, stored.namespace, stored.name, protected, events=events)
        if stored.type == "warehouse":
            self.warehouses.invalidate()
        protection_changed(action, stored.type, target)

    def _warehouse(self, name: str) -> WarehouseRow:
        try:
            return self.warehouses.get(name)
        except NoSuchWarehouse:
            raise NotFound(f"Warehouse does not exist: {name}") from None


def parse_securable(warehouse: str, securable: SecurableRef | ProtectionMarkShape) -> StoredSecurable:
    """A mark's (or a read restriction's) securable in ``warehouse`` (the path's; a body's own
    warehouse is refused)."""
    kind, namespace, name = str(securable.type), securable.namespace, securable.name
    if getattr(securable, "warehouse", None) is not None:
        raise BadRequest("A mark's warehouse is the path's")
    if kind not in KINDS:
        raise BadRequest(f"type must be one of {', '.join(KINDS)}")
    needs_namespace, needs_name = kind != "warehouse", kind in ("table", "view")
    if bool(namespace) != needs_namespace:
        raise BadRequest(f"A {kind} mark {'needs' if needs_namespace else 'has no'} namespace")
    if bool(name) != needs_name:
        raise BadRequest(f"A {kind} mark {'needs' if needs_name else 'has no'} name")
    levels = check_namespace([getattr(level, "root", level) for level in namespace]) if namespace else ()
    return StoredSecurable(kind, warehouse, levels, check_name(name, f"{kind} name") if name else None)


def mark_view(mark: ProtectionMark) -> dict[str, Any]:
    view: dict[str, Any] = {"type": mark.kind}
    if mark.kind != "warehouse":
        view["namespace"] = list(mark.namespace)
    if mark.name is not None:
        view["name"] = mark.name
    return view
