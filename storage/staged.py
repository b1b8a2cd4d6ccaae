"""Staged tables: the rows that make a table real to storage access before its create commits.

Spark's CTAS and ``createOrReplace``, PyIceberg's ``create_table_transaction`` and Trino's CTAS
stage a table (``createTable`` with ``stage-create``), write its data files, and only then commit
the create. Between the two the table has no ``catalog_entry`` row, yet its writer must be able to
have requests signed, or credentials vended, for its location: ``staged_table`` (0013) records
the stage until the create commits (a trigger deletes it when any entry takes the name), its
namespace is dropped, or it expires.

A stage claims its location, metadata directory and data path (when its properties set one) like
any entry (storage/placement.py): no live table, view, other stage or other namespace may overlap
them, checked race-free in the transaction that records it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.ground.errors import NoSuchNamespace
from app.ground.locations import Location
from storage.db import AsyncDatabase, Database
from storage.placement import Claim, claim


@dataclass(frozen=True)
class StagedTable:
    """A live stage: where its table may write (location, metadata directory and data path) and who
    staged it."""

    location: str
    metadata_path: str
    principal: str | None
    data_path: str | None = None


# Where a table or stage is: (location, metadata directory, data path or None).
Place = tuple[str, str, str | None]


@dataclass(frozen=True)
class StoragePlaces:
    """What one name holds, for storage access: the entry's kind and where it is, else where its
    live stages are (oldest first; a name an entry holds has none: the trigger ended them), and
    whether a protection mark covers it (on the entry, one of its namespaces or its warehouse:
    its files are then deleted through nothing Growler signs or vends, docs/recycle-bin.md). Each
    place is (location, metadata directory, data path or None): the folders it owns are
    ``app.rules.table.stored_roots`` of it."""

    kind: str | None
    place: Place | None
    staged: tuple[Place, ...]
    protected: bool = False

    @property
    def location(self) -> str | None:
        return self.place[0] if self.place else None


# One round trip, read for every signed request and every credential vended: signing follows
# the table's current row (a dropped, renamed or moved table is never signed for, on any worker),
# and its protection marks as they are now (a mark set on any worker counts from the moment its
# answer was sent). The last row (2) is always there: whether the namespace chain or the
# warehouse is protected, read from their rows, never from a worker's cache.
PLACES = (
    "SELECT 0 AS staged, e.id, e.kind, e.location,"
    " regexp_replace(e.metadata_location, '/[^/]*$', '') AS metadata_path, e.data_path, e.protected"
    " FROM namespace n JOIN catalog_entry e ON e.namespace_id = n.id"
    " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s AND e.name = %(name)s"
    " UNION ALL"
    " SELECT 1, s.id, 'table', s.location, s.metadata_path, s.data_path, false"
    " FROM namespace n JOIN staged_table s ON s.namespace_id = n.id"
    " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s AND s.name = %(name)s AND s.expires_at > now()"
    " UNION ALL"
    " SELECT 2, 0, NULL, NULL, NULL, NULL, EXISTS (SELECT 1 FROM warehouse w WHERE w.id = %(wh)s AND w.protected)"
    " OR EXISTS (SELECT 1 FROM generate_series(1, cardinality(%(path)s::text[])) d JOIN namespace a"
    "  ON a.warehouse_id = %(wh)s AND a.path = (%(path)s::text[])[1:d] WHERE a.protected)"
    " ORDER BY 1, 2"
)


def _places_params(warehouse_id: int, namespace: tuple[str, ...], name: str) -> dict[str, Any]:
    return {"wh": warehouse_id, "path": list(namespace), "name": name}


def _places(rows: list[tuple[Any, ...]]) -> StoragePlaces:
    """From ``PLACES``' rows: (staged, id, kind, location, metadata directory, data path, protected)."""
    entries = [(row[2], (row[3], row[4], row[5]), row[6]) for row in rows if row[0] == 0]
    held = any(row[6] for row in rows if row[0] == 2)
    if entries:
        kind, place, protected = entries[0]
        return StoragePlaces(kind, place, (), bool(protected) or held)
    return StoragePlaces(None, None, tuple((row[3], row[4], row[5]) for row in rows if row[0] == 1), held)


class AsyncPlacesReader:
    """``StagedTables.places`` on the event loop (signRequest, app/edge/loop_reads.py)."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.db = db

    def available(self) -> bool:
        return self.db.serves_running_loop()

    async def places(self, warehouse_id: int, namespace: tuple[str, ...], name: str) -> StoragePlaces:
        return _places(await self.db.fetch_all(PLACES, _places_params(warehouse_id, namespace, name)))


class StagedTables:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(
        self,
        warehouse_id: int,
        namespace: tuple[str, ...],
        name: str,
        stage: StagedTable,
        lifetime_s: int,
    ) -> None:
        """Record a stage; BadRequest (nothing written) when its folders are taken
        (storage/placement.py), NoSuchNamespace when the namespace is gone."""
        placed = Claim(tuple(_roots(stage)), warehouse_id, namespace, name, what="staged table")
        with self.db.transaction() as conn:
            claim(conn, [placed])
            row = conn.execute(
                "INSERT INTO staged_table"
                " (namespace_id, name, location, metadata_path, data_path, principal, expires_at)"
                " SELECT n.id, %s, %s, %s, %s, %s, now() + make_interval(secs => %s) FROM namespace n"
                " WHERE n.warehouse_id = %s AND n.path = %s RETURNING id",
                (
                    name,
                    stage.location,
                    stage.metadata_path,
                    stage.data_path,
                    stage.principal,
                    lifetime_s,
                    warehouse_id,
                    list(namespace),
                ),
            ).fetchone()
            if row is None:
                raise NoSuchNamespace(f"Namespace does not exist: {'.'.join(namespace)}")

    def places(self, warehouse_id: int, namespace: tuple[str, ...], name: str) -> StoragePlaces:
        with self.db.connection() as conn:
            rows = conn.execute(PLACES, _places_params(warehouse_id, namespace, name)).fetchall()
        columns = ("staged", "id", "kind", "location", "metadata_path", "data_path", "protected")
        return _places([tuple(row[column] for column in columns) for row in rows])

    def delete_expired(self, limit: int = 1000) -> int:
        """Forget stages past their expiry (housekeeping); their files, if any, are orphans."""
        with self.db.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM staged_table WHERE id IN"
                " (SELECT id FROM staged_table WHERE expires_at <= now() ORDER BY expires_at LIMIT %s)",
                (limit,),
            )
        return cursor.rowcount


def _roots(stage: StagedTable) -> list[Location]:
    """The folders a stage claims: those of ``app.rules.table.stored_roots``, parsed."""
    places = [stage.location, stage.metadata_path, *([stage.data_path] if stage.data_path else [])]
    return list(dict.fromkeys(Location.parse(place) for place in places))
