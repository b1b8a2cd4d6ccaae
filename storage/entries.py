"""Tables and views in PostgreSQL (SQL only): one identifier space in a namespace, and the commit
point, a compare-and-set of the metadata pointer (``swap_metadata``).

A part of ``CatalogRepository`` (which derives from ``EntryRows``). The loadTable and listing
queries are public because the event loop's reader (storage/loop_reads.py) sends the same
statements. Methods raise ``app.ground.errors`` exceptions; callers never see psycopg.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import tuple_row

from app.ground.errors import AlreadyExists, NoSuchNamespace
from app.ground.locations import Location
from storage.db import Database, pipelined
from storage.events import ChangeEvent, record_events
from storage.housekeeping_rows import settle_pending
from storage.namespaces import PAGE_UNDER, dotted, page_under
from storage.placement import Claim, PipelinedClaim, claim, overlapping_entries
from storage.protection_rows import entry_protection, refuse_entry_if_protected, refuse_if_protected
from storage.rows import EntryRow
from storage.table_moves import MovedFrom, end_move, insert_move

_LOAD_ENTRY = (
    "SELECT e.id, e.kind, e.uuid::text AS uuid, e.location, e.metadata_location, {metadata} AS metadata,"
    " e.data_path FROM namespace n JOIN catalog_entry e ON e.namespace_id = n.id"
    " WHERE n.warehouse_id = %s AND n.path = %s AND e.name = %s"
)
LOAD_ENTRY = _LOAD_ENTRY.format(metadata="e.metadata")
# The document only when the entry has moved on from the given metadata location: a client
# revalidating what it has (If-None-Match) costs neither decompressing nor sending it.
LOAD_ENTRY_UNLESS_AT = _LOAD_ENTRY.format(metadata="CASE WHEN e.metadata_location = %s THEN '' ELSE e.metadata END")
# listTables / listViews: one kind's names in one namespace after a name, in name order
LIST_ENTRIES = PAGE_UNDER.format(
    page="SELECT name AS item FROM catalog_entry"
    " WHERE namespace_id = n.id AND kind = %(kind)s AND name > coalesce(%(after)s::text, '')"
    " ORDER BY name LIMIT %(limit)s"
)

# The console's search by name (app/catalog/entries.py, ``search_names``): the same keyset walk, rows whose
# name contains the text (case-insensitively); a scan of one namespace's names, bounded by LIMIT.
SEARCH_ENTRIES = PAGE_UNDER.format(
    page="SELECT name AS item FROM catalog_entry"
    " WHERE namespace_id = n.id AND kind = %(kind)s AND name > coalesce(%(after)s::text, '')"
    " AND strpos(lower(name), lower(%(contains)s)) > 0"
    " ORDER BY name LIMIT %(limit)s"
)


def load_entry_query(
    warehouse_id: int, namespace: tuple[str, ...], name: str, unless_at: str | None
) -> tuple[str, tuple[Any, ...]]:
    if unless_at is None:
        return LOAD_ENTRY, (warehouse_id, list(namespace), name)
    return LOAD_ENTRY_UNLESS_AT, (unless_at, warehouse_id, list(namespace), name)


@dataclass(frozen=True)
class MetadataSwap:
    entry_id: int
    expected_location: str
    new_location: str
    new_metadata: str
    new_table_location: str
    # locations the new version takes that the entry did not own (a moved location or metadata
    # directory): claimed in the commit's transaction (storage/placement.py); usually none
    placed: Claim | None = None
    new_data_path: str | None = None  # the table's data path after the commit (None: unset)
    # refused (``Protected``, nothing written) when a mark covers the entry: a commit that moves
    # where its files are (``app.rules.table.relocates``), e.g. "change the location of"
    refused_when_protected: str | None = None


class CommitOutcomeUnknown(Exception):
    """The database connection failed after the commit statements were sent."""


class _LostRace(Exception):
    pass


@dataclass(frozen=True)
class NewEntry:
    name: str
    kind: str
    uuid: str
    location: str
    metadata_location: str
    metadata: str
    data_path: str | None = None  # a table's data path, when its properties set one

    def values(self) -> tuple[str | None, ...]:
        return (self.name, self.kind, self.uuid, self.location, self.metadata_location, self.metadata, self.data_path)


class EntryRows:
    db: Database

    def load_entry(
        self, warehouse_id: int, namespace: tuple[str, ...], name: str, unless_at: str | None = None
    ) -> EntryRow | None:
        """The hot path of loadTable: one indexed query, the document returned as stored text.

        With ``unless_at``, ``metadata`` is empty when the entry is still at that location.
        """
        query, params = load_entry_query(warehouse_id, namespace, name, unless_at)
        with self.db.connection() as conn:
            row = conn.execute(query, params).fetchone()
        return EntryRow(**row) if row else None

    def load_entry_by_id(self, entry_id: int) -> EntryRow | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT id, kind, uuid::text AS uuid, location, metadata_location, metadata, data_path"
                " FROM catalog_entry WHERE id = %s",
                (entry_id,),
            ).fetchone()
        return EntryRow(**row) if row else None

    def entry_exists(self, warehouse_id: int, namespace: tuple[str, ...], name: str, kind: str) -> bool:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM namespace n JOIN catalog_entry e ON e.namespace_id = n.id"
                " WHERE n.warehouse_id = %s AND n.path = %s AND e.name = %s AND e.kind = %s",
                (warehouse_id, list(namespace), name, kind),
            ).fetchone()
        return row is not None

    def list_entries(
        self,
        warehouse_id: int,
        namespace: tuple[str, ...],
        kind: str,
        after: str | None,
        limit: int | None,
        contains: str | None = None,
    ) -> list[str]:
        params = {"wh": warehouse_id, "path": list(namespace), "kind": kind, "after": after, "limit": limit}
        query = LIST_ENTRIES
        if contains:
            query, params["contains"] = SEARCH_ENTRIES, contains
        with self.db.connection() as conn:
            rows = conn.cursor(row_factory=tuple_row).execute(query, params).fetchall()  # as list_namespaces
        names = page_under(rows)
        if names is None:
            raise NoSuchNamespace(f"Namespace does not exist: {dotted(namespace)}")
        return names

    def insert_entry(
        self,
        warehouse_id: int,
        namespace: tuple[str, ...],
        entry: NewEntry,
        before_commit: Callable[[], None] = lambda: None,
        placed: Claim | None = None,
        *,
        events: Sequence[ChangeEvent],
        moved_from: MovedFrom | None = None,
    ) -> int:
        """Register a new table or view; AlreadyExists if the name is taken by either kind.

        ``before_commit`` runs after the statements, before the commit (see ``swap_metadata``).
        ``placed``: the locations it will own, claimed in the same transaction (storage/placement.py).
        ``events``: the change's events, written last (storage/events.py).
        ``moved_from``: a table moved home from a federated warehouse (storage/table_moves.py).
        """
        with self.db.connection() as conn, pipelined(conn):
            try:
                inserted = conn.execute(
                    "INSERT INTO catalog_entry"
                    " (namespace_id, name, kind, uuid, location, metadata_location, metadata, data_path)"
                    " SELECT n.id, %s, %s, %s, %s, %s, %s, %s FROM namespace n"
                    " WHERE n.warehouse_id = %s AND n.path = %s RETURNING id",
                    (*entry.values(), warehouse_id, list(namespace)),
                )
                # after the insert: a name already taken is AlreadyExists first
                claiming = PipelinedClaim(conn, placed) if placed is not None else None
                row = inserted.fetchone()  # one round trip: BEGIN, the insert, the claim's locks
                if row is None:  # rolled back: the file stays pending until it is deleted
                    raise NoSuchNamespace(f"Namespace does not exist: {dotted(namespace)}")
                if claiming is not None:
                    claiming.look_up(row["id"])
                settle_pending(conn, [entry.metadata_location])
                if claiming is not None:
                    claiming.check()  # one round trip: the claim's lookup, the pending record settled
                if moved_from is not None:
                    insert_move(conn, moved_from, row["id"])
                before_commit()
                record_events(conn, events)
            except pg_errors.UniqueViolation as exc:
                raise AlreadyExists(f"Table or view already exists: {dotted((*namespace, entry.name))}") from exc
            except pg_errors.ForeignKeyViolation as exc:  # namespace dropped concurrently
                raise NoSuchNamespace(f"Namespace does not exist: {dotted(namespace)}") from exc
        return row["id"]

    def replace_entry(
        self,
        warehouse_id: int,
        namespace: tuple[str, ...],
        entry: NewEntry,
        placed: Claim | None = None,
        *,
        events: Sequence[ChangeEvent],
    ) -> str | None:
        """registerTable/registerView with overwrite: insert, or repoint an entry of the same kind.

        Returns the previous metadata location (None when nothing was replaced). ``placed``: the
        locations it will own, claimed in the same transaction (the replaced row's excepted).
        """
        with self.db.transaction() as conn:
            ns = conn.execute(
                "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s FOR SHARE",
                (warehouse_id, list(namespace)),
            ).fetchone()
            if ns is None:
                raise NoSuchNamespace(f"Namespace does not exist: {dotted(namespace)}")
            old = conn.execute(
                "SELECT id, kind, metadata_location FROM catalog_entry"
                " WHERE namespace_id = %s AND name = %s FOR UPDATE",
                (ns["id"], entry.name),
            ).fetchone()
            if placed is not None and (old is None or old["kind"] == entry.kind):
                claim(conn, [replace(placed, entry_id=old["id"] if old else None)])
            if old is None:
                conn.execute(
                    "INSERT INTO catalog_entry"
                    " (namespace_id, name, kind, uuid, location, metadata_location, metadata, data_path)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                    (ns["id"], *entry.values()),
                )
                record_events(conn, events)
                return None
            if old["kind"] != entry.kind:
                raise AlreadyExists(f"A {old['kind']} already exists: {dotted((*namespace, entry.name))}")
            conn.execute(
                "UPDATE catalog_entry SET uuid = %s, location = %s, metadata_location = %s, metadata = %s,"
                " data_path = %s, version = version + 1, updated_at = now() WHERE namespace_id = %s AND name = %s",
                (
                    entry.uuid,
                    entry.location,
                    entry.metadata_location,
                    entry.metadata,
                    entry.data_path,
                    ns["id"],
                    entry.name,
                ),
            )
            record_events(conn, events)
            return old["metadata_location"]

    def swap_metadata(
        self,
        swaps: list[MetadataSwap],
        before_commit: Callable[[], None] = lambda: None,
        *,
        events: Sequence[ChangeEvent],
    ) -> bool:
        """The commit point: compare-and-set every pointer, all or none. False = another writer won.

        One swap is a single conditional UPDATE. Several (a multi-table transaction) lock their rows
        in id order - a fixed order, so concurrent transactions cannot deadlock - and check every
        expected location before changing any. The pending-object records of the new files are
        settled in the same transaction, so "committed" and "no longer pending" cannot disagree.
        ``before_commit`` runs once the swaps hold, before the commit: what it raises rolls the
        transaction back (the new files are still being written meanwhile; it waits for them).
        A failure after the statements were sent raises ``CommitOutcomeUnknown``. ``events`` are
        written last, once the file is there (storage/events.py: nothing slow under their lock).
        """
        ordered = sorted(swaps, key=lambda swap: swap.entry_id)
        with self.db.connection() as conn:
            try:
                with pipelined(conn):  # one append: two round trips (BEGIN, swap, settling; events, COMMIT)
                    if len(ordered) > 1 and not self._current_locations_match(conn, ordered):
                        return False
                    claims = [swap.placed for swap in ordered if swap.placed is not None]
                    if claims:
                        claim(conn, claims)
                    updates = [self._send_swap(conn, swap) for swap in ordered]
                    settle_pending(conn, [swap.new_location for swap in ordered])
                    for swap, updated in zip(ordered, updates, strict=True):
                        if updated.fetchone() is None:
                            raise _LostRace
                        if swap.refused_when_protected is not None:  # the row is locked: a mark on it waits
                            refuse_entry_if_protected(conn, swap.refused_when_protected, swap.entry_id)
                    before_commit()
                    record_events(conn, events)
            except _LostRace:
                return False
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                raise CommitOutcomeUnknown(str(exc)) from exc
        return True

    @staticmethod
    def _send_swap(conn: psycopg.Connection, swap: MetadataSwap) -> psycopg.Cursor:
        """The compare-and-set of one pointer; its row comes back only if it held."""
        return conn.execute(
            "UPDATE catalog_entry SET metadata_location = %s, metadata = %s, location = %s,"
            " data_path = %s, version = version + 1, updated_at = now()"
            " WHERE id = %s AND metadata_location = %s RETURNING id",
            (
                swap.new_location,
                swap.new_metadata,
                swap.new_table_location,
                swap.new_data_path,
                swap.entry_id,
                swap.expected_location,
            ),
        )

    @staticmethod
    def _current_locations_match(conn: psycopg.Connection, ordered: list[MetadataSwap]) -> bool:
        rows = conn.execute(
            "SELECT id, metadata_location FROM catalog_entry WHERE id = ANY(%s) ORDER BY id FOR UPDATE",
            ([swap.entry_id for swap in ordered],),
        ).fetchall()
        current = {row["id"]: row["metadata_location"] for row in rows}
        return all(current.get(swap.entry_id) == swap.expected_location for swap in ordered)

    def current_metadata_location(self, entry_id: int) -> str | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT metadata_location FROM catalog_entry WHERE id = %s", (entry_id,)).fetchone()
        return row["metadata_location"] if row else None

    def delete_entry(
        self,
        warehouse_id: int,
        namespace: tuple[str, ...],
        name: str,
        kind: str,
        purge_objects: list[str] | None,
        metadata_path: str | None = None,
        action: str = "drop",
        *,
        events: Callable[[EntryRow], Sequence[ChangeEvent]],
        only_at: str | None = None,
    ) -> EntryRow | None:
        """Remove an entry (a hard drop); with ``purge_objects`` also queue its files for deletion,
        atomically. ``Protected`` (nothing written) when the entry or what holds it is protected.
        ``events`` makes the drop's events of the removed row (written in the same transaction).
        ``only_at``: an undone move (storage/table_moves.py) - the entry goes with its move's row,
        only while its metadata location is this one (None when it moved on, nothing written)."""
        with self.db.transaction() as conn:
            refuse_if_protected(conn, action, warehouse_id, namespace, name)
            if only_at is not None:
                end_move(conn, warehouse_id, namespace, name, only_at)
            row = conn.execute(
                "DELETE FROM catalog_entry e USING namespace n"
                " WHERE e.namespace_id = n.id AND n.warehouse_id = %s AND n.path = %s AND e.name = %s AND e.kind = %s"
                " AND (%s::text IS NULL OR e.metadata_location = %s)"
                " RETURNING e.id, e.kind, e.uuid::text AS uuid, e.location, e.metadata_location, e.metadata,"
                " e.data_path",
                (warehouse_id, list(namespace), name, kind, only_at, only_at),
            ).fetchone()
            if row is not None and purge_objects is not None:
                conn.execute(
                    "INSERT INTO purge_job (location, extra_objects, metadata_path) VALUES (%s, %s, %s)",
                    (row["location"], purge_objects, metadata_path),
                )
            if row is not None:
                record_events(conn, events(EntryRow(**row)))
        return EntryRow(**row) if row else None

    def rename_entry(
        self,
        warehouse_id: int,
        source: tuple[tuple[str, ...], str],
        destination: tuple[tuple[str, ...], str],
        kind: str,
        *,
        events: Callable[[str], Sequence[ChangeEvent]],
    ) -> bool:
        """Move an entry; False when the source does not exist (as this kind). ``events`` makes
        the rename's events of the entry's uuid (written in the same transaction)."""
        (src_ns, src_name), (dst_ns, dst_name) = source, destination
        with self.db.transaction() as conn:
            dst = conn.execute(
                "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s FOR SHARE",
                (warehouse_id, list(dst_ns)),
            ).fetchone()
            if dst is None:
                raise NoSuchNamespace(f"Namespace does not exist: {dotted(dst_ns)}")
            refuse_if_protected(conn, "rename", warehouse_id, src_ns, src_name)
            try:
                cursor = conn.execute(
                    "UPDATE catalog_entry e SET namespace_id = %s, name = %s, updated_at = now()"
                    " FROM namespace n WHERE e.namespace_id = n.id AND n.warehouse_id = %s AND n.path = %s"
                    " AND e.name = %s AND e.kind = %s RETURNING e.uuid::text AS uuid",
                    (dst["id"], dst_name, warehouse_id, list(src_ns), src_name, kind),
                )
            except pg_errors.UniqueViolation as exc:
                raise AlreadyExists(f"Table or view already exists: {dotted((*dst_ns, dst_name))}") from exc
            row = cursor.fetchone()
            if row is not None:
                record_events(conn, events(row["uuid"]))
            return row is not None

    def protection_of_entry(self, entry_id: int) -> str | None:
        """What protects the live entry (a mark on it, a namespace or its warehouse), else None."""
        with self.db.connection() as conn:
            found = entry_protection(conn, entry_id)
        return found[1] if found is not None else None

    def refuse_if_entry_protected(self, action: str, entry_id: int) -> None:
        """``Protected`` when a mark covers the live entry (checked before work a commit would waste)."""
        with self.db.connection() as conn:
            refuse_entry_if_protected(conn, action, entry_id)

    def entries_overlapping(self, roots: list[Location], exclude_id: int | None = None) -> list[EntryRow]:
        """Live and binned tables and views (any warehouse) whose location, metadata directory (that of
        its current metadata file) or data path is at, under or above one of ``roots``, compared by
        segments."""
        if not roots:
            return []
        with self.db.connection() as conn:
            return overlapping_entries(conn, roots, exclude_id)
