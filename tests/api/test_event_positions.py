"""The change feed never skips an event: positions come from a sequence (migration 0024), so a
writer can take a smaller position and commit after one with a larger; a reader reads only up to
the horizon it takes under the stream's lock, which waits for the writers in flight.

Forced with open transactions, not with timing: writer A takes its position and stays
uncommitted while writer B takes a larger one and commits. On the counter row this replaced, B
could not even take its position while A was open (B's lock wait fails the test).
"""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from psycopg.rows import dict_row

from app.composition.services import services_of
from storage.events import ChangeEvent, EventQuery, EventRows, record_events
from tests.api.authz_support import WAREHOUSE
from tests.api.tables_support import PREFIX
from tests.integration.proc_support import wait_for  # the suite's one condition poll

pytestmark = pytest.mark.usefixtures("clean_catalog")


def event(stream: int) -> ChangeEvent:
    return ChangeEvent(
        stream=stream,
        event_id=str(uuid.uuid4()),
        request_id="r",
        request_event_count=1,
        operation_type="update-namespace-properties",
        object_type="namespace",
        operation={"operation-type": "update-namespace-properties", "namespace": ["x"]},
        namespace=("x",),
    )


def test_a_reader_never_skips_a_smaller_position_committed_later(client, app, services, db):
    stream = db.execute("SELECT id FROM warehouse WHERE name = %s", (WAREHOUSE,)).fetchone()[0]
    # the stream's row exists (its first event writes it, and a second writer would wait for that)
    db.execute("INSERT INTO event_stream (stream) VALUES (%s)", (stream,))
    first, second = event(stream), event(stream)
    pool = services_of(app.app).events.rows.db
    with (
        psycopg.connect(services.database_url, row_factory=dict_row) as a,
        psycopg.connect(services.database_url, row_factory=dict_row) as b,
    ):
        record_events(a, [first])  # A: a position, not committed
        b.execute("SET lock_timeout = '5s'")  # the old counter row: B waits for A, fails here
        record_events(b, [second])
        b.commit()
        positions = dict(db.execute("SELECT event_id::text, position FROM change_event").fetchall())
        assert list(positions) == [second.event_id]  # B's, committed; A's still to come

        # A reader now must not answer B's event alone: it waits, and past its wait says 503
        busy = client.post(f"{PREFIX}/events", json={})
        assert busy.status_code == 503, busy.text
        assert busy.headers["Retry-After"] == "1"
        assert busy.json()["error"]["type"] == "ServiceUnavailableException"

        # A reader that waits long enough gets both, in position order, once A commits
        read: list = []
        reader = threading.Thread(
            target=lambda: read.append(EventRows(pool, wait_ms=60_000).read(EventQuery(stream, after=0, limit=10)))
        )
        reader.start()
        wait_for(
            lambda: db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()[
                0
            ],
            "the reader waiting for A",
        )
        assert read == []
        a.commit()
        reader.join(30)
    assert not reader.is_alive()
    (found, covered) = read[0]
    assert [e.event_id for e in found] == [first.event_id, second.event_id]
    assert found[0].position < found[1].position == positions[second.event_id]
    assert covered >= found[1].position


def test_a_rolled_back_writer_leaves_a_gap_readers_step_over(client, app, services, db):
    stream = db.execute("SELECT id FROM warehouse WHERE name = %s", (WAREHOUSE,)).fetchone()[0]
    rows = EventRows(services_of(app.app).events.rows.db, wait_ms=60_000)
    kept = event(stream)
    with psycopg.connect(services.database_url, row_factory=dict_row) as a:
        record_events(a, [event(stream)])
        a.rollback()
    with psycopg.connect(services.database_url, row_factory=dict_row) as b:
        record_events(b, [kept])
    found, covered = rows.read(EventQuery(stream, after=0, limit=10))
    assert [e.event_id for e in found] == [kept.event_id]
    later, _ = rows.read(EventQuery(stream, after=covered, limit=10))
    assert later == []
