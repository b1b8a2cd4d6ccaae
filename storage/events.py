"""The change feed's outbox in PostgreSQL (SQL only): events written in the transaction of the
change they record, read back in position order, and pruned past their retention.

``record_events`` is the one way an event is written: every storage method that changes the
catalog calls it on its own connection, inside its own transaction, as its last statement. So an
acknowledged change has its event and a rolled-back or refused one has none; a commit the server
retried writes one (only the attempt that won reaches it); and a change whose connection broke
after the commit was sent has its event exactly if it took effect.

Positions (docs/events.md, migration 0024): taken from one sequence by the statement that inserts
the events, under the stream's advisory lock held shared until the commit; a reader takes that
lock exclusively for a moment (``horizon``) and reads only up to the sequence's value then: every
position at or below it is committed or never will be, so a page ending there is final. Writers
never wait for each other (the counter row this replaced made every writer of a warehouse wait
for the one before it: 5.5 ms of wall time per createTable at 16 connections); a reader waits at
most for the commits in flight. The statement goes last so that nothing slow (the metadata
file's write, which ``before_commit`` waits for) runs under the shared lock a reader waits on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from app.ground.errors import ServiceUnavailable
from storage.db import Database

MANAGEMENT_STREAM = 0  # the stream of installation-level changes (principals, roles, grants, ...)

# How long a reader waits for the writers in flight to commit before it gives up with 503: they
# hold the stream's lock only for their last statement and their commit.
HORIZON_WAIT_MS = 2000


class FeedBusy(ServiceUnavailable):
    """A reader waited ``HORIZON_WAIT_MS`` for a stream's writers in flight (503, Retry-After)."""

    def __init__(self) -> None:
        super().__init__("The change feed is busy with writes in flight, retry shortly", retry_after=1)


def horizon(conn: psycopg.Connection, stream: int, wait_ms: int = HORIZON_WAIT_MS) -> int:
    """The position up to which ``stream`` is final: every event at or below it is committed (or
    never will be), so a reader reading up to it skips nothing (migration 0024). Waits for the
    writers in flight, at most ``wait_ms`` (then FeedBusy). On an autocommit connection the
    stream's lock is held for this one statement; in a transaction, until it ends."""
    try:
        return conn.execute("SELECT change_event_horizon(%s, %s) AS h", (stream, wait_ms)).fetchone()["h"]
    except psycopg.errors.LockNotAvailable as exc:
        raise FeedBusy() from exc


@dataclass(frozen=True)
class ChangeEvent:
    """One event as the outbox stores it; ``operation`` is the proposal's operation object.

    ``namespace``/``name``/``uuid`` locate the object the event is about (for filters and
    authorization): a namespace event has no name, a management event neither."""

    stream: int
    event_id: str
    request_id: str
    request_event_count: int
    operation_type: str
    object_type: str
    operation: dict[str, Any]
    namespace: tuple[str, ...] | None = None
    name: str | None = None
    uuid: str | None = None
    actor: dict[str, Any] | None = None

    def document(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "event-id": self.event_id,
            "request-id": self.request_id,
            "request-event-count": self.request_event_count,
            "operation-type": self.operation_type,
            "object-type": self.object_type,
            "operation": self.operation,
            "actor": self.actor,
        }
        if self.namespace is not None:
            doc["namespace"] = list(self.namespace)
        if self.name is not None:
            doc["name"] = self.name
        if self.uuid is not None:
            doc["uuid"] = self.uuid
        return doc


def record_events(conn: psycopg.Connection, events: Sequence[ChangeEvent]) -> None:
    """Write ``events`` in the caller's open transaction: one statement per stream, streams in
    order (a reader takes one stream's lock at a time, so no order is needed for them; the order
    keeps it so should one ever take several)."""
    streams = sorted({event.stream for event in events})
    for stream in streams:
        docs = [event.document() for event in events if event.stream == stream]
        conn.execute("SELECT record_change_events(%s, %s)", (stream, Jsonb(docs)))


@dataclass(frozen=True)
class StoredEvent:
    stream: int
    position: int
    event_id: str
    request_id: str
    request_event_count: int
    created_at: datetime
    operation_type: str
    object_type: str
    namespace: list[str] | None
    name: str | None
    object_uuid: str | None
    actor: dict[str, Any] | None
    operation: dict[str, Any]


@dataclass(frozen=True)
class EventQuery:
    """What a reader asks for; empty tuples filter nothing."""

    stream: int
    after: int
    limit: int
    since: datetime | None = None
    operation_types: tuple[str, ...] = ()
    object_types: tuple[str, ...] = ()
    uuids: tuple[str, ...] = ()
    # identifiers (namespace levels then the name) an event's object must start with
    name_prefixes: tuple[tuple[str, ...], ...] = field(default_factory=tuple)


