"""Table operations: create, register, drop (with purge), unregister, metrics; the service.

``TableService`` is composed of plain parts given at construction (app/composition/catalog.py),
each a class of its own module: the table entries (``app.catalog.entries.Entries``: names,
locations, drops), storage access (``app.tables.access``: config, credentials, staged tables),
the loader (``app.tables.loading``: loadTable and its answers, importable from here) and the
committer (``app.tables.committing``: updateTable and commitTransaction). What the handlers call
is here (the parts' own methods, bound at construction: no delegation in between); the
other services (scan planning, signing, previews) may call a part.
Requests come parsed (``app.rules.requests.tables``).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from app.catalog.deletion import is_soft
from app.catalog.entries import Entries, now_ms
from app.ground.errors import CommitFailed
from app.ground.locations import InvalidLocation, Location
from app.namespaces.warehouses import WarehouseDirectory
from app.rules import table as rules
from app.rules.identifiers import check_name
from app.rules.requests.tables import (
    CreateTableRequest,
    RegisterTableRequest,
    ReportMetricsRequest,
)
from app.rules.table.answers import LoadedTable, NotModified
from app.storage_access.delegation import NO_DELEGATION, Delegation
from app.tables.access import TABLE, TableStorageAccess
from app.tables.committing import TableCommitter, new_metadata_location, within_any
from app.tables.loading import LoadTableRequest, TableLoader
from app.tables.memory import HeldDocuments
from app.tables.metrics_reports import MetricsReports
from storage.entries import NewEntry
from storage.events import ChangeEvent
from storage.rows import EntryRow
from storage.table_moves import MovedFrom
from storage.warehouses import WarehouseRow

__all__ = ["TABLE", "LoadTableRequest", "LoadedTable", "NotModified", "TableService"]

log = logging.getLogger(__name__)


class TableService:
    def __init__(
        self,
        warehouses: WarehouseDirectory,
        entries: Entries,
        access: TableStorageAccess,
        loader: TableLoader,
        committer: TableCommitter,
        *,
        held: HeldDocuments,
        reports: MetricsReports,
    ) -> None:
        self.warehouses = warehouses
        self.entries = entries
        self.access = access
        self.loader = loader
        self.committer = committer
        self.settings = access.settings
        # the shared repository, object store and authorizer the parts were given (for the other
        # services built on this one: scan planning, signing, previews, maintenance)
        self.repository = entries.repository
        self.objects = entries.objects
        self.authorizer = access.authorizer
        self.parsed = committer.parsed  # parsed documents, shared by loading, committing, planning
        self.issued = loader.issued  # lets loadTable on the event loop skip unchanged documents
        self.held = held  # ... and skip reading a document it answered with before
        self.staged = access.staged
        self.reports = reports
        self.purge_requested = threading.Event()  # a hard drop with purge wakes the purger
        # What the handlers call of the parts: the parts' own methods, so a call goes straight to
        # the part that does the work, no delegation in between (scripts/trace_handoffs.py).
        self.load = loader.load
        self.commit_table = committer.commit_table  # updateTable (and maintenance's commits)
        self.commit_transaction = committer.commit_transaction
        self.load_credentials = access.load_credentials
        self.list_names = entries.list_names
        self.require_exists = entries.require_exists
        self.rename = entries.rename

    # -- creating -----------------------------------------------------------------------

    def create_table(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        request: CreateTableRequest,
        delegation: Delegation = NO_DELEGATION,
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        name = check_name(request.name, "table name")
        namespace_properties = self.entries.require_namespace(warehouse, namespace)
        table_uuid = str(uuid.uuid4())
        location = self.entries.location_for(
            warehouse, namespace, name, table_uuid, request.location, namespace_properties
        )
        metadata = rules.new_table_metadata(request, location=location, now_ms=now_ms(), table_uuid=table_uuid)
        self.committer.require_own_folders(warehouse, namespace, namespace_properties, metadata)
        text = rules.to_json(metadata)
        roots = rules.table_roots(metadata)
        if request.stage_create:
            self.entries.require_name_free(warehouse, namespace, name)
            self.access.stage(warehouse, namespace, name, metadata)
            config, credentials = self.access.storage_access(warehouse, (namespace, name), roots, delegation, True)
            return LoadedTable(None, text, config, credentials)
        config, credentials = self.access.storage_access(warehouse, (namespace, name), roots, delegation, True)
        metadata_location = new_metadata_location(metadata, rules.next_metadata_version(None))
        entry = self._new_entry(name, metadata, metadata_location, text)
        self.entries.insert_new(warehouse, namespace, entry, self.entries.created_events(warehouse, namespace, entry))
        return LoadedTable(metadata_location, text, config, credentials, self.loader.load_etag(metadata_location))

    def register_table(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        request: RegisterTableRequest,
        delegation: Delegation = NO_DELEGATION,
        *,
        moved_from: MovedFrom | None = None,
        move_events: Sequence[ChangeEvent] = (),
    ) -> LoadedTable:
        """``moved_from``: a table moved home from a federated warehouse (app/table_moves/), its
        move's row and ``move_events`` written in the register's transaction."""
        warehouse = self.warehouses.get(prefix)
        name = check_name(request.name, "table name")
        metadata_location = request.metadata_location
        properties = self.entries.require_namespace(warehouse, namespace)
        metadata = rules.parse_metadata(self.entries.read_metadata_file(warehouse, metadata_location))
        self._require_registered_locations_allowed(warehouse, metadata, metadata_location)
        self.entries.require_home(warehouse, namespace, properties, metadata.location, "location")
        self.committer.require_own_folders(warehouse, namespace, properties, metadata, metadata_location)
        text = rules.to_json(metadata)
        entry = self._new_entry(name, metadata, metadata_location, text)
        events = [*self.entries.created_events(warehouse, namespace, entry, "register-table"), *move_events]
        self.entries.register(warehouse, namespace, entry, request.overwrite, events, moved_from)
        roots = rules.table_roots(metadata, metadata_location)
        config, credentials = self.access.storage_access(warehouse, (namespace, name), roots, delegation, True)
        return LoadedTable(metadata_location, text, config, credentials, self.loader.load_etag(metadata_location))

    # -- dropping and renaming ----------------------------------------------------------

    def drop_table(self, prefix: str, namespace: tuple[str, ...], name: str, purge: bool) -> None:
        """Soft policy: into the recycle bin (a purge waits for the retention's end); hard: removed
        now, its purge queued (app/catalog/deletion.py)."""
        warehouse = self.warehouses.get(prefix)
        self.access.refuse_if_restricted(prefix, namespace, name, "drop")
        if is_soft(warehouse):
            events = self.entries.dropped_events(warehouse, namespace, name, purge=purge)
            if (
                self.entries.drop_into_bin(warehouse, namespace, name, purge=purge, action="drop", events=events)
                is None
            ):
                raise self.entries.missing(namespace, name)
            return
        purge_objects = metadata_path = None
        if purge:
            row = self.entries.require_entry(warehouse, namespace, name)
            metadata_path, purge_objects = self.owned_metadata_files(row)
        row = self.entries.drop_at_once(
            warehouse,
            namespace,
            name,
            action="drop",
            events=self.entries.dropped_events(warehouse, namespace, name, purge=purge),
            purge_objects=purge_objects,
            metadata_path=metadata_path,
        )
        if row is None:
            raise self.entries.missing(namespace, name)
        if purge:
            self.purge_requested.set()

    def unregister_table(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        name: str,
        *,
        only_at: str | None = None,
        also: Sequence[ChangeEvent] = (),
    ) -> LoadedTable:
        """Forget the table, keep every file: the opposite of registerTable (Java's
        ``Catalog.dropTable(ident, purge=false)`` without a trace: no bin entry, its location free).

        The row goes in one statement, which returns what it held: the answer is the last
        committed version, and a commit racing it loses its compare-and-set and finds no table.
        ``only_at`` (an undone move, app/table_moves/): only while that is its metadata location,
        else CommitFailed and nothing written; ``also``: events written with it.
        """
        warehouse = self.warehouses.get(prefix)
        name = check_name(name, "table name")
        self.access.refuse_if_restricted(prefix, namespace, name, "unregister")
        dropped = self.entries.dropped_events(warehouse, namespace, name, purge=False)

        def events(row: EntryRow) -> list[ChangeEvent]:
            return [*dropped(row), *also]

        # Never into the recycle bin, whatever the warehouse's policy: its metadata is handed back
        # to be registered (here or in another catalog), and a binned copy would be a second owner.
        row = self.entries.drop_at_once(warehouse, namespace, name, action="unregister", events=events, only_at=only_at)
        if row is None and only_at is not None and self.repository.load_entry(warehouse.id, namespace, name):
            raise CommitFailed(f"Table {'.'.join((*namespace, name))} was committed to meanwhile: retry")
        if row is None:
            raise self.entries.missing(namespace, name)
        return LoadedTable(row.metadata_location, row.metadata, {}, [])

    def report_metrics(self, prefix: str, namespace: tuple[str, ...], name: str, report: ReportMetricsRequest) -> None:
        warehouse = self.warehouses.get(prefix)
        self.entries.require_entry(warehouse, namespace, name)
        self.reports.accept(warehouse.id, namespace, name, report)

    # -- helpers ------------------------------------------------------------------------

    def owned_metadata_files(self, row: EntryRow) -> tuple[str | None, list[str]]:
        """What a purge of this table may delete besides what lies under its location: its
        metadata directory, and the metadata files (current and logged) inside it or the location.
        A logged file anywhere else (registered metadata may name any) is not the table's."""
        metadata = self.parsed.parse(row.metadata_location, row.metadata)
        try:
            roots = [Location.parse(row.location), Location.parse(rules.metadata_directory(metadata))]
        except InvalidLocation:  # stored before locations were checked: not Growler's to delete
            log.warning("table location or metadata path is not a valid location; the purge deletes nothing")
            return None, []
        files = [row.metadata_location, *(entry.metadata_file for entry in metadata.metadata_log)]
        return roots[1].uri, [text for text in dict.fromkeys(files) if within_any(text, roots)]

    @staticmethod
    def _new_entry(name: str, metadata: Any, metadata_location: str, text: str) -> NewEntry:
        data_path = rules.data_path(metadata.properties or {})
        return NewEntry(name, TABLE, str(metadata.table_uuid), metadata.location, metadata_location, text, data_path)

    def _require_registered_locations_allowed(
        self, warehouse: WarehouseRow, metadata: Any, metadata_location: str
    ) -> None:
        """registerTable: the location, metadata path, data path and metadata-log entries of the
        registered metadata lie in the warehouse's allowed locations, and its snapshots' manifest
        lists in the table's own folders (``rules.table_roots``: its location, its metadata file's
        directory, its data path), else 400, nothing written: a later commit, delete-after-commit or
        purge acts on exactly these, and the server-side readers open only the table's own files
        (docs/security.md)."""
        self.entries.require_inside_warehouse(warehouse, metadata.location, "location")
        self.entries.require_inside_warehouse(warehouse, rules.metadata_directory(metadata), "write.metadata.path")
        for entry in metadata.metadata_log:
            self.entries.require_inside_warehouse(warehouse, entry.metadata_file, "metadata-log entry")
        data_path = rules.data_path(metadata.properties or {})
        if data_path:
            self.entries.require_inside_warehouse(warehouse, data_path, "write.data.path")
        own = rules.table_files(metadata, metadata_location)
        for snapshot in metadata.snapshots:
            manifest_list = getattr(snapshot, "manifest_list", None)
            if manifest_list:
                own.require(manifest_list, "manifest-list")
