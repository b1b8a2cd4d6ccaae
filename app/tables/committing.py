"""updateTable and commitTransaction: a table's next version, prepared with the rules and handed
to the commit loop (``app.catalog.commits``).

``TableCommitter`` is a part ``TableService`` is given at construction
(app/composition/catalog.py); maintenance commits through ``TableService.commit_table`` too.
The commit follows ARCHITECTURE.md: read the row (one query), apply the pure rules, write a
new metadata object (never overwriting), then compare-and-set the pointer in PostgreSQL. A lost
race re-reads and re-applies while the requirements still hold; the losing file is deleted. The
requests come parsed (``app.rules.requests.tables``): requirements and updates are PyIceberg's
models by the time they get here.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from app.catalog.commits import CommitLanes, CommitLoop, NewVersion
from app.catalog.entries import Entries, now_ms
from app.events import changes as change_events
from app.ground.errors import AlreadyExists, BadRequest, CommitFailed, NoSuchTable
from app.ground.events import CommitRecorder, refusals_counted
from app.ground.locations import InvalidLocation, Location
from app.namespaces.warehouses import WarehouseDirectory
from app.rules import table as rules
from app.rules.identifiers import check_name, check_namespace, format_namespace
from app.rules.metadata_files import metadata_file_location
from app.rules.requests.tables import CommitTableRequest, CommitTransactionRequest, TableChangeRequest
from app.rules.table.answers import LoadedTable, load_etag
from app.tables.access import TABLE
from app.tables.memory import EntryKey, ParsedMetadataCache
from storage.entries import NewEntry
from storage.events import ChangeEvent
from storage.repository import CatalogRepository
from storage.rows import EntryRow
from storage.warehouses import WarehouseRow

log = logging.getLogger(__name__)
# Told (entry id, snapshot count, the new metadata's properties) after each commit lands.
AfterCommit = Callable[[int, int, Mapping[str, str]], None]
# What a protection mark refuses a commit that moves a table's files (its location, metadata
# directory or data path): the message's "Cannot change the location of db.t: ...".
MOVE = "change the location of"


@dataclass(frozen=True)
class TableChange:
    """One table's share of a commit: which table, and the parsed request."""

    namespace: tuple[str, ...]
    name: str
    commit: CommitTableRequest

    @classmethod
    def of(cls, change: TableChangeRequest) -> TableChange:
        """A table change of a transaction, which names its table."""
        identifier = change.identifier
        return cls(check_namespace(list(identifier.namespace)), check_name(identifier.name, "table name"), change)


@dataclass(frozen=True)
class PreparedCommit:
    key: EntryKey
    row: EntryRow | None
    base: Any
    new: Any
    text: str


