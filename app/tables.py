"""Table operations: create, load, commit, drop (with purge), rename, register, metrics.

The commit follows ARCHITECTURE.md: read the row (one query), apply the pure rules, write a
new metadata object (never overwriting), then compare-and-set the pointer in PostgreSQL. A lost
race re-reads and re-applies while the requirements still hold; the losing file is deleted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from app import change_events
from app.authorization import Authorizer
from app.commits import CommitLanes, CommitLoop, NewVersion
from app.deletion import is_soft
from app.entries import EntryService, now_ms
from app.ground.errors import (
    AlreadyExists,
    BadRequest,
    CommitFailed,
    NoSuchTable,
)
from app.ground.events import CommitRecorder
from app.ground.locations import InvalidLocation, Location
from app.ground.page_tokens import PageTokens
from app.ground.settings import Settings
from app.metrics_reports import MetricsReports
from app.rules import table as rules
from app.rules.identifiers import (
    check_name,
    check_namespace,
    format_namespace,
)
from app.storage_access import (
    NO_DELEGATION,
    Delegation,
)
from app.table_access import TABLE, TableStorageAccess
from app.table_memory import EntryKey, HeldDocuments, IssuedETags, ParsedMetadataCache
from app.warehouses import WarehouseDirectory
from storage.entries import NewEntry
from storage.events import ChangeEvent
from storage.objects import ObjectStore
from storage.repository import CatalogRepository
from storage.rows import EntryRow
from storage.staged import StagedTables
from storage.warehouses import WarehouseRow

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableChange:
    namespace: tuple[str, ...]
    name: str
    requirements: list[dict[str, Any]]
    updates: list[dict[str, Any]]

    @classmethod
    def from_request(cls, change: dict[str, Any]) -> TableChange:
        identifier = change.get("identifier")
        if not identifier:
            raise BadRequest("Every table change of a transaction needs an identifier")
        return cls(
            check_namespace(identifier["namespace"]),
            check_name(identifier["name"], "table name"),
            change.get("requirements") or [],
            change.get("updates") or [],
        )


@dataclass(frozen=True)
class PreparedCommit:
    key: EntryKey
    row: EntryRow | None
    base: Any
    new: Any
    text: str


@dataclass(frozen=True)
class LoadTableRequest:
    """A parsed loadTable: the table, the variant of the answer asked for, and the client's ETag."""

    prefix: str
    namespace: tuple[str, ...]
    name: str
    snapshots: str | None = None
    delegation: Delegation = NO_DELEGATION
    if_none_match: str | None = None


@dataclass(frozen=True)
class NotModified:
    """loadTable's answer when the client's ``If-None-Match`` names what it would get (304)."""

    etag: str
    metadata_location: str


@dataclass(frozen=True)
class LoadedTable:
    """What loadTable answers; ``metadata`` is the stored JSON text, not re-parsed
    (``app.edge.responses`` renders it)."""

    metadata_location: str | None
    metadata: str
    config: dict[str, str]
    credentials: list[dict[str, Any]]
    etag: str | None = None


def etag_for(metadata_location: str, variant: str) -> str:
    digest = hashlib.sha256(f"{metadata_location}|{variant}".encode()).hexdigest()[:32]
    return f'"{digest}"'


def load_etag(
    metadata_location: str, snapshots: str | None, delegation: Delegation, planning_mode: str | None = None
) -> str:
    """loadTable's ETag: the metadata version and what of it the response shows.

    The configured ``scan-planning-mode`` is in the response's config, so it is part of the tag:
    after a restart with another mode, a client's cached table (and config) is not revalidated.
    """
    variant = f"{snapshots or 'all'}|{delegation.variant}"
    return etag_for(metadata_location, f"{variant}|{planning_mode}" if planning_mode else variant)


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    candidates = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in candidates or etag in candidates


