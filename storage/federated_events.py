"""Where the mirror of each federated warehouse's remote change feed stands (migration 0039; the
part is app/federation/mirror.py). SQL only.

A warehouse is claimed for one page at a time: its cursor row locked (``SKIP LOCKED``: another
worker or replica mirroring it meanwhile is passed over), the page's events recorded and the
cursor moved in that one transaction - an event is recorded once and none is skipped, whichever
worker dies when.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

import psycopg

from storage.db import Database
from storage.events import ChangeEvent, record_events
from storage.federated_versions import Table


@dataclass(frozen=True)
class MirrorCursor:
    warehouse_id: int
    warehouse: str
    continuation_token: str | None


class MirrorClaim:
    """One warehouse's cursor, locked for the transaction it was claimed in."""

    def __init__(self, conn: psycopg.Connection, cursor: MirrorCursor) -> None:
        self.conn = conn
        self.cursor = cursor

    def recorded_requests(self, request_ids: Sequence[str], since: datetime) -> set[str]:
        """Which of ``request_ids`` have events on the warehouse's stream since ``since``: the
        writes made through Growler, which recorded their own (by the change feed's time index)."""
        if not request_ids:
            return set()
        rows = self.conn.execute(
            "SELECT DISTINCT request_id FROM change_event"
            " WHERE created_at >= %s AND stream = %s AND request_id = ANY(%s)",
            (since, self.cursor.warehouse_id, list(request_ids)),
        ).fetchall()
        return {row["request_id"] for row in rows}

    def advance(self, events: Sequence[ChangeEvent], versions: Sequence[tuple[Table, str]], token: str) -> None:
        """The page's events, the table versions they moved, and the cursor at ``token``."""
        record_events(self.conn, events)
        for (namespace, name), location in versions:
            self.conn.execute(
                "INSERT INTO federated_table_version (warehouse_id, namespace, name, metadata_location)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (warehouse_id, namespace, name)"
                " DO UPDATE SET metadata_location = EXCLUDED.metadata_location",
                (self.cursor.warehouse_id, list(namespace), name, location),
            )
        self.conn.execute(
            "UPDATE federated_event_cursor SET continuation_token = %s, served = true, next_at = now()"
            " WHERE warehouse_id = %s",
            (token, self.cursor.warehouse_id),
        )

    def later(self, seconds: float, *, served: bool = True) -> None:
        """Ask the remote again in ``seconds`` (nothing new, a failure, or no events endpoint)."""
        self.conn.execute(
            "UPDATE federated_event_cursor SET served = %s, next_at = now() + make_interval(secs => %s)"
            " WHERE warehouse_id = %s",
            (served, seconds, self.cursor.warehouse_id),
        )


class MirrorCursors:
    def __init__(self, db: Database) -> None:
        self.db = db

    def mirrored(self) -> frozenset[int]:
        """The federated warehouses whose remote serves its events (the mirror records their changes)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT c.warehouse_id FROM federated_event_cursor c JOIN warehouse w ON w.id = c.warehouse_id"
                " WHERE c.served AND c.continuation_token IS NOT NULL AND w.federation IS NOT NULL"
            ).fetchall()
        return frozenset(row["warehouse_id"] for row in rows)

    def enrol(self) -> None:
        """A cursor row for every federated warehouse that has none yet (created since the last round)."""
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO federated_event_cursor (warehouse_id)"
                " SELECT id FROM warehouse WHERE federation IS NOT NULL ON CONFLICT DO NOTHING"
            )

    @contextmanager
    def claim_next(self, skip: Sequence[int] = ()) -> Iterator[MirrorClaim | None]:
        """The federated warehouse whose mirror is due first and not claimed elsewhere, locked
        until the block ends; None: none due."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT c.warehouse_id, w.name, c.continuation_token FROM federated_event_cursor c"
                " JOIN warehouse w ON w.id = c.warehouse_id"
                " WHERE c.next_at <= now() AND w.federation IS NOT NULL AND NOT c.warehouse_id = ANY(%s)"
                " ORDER BY c.next_at LIMIT 1 FOR UPDATE OF c SKIP LOCKED",
                (list(skip),),
            ).fetchone()
            if row is None:
                yield None
                return
            yield MirrorClaim(conn, MirrorCursor(row["warehouse_id"], row["name"], row["continuation_token"]))
