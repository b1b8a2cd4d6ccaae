"""Catalog rows in PostgreSQL: plain, parameterised SQL kept together.

Methods return plain dicts/tuples and raise ``app.ground.errors`` exceptions; callers never see psycopg.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from app.ground.errors import AlreadyExists, BadRequest, NamespaceNotEmpty, NoSuchNamespace
from app.ground.locations import Location
from storage.db import AsyncDatabase, Database
from storage.housekeeping_rows import SETTLE_PENDING, HousekeepingRows
from storage.placement import Claim, claim, overlapping_entries
from storage.rows import EntryRow


@dataclass(frozen=True)
class WarehouseRow:
    id: int
    name: str
    location: str
    storage: dict[str, Any]
    # extra prefixes where tables and views may live (see app.ground.locations / EntryService)
    allowed_locations: tuple[str, ...] = field(default=())
    # The warehouse's own storage keys, encrypted (app/ground/secrets.py); None: the environment's.
    storage_secret: bytes | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allowed_locations", tuple(self.allowed_locations or ()))
        if isinstance(self.storage_secret, memoryview):
            object.__setattr__(self, "storage_secret", bytes(self.storage_secret))


_LOAD_ENTRY = (
    "SELECT e.id, e.kind, e.uuid::text AS uuid, e.location, e.metadata_location, {metadata} AS metadata"
    " FROM namespace n JOIN catalog_entry e ON e.namespace_id = n.id"
    " WHERE n.warehouse_id = %s AND n.path = %s AND e.name = %s"
)
LOAD_ENTRY = _LOAD_ENTRY.format(metadata="e.metadata")
# The document only when the entry has moved on from the given metadata location: a client
# revalidating what it has (If-None-Match) costs neither decompressing nor sending it.
LOAD_ENTRY_UNLESS_AT = _LOAD_ENTRY.format(metadata="CASE WHEN e.metadata_location = %s THEN '' ELSE e.metadata END")


NAMESPACE_PROPERTIES = "SELECT properties FROM namespace WHERE warehouse_id = %s AND path = %s"
# listNamespaces: the direct children of a parent (the top level for NULL) after a path, in path order
LIST_NAMESPACES = (
    "SELECT path FROM namespace"
    " WHERE warehouse_id = %(wh)s AND parent_id IS NOT DISTINCT FROM %(parent)s"
    # coalesce, not "IS NULL OR": one index range scan even under a generic plan
    "   AND path > coalesce(%(after)s::text[], '{}'::text[])"
    " ORDER BY path LIMIT %(limit)s"
)
# A page of what lies in one namespace, in the round trip that finds the namespace (a listing paid
# two; each cost about as much as the page): no row - no such namespace; one row of NULL - an empty
# page; else the page (``_page_under``).
_PAGE_UNDER = (
    "SELECT child.item FROM namespace n LEFT JOIN LATERAL ({page}) child ON true"
    " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s ORDER BY child.item"
)
# listNamespaces under a parent: its direct children after a path, in path order
LIST_CHILD_NAMESPACES = _PAGE_UNDER.format(
    page="SELECT path AS item FROM namespace"
    " WHERE warehouse_id = %(wh)s AND parent_id = n.id AND path > coalesce(%(after)s::text[], '{}'::text[])"
    " ORDER BY path LIMIT %(limit)s"
)
# listTables / listViews: one kind's names in one namespace after a name, in name order
LIST_ENTRIES = _PAGE_UNDER.format(
    page="SELECT name AS item FROM catalog_entry"
    " WHERE namespace_id = n.id AND kind = %(kind)s AND name > coalesce(%(after)s::text, '')"
    " ORDER BY name LIMIT %(limit)s"
)


def _page_under(rows: list[tuple[Any, ...]]) -> list[Any] | None:
    """The items of a ``_PAGE_UNDER`` query; None when the namespace is not there."""
    if not rows:
        return None
    return [] if rows[0][0] is None else [item for (item,) in rows]


class AsyncEntryReader:
    """Rows the operation door reads on the event loop: ``CatalogRepository.load_entry`` (loadTable),
    ``namespace_properties`` (loadNamespaceMetadata), ``list_namespaces`` and ``list_entries``
    (listNamespaces, listTables, listViews)."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.db = db

    def available(self) -> bool:
        return self.db.serves_running_loop()

    async def load_entry(
        self, warehouse_id: int, namespace: tuple[str, ...], name: str, unless_at: str | None = None
    ) -> EntryRow | None:
        """The entry; with ``unless_at``, its ``metadata`` is empty when it is still at that location."""
        row = await self.db.fetch_one(*_load_entry_query(warehouse_id, namespace, name, unless_at))
        return EntryRow(**row) if row else None

    async def namespace_properties(self, warehouse_id: int, path: tuple[str, ...]) -> dict[str, str] | None:
        """The namespace's stored properties; None when there is no such namespace."""
        row = await self.db.fetch_one(NAMESPACE_PROPERTIES, (warehouse_id, list(path)))
        return row["properties"] if row else None

    async def list_entries(
        self, warehouse_id: int, namespace: tuple[str, ...], kind: str, after: str | None, limit: int | None
    ) -> list[str] | None:
        """``CatalogRepository.list_entries``; None (not NoSuchNamespace) when the namespace is missing."""
        params = {"wh": warehouse_id, "path": list(namespace), "kind": kind, "after": after, "limit": limit}
        return _page_under(await self.db.fetch_all(LIST_ENTRIES, params))

    async def list_namespaces(
        self, warehouse_id: int, parent: tuple[str, ...] | None, after: list[str] | None, limit: int | None
    ) -> list[tuple[str, ...]] | None:
        """``CatalogRepository.list_namespaces``; None (not NoSuchNamespace) when the parent is missing."""
        query, params = _list_namespaces_query(warehouse_id, parent, after, limit)
        return _listed_namespaces(await self.db.fetch_all(query, params), nested=bool(parent))


