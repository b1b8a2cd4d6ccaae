"""The recycle bin (issue 35): list, undrop, purge at once, recursive namespace drop, expiry.

Soft drops of tables and views happen in the catalog's own operations (``Entries.drop_into_bin``);
this service is the management API's side (openapi/management.yaml, ``handlers/management.py``)
and housekeeping's (``expire_due``). Who may do what (app/management/rights.py, decided first):

- listing the bin needs ``undrop`` on the warehouse, or on the namespace listed;
- an undrop needs ``undrop`` where the unit was dropped from (its namespace; a namespace unit's
  parent or warehouse) and, when it comes back elsewhere, where it comes back to;
- a recursive drop needs ``drop`` on the namespace, like dropNamespace;
- a purge at once is for administrators.

Each change is one transaction in storage/bin_rows.py and is logged and counted once committed
(app/catalog/deletion.py); the methods named ``undrop``, ``purge_now``, ``drop_namespace`` and
``expire_due`` are where a change event (issue 36) belongs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from app.catalog.deletion import HARD, SOFT, bin_drop, is_soft, recorded
from app.catalog.paging import Page, PageWindow
from app.events import changes as change_events
from app.ground.errors import BadRequest, LocationTaken, NoSuchWarehouse, NotFound, PurgeStarted
from app.ground.events import refusals_counted
from app.ground.page_tokens import PageTokens, scope
from app.ground.settings import Settings
from app.management.rights import ManagementRights
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.identifiers import check_name, check_namespace
from app.rules.privileges import Kind, Privilege, Securable
from app.rules.requests.management import UndropRequest
from storage.bin_rows import BinnedTable, BinUnitRow, PurgePlan, TakenOver
from storage.repository import CatalogRepository
from storage.rows import EntryRow
from storage.warehouses import WarehouseRow

# How many units one housekeeping round expires (the next round takes the rest).
EXPIRE_BATCH = 100

# What a purge of a table may delete besides its location: (metadata directory, metadata files).
PurgeFiles = Callable[[EntryRow], tuple[str | None, list[str]]]


class RecycleBinService:
    def __init__(
        self,
        settings: Settings,
        repository: CatalogRepository,
        warehouses: WarehouseDirectory,
        purge_files: PurgeFiles,
        purge_requested: threading.Event,
        *,
        rights: ManagementRights,
        page_tokens: PageTokens,
    ) -> None:
        self.settings = settings
        self.repository = repository
        self.warehouses = warehouses
        self.purge_files = purge_files  # TableService.owned_metadata_files
        self.purge_requested = purge_requested  # wakes the housekeeper
        self.rights = rights  # the management API's rights (app/management/rights.py)
        self.page_tokens = page_tokens

    # -- reading -------------------------------------------------------------------------------

    def list_units(
        self, warehouse_name: str, namespace: tuple[str, ...] | None, page_token: str | None, page_size: int | None
    ) -> Page:
        warehouse = self._warehouse(warehouse_name)
        listing = scope("listBin", warehouse_name, list(namespace or ()))
        window = PageWindow.of(page_token, page_size, self.settings.max_page_size, str, self.page_tokens, listing)
        after = window.after
        if isinstance(after, str) and not after.isdigit():  # sealed by us: never
            raise BadRequest("Invalid pageToken")
        rows = self.repository.bin_units(
            warehouse.id, namespace, int(after) if isinstance(after, str) else None, window.fetch
        )
        return window.page(rows, lambda row: str(row.id))

    # -- changes -------------------------------------------------------------------------------

    def undrop(self, warehouse_name: str, unit_id: int, request: UndropRequest) -> BinUnitRow:
        """Bring a unit back, under its old name or the one ``request`` gives (``namespace``, ``name``)."""
        warehouse = self._warehouse_or_refuse(warehouse_name, "undrop")
        unit = self.repository.bin_unit(warehouse.id, unit_id)
        source = _home(warehouse_name, unit) if unit else Securable.of_warehouse(warehouse_name)
        target = {"warehouse": warehouse_name, "id": unit_id}
        self.rights.require_privilege("undrop", target, Privilege.UNDROP, source)
        if unit is None:
            raise NotFound(f"Nothing in the bin of warehouse {warehouse_name} with id {unit_id}")
        namespace, name = self._destination(unit, request)
        moved = namespace != unit.namespace or name != unit.name
        if moved:
            back = BinUnitRow(**{**unit.__dict__, "namespace": namespace, "name": name})
            self.rights.require_privilege("undrop", target, Privilege.UNDROP, _home(warehouse_name, back))
        events = change_events.events_of(
            warehouse.id,
            [change_events.bin_change("undrop", unit.kind, namespace, name, unit.uuid, origin=list(unit.namespace))],
        )
        try:
            restored = self.repository.undrop_unit(warehouse.id, unit_id, namespace, name, events=events)
        except TakenOver as exc:
            raise LocationTaken(self._taken_over(warehouse, exc)) from None
        recorded(
            "undrop",
            unit.kind,
            SOFT,
            {**target, "namespace": list(namespace), "name": name, "from": list(unit.namespace)},
        )
        return BinUnitRow(**{**restored.__dict__, "namespace": namespace, "name": name})

    def purge_now(self, warehouse_name: str, unit_id: int) -> None:
        """An administrator's purge: the unit's tables' files go now, whatever was asked at drop;
        409 ``Protected`` (nothing written) while a mark is on the namespace it was dropped from (or
        one above it) or on its warehouse."""
        target = {"warehouse": warehouse_name, "id": unit_id}
        warehouse = self._warehouse(warehouse_name)
        unit = self.repository.bin_unit(warehouse.id, unit_id)
        if unit is None:
            raise NotFound(f"Nothing in the bin of warehouse {warehouse_name} with id {unit_id}")
        events = change_events.events_of(
            warehouse.id,
            [change_events.bin_change("purge", unit.kind, unit.namespace, unit.name, unit.uuid, purge=True)],
        )
        plans = self._plans(unit.id)
        with refusals_counted(unit.kind):
            started = self.repository.start_purge(warehouse.id, unit_id, plans, due_only=False, events=events)
        if not started:
            current = self.repository.bin_unit(warehouse.id, unit_id)
            if current is None:
                raise NotFound(f"Nothing in the bin of warehouse {warehouse_name} with id {unit_id}")
            raise PurgeStarted(f"The purge of {unit_id} started already")
        self.purge_requested.set()
        recorded("purge", unit.kind, SOFT, {**target, "namespace": list(unit.namespace), "name": unit.name})

    def drop_namespace(
        self, warehouse_name: str, namespace: tuple[str, ...], recursive: bool, purge: bool
    ) -> BinUnitRow | None:
        """A recursive drop: the namespace and everything under it, as one unit. Into the bin on
        a soft warehouse (returned); gone at once on a hard one (its tables purged when asked)."""
        target = {**_target(warehouse_name, namespace), "recursive": recursive, "purge": purge}
        if not recursive:
            raise BadRequest("Only a recursive drop is served here (recursive=true); dropNamespace drops an empty one")
        namespace = check_namespace(list(namespace))
        warehouse = self._warehouse(warehouse_name)
        on = Securable.of_namespace(warehouse_name, namespace)
        refusal = (
            f"Cannot drop {on.describe()} with its contents: the principal reads tables in it under read"
            " restrictions, which tables registered again would not carry; a principal without restrictions"
            " there (a grant manager) may"
        )
        self.rights.require_unrestricted_within("drop", target, on, refusal)
        with refusals_counted("namespace"):
            dropped = change_events.namespace_change("drop-namespace", namespace, recursive=True, purge=purge)
            unit = self.repository.bin_namespace(
                warehouse.id,
                namespace,
                bin_drop(warehouse, purge),
                events=change_events.events_of(warehouse.id, [dropped]),
            )
        assert unit is not None
        if is_soft(warehouse):
            recorded("drop", "namespace", SOFT, target)
            return unit
        plans = self._plans(unit.id) if purge else []
        # its event: the drop's; the drop checked the marks
        self.repository.start_purge(warehouse.id, unit.id, plans, due_only=False, events=(), held=False)
        if plans:
            self.purge_requested.set()
        recorded("drop", "namespace", HARD, target)
        return None

    def expire_due(self, limit: int = EXPIRE_BATCH) -> int:
        """Housekeeping: forget the units whose retention ended, queueing the purge of their tables'
        files where a purge was asked at drop (the purger deletes only what they own). A unit a
        protection mark holds (on the namespace it was dropped from, one above, or its warehouse)
        waits in the bin until the mark is removed."""
        expired = 0
        for unit in self.repository.due_units(limit):
            plans = self._plans(unit.id) if unit.purge_requested else []
            expiry = change_events.bin_change(
                "expire", unit.kind, unit.namespace, unit.name, unit.uuid, purge=bool(plans)
            )
            events = change_events.events_of(unit.warehouse_id, [expiry])
            if self.repository.start_purge(unit.warehouse_id, unit.id, plans, due_only=True, events=events):
                expired += 1
                target = {"id": unit.id, "namespace": list(unit.namespace), "name": unit.name, "purge": bool(plans)}
                recorded("expire", unit.kind, SOFT, target)
        if expired:
            self.purge_requested.set()
        return expired

    # -- helpers -------------------------------------------------------------------------------

    def _plans(self, unit_id: int) -> list[PurgePlan]:
        return [self._plan(table) for table in self.repository.binned_tables(unit_id)]

    def _plan(self, table: BinnedTable) -> PurgePlan:
        row = EntryRow(table.id, "table", "", table.location, table.metadata_location, table.metadata)
        metadata_path, extra = self.purge_files(row)
        return PurgePlan(table.id, table.location, metadata_path, extra)

    def _taken_over(self, warehouse: WarehouseRow, refused: TakenOver) -> str:
        """The refusal of an undrop over a take-over, naming the holder when the caller sees it."""
        holder = refused.holder
        qualified = ".".join((*holder.namespace, holder.name))
        kind = Kind.VIEW if holder.kind == "view" else Kind.TABLE
        visible = holder.warehouse_id == warehouse.id and self.rights.authorizer.sees(
            Securable.of_entry(kind, warehouse.name, holder.namespace, holder.name)
        )
        named = f"{holder.kind} {qualified}" if visible else "another table, view or staged table"
        return (
            f"Cannot undrop {refused.unit_id}: the location of {refused.entry} ({refused.location}) was taken "
            f"over since its drop: {named} holds it now. Drop that {holder.kind if visible else 'entry'} first "
            "(or give it another location) and undrop again, or purge this unit "
            f"(DELETE /management/v1/warehouses/{warehouse.name}/bin/{refused.unit_id}): the purge leaves "
            "every file a live entry holds"
        )

    def _destination(self, unit: BinUnitRow, request: UndropRequest) -> tuple[tuple[str, ...], str | None]:
        namespace = check_namespace(list(request.namespace)) if request.namespace else unit.namespace
        if unit.kind == "namespace":
            if request.name:
                raise BadRequest("A namespace comes back under a namespace path (namespace), not a name")
            return namespace, None
        return namespace, check_name(request.name or unit.name, f"{unit.kind} name")

    def _warehouse(self, name: str) -> WarehouseRow:
        try:
            return self.warehouses.get(name)
        except NoSuchWarehouse:
            raise NotFound(f"Warehouse does not exist: {name}") from None

    def _warehouse_or_refuse(self, name: str, action: str) -> WarehouseRow:
        """The warehouse, or 403 for a caller holding undrop nowhere in it (never a 404 first)."""
        try:
            return self.warehouses.get(name)
        except NoSuchWarehouse:
            self.rights.require_privilege(action, {"warehouse": name}, Privilege.UNDROP, Securable.of_warehouse(name))
            raise NotFound(f"Warehouse does not exist: {name}") from None


def _target(warehouse: str, namespace: tuple[str, ...] | None) -> dict[str, Any]:
    return {"warehouse": warehouse, "namespace": list(namespace or ())}


def _home(warehouse: str, unit: BinUnitRow) -> Securable:
    """Where a unit lives in the securable tree: an entry's namespace; a namespace's container."""
    if unit.kind == "namespace":
        return Securable.of_namespace(warehouse, unit.namespace).container()
    return Securable.of_namespace(warehouse, unit.namespace)


def unit_view(unit: BinUnitRow) -> dict[str, Any]:
    """A unit as the management API shows it."""
    view: dict[str, Any] = {
        "id": unit.id,
        "kind": unit.kind,
        "namespace": list(unit.namespace),
        "dropped-at": unit.dropped_at.isoformat(),
        "expires-at": unit.expires_at.isoformat(),
        "purge-requested": unit.purge_requested,
        "dropped-by": unit.dropped_by,
        "purging-since": unit.purging_since.isoformat() if unit.purging_since else None,
    }
    if unit.name is not None:
        view["name"] = unit.name
    if unit.metadata_location is not None:
        view["metadata-location"] = unit.metadata_location
    if unit.uuid is not None:
        view["uuid"] = unit.uuid
    return view
