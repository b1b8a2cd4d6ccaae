"""What tables and views have in common: one identifier space, locations, registered files.

``TableService`` and ``ViewService`` are each given an ``Entries`` of their kind at construction
(app/composition/catalog.py) and add their own metadata rules (``app.rules.table`` /
``app.rules.view``). The shared part: listing with keyset pagination, existence, rename,
locations kept inside the warehouse, reading a registered metadata file, and inserting a new
entry with its first file. The commit loop is ``app.catalog.commits``, which the services
compose (``Entries.files`` here, their ``commits`` there).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from app.authorization import Authorizer
from app.catalog.commits import MetadataFiles
from app.catalog.deletion import HARD, SOFT, bin_drop, recorded
from app.catalog.paging import Page, PageWindow, fill_page, names_window
from app.events import changes as change_events
from app.ground.errors import AlreadyExists, BadRequest, CatalogError, NoSuchNamespace
from app.ground.events import refusals_counted
from app.ground.limits import check_metadata_schemas, load_json
from app.ground.locations import InvalidLocation, Location, is_allowed, safe_segment
from app.ground.page_tokens import PageTokens
from app.ground.settings import Settings
from app.namespaces.service import default_namespace_location, namespace_home
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.identifiers import (
    check_name,
    check_namespace,
    format_namespace,
)
from app.rules.metadata_files import decode_metadata
from app.rules.privileges import Kind, Privilege, Securable
from app.rules.requests.catalog import TableIdentifier
from app.rules.table.files import stored_roots
from storage.entries import NewEntry
from storage.events import ChangeEvent
from storage.objects import ObjectNotFound, ObjectStore
from storage.placement import Claim
from storage.repository import CatalogRepository
from storage.rows import EntryRow
from storage.table_moves import MovedFrom
from storage.warehouses import WarehouseRow

MAX_SEARCH_TEXT = 200  # characters of the console's search by name

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class Entries:
    """The entries of one kind: a part of ``TableService`` or ``ViewService``, not a base class."""

    def __init__(
        self,
        kind: str,
        not_found: type[CatalogError],
        settings: Settings,
        repository: CatalogRepository,
        objects: ObjectStore,
        warehouses: WarehouseDirectory,
        *,
        authorizer: Authorizer,
        page_tokens: PageTokens,
    ) -> None:
        self.kind = kind  # "table" or "view": the catalog_entry kind these are
        self.not_found = not_found  # the kind's 404
        self.settings = settings
        self.repository = repository
        self.objects = objects
        self.warehouses = warehouses
        # Who may see and change what (app/authorization.py). Required, with no permissive default:
        # a service wired without it must fail to build, not allow everything.
        self.authorizer = authorizer
        # The installation's page token key (one for all workers and replicas): app/edge/factory.py.
        self.page_tokens = page_tokens
        self.files = MetadataFiles(repository, objects)

    # -- shared operations --------------------------------------------------------------

    def list_names(
        self, prefix: str, namespace: tuple[str, ...], page_token: str | None, page_size: int | None
    ) -> Page:
        warehouse = self.warehouses.get(prefix)
        window = self.names_window(warehouse.name, namespace, page_token, page_size)
        return fill_page(
            window,
            lambda after, limit: self.repository.list_entries(warehouse.id, namespace, self.kind, after, limit),
            lambda names: self.visible(prefix, namespace, names),
        )

    def search_names(
        self, prefix: str, namespace: tuple[str, ...], text: str, page_token: str | None, page_size: int | None
    ) -> Page:
        """The console's search: names containing ``text`` (case-insensitive), paged like the
        listing (its tokens are sealed for this search only) and filtered by what the caller sees."""
        if len(text) > MAX_SEARCH_TEXT:
            raise BadRequest(f"The search text is longer than {MAX_SEARCH_TEXT} characters")
        warehouse = self.warehouses.get(prefix)
        operation = ("searchTables" if self.kind == "table" else "searchViews") + "\x1f" + text
        window = names_window(
            operation, warehouse.name, namespace, page_token, page_size, self.settings.max_page_size, self.page_tokens
        )
        return fill_page(
            window,
            lambda after, limit: self.repository.list_entries(
                warehouse.id, namespace, self.kind, after, limit, contains=text
            ),
            lambda names: self.visible(prefix, namespace, names),
        )

    def names_window(
        self, warehouse: str, namespace: tuple[str, ...], page_token: str | None, page_size: int | None
    ) -> PageWindow:
        """listTables' or listViews' window (handler and event loop alike)."""
        operation = "listTables" if self.kind == "table" else "listViews"
        max_size = self.settings.max_page_size
        return names_window(operation, warehouse, namespace, page_token, page_size, max_size, self.page_tokens)

    def visible(self, prefix: str, namespace: tuple[str, ...], names: list[str]) -> list[str]:
        """The names the caller may see (the event loop's listings use it too)."""
        kind = Kind(self.kind)
        return self.authorizer.filter(names, lambda name: Securable.of_entry(kind, prefix, namespace, name))

    def may_write(self, warehouse: str, namespace: tuple[str, ...], name: str, creating: bool = False) -> bool:
        """Whether vended credentials for this entry may write (else read-only): WRITE on it, or
        CREATE on its namespace for the answer that creates it."""
        entry = Securable.of_entry(Kind(self.kind), warehouse, namespace, name)
        if self.authorizer.may(Privilege.WRITE, entry):
            return True
        return creating and self.authorizer.may(Privilege.CREATE, entry.container())

    def require_exists(self, prefix: str, namespace: tuple[str, ...], name: str) -> None:
        """HEAD: the entity's 404 unless it exists (as this kind)."""
        warehouse = self.warehouses.get(prefix)
        if not self.repository.entry_exists(warehouse.id, namespace, name, self.kind):
            raise self.missing(namespace, name)

    def drop_into_bin(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        name: str,
        *,
        purge: bool,
        action: str,
        events: Callable[[EntryRow], Sequence[ChangeEvent]],
    ) -> EntryRow | None:
        """A soft drop (issue 35): the entry leaves the name space for the recycle bin with its
        grants, in one transaction; its files stay, and with ``purge`` they go when the retention
        ends. None when there is no such entry; 409 (nothing written) when it is protected."""
        with refusals_counted(self.kind):
            row = self.repository.bin_entry(
                warehouse.id, namespace, name, self.kind, bin_drop(warehouse, purge), action, events=events
            )
        if row is not None:
            target = {"warehouse": warehouse.name, "namespace": list(namespace), "name": name, "purge": purge}
            recorded(action, self.kind, SOFT, target)
        return row

    def drop_at_once(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        name: str,
        *,
        action: str,
        events: Callable[[EntryRow], Sequence[ChangeEvent]],
        purge_objects: list[str] | None = None,
        metadata_path: str | None = None,
        only_at: str | None = None,
    ) -> EntryRow | None:
        """A hard drop: the entry is removed now (its purge, if any, queued in the same transaction).
        ``only_at``: only while its metadata location is this one (None otherwise, nothing written)."""
        with refusals_counted(self.kind):
            row = self.repository.delete_entry(
                warehouse.id,
                namespace,
                name,
                self.kind,
                purge_objects,
                metadata_path,
                action=action,
                events=events,
                only_at=only_at,
            )
        if row is not None:
            target = {"warehouse": warehouse.name, "namespace": list(namespace), "name": name}
            recorded(action, self.kind, HARD, {**target, "purge": purge_objects is not None})
        return row

    def rename(self, prefix: str, source: TableIdentifier, destination: TableIdentifier) -> None:
        """Java's wording (``InMemoryCatalog.renameTable``/``renameView``): every refusal names
        both identifiers, ``Cannot rename ns.a to ns.b. <reason>``."""
        warehouse = self.warehouses.get(prefix)
        src = (check_namespace(list(source.namespace)), check_name(source.name, f"{self.kind} name"))
        dst = (check_namespace(list(destination.namespace)), check_name(destination.name, f"{self.kind} name"))
        cannot = f"Cannot rename {format_namespace((*src[0], src[1]))} to {format_namespace((*dst[0], dst[1]))}."
        change = change_events.renamed(self.kind, src, dst)

        def events(entry_uuid: str) -> list[ChangeEvent]:
            return change_events.events_of(warehouse.id, [change(entry_uuid)])

        try:
            with refusals_counted(self.kind):
                renamed = self.repository.rename_entry(warehouse.id, src, dst, self.kind, events=events)
        except NoSuchNamespace as exc:
            raise NoSuchNamespace(f"{cannot} {exc.message}") from exc
        except AlreadyExists as exc:
            raise AlreadyExists(f"{cannot} {self.kind_at(warehouse, *dst).capitalize()} already exists") from exc
        if not renamed:
            self.require_namespace(warehouse, src[0])
            raise self.not_found(f"{cannot} {self.kind.capitalize()} does not exist")

    # -- helpers for the services --------------------------------------------------------

    def missing(self, namespace: tuple[str, ...], name: str) -> CatalogError:
        return self.not_found(f"{self.kind.capitalize()} does not exist: {format_namespace((*namespace, name))}")

    def require_entry(self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str) -> EntryRow:
        """The row of this kind, in one query.

        A miss is the entity's own 404 even when the namespace is missing too: that is the only
        404 the spec gives loadTable/loadView, and the Java client falls back to metadata tables
        (``db.t.snapshots``) only on NoSuchTableException.
        """
        row = self.repository.load_entry(warehouse.id, namespace, name)
        if row is None or row.kind != self.kind:
            raise self.missing(namespace, name)
        return row

    def require_namespace(self, warehouse: WarehouseRow, namespace: tuple[str, ...]) -> dict[str, str]:
        """The namespace's properties (one round trip, as an existence check costs); 404 if missing."""
        try:
            return self.repository.namespace_properties(warehouse.id, namespace)
        except NoSuchNamespace:
            raise NoSuchNamespace(f"Namespace does not exist: {format_namespace(namespace)}") from None

    def require_name_free(self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str) -> None:
        row = self.repository.load_entry(warehouse.id, namespace, name)
        if row is not None:
            raise self.name_taken(namespace, name, row.kind)

    def kind_at(self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str) -> str:
        """The kind of the entry holding a name a write just found taken (this kind if it went again)."""
        row = self.repository.load_entry(warehouse.id, namespace, name)
        return row.kind if row is not None else self.kind

    def name_taken(self, namespace: tuple[str, ...], name: str, existing_kind: str) -> AlreadyExists:
        """Java's wording (``BaseMetastoreViewCatalog``, ``InMemoryCatalog``): ``Table already
        exists: ns.t`` over its own kind, ``View with same name already exists: ns.t`` over the other."""
        qualified = format_namespace((*namespace, name))
        if existing_kind == self.kind:
            return AlreadyExists(f"{self.kind.capitalize()} already exists: {qualified}")
        return AlreadyExists(f"{existing_kind.capitalize()} with same name already exists: {qualified}")

    def location_for(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        name: str,
        entry_uuid: str,
        requested: Any,
        namespace_properties: dict[str, str],
    ) -> str:
        """The requested location, else a new folder under the namespace's location: its own
        ``location`` property when a user set one (as Hive, Glue and Java's JDBC catalog place
        tables), else the default one ``loadNamespaceMetadata`` reports. Either way it must lie
        inside the warehouse's allowed locations."""
        if requested:
            location = str(requested).rstrip("/")
            self.require_inside_warehouse(warehouse, location, "location")
            self.require_home(warehouse, namespace, namespace_properties, location, "location")
            return location
        parent = str(namespace_properties.get("location") or "").rstrip("/")
        if parent:
            self.require_inside_warehouse(warehouse, parent, "namespace location")
        else:
            parent = default_namespace_location(warehouse, namespace)
        # The uuid suffix keeps a re-created table or view from ever sharing files with a dropped one.
        return f"{parent}/{safe_segment(name)}-{entry_uuid.replace('-', '')}"

    def require_home(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        namespace_properties: dict[str, str],
        location: str,
        what: str,
    ) -> None:
        """A location an entry is given (not made up by Growler) lies strictly inside its namespace's
        location, or inside one of the warehouse's other allowed locations: a grant on one
        namespace never places an entry in another's folder. (Overlaps with what others own are
        refused where the entry is written: storage/placement.py.)"""
        parsed = Location.parse(location, what)
        home = Location.parse(namespace_home(warehouse, namespace, namespace_properties), "namespace location")
        others = [Location.parse(text, "allowed location") for text in warehouse.allowed_locations]
        if any(parsed.is_within(root) and parsed != root for root in (home, *others)):
            return
        raise BadRequest(
            f"The {what} {location!r} is outside its namespace's location ({home.uri}) and the warehouse's "
            "other allowed locations"
        )

    def require_homes(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        namespace_properties: dict[str, str],
        named: list[tuple[str, str]],
        own: list[Location],
    ) -> None:
        """Each folder an entry is given (``named``: (what, location) - its metadata directory, a
        table's data path) lies in its namespace's home, unless inside one it owns already
        (``own``: its location, checked itself where it is given)."""
        for what, location in named:
            if not any(Location.parse(location, what).is_within(root) for root in own):
                self.require_home(warehouse, namespace, namespace_properties, location, what)

    def claim(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        entry: NewEntry,
        entry_id: int | None = None,
    ) -> Claim:
        """The folders an entry owns (its location, metadata directory and - a table's - data path:
        ``app.rules.table.stored_roots``), to be claimed where it is written (storage/placement.py)."""
        roots = stored_roots(entry.location, entry.metadata_location.rsplit("/", 1)[0], entry.data_path)
        parsed = dict.fromkeys(Location.parse(root) for root in roots)
        return Claim(tuple(parsed), warehouse.id, namespace, entry.name, entry_id, self.kind)

    def moved(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        name: str,
        row: EntryRow,
        named: list[tuple[str, str]],
    ) -> Claim | None:
        """A commit's claim when its new version owns a folder its row did not (``named``: (what,
        location) of its location, metadata directory and - a table's - data path after the
        commit), after checking each such folder lies in its namespace's home; None when every one
        lies in a folder the entry owns already."""
        old = []  # what it owns now; a folder stored before locations were checked owns nothing here
        for text in (row.location, row.metadata_location.rsplit("/", 1)[0], row.data_path):
            try:
                old += [Location.parse(text)] if text else []
            except InvalidLocation:
                continue
        added = [(what, text) for what, text in named if not any(Location.parse(text).is_within(o) for o in old)]
        if not added:
            return None
        properties = self.require_namespace(warehouse, namespace)
        for what, text in added:
            self.require_home(warehouse, namespace, properties, text, what)
        roots = dict.fromkeys(Location.parse(text) for _, text in named)
        return Claim(tuple(roots), warehouse.id, namespace, name, row.id, self.kind)

    @staticmethod
    def allowed_roots(warehouse: WarehouseRow) -> list[Location]:
        """The warehouse location and its allowed locations (configuration, checked at start-up)."""
        return [Location.parse(text, "allowed location") for text in (warehouse.location, *warehouse.allowed_locations)]

    @classmethod
    def require_inside_warehouse(cls, warehouse: WarehouseRow, location: str, what: str) -> Location:
        """Every location Growler writes to, reads from or purges: valid (``app.ground.locations``) and
        strictly under the warehouse location or one of its allowed locations, by segments."""
        parsed = Location.parse(location, what)
        roots = cls.allowed_roots(warehouse)
        if not is_allowed(parsed, roots):
            allowed = ", ".join(root.uri for root in roots)
            raise BadRequest(f"The {what} {location!r} is outside the warehouse's allowed locations ({allowed})")
        return parsed

    def created_events(
        self, warehouse: WarehouseRow, namespace: tuple[str, ...], entry: NewEntry, operation_type: str | None = None
    ) -> list[ChangeEvent]:
        """The event of a new entry (create, or register with ``operation_type``)."""
        change = change_events.created(self.kind, namespace, entry.name, entry.uuid, json.loads(entry.metadata))
        if operation_type is not None:
            change = change_events.Change(
                operation_type, change.object_type, change.operation, change.namespace, change.name, change.uuid
            )
        return change_events.events_of(warehouse.id, [change])

    def dropped_events(
        self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str, **fields: Any
    ) -> Callable[[EntryRow], list[ChangeEvent]]:
        """The events of a drop, made in its transaction from the row it removed."""

        def events(row: EntryRow) -> list[ChangeEvent]:
            change = change_events.entry_change(f"drop-{self.kind}", self.kind, namespace, name, row.uuid, **fields)
            return change_events.events_of(warehouse.id, [change])

        return events

    def read_metadata_file(self, warehouse: WarehouseRow, location: str) -> str:
        """registerTable/registerView: the text of an existing metadata file in the warehouse."""
        parsed = self.require_inside_warehouse(warehouse, location, "metadata-location")
        try:
            limits = self.settings.limits
            text = decode_metadata(self.objects.read(parsed, limits.max_metadata_bytes), limits.max_inflated_bytes)
            check_metadata_schemas(load_json(text, limits, "metadata file", items=False), limits)
            return text
        except ObjectNotFound as exc:
            raise BadRequest(f"Metadata file does not exist: {location}") from exc
        except (UnicodeDecodeError, OSError, EOFError) as exc:
            raise BadRequest(f"Not a valid {self.kind} metadata file: {location}") from exc

    def register(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        entry: NewEntry,
        overwrite: bool,
        events: Sequence[ChangeEvent],
        moved_from: MovedFrom | None = None,
    ) -> None:
        """``moved_from``: a table moved home from a federated warehouse (never an overwrite),
        its move recorded with it (app/table_moves/service.py)."""
        placed = self.claim(warehouse, namespace, entry)
        try:
            if overwrite:
                self.repository.replace_entry(warehouse.id, namespace, entry, placed, events=events)
            else:
                self.repository.insert_entry(
                    warehouse.id, namespace, entry, placed=placed, events=events, moved_from=moved_from
                )
        except AlreadyExists as exc:
            raise self.name_taken(namespace, entry.name, self.kind_at(warehouse, namespace, entry.name)) from exc

    def insert_new(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        entry: NewEntry,
        events: Sequence[ChangeEvent],
        name_taken: Callable[[AlreadyExists], Exception] | None = None,
    ) -> None:
        """Write the first metadata file while the entry is inserted, with the change's events; the
        file goes if that fails.

        A name already taken raises ``name_taken(exc)``: by default the kind-aware error of
        create/register.
        """

        placed = self.claim(warehouse, namespace, entry)

        def insert(written: Callable[[], None]) -> bool:
            try:
                self.repository.insert_entry(
                    warehouse.id, namespace, entry, before_commit=written, placed=placed, events=events
                )
            except AlreadyExists as exc:
                if name_taken is not None:
                    raise name_taken(exc) from exc
                raise self.name_taken(namespace, entry.name, self.kind_at(warehouse, namespace, entry.name)) from exc
            return True

        self.files.commit_with([(entry.metadata_location, entry.metadata)], insert)