def _list_namespaces_query(
    warehouse_id: int, parent: tuple[str, ...] | None, after: list[str] | None, limit: int | None
) -> tuple[str, dict[str, Any]]:
    if parent:
        return LIST_CHILD_NAMESPACES, {"wh": warehouse_id, "path": list(parent), "after": after, "limit": limit}
    return LIST_NAMESPACES, {"wh": warehouse_id, "parent": None, "after": after, "limit": limit}


def _listed_namespaces(rows: list[tuple[Any, ...]], nested: bool) -> list[tuple[str, ...]] | None:
    """The paths of a ``_list_namespaces_query``; None when the parent is not there."""
    paths = _page_under(rows) if nested else [path for (path,) in rows]
    return None if paths is None else [tuple(path) for path in paths]


def _load_entry_query(
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

    def values(self) -> tuple[str, ...]:
        return (self.name, self.kind, self.uuid, self.location, self.metadata_location, self.metadata)


_WAREHOUSE_COLUMNS = "id, name, location, storage, allowed_locations, storage_secret"


def _dotted(path: tuple[str, ...] | list[str]) -> str:
    return ".".join(path)


class CatalogRepository(HousekeepingRows):
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- warehouses ---------------------------------------------------------------------

    def upsert_warehouse(
        self, name: str, location: str, storage: dict[str, Any], allowed_locations: list[str] | None = None
    ) -> WarehouseRow:
        """Create the warehouse, or bring its settings in line with the configuration."""
        allowed = list(allowed_locations or [])
        with self.db.connection() as conn:
            row = conn.execute(
                "INSERT INTO warehouse (name, location, storage, allowed_locations) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (name) DO UPDATE SET location = EXCLUDED.location,"
                " storage = EXCLUDED.storage, allowed_locations = EXCLUDED.allowed_locations, updated_at = now()"
                " WHERE (warehouse.location, warehouse.storage, warehouse.allowed_locations)"
                "  IS DISTINCT FROM (EXCLUDED.location, EXCLUDED.storage, EXCLUDED.allowed_locations)"
                f" RETURNING {_WAREHOUSE_COLUMNS}",
                (name, location, Jsonb(storage), allowed),
            ).fetchone()
            if row is None:  # unchanged: the conditional upsert returned nothing
                row = conn.execute(f"SELECT {_WAREHOUSE_COLUMNS} FROM warehouse WHERE name = %s", (name,)).fetchone()
        return WarehouseRow(**row)

    def get_warehouse(self, name: str) -> WarehouseRow | None:
        with self.db.connection() as conn:
            row = conn.execute(f"SELECT {_WAREHOUSE_COLUMNS} FROM warehouse WHERE name = %s", (name,)).fetchone()
        return WarehouseRow(**row) if row else None

    # -- namespaces ---------------------------------------------------------------------

    def list_namespaces(
        self,
        warehouse_id: int,
        parent: tuple[str, ...] | None,
        after: list[str] | None,
        limit: int | None,
    ) -> list[tuple[str, ...]]:
        """Direct children of ``parent`` (top level when None), in path order, after ``after``."""
        query, params = _list_namespaces_query(warehouse_id, parent, after, limit)
        with self.db.connection() as conn:
            # a page of rows: psycopg builds tuples in C, dicts in Python
            rows = conn.cursor(row_factory=tuple_row).execute(query, params).fetchall()
        paths = _listed_namespaces(rows, nested=bool(parent))
        if paths is None:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(parent or ())}")
        return paths

    def create_namespace(self, warehouse_id: int, path: tuple[str, ...], properties: dict[str, str]) -> None:
        """Insert a namespace whose parent (for a nested one) must already exist."""
        with self.db.connection() as conn:
            try:
                row = conn.execute(
                    "INSERT INTO namespace (warehouse_id, path, parent_id, properties)"
                    " SELECT %(wh)s, %(path)s, parent.id, %(props)s"
                    " FROM (SELECT NULL) AS one"
                    " LEFT JOIN namespace parent"
                    "   ON parent.warehouse_id = %(wh)s AND parent.path = %(parent)s::text[]"
                    " WHERE %(parent)s::text[] IS NULL OR parent.id IS NOT NULL"
                    " RETURNING id",
                    {
                        "wh": warehouse_id,
                        "path": list(path),
                        "parent": list(path[:-1]) or None,
                        "props": Jsonb(properties),
                    },
                ).fetchone()
            except pg_errors.UniqueViolation as exc:
                raise AlreadyExists(f"Namespace already exists: {_dotted(path)}") from exc
            except pg_errors.ForeignKeyViolation as exc:  # parent dropped concurrently
                raise BadRequest(f"Parent namespace does not exist: {_dotted(path[:-1])}") from exc
        if row is None:
            raise BadRequest(f"Parent namespace does not exist: {_dotted(path[:-1])}")

    def namespace_properties(self, warehouse_id: int, path: tuple[str, ...]) -> dict[str, str]:
        with self.db.connection() as conn:
            row = conn.execute(NAMESPACE_PROPERTIES, (warehouse_id, list(path))).fetchone()
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(path)}")
        return row["properties"]

    def namespace_exists(self, warehouse_id: int, path: tuple[str, ...]) -> bool:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM namespace WHERE warehouse_id = %s AND path = %s",
                (warehouse_id, list(path)),
            ).fetchone()
        return row is not None

    def drop_namespace(self, warehouse_id: int, path: tuple[str, ...]) -> None:
        """Delete an empty namespace; the RESTRICT foreign keys make "empty" race-free."""
        with self.db.connection() as conn:
            try:
                row = conn.execute(
                    "DELETE FROM namespace WHERE warehouse_id = %s AND path = %s RETURNING id",
                    (warehouse_id, list(path)),
                ).fetchone()
            except pg_errors.ForeignKeyViolation as exc:
                raise NamespaceNotEmpty(
                    f"Namespace {_dotted(path)} is not empty: it holds namespaces, tables or views"
                ) from exc
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(path)}")

    def update_namespace_properties(
        self,
        warehouse_id: int,
        path: tuple[str, ...],
        removals: list[str],
        updates: dict[str, str],
    ) -> dict[str, str]:
        """Apply removals then updates in one statement; returns the properties before."""
        with self.db.connection() as conn:
            row = conn.execute(
                "WITH old AS ("
                "  SELECT id, properties FROM namespace"
                "  WHERE warehouse_id = %s AND path = %s FOR UPDATE)"
                " UPDATE namespace n SET properties = (old.properties - %s::text[]) || %s::jsonb,"
                "  updated_at = now()"
                " FROM old WHERE n.id = old.id RETURNING old.properties AS before",
                (warehouse_id, list(path), removals, Jsonb(updates)),
            ).fetchone()
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(path)}")
        return row["before"]

    # -- tables and views (one identifier space) ----------------------------------------

    def load_entry(
        self, warehouse_id: int, namespace: tuple[str, ...], name: str, unless_at: str | None = None
    ) -> EntryRow | None:
        """The hot path of loadTable: one indexed query, the document returned as stored text.

        With ``unless_at``, ``metadata`` is empty when the entry is still at that location.
        """
        query, params = _load_entry_query(warehouse_id, namespace, name, unless_at)
        with self.db.connection() as conn:
            row = conn.execute(query, params).fetchone()
        return EntryRow(**row) if row else None

    def load_entry_by_id(self, entry_id: int) -> EntryRow | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT id, kind, uuid::text AS uuid, location, metadata_location, metadata"
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
    ) -> list[str]:
        params = {"wh": warehouse_id, "path": list(namespace), "kind": kind, "after": after, "limit": limit}
        with self.db.connection() as conn:
            rows = conn.cursor(row_factory=tuple_row).execute(LIST_ENTRIES, params).fetchall()  # as list_namespaces
        names = _page_under(rows)
        if names is None:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(namespace)}")
        return names

    def insert_entry(
        self,
        warehouse_id: int,
        namespace: tuple[str, ...],
        entry: NewEntry,
        before_commit: Callable[[], None] = lambda: None,
        placed: Claim | None = None,
    ) -> int:
        """Register a new table or view; AlreadyExists if the name is taken by either kind.

        ``before_commit`` runs after the statements, before the commit (see ``swap_metadata``).
        ``placed``: the locations it will own, claimed in the same transaction (storage/placement.py).
        """
        with self.db.transaction() as conn:
            try:
                row = conn.execute(
                    "INSERT INTO catalog_entry (namespace_id, name, kind, uuid, location, metadata_location, metadata)"
                    " SELECT n.id, %s, %s, %s, %s, %s, %s FROM namespace n"
                    " WHERE n.warehouse_id = %s AND n.path = %s RETURNING id",
                    (*entry.values(), warehouse_id, list(namespace)),
                ).fetchone()
                if row is None:  # rolled back: the file stays pending until it is deleted
                    raise NoSuchNamespace(f"Namespace does not exist: {_dotted(namespace)}")
                if placed is not None:  # after the insert: a name already taken is AlreadyExists first
                    claim(conn, [replace(placed, entry_id=row["id"])])
                conn.execute(SETTLE_PENDING, ([entry.metadata_location],))
                before_commit()
            except pg_errors.UniqueViolation as exc:
                raise AlreadyExists(f"Table or view already exists: {_dotted((*namespace, entry.name))}") from exc
            except pg_errors.ForeignKeyViolation as exc:  # namespace dropped concurrently
                raise NoSuchNamespace(f"Namespace does not exist: {_dotted(namespace)}") from exc
        return row["id"]

    def replace_entry(
        self, warehouse_id: int, namespace: tuple[str, ...], entry: NewEntry, placed: Claim | None = None
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
                raise NoSuchNamespace(f"Namespace does not exist: {_dotted(namespace)}")
            old = conn.execute(
                "SELECT id, kind, metadata_location FROM catalog_entry"
                " WHERE namespace_id = %s AND name = %s FOR UPDATE",
                (ns["id"], entry.name),
            ).fetchone()
            if placed is not None and (old is None or old["kind"] == entry.kind):
                claim(conn, [replace(placed, entry_id=old["id"] if old else None)])
            if old is None:
                conn.execute(
                    "INSERT INTO catalog_entry (namespace_id, name, kind, uuid, location, metadata_location, metadata)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                    (ns["id"], *entry.values()),
                )
                return None
            if old["kind"] != entry.kind:
                raise AlreadyExists(f"A {old['kind']} already exists: {_dotted((*namespace, entry.name))}")
            conn.execute(
                "UPDATE catalog_entry SET uuid = %s, location = %s, metadata_location = %s, metadata = %s,"
                " version = version + 1, updated_at = now() WHERE namespace_id = %s AND name = %s",
                (entry.uuid, entry.location, entry.metadata_location, entry.metadata, ns["id"], entry.name),
            )
            return old["metadata_location"]

    def swap_metadata(self, swaps: list[MetadataSwap], before_commit: Callable[[], None] = lambda: None) -> bool:
        """The commit point: compare-and-set every pointer, all or none. False = another writer won.

        One swap is a single conditional UPDATE. Several (a multi-table transaction) lock their rows
        in id order - a fixed order, so concurrent transactions cannot deadlock - and check every
        expected location before changing any. The pending-object records of the new files are
        settled in the same transaction, so "committed" and "no longer pending" cannot disagree.
        ``before_commit`` runs once the swaps hold, before the commit: what it raises rolls the
        transaction back (the new files are still being written meanwhile; it waits for them).
        A failure after the statements were sent raises ``CommitOutcomeUnknown``.
        """
        ordered = sorted(swaps, key=lambda swap: swap.entry_id)
        with self.db.connection() as conn:
            try:
                with conn.transaction():
                    if len(ordered) > 1 and not self._current_locations_match(conn, ordered):
                        return False
                    claims = [swap.placed for swap in ordered if swap.placed is not None]
                    if claims:
                        claim(conn, claims)
                    for swap in ordered:
                        cursor = conn.execute(
                            "UPDATE catalog_entry SET metadata_location = %s, metadata = %s, location = %s,"
                            " version = version + 1, updated_at = now() WHERE id = %s AND metadata_location = %s",
                            (
                                swap.new_location,
                                swap.new_metadata,
                                swap.new_table_location,
                                swap.entry_id,
                                swap.expected_location,
                            ),
                        )
                        if cursor.rowcount != 1:
                            raise _LostRace
                    conn.execute(SETTLE_PENDING, ([swap.new_location for swap in ordered],))
                    before_commit()
            except _LostRace:
                return False
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                raise CommitOutcomeUnknown(str(exc)) from exc
        return True

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
    ) -> EntryRow | None:
        """Remove an entry; with ``purge_objects`` also queue its files for deletion, atomically."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "DELETE FROM catalog_entry e USING namespace n"
                " WHERE e.namespace_id = n.id AND n.warehouse_id = %s AND n.path = %s AND e.name = %s AND e.kind = %s"
                " RETURNING e.id, e.kind, e.uuid::text AS uuid, e.location, e.metadata_location, e.metadata",
                (warehouse_id, list(namespace), name, kind),
            ).fetchone()
            if row is not None and purge_objects is not None:
                conn.execute(
                    "INSERT INTO purge_job (location, extra_objects, metadata_path) VALUES (%s, %s, %s)",
                    (row["location"], purge_objects, metadata_path),
                )
        return EntryRow(**row) if row else None

    def rename_entry(
        self,
        warehouse_id: int,
        source: tuple[tuple[str, ...], str],
        destination: tuple[tuple[str, ...], str],
        kind: str,
    ) -> bool:
        """Move an entry; False when the source does not exist (as this kind)."""
        (src_ns, src_name), (dst_ns, dst_name) = source, destination
        with self.db.transaction() as conn:
            dst = conn.execute(
                "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s FOR SHARE",
                (warehouse_id, list(dst_ns)),
            ).fetchone()
            if dst is None:
                raise NoSuchNamespace(f"Namespace does not exist: {_dotted(dst_ns)}")
            try:
                cursor = conn.execute(
                    "UPDATE catalog_entry e SET namespace_id = %s, name = %s, updated_at = now()"
                    " FROM namespace n WHERE e.namespace_id = n.id AND n.warehouse_id = %s AND n.path = %s"
                    " AND e.name = %s AND e.kind = %s",
                    (dst["id"], dst_name, warehouse_id, list(src_ns), src_name, kind),
                )
            except pg_errors.UniqueViolation as exc:
                raise AlreadyExists(f"Table or view already exists: {_dotted((*dst_ns, dst_name))}") from exc
            return cursor.rowcount == 1

    def entries_overlapping(self, roots: list[Location], exclude_id: int | None = None) -> list[EntryRow]:
        """Live tables and views (any warehouse) whose location or metadata directory (that of
        its current metadata file) is at, under or above one of ``roots``, compared by segments."""
        if not roots:
            return []
        with self.db.connection() as conn:
            return overlapping_entries(conn, roots, exclude_id)

    # -- metrics --------------------------------------------------------------------------

    def insert_metrics_report(
        self, warehouse_id: int, namespace: tuple[str, ...], table: str, report_type: str, report: dict[str, Any]
    ) -> None:
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO metrics_report (warehouse_id, namespace, table_name, report_type, report)"
                " VALUES (%s, %s, %s, %s, %s)",
                (warehouse_id, list(namespace), table, report_type, Jsonb(report)),
            )

    # -- health -------------------------------------------------------------------------

    def ping(self) -> None:
        self.db.ping()