class TableCommitter:
    def __init__(
        self,
        repository: CatalogRepository,
        warehouses: WarehouseDirectory,
        entries: Entries,
        parsed: ParsedMetadataCache,
        snapshot_json: rules.SnapshotJson,
        *,
        after_commit: AfterCommit,
        planning_mode: str | None,
    ) -> None:
        self.repository = repository
        self.warehouses = warehouses
        self.entries = entries
        self.planning_mode = planning_mode  # in the answer's ETag, as loadTable's (app.rules.table.answers)
        self.parsed = parsed  # parsed documents by location, shared with loading and scan planning
        self.snapshot_json = snapshot_json  # the one ``parsed`` reuses: a commit's snapshots serialised once
        self.lanes = CommitLanes()
        self.commits = CommitLoop(repository, entries.files, kind=TABLE, logged_files=logged_files)
        # Told (entry id, snapshot count, properties) after each commit lands:
        # maintenance's trigger (app/maintenance/trigger.py), in memory only - no database round
        # trip on the commit path. Given at construction (app/composition), never installed later.
        self.after_commit = after_commit

    def commit_table(
        self, prefix: str, namespace: tuple[str, ...], name: str, commit: CommitTableRequest
    ) -> LoadedTable:
        """updateTable (and the maintenance's own commits)."""
        warehouse = self.warehouses.get(prefix)
        change = TableChange(namespace, check_name(name, "table name"), commit)
        return self._commit_with_retries(warehouse, [change])[0]

    def commit_transaction(self, prefix: str, request: CommitTransactionRequest) -> None:
        """Several tables, all or nothing (``POST /v1/{prefix}/transactions/commit``)."""
        warehouse = self.warehouses.get(prefix)
        parsed = [TableChange.of(change) for change in request.table_changes]
        named = [(change.namespace, change.name) for change in parsed]
        if len(set(named)) != len(named):
            raise BadRequest("A transaction may name each table only once")
        if not parsed:
            raise BadRequest("A transaction needs at least one table change")
        self._commit_with_retries(warehouse, parsed)

    def _commit_with_retries(self, warehouse: WarehouseRow, changes: list[TableChange]) -> list[LoadedTable]:
        names = [format_namespace((*c.namespace, c.name)) for c in changes]
        with refusals_counted(TABLE), CommitRecorder(warehouse.name, names) as recorder:  # metrics + a log line
            return self.commits.run(
                lambda: self._attempt_in_lane(warehouse, changes, recorder), ", ".join(names), recorder.retried
            )

    def _attempt_in_lane(
        self, warehouse: WarehouseRow, changes: list[TableChange], recorder: CommitRecorder
    ) -> list[LoadedTable] | None:
        """A single-table attempt waits for this worker's other commits to the table (CommitLanes).

        Transactions do not: holding several lanes could deadlock, and they are rare. A commit
        that finds the lane taken is first checked against the current row, and refused there
        when another writer made it hopeless: with N writers on a table most attempts are such,
        and each would otherwise hold up, in turn, the one commit that can win (W7). The attempt
        in the lane reads the row again (without its document, which this worker then holds), so
        what it decides on is still current; a free lane costs no extra read.
        """
        if len(changes) != 1:
            return self._attempt_commit(warehouse, changes, recorder)
        key = (warehouse.id, changes[0].namespace, changes[0].name)
        lane = self.lanes.lane(key)
        if not lane.acquire(blocking=False):
            commit = changes[0].commit
            if not commit.creates:
                _, base = self._read_base(key, rules.screen_for(commit.requirements))  # CommitFailed: hopeless
                if base is not None:  # held here: not screened, checked
                    rules.check_requirements(base, commit.requirements)
            lane.acquire()
        try:
            return self._attempt_commit(warehouse, changes, recorder)
        finally:
            lane.release()

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
            self.entries.files.forget(self._owned_previous_files(p, location))
            self.after_commit(p.row.id, len(p.new.snapshots), p.new.properties)
        locations = dict(zip(map(id, changed), written, strict=True))
        results = []
        for p in prepared:
            location = locations.get(id(p), p.row.metadata_location)
            etag = load_etag(location, None, planning_mode=self.planning_mode)  # loadTable's: all snapshots
            results.append(LoadedTable(location, p.text, {}, [], etag))
        if recorder is not None:
            old = [p.row.metadata_location for p in prepared]
            recorder.locations = list(zip(old, [r.metadata_location for r in results], strict=True))
        return results

    @staticmethod
    def _commit_events(
        warehouse: WarehouseRow, changes: list[TableChange], changed: list[PreparedCommit], versions: list[NewVersion]
    ) -> list[ChangeEvent]:
        """One update-table event per table the commit changes (a transaction's share a request id)."""
        by_key = {(warehouse.id, change.namespace, change.name): change.commit for change in changes}
        return change_events.events_of(
            warehouse.id,
            [
                change_events.committed(
                    TABLE,
                    p.key[1],
                    p.key[2],
                    p.row.uuid,
                    by_key[p.key].sent_requirements,
                    by_key[p.key].sent_updates,
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
        commit = change.commit
        row, base = self._read_base(key, rules.screen_for(commit.requirements))
        creating = commit.creates
        if row is not None and row.kind != TABLE:
            if creating and allow_create:  # a create transaction over a view (Java: the same 409)
                raise self.entries.name_taken(change.namespace, change.name, row.kind)
            raise NoSuchTable(f"Table does not exist: {qualified} is a view")
        if row is None and not (creating and allow_create):
            raise NoSuchTable(f"Table does not exist: {qualified}")
        default_location = None
        if row is None:  # staged create: a location unless the updates set one
            namespace_properties = self.entries.require_namespace(warehouse, change.namespace)
            default_location = self.entries.location_for(
                warehouse, change.namespace, change.name, str(uuid.uuid4()), None, namespace_properties
            )
        new = rules.commit(
            base,
            commit.requirements,
            commit.updates,
            base_location=row.metadata_location if row else None,
            now_ms=now_ms(),
            default_location=default_location,
        )
        self.entries.require_inside_warehouse(warehouse, new.location, "location")
        self.entries.require_inside_warehouse(warehouse, rules.metadata_directory(new), "write.metadata.path")
        data_path = rules.data_path(new.properties or {})
        if data_path:  # a moving commit's folders meet the home where it claims them (Entries.moved)
            self.entries.require_inside_warehouse(warehouse, data_path, "write.data.path")
        own = rules.table_files(new)  # a snapshot names only the table's own manifest lists
        for manifest_list in rules.added_manifest_lists(commit.updates):
            own.require(manifest_list, "manifest-list")
        if row is None:
            if new.location != default_location:  # a create that names its location
                self.entries.require_home(warehouse, change.namespace, namespace_properties, new.location, "location")
            self.require_own_folders(warehouse, change.namespace, namespace_properties, new)
        return PreparedCommit(key, row, base, new, rules.to_json(new, self.snapshot_json))

    def _read_base(self, key: EntryKey, screen: rules.Screen) -> tuple[EntryRow | None, Any]:
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
        metadata_location = new_metadata_location(new, rules.next_metadata_version(None))
        data_path = rules.data_path(new.properties or {})
        entry = NewEntry(change.name, TABLE, str(new.table_uuid), new.location, metadata_location, text, data_path)

        def name_taken(exc: AlreadyExists) -> Exception:
            existing_kind = self.entries.kind_at(warehouse, change.namespace, change.name)
            if existing_kind != TABLE:
                return self.entries.name_taken(change.namespace, change.name, existing_kind)
            qualified = format_namespace((*change.namespace, change.name))
            return CommitFailed(f"Requirement failed: table already exists: {qualified}")

        created = change_events.entry_change(
            "create-table", TABLE, change.namespace, change.name, entry.uuid, updates=change.commit.sent_updates
        )
        events = change_events.events_of(warehouse.id, [created])
        self.entries.insert_new(warehouse, change.namespace, entry, events, name_taken)
        etag = load_etag(metadata_location, None, planning_mode=self.planning_mode)  # loadTable's: all snapshots
        return LoadedTable(metadata_location, text, {}, [], etag)

    def _new_version(self, warehouse: WarehouseRow, prepared: PreparedCommit) -> NewVersion:
        """A commit that moves where a protected table's files are is refused before any file is
        written, and again in the swap's transaction (a mark set meanwhile)."""
        refused = MOVE if rules.relocates(prepared.base, prepared.new) else None
        if refused is not None:
            self.repository.refuse_if_entry_protected(refused, prepared.row.id)
        file = new_metadata_location(prepared.new, rules.next_metadata_version(prepared.row.metadata_location))
        _, namespace, name = prepared.key
        data_path = rules.data_path(prepared.new.properties or {})
        named = [("location", prepared.new.location), ("write.metadata.path", file.rsplit("/", 1)[0])]
        if data_path:
            named.append(("write.data.path", data_path))
        placed = self.entries.moved(warehouse, namespace, name, prepared.row, named)
        return NewVersion(
            prepared.row, file, prepared.text, prepared.new.location, placed, data_path, refused_when_protected=refused
        )

    def require_own_folders(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        namespace_properties: dict[str, str],
        metadata: Any,
        metadata_location: str | None = None,
    ) -> None:
        """A new table's metadata directory (that of ``metadata_location``, a registered file, when
        given) and data path (``write.data.path``, when set): inside the warehouse's allowed
        locations, and inside its namespace's home unless inside its own location - a folder a
        caller names is never another entry's (storage/placement.py claims them with the table)."""
        self.entries.require_inside_warehouse(warehouse, rules.metadata_directory(metadata), "write.metadata.path")
        named = [("metadata directory", metadata_location.rsplit("/", 1)[0])] if metadata_location else []
        if not metadata_location:
            named.append(("write.metadata.path", rules.metadata_directory(metadata)))
        data_path = rules.data_path(metadata.properties or {})
        if data_path:
            self.entries.require_inside_warehouse(warehouse, data_path, "write.data.path")
            named.append(("write.data.path", data_path))
        own = [Location.parse(metadata.location, "location")]
        self.entries.require_homes(warehouse, namespace, namespace_properties, named, own)

    def _owned_previous_files(self, prepared: PreparedCommit, written: str) -> list[str]:
        """``write.metadata.delete-after-commit``: the previous metadata files that fell out of the log
        and that this table owns - inside its own metadata directory (before or after the commit),
        not the file just written, and only while no other table or view shares that directory and
        no protection mark covers the table (its files are then deleted by nothing)."""
        candidates = rules.metadata_files_to_delete(prepared.base, prepared.new)
        if not candidates:
            return []
        try:
            roots = list(
                dict.fromkeys(Location.parse(rules.metadata_directory(m)) for m in (prepared.base, prepared.new))
            )
        except InvalidLocation:
            return []
        owned = [text for text in candidates if text != written and within_any(text, roots)]
        if not owned:
            return []
        protected_by = self.repository.protection_of_entry(prepared.row.id)
        if protected_by is not None:
            log.info("not deleting %d previous metadata files: %s", len(owned), protected_by)
            return []
        shared = self.repository.entries_overlapping(roots, exclude_id=prepared.row.id)
        if shared:
            log.info("not deleting %d previous metadata files: their directory is shared", len(owned))
            return []
        return owned


def new_metadata_location(metadata: Any, version: int) -> str:
    """Where a table's metadata file of ``version`` goes: in its metadata directory, a fresh uuid
    in its name, so never an existing object."""
    directory = rules.metadata_directory(metadata)
    return metadata_file_location(directory, version, metadata.properties or {}, str(uuid.uuid4()))


def logged_files(row: EntryRow) -> list[str]:
    """The metadata files a stored table document names as its predecessors (``metadata-log``)."""
    return [entry["metadata-file"] for entry in json.loads(row.metadata).get("metadata-log", [])]


def within_any(text: str, roots: list[Location]) -> bool:
    try:
        location = Location.parse(text)
    except InvalidLocation:
        return False
    return any(location.is_within(root) and location != root for root in roots)
