"""The change feed's outbox in PostgreSQL (SQL only): events written in the transaction of the
change they record, read back in position order, and pruned past their retention.

``record_events`` is the one way an event is written: every storage method that changes the
catalog calls it on its own connection, inside its own transaction, as its last statement. So an
acknowledged change has its event and a rolled-back or refused one has none; a commit the server
retried writes one (only the attempt that won reaches it); and a change whose connection broke
after the commit was sent has its event exactly if it took effect.

Positions (docs/events.md): one counter row per stream (a warehouse; 0 for management changes),
incremented by the same statement that inserts the events. The row stays locked until the
commit, so one stream's writers take their positions in commit order: a reader that sees
position n sees every position before it, and a page ending at n is final. Writers of one
warehouse serialise for that last statement and their commit - a fraction of a millisecond of a
commit that costs several (the A/B figures in docs/events.md). The statement goes last so that
nothing slow (the metadata file's write, which ``before_commit`` waits for) runs under the lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from storage.db import Database

MANAGEMENT_STREAM = 0  # the stream of installation-level changes (principals, roles, grants, ...)

_RECORD = (
    "WITH counter AS ("
    "  INSERT INTO event_stream AS s (stream, last_position) VALUES (%(stream)s, %(count)s)"
    "  ON CONFLICT (stream) DO UPDATE SET last_position = s.last_position + EXCLUDED.last_position"
    "  RETURNING last_position)"
    " INSERT INTO change_event (stream, position, event_id, request_id, request_event_count, operation_type,"
    "  object_type, namespace, name, object_uuid, actor, operation)"
    " SELECT %(stream)s, counter.last_position - %(count)s + e.ordinality, (e.doc->>'event-id')::uuid,"
    "  e.doc->>'request-id', (e.doc->>'request-event-count')::integer, e.doc->>'operation-type',"
    "  e.doc->>'object-type',"
    "  CASE WHEN e.doc ? 'namespace' THEN ARRAY(SELECT jsonb_array_elements_text(e.doc->'namespace')) END,"
    "  e.doc->>'name', (e.doc->>'uuid')::uuid, e.doc->'actor', e.doc->'operation'"
    " FROM counter, jsonb_array_elements(%(events)s) WITH ORDINALITY AS e(doc, ordinality)"
)


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
    order (so two transactions of several streams cannot deadlock on the counters)."""
    streams = sorted({event.stream for event in events})
    for stream in streams:
        docs = [event.document() for event in events if event.stream == stream]
        conn.execute(_RECORD, {"stream": stream, "count": len(docs), "events": Jsonb(docs)})


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
    """Reads and retention of the outbox (writes go through ``record_events``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

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
            # The end first: every position up to it is committed (positions are taken in commit
            # order), so the page below it is final whatever commits meanwhile.
            end = conn.execute("SELECT last_position FROM event_stream WHERE stream = %s", (query.stream,)).fetchone()
            params["end"] = end["last_position"] if end else 0
            rows = conn.cursor(row_factory=dict_row).execute(_SELECT, params).fetchall()
        covered = rows[-1]["position"] if len(rows) == query.limit else max(query.after, params["end"])
        return [StoredEvent(**row) for row in rows], covered

    def latest_of(self, stream: int, object_uuid: str, limit: int, window: int) -> list[StoredEvent]:
        """One object's newest events, newest first, among the stream's last ``window`` positions
        (the console's timeline: bounded work whatever the stream's length, walking the primary
        key backwards; no index on the uuid, so the window is what bounds the scan)."""
        sql = (
            _COLUMNS + " WHERE stream = %(stream)s AND position > %(floor)s"
            " AND object_uuid = %(uuid)s::uuid ORDER BY position DESC LIMIT %(limit)s"
        )
        with self.db.connection() as conn:
            end = conn.execute("SELECT last_position FROM event_stream WHERE stream = %s", (stream,)).fetchone()
            floor = max((end["last_position"] if end else 0) - window, 0)
            params = {"stream": stream, "floor": floor, "uuid": object_uuid, "limit": limit}
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