_COLUMNS = (
    "SELECT stream, position, event_id::text AS event_id, request_id, request_event_count, created_at,"
    " operation_type, object_type, namespace, name, object_uuid::text AS object_uuid, actor, operation"
    " FROM change_event"
)
_SELECT = (
    _COLUMNS + " WHERE stream = %(stream)s AND position > %(after)s AND position <= %(end)s"
    " AND (%(since)s::timestamptz IS NULL OR created_at >= %(since)s)"
    " AND (cardinality(%(operations)s::text[]) = 0 OR operation_type = ANY(%(operations)s))"
    " AND (cardinality(%(objects)s::text[]) = 0 OR object_type = ANY(%(objects)s))"
    " AND (cardinality(%(uuids)s::uuid[]) = 0 OR object_uuid = ANY(%(uuids)s))"
    " AND (jsonb_array_length(%(names)s) = 0 OR EXISTS ("
    "   SELECT 1 FROM jsonb_array_elements(%(names)s) p"
    "   WHERE (coalesce(namespace, '{}') || coalesce(ARRAY[name], '{}'))[1:jsonb_array_length(p)]"
    '     = ARRAY(SELECT jsonb_array_elements_text(p)) COLLATE "C"))'
    " ORDER BY position LIMIT %(limit)s"
)


class EventRows:
    """Reads and retention of the outbox (writes go through ``record_events``, in the change's own
    transaction; ``append`` for a change made elsewhere: a federated warehouse's remote)."""

    def __init__(self, db: Database, wait_ms: int = HORIZON_WAIT_MS) -> None:
        self.db = db
        self.wait_ms = wait_ms

    def append(self, events: Sequence[ChangeEvent]) -> None:
        """``events`` in a transaction of their own (committed when this returns)."""
        with self.db.transaction() as conn:
            record_events(conn, events)

    def read(self, query: EventQuery) -> tuple[list[StoredEvent], int]:
        """Events after ``query.after`` that match, in position order, and the position the
        read covered (the last event's, or the stream's end when fewer than ``limit`` matched),
        so a caller whose filters matched nothing still moves on."""
        params = {
            "stream": query.stream,
            "after": query.after,
            "since": query.since,
            "operations": list(query.operation_types),
            "objects": list(query.object_types),
            "uuids": list(query.uuids),
            "names": Jsonb([list(prefix) for prefix in query.name_prefixes]),
            "limit": query.limit,
        }
        with self.db.connection() as conn:
            # The horizon first: every position up to it is committed or never will be, so the
            # page below it is final whatever commits meanwhile.
            params["end"] = horizon(conn, query.stream, self.wait_ms)
            rows = conn.cursor(row_factory=dict_row).execute(_SELECT, params).fetchall()
        covered = rows[-1]["position"] if len(rows) == query.limit else max(query.after, params["end"])
        return [StoredEvent(**row) for row in rows], covered

    def latest_of(self, stream: int, object_uuid: str, limit: int) -> list[StoredEvent]:
        """One object's newest events, newest first, however old (the console's timeline): a
        backward scan of ``change_event_by_object`` (migration 0021), bounded by ``limit``."""
        sql = (
            _COLUMNS + " WHERE stream = %(stream)s AND object_uuid = %(uuid)s::uuid"
            " ORDER BY position DESC LIMIT %(limit)s"
        )
        params = {"stream": stream, "uuid": object_uuid, "limit": limit}
        with self.db.connection() as conn:
            rows = conn.cursor(row_factory=dict_row).execute(sql, params).fetchall()
        return [StoredEvent(**row) for row in rows]

    def pruned_through(self, stream: int) -> int:
        """The last position retention deleted (0: none): a token before it may have missed events."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT pruned_through FROM event_stream WHERE stream = %s", (stream,)).fetchone()
        return row["pruned_through"] if row else 0

    def prune(self, retention_s: float) -> int:
        """Delete events older than the retention, recording per stream how far it went."""
        with self.db.transaction() as conn:
            rows = conn.execute(
                "WITH gone AS (DELETE FROM change_event WHERE created_at < now() - make_interval(secs => %s)"
                "  RETURNING stream, position)"
                " SELECT stream, max(position) AS through, count(*) AS n FROM gone GROUP BY stream",
                (retention_s,),
            ).fetchall()
            for row in rows:
                conn.execute(
                    "UPDATE event_stream SET pruned_through = greatest(pruned_through, %s) WHERE stream = %s",
                    (row["through"], row["stream"]),
                )
        return sum(row["n"] for row in rows)
