"""Table operations: create, register, drop (with purge), unregister, metrics; the service.

``TableService`` is composed of parts kept apart for size: loading (``app.tables.loading``:
loadTable and its answers, importable from here), committing (``app.tables.committing``:
updateTable and commitTransaction) and storage access (``app.tables.access``: config,
credentials, staged tables). Requests come parsed (``app.rules.requests.tables``).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from app.authorization import Authorizer
from app.catalog.commits import CommitLanes, CommitLoop
from app.catalog.deletion import is_soft
from app.catalog.entries import now_ms
from app.ground.errors import NoSuchTable
from app.ground.locations import InvalidLocation, Location
from app.ground.page_tokens import PageTokens
from app.ground.settings import Settings
from app.namespaces.warehouses import WarehouseDirectory
from app.rules import table as rules
from app.rules.identifiers import check_name
from app.rules.requests.tables import CreateTableRequest, RegisterTableRequest, ReportMetricsRequest
from app.storage_access.delegation import NO_DELEGATION, Delegation
from app.tables.access import TABLE
from app.tables.committing import TableCommits, logged_files, within_any
from app.tables.loading import LoadedTable, LoadTableRequest, NotModified
from app.tables.memory import HeldDocuments, IssuedETags, ParsedMetadataCache
from app.tables.metrics_reports import MetricsReports
from storage.entries import NewEntry
from storage.objects import ObjectStore
from storage.repository import CatalogRepository
from storage.rows import EntryRow
from storage.staged import StagedTables
from storage.warehouses import WarehouseRow

__all__ = ["TABLE", "LoadTableRequest", "LoadedTable", "NotModified", "TableService"]

log = logging.getLogger(__name__)


class TableService(TableCommits):
    kind = TABLE
    not_found = NoSuchTable

    def __init__(
        self,
        settings: Settings,
        repository: CatalogRepository,
        objects: ObjectStore,
        warehouses: WarehouseDirectory,
        *,
        authorizer: Authorizer,
        page_tokens: PageTokens,
        after_commit: Callable[[int, int, bool], None],
    ) -> None:
        super().__init__(settings, repository, objects, warehouses, authorizer=authorizer, page_tokens=page_tokens)
        self.purge_requested = threading.Event()
        self.snapshot_json = rules.SnapshotJson()
        self.parsed = ParsedMetadataCache(snapshot_json=self.snapshot_json)
        self.issued = IssuedETags()  # lets loadTable on the event loop skip unchanged documents
        self.held = HeldDocuments()  # ... and skip reading a document it answered with before
        self.lanes = CommitLanes()
        self.commits = CommitLoop(repository, self.files, kind=TABLE, logged_files=logged_files)
        self.staged = StagedTables(repository.db)
        self.reports = MetricsReports(repository)
        # Told (entry id, snapshot count, sets history.expire.*) after each commit lands:
        # maintenance's trigger (app/maintenance_trigger.py), in memory only - no database round
        # trip on the commit path. Given at construction (app/composition), never installed later.
        self.after_commit = after_commit

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
        namespace_properties = self._require_namespace(warehouse, namespace)
        table_uuid = str(uuid.uuid4())
        location = self._location_for(warehouse, namespace, name, table_uuid, request.location, namespace_properties)
        metadata = rules.new_table_metadata(request, location=location, now_ms=now_ms(), table_uuid=table_uuid)
        self._require_own_folders(warehouse, namespace, namespace_properties, metadata)
        text = rules.to_json(metadata)
        roots = rules.table_roots(metadata)
        if request.stage_create:
            self._require_name_free(warehouse, namespace, name)
            self._stage(warehouse, namespace, name, metadata)
            config, credentials = self._storage_access(warehouse, (namespace, name), roots, delegation, True)
            return LoadedTable(None, text, config, credentials)
        config, credentials = self._storage_access(warehouse, (namespace, name), roots, delegation, True)
        metadata_location = self._metadata_location(metadata, rules.next_metadata_version(None))
        entry = self._new_entry(name, metadata, metadata_location, text)
        self._insert_new(warehouse, namespace, entry, self._created_events(warehouse, namespace, entry))
        return LoadedTable(metadata_location, text, config, credentials, self.load_etag(metadata_location))

    def register_table(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        request: RegisterTableRequest,
        delegation: Delegation = NO_DELEGATION,
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        name = check_name(request.name, "table name")
        metadata_location = request.metadata_location
        properties = self._require_namespace(warehouse, namespace)
        metadata = rules.parse_metadata(self._read_metadata_file(warehouse, metadata_location))
        self._require_registered_locations_allowed(warehouse, metadata, metadata_location)
        self._require_home(warehouse, namespace, properties, metadata.location, "location")
        self._require_own_folders(warehouse, namespace, properties, metadata, metadata_location)
        text = rules.to_json(metadata)
        entry = self._new_entry(name, metadata, metadata_location, text)
        events = self._created_events(warehouse, namespace, entry, "register-table")
        self._register(warehouse, namespace, entry, request.overwrite, events)
        roots = rules.table_roots(metadata, metadata_location)
        config, credentials = self._storage_access(warehouse, (namespace, name), roots, delegation, True)
        return LoadedTable(metadata_location, text, config, credentials, self.load_etag(metadata_location))

    # -- dropping and renaming ----------------------------------------------------------

    def drop_table(self, prefix: str, namespace: tuple[str, ...], name: str, purge: bool) -> None:
        """Soft policy: into the recycle bin (a purge waits for the retention's end); hard: removed
        now, its purge queued (app/catalog/deletion.py)."""
        warehouse = self.warehouses.get(prefix)
        if is_soft(warehouse):
            events = self._dropped_events(warehouse, namespace, name, purge=purge)
            if self.drop_into_bin(warehouse, namespace, name, purge=purge, action="drop", events=events) is None:
                raise self.missing(namespace, name)
            return
        purge_objects = metadata_path = None
        if purge:
            row = self._require_entry(warehouse, namespace, name)
            metadata_path, purge_objects = self.owned_metadata_files(row)
        row = self.drop_at_once(
            warehouse,
            namespace,
            name,
            action="drop",
            events=self._dropped_events(warehouse, namespace, name, purge=purge),
            purge_objects=purge_objects,
            metadata_path=metadata_path,
        )
        if row is None:
            raise self.missing(namespace, name)
        if purge:
            self.purge_requested.set()

    def unregister_table(self, prefix: str, namespace: tuple[str, ...], name: str) -> LoadedTable:
        """Forget the table, keep every file: the opposite of registerTable (Java's
        ``Catalog.dropTable(ident, purge=false)`` without a trace: no bin entry, its location free).

        The row goes in one statement, which returns what it held: the answer is the last
        committed version, and a commit racing it loses its compare-and-set and finds no table.
        """
        warehouse = self.warehouses.get(prefix)
        name = check_name(name, "table name")
        events = self._dropped_events(warehouse, namespace, name, purge=False)
        # Never into the recycle bin, whatever the warehouse's policy: its metadata is handed back
        # to be registered (here or in another catalog), and a binned copy would be a second owner.
        row = self.drop_at_once(warehouse, namespace, name, action="unregister", events=events)
        if row is None:
            raise self.missing(namespace, name)
        return LoadedTable(row.metadata_location, row.metadata, {}, [])

    def report_metrics(self, prefix: str, namespace: tuple[str, ...], name: str, report: ReportMetricsRequest) -> None:
        warehouse = self.warehouses.get(prefix)
        self._require_entry(warehouse, namespace, name)
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
        self._require_inside_warehouse(warehouse, metadata.location, "location")
        self._require_inside_warehouse(warehouse, rules.metadata_directory(metadata), "write.metadata.path")
        for entry in metadata.metadata_log:
            self._require_inside_warehouse(warehouse, entry.metadata_file, "metadata-log entry")
        data_path = rules.data_path(metadata.properties or {})
        if data_path:
            self._require_inside_warehouse(warehouse, data_path, "write.data.path")
        own = rules.table_files(metadata, metadata_location)
        for snapshot in metadata.snapshots:
            manifest_list = getattr(snapshot, "manifest_list", None)
            if manifest_list:
                own.require(manifest_list, "manifest-list")
