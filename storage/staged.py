"""Staged tables: the rows that make a table real to storage access before its create commits.

Spark's CTAS and ``createOrReplace``, PyIceberg's ``create_table_transaction`` and Trino's CTAS
stage a table (``createTable`` with ``stage-create``), write its data files, and only then commit
the create. Between the two the table has no ``catalog_entry`` row, yet its writer must be able to
have requests signed, or credentials vended, for its location: ``staged_table`` (0013) records
the stage until the create commits (a trigger deletes it when any entry takes the name), its
namespace is dropped, or it expires.

A stage is recorded under a transaction-scoped advisory lock that every stage takes, after checking
that no live table or view, and no other live stage, overlaps its location or metadata directory:
two stages cannot both claim one folder, and a stage never claims a live entry's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.ground.errors import BadRequest, NoSuchNamespace
from app.ground.locations import InvalidLocation, Location
from storage.db import AsyncDatabase, Database
from storage.housekeeping_rows import bare
from storage.repository import overlapping_entries

# pg_advisory_xact_lock's key for "a location is being claimed": held for the checks and the insert.
LOCATION_CLAIM_LOCK = 0x6772_6F77_6C6F_63


@dataclass(frozen=True)
class StagedTable:
    """A live stage: where its table may write (location and metadata directory) and who staged it."""

    location: str
    metadata_path: str
    principal: str | None


@dataclass(frozen=True)
class StoragePlaces:
    """What one name holds, for storage access: the entry's kind and location, else the locations
    of its live stages (oldest first; a name an entry holds has none: the trigger ended them)."""

    kind: str | None
    location: str | None
    staged: tuple[str, ...]


# One round trip, read for every signed request and every credential vended: signing follows
# the table's current row (a dropped, renamed or moved table is never signed for, on any worker).
PLACES = (
    "SELECT 0 AS staged, e.id, e.kind, e.location FROM namespace n JOIN catalog_entry e ON e.namespace_id = n.id"
    " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s AND e.name = %(name)s"
    " UNION ALL"
    " SELECT 1, s.id, 'table', s.location FROM namespace n JOIN staged_table s ON s.namespace_id = n.id"
    " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s AND s.name = %(name)s AND s.expires_at > now()"
    " ORDER BY 1, 2"
)


def _places_params(warehouse_id: int, namespace: tuple[str, ...], name: str) -> dict[str, Any]:
    return {"wh": warehouse_id, "path": list(namespace), "name": name}


def _places(rows: list[tuple[Any, ...]]) -> StoragePlaces:
    entries = [(kind, location) for staged, _, kind, location in rows if not staged]
    if entries:
        return StoragePlaces(entries[0][0], entries[0][1], ())
    return StoragePlaces(None, None, tuple(location for staged, _, _, location in rows if staged))


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
        """Record a stage; BadRequest (nothing written) when its folders overlap a live entry's or
        another live stage's, NoSuchNamespace when the namespace is gone."""
        roots = _roots(stage)
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCATION_CLAIM_LOCK,))
            if overlapping_entries(conn, roots):
                raise BadRequest(
                    f"Cannot stage a table at {stage.location}: it overlaps the location of another table or view"
                )
            if self._overlapping_stages(conn, roots):
                raise BadRequest(
                    f"Cannot stage a table at {stage.location}: it overlaps the location of another staged table"
                )
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
        return _places([(row["staged"], row["id"], row["kind"], row["location"]) for row in rows])

    def delete_expired(self, limit: int = 1000) -> int:
        """Forget stages past their expiry (housekeeping); their files, if any, are orphans."""
        with self.db.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM staged_table WHERE id IN"
                " (SELECT id FROM staged_table WHERE expires_at <= now() ORDER BY expires_at LIMIT %s)",
                (limit,),
            )
        return cursor.rowcount

    @staticmethod
    def _overlapping_stages(conn, roots: list[Location]) -> bool:
        rows = conn.execute(
            "SELECT location, metadata_path FROM staged_table s, unnest(%(roots)s::text[]) r"
            " WHERE s.expires_at > now() AND ("
            "  starts_with(rtrim(regexp_replace(s.location, '^[A-Za-z0-9]+:/*', ''), '/') || '/', r || '/')"
            "  OR starts_with(r || '/', rtrim(regexp_replace(s.location, '^[A-Za-z0-9]+:/*', ''), '/') || '/')"
            "  OR starts_with(rtrim(regexp_replace(s.metadata_path, '^[A-Za-z0-9]+:/*', ''), '/') || '/', r || '/')"
            "  OR starts_with(r || '/', rtrim(regexp_replace(s.metadata_path, '^[A-Za-z0-9]+:/*', ''), '/') || '/'))",
            {"roots": [bare(root) for root in roots]},
        ).fetchall()
        for row in rows:
            try:
                places = _roots(StagedTable(row["location"], row["metadata_path"], None))
            except InvalidLocation:
                return True
            if any(place.overlaps(root) for place in places for root in roots):
                return True
        return False


def _roots(stage: StagedTable) -> list[Location]:
    return list(dict.fromkeys([Location.parse(stage.location), Location.parse(stage.metadata_path)]))