class TableService(TableStorageAccess, EntryService):
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
    ) -> None:
        super().__init__(settings, repository, objects, warehouses, authorizer=authorizer, page_tokens=page_tokens)
        self.purge_requested = threading.Event()
        self.snapshot_json = rules.SnapshotJson()
        self.parsed = ParsedMetadataCache(snapshot_json=self.snapshot_json)
        self.issued = IssuedETags()  # lets loadTable on the event loop skip unchanged documents
        self.held = HeldDocuments()  # ... and skip reading a document it answered with before
        self.lanes = CommitLanes()
        self.commits = CommitLoop(repository, self.files, kind=TABLE, logged_files=_logged_files)
        self.staged = StagedTables(repository.db)
        self.reports = MetricsReports(repository)
        # Told (entry id, snapshot count) after each commit lands: maintenance's trigger
        # (app/maintenance_trigger.py), in memory only - no database round trip on the commit path.
        self.after_commit: Callable[[int, int], None] = lambda _entry_id, _snapshots: None

    # -- reading ------------------------------------------------------------------------

    def load(self, request: LoadTableRequest) -> LoadedTable | NotModified:
        """loadTable: the table as asked for, or NotModified when the client already has it."""
        warehouse = self.warehouses.get(request.prefix)
        return self.answer(warehouse, self._require_entry(warehouse, request.namespace, request.name), request)

    def answer(self, warehouse: WarehouseRow, row: EntryRow, request: LoadTableRequest) -> LoadedTable | NotModified:
        """loadTable's answer for a row already read (here, or on the event loop: app/edge/loop_reads.py)."""
        not_modified = self.not_modified(row, request)
        if not_modified is not None:
            return not_modified
        metadata = row.metadata
        if request.snapshots == "refs":
            metadata = json.dumps(rules.refs_only(json.loads(metadata)), separators=(",", ":"))
        config, credentials = self._storage_access(
            warehouse, (request.namespace, request.name), row.location, request.delegation
        )
        etag = self.load_etag(row.metadata_location, request.snapshots, request.delegation)
        self.issued.remember(etag, row.metadata_location)
        return LoadedTable(row.metadata_location, metadata, config, credentials, etag)

    def not_modified(self, row: EntryRow, request: LoadTableRequest) -> NotModified | None:
        """NotModified when the client's ETag is that of the answer; needs the row's location only."""
        etag = self.load_etag(row.metadata_location, request.snapshots, request.delegation)
        if not etag_matches(request.if_none_match, etag):
            return None
        self.issued.remember(etag, row.metadata_location)
        return NotModified(etag, row.metadata_location)

    def load_etag(
        self, metadata_location: str, snapshots: str | None = None, delegation: Delegation = NO_DELEGATION
    ) -> str:
        """The ETag of loadTable's answer (and of the other answers carrying the same metadata)."""
        return load_etag(metadata_location, snapshots, delegation, self.settings.scan_planning_mode)

    # -- creating -----------------------------------------------------------------------

    def create_table(
        self, prefix: str, namespace: tuple[str, ...], request: dict[str, Any], delegation: Delegation = NO_DELEGATION
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        name = check_name(request["name"], "table name")
        namespace_properties = self._require_namespace(warehouse, namespace)
        table_uuid = str(uuid.uuid4())
        location = self._location_for(
            warehouse, namespace, name, table_uuid, request.get("location"), namespace_properties
        )
        metadata = rules.new_table_metadata(request, location=location, now_ms=now_ms(), table_uuid=table_uuid)
        self._require_inside_warehouse(warehouse, rules.metadata_directory(metadata), "write.metadata.path")
        text = rules.to_json(metadata)
        if request.get("stage-create"):
            self._require_name_free(warehouse, namespace, name)
            self._stage(warehouse, namespace, name, metadata)
            config, credentials = self._storage_access(warehouse, (namespace, name), location, delegation, True)
            return LoadedTable(None, text, config, credentials)
        config, credentials = self._storage_access(warehouse, (namespace, name), location, delegation, True)
        metadata_location = self._metadata_location(metadata, rules.next_metadata_version(None))
        entry = NewEntry(name, TABLE, str(metadata.table_uuid), metadata.location, metadata_location, text)
        self._insert_new(warehouse, namespace, entry, self._created_events(warehouse, namespace, entry))
        return LoadedTable(metadata_location, text, config, credentials, self.load_etag(metadata_location))

    def register_table(
        self, prefix: str, namespace: tuple[str, ...], request: dict[str, Any], delegation: Delegation = NO_DELEGATION
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        name = check_name(request["name"], "table name")
        metadata_location = request["metadata-location"]
        properties = self._require_namespace(warehouse, namespace)
        metadata = rules.parse_metadata(self._read_metadata_file(warehouse, metadata_location))
        self._require_registered_locations_allowed(warehouse, metadata)
        self._require_home(warehouse, namespace, properties, metadata.location, "location")
        text = rules.to_json(metadata)
        entry = NewEntry(name, TABLE, str(metadata.table_uuid), metadata.location, metadata_location, text)
        events = self._created_events(warehouse, namespace, entry, "register-table")
        self._register(warehouse, namespace, entry, bool(request.get("overwrite")), events)
        config, credentials = self._storage_access(warehouse, (namespace, name), metadata.location, delegation, True)
        return LoadedTable(metadata_location, text, config, credentials, self.load_etag(metadata_location))

    # -- committing ---------------------------------------------------------------------

    def commit_table(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        name: str,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        change = TableChange(namespace, check_name(name, "table name"), requirements, updates)
        return self._commit_with_retries(warehouse, [change])[0]

    def commit_transaction(self, prefix: str, changes: list[dict[str, Any]]) -> None:
        """Several tables, all or nothing (``POST /v1/{prefix}/transactions/commit``)."""
        warehouse = self.warehouses.get(prefix)
        parsed = [TableChange.from_request(change) for change in changes]
        named = [(change.namespace, change.name) for change in parsed]
        if len(set(named)) != len(named):
            raise BadRequest("A transaction may name each table only once")
        if not parsed:
            raise BadRequest("A transaction needs at least one table change")
        self._commit_with_retries(warehouse, parsed)

    def _commit_with_retries(self, warehouse: WarehouseRow, changes: list[TableChange]) -> list[LoadedTable]:
        names = [format_namespace((*c.namespace, c.name)) for c in changes]
        with CommitRecorder(warehouse.name, names) as recorder:  # metrics + one log line per table
            return self.commits.run(
                lambda: self._attempt_in_lane(warehouse, changes, recorder), ", ".join(names), recorder.retried
            )

    def _attempt_in_lane(
        self, warehouse: WarehouseRow, changes: list[TableChange], recorder: CommitRecorder
    ) -> list[LoadedTable] | None:
        """A single-table attempt waits for this worker's other commits to the table (CommitLanes).

        Transactions do not: holding several lanes could deadlock, and they are rare.
        """
        if len(changes) != 1:
            return self._attempt_commit(warehouse, changes, recorder)
        with self.lanes.lane((warehouse.id, changes[0].namespace, changes[0].name)):
            return self._attempt_commit(warehouse, changes, recorder)

    def _attempt_commit(
        self, warehouse: WarehouseRow, changes: list[TableChange], recorder: CommitRecorder | None = None
    ) -> list[LoadedTable] | None:
        """One optimistic attempt; None when a concurrent commit won the compare-and-set."""
        prepared = [self._prepare(warehouse, change, allow_create=len(changes) == 1) for change in changes]
        if prepared[0].row is None:
            created = self._create_from_commit(warehouse, changes[0], prepared[0])
            if recorder is not None:
                recorder.locations = [(None, created.metadata_location)]
            return [created]
        changed = [p for p in prepared if p.text != p.row.metadata]
        versions = [self._new_version(warehouse, p) for p in changed]
        if versions and not self.commits.publish(versions, self._commit_events(warehouse, changes, changed, versions)):
            return None
        written = [version.location for version in versions]
        for p, location in zip(changed, written, strict=True):
            self.parsed.remember(location, p.text, p.new, (p.key, p.row.id))
            self.files.forget(self._owned_previous_files(p, location))
            self.after_commit(p.row.id, len(p.new.snapshots))
        locations = dict(zip(map(id, changed), written, strict=True))
        results = []
        for p in prepared:
            location = locations.get(id(p), p.row.metadata_location)
            results.append(LoadedTable(location, p.text, {}, [], self.load_etag(location)))
        if recorder is not None:
            old = [p.row.metadata_location for p in prepared]
            recorder.locations = list(zip(old, [r.metadata_location for r in results], strict=True))
        return results

    @staticmethod
    def _commit_events(
        warehouse: WarehouseRow, changes: list[TableChange], changed: list[PreparedCommit], versions: list[NewVersion]
    ) -> list[ChangeEvent]:
        """One update-table event per table the commit changes (a transaction's share a request id)."""
        by_key = {(warehouse.id, change.namespace, change.name): change for change in changes}
        return change_events.events_of(
            warehouse.id,
            [
                change_events.committed(
                    TABLE,
                    p.key[1],
                    p.key[2],
                    p.row.uuid,
                    by_key[p.key].requirements,
                    by_key[p.key].updates,
                    p.row.metadata_location,
                    version.location,
                )
                for p, version in zip(changed, versions, strict=True)
            ],
        )

    def _prepare(self, warehouse: WarehouseRow, change: TableChange, allow_create: bool) -> PreparedCommit:
        """Read the current row (one query) and apply the pure rules to it."""
        qualified = format_namespace((*change.namespace, change.name))
        key = (warehouse.id, change.namespace, change.name)
        row, base = self._read_base(key, rules.screen_for(change.requirements, change.updates))
        creating = any(r.get("type") == "assert-create" for r in change.requirements)
        if row is not None and row.kind != TABLE:
            if creating and allow_create:  # a create transaction over a view (Java: the same 409)
                raise self._name_taken(change.namespace, change.name, row.kind)
            raise NoSuchTable(f"Table does not exist: {qualified} is a view")
        if row is None and not (creating and allow_create):
            raise NoSuchTable(f"Table does not exist: {qualified}")
        default_location = None
        if row is None:  # staged create: a location unless the updates set one
            namespace_properties = self._require_namespace(warehouse, change.namespace)
            default_location = self._location_for(
                warehouse, change.namespace, change.name, str(uuid.uuid4()), None, namespace_properties
            )
        new = rules.commit(
            base,
            change.requirements,
            change.updates,
            base_location=row.metadata_location if row else None,
            now_ms=now_ms(),
            default_location=default_location,
        )
        self._require_inside_warehouse(warehouse, new.location, "location")
        self._require_inside_warehouse(warehouse, rules.metadata_directory(new), "write.metadata.path")
        for manifest_list in rules.added_manifest_lists(change.updates):
            self._require_inside_warehouse(warehouse, manifest_list, "manifest-list")
        if row is None and new.location != default_location:  # a create that names its location
            self._require_home(warehouse, change.namespace, namespace_properties, new.location, "location")
        return PreparedCommit(key, row, base, new, rules.to_json(new, self.snapshot_json))

    def _read_base(self, key: EntryKey, screen: Callable[[dict[str, Any]], None]) -> tuple[EntryRow | None, Any]:
        """The entry's row and parsed metadata; the document is read only if it is not known here
        (it is, after this worker's previous commit to the table: the usual case). A document
        that must be parsed is first shown to ``screen``: a commit another writer made hopeless
        is refused before the parse."""
        seen = self.parsed.latest(key)
        row = self.repository.load_entry(*key, unless_at=seen.location if seen else None)
        if row is None or row.kind != TABLE:  # a view: the caller refuses it without its document
            return row, None
        if seen is not None and row.metadata_location == seen.location:
            if row.id == seen.entry_id:
                return replace(row, metadata=seen.text), seen.metadata
            row = self.repository.load_entry(*key)  # another entry at that version: its own text
            if row is None:
                return None, None
        return row, self.parsed.parse(row.metadata_location, row.metadata, (key, row.id), screen)

    def _create_from_commit(
        self, warehouse: WarehouseRow, change: TableChange, prepared: PreparedCommit
    ) -> LoadedTable:
        """A staged create (``assert-create``) becomes a table: first version of its metadata."""
        new, text = prepared.new, prepared.text
        metadata_location = self._metadata_location(new, rules.next_metadata_version(None))
        entry = NewEntry(change.name, TABLE, str(new.table_uuid), new.location, metadata_location, text)

        def name_taken(exc: AlreadyExists) -> Exception:
            existing_kind = self._kind_at(warehouse, change.namespace, change.name)
            if existing_kind != TABLE:
                return self._name_taken(change.namespace, change.name, existing_kind)
            qualified = format_namespace((*change.namespace, change.name))
            return CommitFailed(f"Requirement failed: table already exists: {qualified}")

        created = change_events.entry_change(
            "create-table", TABLE, change.namespace, change.name, entry.uuid, updates=change.updates
        )
        events = change_events.events_of(warehouse.id, [created])
        self._insert_new(warehouse, change.namespace, entry, events, name_taken)
        return LoadedTable(metadata_location, text, {}, [], self.load_etag(metadata_location))

    # -- dropping and renaming ----------------------------------------------------------

    def drop_table(self, prefix: str, namespace: tuple[str, ...], name: str, purge: bool) -> None:
        """Soft policy: into the recycle bin (a purge waits for the retention's end); hard: removed
        now, its purge queued (app/deletion.py)."""
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
        """Forget the table, keep every file: the opposite of registerTable.

        The row goes in one statement, which returns what it held: the answer is the last
        committed version, and a commit racing it loses its compare-and-set and finds no table.
        """
        warehouse = self.warehouses.get(prefix)
        name = check_name(name, "table name")
        events = self._dropped_events(warehouse, namespace, name, purge=False)
        if is_soft(warehouse):
            row = self.drop_into_bin(warehouse, namespace, name, purge=False, action="unregister", events=events)
        else:
            row = self.drop_at_once(warehouse, namespace, name, action="unregister", events=events)
        if row is None:
            raise self.missing(namespace, name)
        return LoadedTable(row.metadata_location, row.metadata, {}, [])

    def report_metrics(self, prefix: str, namespace: tuple[str, ...], name: str, report: dict[str, Any]) -> None:
        warehouse = self.warehouses.get(prefix)
        self._require_entry(warehouse, namespace, name)
        self.reports.accept(warehouse.id, namespace, name, report)

    # -- helpers ------------------------------------------------------------------------

    def _metadata_location(self, metadata: Any, version: int) -> str:
        return self._new_metadata_file(rules.metadata_directory(metadata), version, metadata.properties or {})

    def _new_version(self, warehouse: WarehouseRow, prepared: PreparedCommit) -> NewVersion:
        file = self._next_location(prepared)
        _, namespace, name = prepared.key
        placed = self._moved(warehouse, namespace, name, prepared.row, prepared.new.location, file)
        return NewVersion(prepared.row, file, prepared.text, prepared.new.location, placed)

    def _next_location(self, prepared: PreparedCommit) -> str:
        """Where the next version of a prepared commit's table goes."""
        return self._metadata_location(prepared.new, rules.next_metadata_version(prepared.row.metadata_location))

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
        return roots[1].uri, [text for text in dict.fromkeys(files) if _within_any(text, roots)]

    def _owned_previous_files(self, prepared: PreparedCommit, written: str) -> list[str]:
        """``write.metadata.delete-after-commit``: the previous metadata files that fell out of the log
        and that this table owns - inside its own metadata directory (before or after the commit),
        not the file just written, and only while no other table or view shares that directory."""
        candidates = rules.metadata_files_to_delete(prepared.base, prepared.new)
        if not candidates:
            return []
        try:
            roots = list(
                dict.fromkeys(Location.parse(rules.metadata_directory(m)) for m in (prepared.base, prepared.new))
            )
        except InvalidLocation:
            return []
        owned = [text for text in candidates if text != written and _within_any(text, roots)]
        if not owned:
            return []
        shared = self.repository.entries_overlapping(roots, exclude_id=prepared.row.id)
        if shared:
            log.info("not deleting %d previous metadata files: their directory is shared", len(owned))
            return []
        return owned

    def _require_registered_locations_allowed(self, warehouse: WarehouseRow, metadata: Any) -> None:
        """registerTable: the location, metadata path, metadata-log entries and manifest lists of
        the registered metadata all lie in the warehouse's allowed locations (else 400, nothing
        written): a later commit, delete-after-commit or purge acts on exactly these."""
        self._require_inside_warehouse(warehouse, metadata.location, "location")
        self._require_inside_warehouse(warehouse, rules.metadata_directory(metadata), "write.metadata.path")
        for entry in metadata.metadata_log:
            self._require_inside_warehouse(warehouse, entry.metadata_file, "metadata-log entry")
        for snapshot in metadata.snapshots:
            manifest_list = getattr(snapshot, "manifest_list", None)
            if manifest_list:
                self._require_inside_warehouse(warehouse, manifest_list, "manifest-list")


def _logged_files(row: EntryRow) -> list[str]:
    """The metadata files a stored table document names as its predecessors (``metadata-log``)."""
    return [entry["metadata-file"] for entry in json.loads(row.metadata).get("metadata-log", [])]


def _within_any(text: str, roots: list[Location]) -> bool:
    try:
        location = Location.parse(text)
    except InvalidLocation:
        return False
    return any(location.is_within(root) and location != root for root in roots)
