"""Push delivery of the change feed in PostgreSQL (SQL only): sinks, their cursors, dead letters,
and the publisher's lease (app/publisher/service.py).

One publisher at a time delivers, across every worker and replica: the one holding the lease row
(renewed well inside its lifetime; taken over by another once it lapses, e.g. after a SIGKILL).
A cursor moves only under the lease (``advance`` checks the holder in the same statement), so a
publisher that lost its lease without knowing cannot move a cursor back or forth.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from app.ground.errors import AlreadyExists
from storage.audit import COLUMNS
from storage.db import Database
from storage.events import StoredEvent, horizon

# The oldest transaction still running (as migration 0037's ``tx``): what is older is final.
_XMIN = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_AUDIT_COLUMNS = ", ".join(f"a.{column.strip()}" for column in COLUMNS.split(","))
_EVENT_COLUMNS = (
    "e.stream, e.position, e.event_id::text AS event_id, e.request_id, e.request_event_count, e.created_at,"
    " e.operation_type, e.object_type, e.namespace, e.name, e.object_uuid::text AS object_uuid, e.actor, e.operation"
)


@dataclass(frozen=True)
class SinkRow:
    id: int
    name: str
    kind: str
    url: str
    secret: bytes | None
    filters: dict[str, Any]
    max_attempts: int
    created_at: datetime
    options: dict[str, Any]  # a kind's settings beyond its url (Kafka: topic, security); nothing secret


@dataclass(frozen=True)
class AuditExport:
    """An audit record to deliver: the transaction that wrote it (the stream's order) and its row."""

    tx: int  # the transaction that wrote it (migration 0037)
    row: dict[str, Any]


@dataclass(frozen=True)
class DeadLetter:
    stream: int
    position: int
    event_id: str
    attempts: int
    last_error: str
    replay: bool
    created_at: datetime


class DeliveryRows:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- sinks (the management API) ------------------------------------------------------

    def create_sink(
        self,
        name: str,
        kind: str,
        url: str,
        secret: bytes | None,
        filters: dict[str, Any],
        max_attempts: int,
        options: dict[str, Any] | None = None,
    ) -> SinkRow:
        """A new sink; it starts at the end of every stream (what was committed before is not pushed)."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO event_sink (name, kind, url, secret, filters, max_attempts, options)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING RETURNING *",
                (name, kind, url, secret, Jsonb(filters), max_attempts, Jsonb(options or {})),
            ).fetchone()
            if row is None:
                raise AlreadyExists(f"Event sink already exists: {name}")
            _start_at_the_end(conn, row["id"])
            if filters.get("audit"):  # its audit stream starts at the transactions still running
                conn.execute(f"INSERT INTO audit_sink_cursor (sink_id, tx, id) VALUES (%s, {_XMIN}, 0)", (row["id"],))
        return SinkRow(**row)

    def sinks(self) -> list[SinkRow]:
        with self.db.connection() as conn:
            return [SinkRow(**row) for row in conn.execute("SELECT * FROM event_sink ORDER BY name").fetchall()]

    def sink(self, name: str) -> SinkRow | None:
        with self.db.connection() as conn:
            row = conn.execute("SELECT * FROM event_sink WHERE name = %s", (name,)).fetchone()
        return SinkRow(**row) if row else None

    def delete_sink(self, name: str) -> bool:
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM event_sink WHERE name = %s RETURNING id", (name,)).fetchone() is not None

    def ensure_sink(self, name: str, kind: str, url: str) -> None:
        """A sink the environment configures (GROWLER_EVENTS_NATS_URL): made, or pointed at ``url``."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO event_sink (name, kind, url) VALUES (%s, %s, %s)"
                " ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url, kind = EXCLUDED.kind"
                " RETURNING id, (xmax = 0) AS made",
                (name, kind, url),
            ).fetchone()
            if row["made"]:
                _start_at_the_end(conn, row["id"])

    # -- dead letters --------------------------------------------------------------------

    def dead_letters(self, sink_id: int, after: tuple[int, int] | None, limit: int) -> list[DeadLetter]:
        stream, position = after or (-1, -1)
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT stream, position, event_id::text AS event_id, attempts, last_error, replay, created_at"
                " FROM event_dead_letter WHERE sink_id = %s AND (stream, position) > (%s, %s)"
                " ORDER BY stream, position LIMIT %s",
                (sink_id, stream, position, limit),
            ).fetchall()
        return [DeadLetter(**row) for row in rows]

    def request_replay(self, sink_id: int) -> int:
        with self.db.transaction() as conn:
            cursor = conn.execute("UPDATE event_dead_letter SET replay = true WHERE sink_id = %s", (sink_id,))
            return cursor.rowcount

    def to_replay(self, sink_id: int, limit: int) -> list[tuple[DeadLetter, StoredEvent | None]]:
        """Dead letters an administrator asked to deliver again, with their events (None: pruned)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT d.stream, d.position, d.event_id::text AS event_id, d.attempts, d.last_error, d.replay,"
                " d.created_at, e.position AS found FROM event_dead_letter d LEFT JOIN change_event e"
                " ON e.stream = d.stream AND e.position = d.position"
                " WHERE d.sink_id = %s AND d.replay ORDER BY d.stream, d.position LIMIT %s",
                (sink_id, limit),
            ).fetchall()
            found = []
            for row in rows:
                event = None
                if row.pop("found") is not None:
                    hit = conn.execute(
                        f"SELECT {_EVENT_COLUMNS} FROM change_event e WHERE e.stream = %s AND e.position = %s",
                        (row["stream"], row["position"]),
                    ).fetchone()
                    event = StoredEvent(**hit) if hit else None
                found.append((DeadLetter(**row), event))
        return found

    def settle_dead_letter(self, sink_id: int, stream: int, position: int, error: str | None) -> None:
        """A replayed dead letter: gone when delivered, else kept (and no longer asked for) with the error."""
        with self.db.transaction() as conn:
            if error is None:
                conn.execute(
                    "DELETE FROM event_dead_letter WHERE sink_id = %s AND stream = %s AND position = %s",
                    (sink_id, stream, position),
                )
            else:
                conn.execute(
                    "UPDATE event_dead_letter SET replay = false, attempts = attempts + 1, last_error = %s"
                    " WHERE sink_id = %s AND stream = %s AND position = %s",
                    (error[:500], sink_id, stream, position),
                )

    # -- the publisher -------------------------------------------------------------------

    def take_lease(self, holder: str, lifetime_s: float) -> bool:
        """Take or renew the lease; False while another holder's is alive."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO event_publisher_lease AS l (holder, expires_at)"
                " VALUES (%(holder)s, clock_timestamp() + make_interval(secs => %(s)s))"
                " ON CONFLICT (singleton) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at"
                " WHERE l.holder = EXCLUDED.holder OR l.expires_at < clock_timestamp() RETURNING holder",
                {"holder": holder, "s": lifetime_s},
            ).fetchone()
        return row is not None

    def release_lease(self, holder: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM event_publisher_lease WHERE holder = %s", (holder,))

    def pending(self, sink_id: int, limit: int) -> list[StoredEvent]:
        """The next events of every stream after the sink's cursors, in position order per stream
        (a stream the sink has no cursor for yet starts at its beginning)."""
        with self.db.connection() as conn:
            # Each stream's horizon first, one statement (and one lock) at a time: events past it
            # may still be joined by smaller positions, so they wait for the next round.
            streams = [row["stream"] for row in conn.execute("SELECT stream FROM event_stream ORDER BY stream")]
            ends = [horizon(conn, stream) for stream in streams]
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    f"SELECT {_EVENT_COLUMNS} FROM unnest(%(streams)s::bigint[], %(ends)s::bigint[]) s(stream, horizon)"
                    " LEFT JOIN event_sink_cursor c ON c.sink_id = %(sink)s AND c.stream = s.stream"
                    " CROSS JOIN LATERAL (SELECT * FROM change_event e WHERE e.stream = s.stream"
                    "   AND e.position > coalesce(c.position, 0) AND e.position <= s.horizon"
                    "   ORDER BY e.position LIMIT %(limit)s) e"
                    " ORDER BY e.stream, e.position",
                    {"sink": sink_id, "limit": limit, "streams": streams, "ends": ends},
                )
                .fetchall()
            )
        return [StoredEvent(**row) for row in rows]

    def advance(self, sink_id: int, holder: str, stream: int, position: int, dead: tuple[str, int, str] | None) -> bool:
        """Move the sink's cursor of ``stream`` to ``position`` (with the event's dead letter, when
        it was given up on), only while ``holder`` holds the lease; False when it does not."""
        with self.db.transaction() as conn:
            if not _holds_lease(conn, holder):
                return False
            conn.execute(
                "INSERT INTO event_sink_cursor (sink_id, stream, position) VALUES (%s, %s, %s)"
                " ON CONFLICT (sink_id, stream) DO UPDATE SET position = greatest(event_sink_cursor.position,"
                " EXCLUDED.position)",
                (sink_id, stream, position),
            )
            if dead is not None:
                event_id, attempts, error = dead
                conn.execute(
                    "INSERT INTO event_dead_letter (sink_id, stream, position, event_id, attempts, last_error)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (sink_id, stream, position, event_id, attempts, error[:500]),
                )
        return True

    def pending_audit(self, sink_id: int, limit: int) -> list[AuditExport]:
        """The next audit records after the sink's audit cursor, in (transaction, id) order, of
        transactions older than every one still running (migration 0037): none can join them later."""
        with self.db.connection() as conn:
            rows = conn.execute(
                f"SELECT a.tx, {_AUDIT_COLUMNS} FROM audit_sink_cursor c CROSS JOIN LATERAL"
                " (SELECT * FROM audit_record a WHERE a.tx >= c.tx AND (a.tx, a.id) > (c.tx, c.id)"
                f"  AND a.tx < {_XMIN} ORDER BY a.tx, a.id LIMIT %s) a"
                " WHERE c.sink_id = %s ORDER BY a.tx, a.id",
                (limit, sink_id),
            ).fetchall()
        return [AuditExport(row.pop("tx"), row) for row in rows]

    def advance_audit(self, sink_id: int, holder: str, tx: int, record_id: int) -> bool:
        """Move the sink's audit cursor past (tx, id), only while ``holder`` holds the lease."""
        with self.db.transaction() as conn:
            if not _holds_lease(conn, holder):
                return False
            conn.execute(
                "UPDATE audit_sink_cursor SET tx = %s, id = %s WHERE sink_id = %s AND (tx, id) < (%s, %s)",
                (tx, record_id, sink_id, tx, record_id),
            )
        return True

    def warehouse_names(self) -> dict[int, str]:
        with self.db.connection() as conn:
            return {row["id"]: row["name"] for row in conn.execute("SELECT id, name FROM warehouse").fetchall()}

    def oldest_undelivered(self, sink_id: int) -> datetime | None:
        """When the oldest event the sink has not delivered yet was written (None: none pending)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT min(e.created_at) AS oldest FROM event_stream s"
                " LEFT JOIN event_sink_cursor c ON c.sink_id = %s AND c.stream = s.stream"
                " JOIN LATERAL (SELECT created_at FROM change_event e WHERE e.stream = s.stream"
                "   AND e.position > coalesce(c.position, 0) ORDER BY e.position LIMIT 1) e ON true",
                (sink_id,),
            ).fetchone()
        return row["oldest"] if row else None


def _holds_lease(conn: psycopg.Connection, holder: str) -> bool:
    """``holder`` holds the publisher's lease now; held (FOR SHARE) to the end of the caller's
    transaction, so a cursor moves only under a live lease."""
    held = conn.execute(
        "SELECT 1 FROM event_publisher_lease WHERE holder = %s AND expires_at > clock_timestamp() FOR SHARE",
        (holder,),
    ).fetchone()
    return held is not None


def _start_at_the_end(conn: psycopg.Connection, sink_id: int) -> None:
    """A new sink's cursors at every stream's horizon, in the caller's transaction: it receives
    what commits after it (a stream born later starts at its beginning). One stream at a time, in
    order; each stream's lock is held to the end of the transaction (short: it writes a few rows)."""
    streams = [row["stream"] for row in conn.execute("SELECT stream FROM event_stream ORDER BY stream")]
    for stream in streams:
        conn.execute(
            "INSERT INTO event_sink_cursor (sink_id, stream, position) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            (sink_id, stream, horizon(conn, stream)),
        )
