"""Staged tables: the rows that make a table real to storage access before its create commits.

Spark's CTAS and ``createOrReplace``, PyIceberg's ``create_table_transaction`` and Trino's CTAS
stage a table (``createTable`` with ``stage-create``), write its data files, and only then commit
the create. Between the two the table has no ``catalog_entry`` row, yet its writer must be able to
have requests signed, or credentials vended, for its location: ``staged_table`` (0013) records
the stage until the create commits (a trigger deletes it when any entry takes the name), its
namespace is dropped, or it expires.

A stage claims its location and metadata directory like any entry (storage/placement.py): no live
table, view, other stage or other namespace may overlap them, checked race-free in the
transaction that records it.
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
    """A live stage: where its table may write (location and metadata directory) and who staged it."""

    location: str
    metadata_path: str
    principal: str | None


@dataclass(frozen=True)
class StoragePlaces:
    """What one name holds, for storage access: the entry's kind and location, else the locations
    of its live stages (oldest first; a name an entry holds has none: the trigger ended them), and
    whether a protection mark covers it (on the entry, one of its namespaces or its warehouse:
    its files are then deleted through nothing Growler signs or vends, docs/recycle-bin.md)."""

    kind: str | None
    location: str | None
    staged: tuple[str, ...]
    protected: bool = False


# One round trip, read for every signed request and every credential vended: signing follows
# the table's current row (a dropped, renamed or moved table is never signed for, on any worker),
# and its protection marks as they are now (a mark set on any worker counts from the moment its
# answer was sent). The last row (2) is always there: whether the namespace chain or the
# warehouse is protected, read from their rows, never from a worker's cache.
PLACES = (
    "SELECT 0 AS staged, e.id, e.kind, e.location, e.protected FROM namespace n"
    " JOIN catalog_entry e ON e.namespace_id = n.id"
    " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s AND e.name = %(name)s"
    " UNION ALL"
    " SELECT 1, s.id, 'table', s.location, false FROM namespace n JOIN staged_table s ON s.namespace_id = n.id"
    " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s AND s.name = %(name)s AND s.expires_at > now()"
    " UNION ALL"
    " SELECT 2, 0, NULL, NULL, EXISTS (SELECT 1 FROM warehouse w WHERE w.id = %(wh)s AND w.protected)"
    " OR EXISTS (SELECT 1 FROM generate_series(1, cardinality(%(path)s::text[])) d JOIN namespace a"
    "  ON a.warehouse_id = %(wh)s AND a.path = (%(path)s::text[])[1:d] WHERE a.protected)"
    " ORDER BY 1, 2"
)


def _places_params(warehouse_id: int, namespace: tuple[str, ...], name: str) -> dict[str, Any]:
    return {"wh": warehouse_id, "path": list(namespace), "name": name}


def _places(rows: list[tuple[Any, ...]]) -> StoragePlaces:
    entries = [(kind, location, protected) for staged, _, kind, location, protected in rows if staged == 0]
    held = any(protected for staged, _, _, _, protected in rows if staged == 2)
    if entries:
        kind, location, protected = entries[0]
        return StoragePlaces(kind, location, (), bool(protected) or held)
    return StoragePlaces(None, None, tuple(location for staged, _, _, location, _ in rows if staged == 1), held)


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
                "INSERT INTO staged_table (namespace_id, name, location, metadata_path, principal, expires_at)"
                " SELECT n.id, %s, %s, %s, %s, now() + make_interval(secs => %s) FROM namespace n"
                " WHERE n.warehouse_id = %s AND n.path = %s RETURNING id",
                (name, stage.location, stage.metadata_path, stage.principal, lifetime_s, warehouse_id, list(namespace)),
            ).fetchone()
            if row is None:
                raise NoSuchNamespace(f"Namespace does not exist: {'.'.join(namespace)}")

    def places(self, warehouse_id: int, namespace: tuple[str, ...], name: str) -> StoragePlaces:
        with self.db.connection() as conn:
            rows = conn.execute(PLACES, _places_params(warehouse_id, namespace, name)).fetchall()
        return _places([(row["staged"], row["id"], row["kind"], row["location"], row["protected"]) for row in rows])

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
    return list(dict.fromkeys([Location.parse(stage.location), Location.parse(stage.metadata_path)]))
