"""The console's change feed and maintenance pages (issue 38), and a table page's timeline, through
the whole ASGI stack as tests/api/test_console.py drives the other pages.

What each page may show is the API's answer: the events page reads the feed through the
service behind ``POST /v1/{prefix}/events`` (app/events_feed.py) with its per-event filter, the
maintenance page the management API's maintenance service (app/maintenance.py) with its rights.
"""

from __future__ import annotations

import json
import re

import pytest

from tests.api.test_console import make_table, sign_in

TIMELINE = re.compile(r'id="table-events".*?</table>', re.S)


@pytest.fixture
def browser(app, clean_catalog):
    """A client with no bearer token, signed in to the console as the test admin."""
    client = app.anonymous_client()
    assert sign_in(client).status_code == 303
    return client


def test_a_table_timeline_finds_its_events_however_old_through_the_uuid_index(browser, app, db) -> None:
    """Its events lie behind 120,000 newer events of another table (the old timeline looked
    through the last 100,000 positions only); the lookup is a scan of change_event_by_object."""
    created = make_table(app.test_client(), ["old"], "early")
    uuid = created["metadata"]["table-uuid"]
    stream = db.execute("SELECT stream FROM change_event WHERE object_uuid = %s", (uuid,)).fetchone()[0]
    db.execute(
        "WITH counter AS (UPDATE event_stream SET last_position = last_position + 120000 WHERE stream = %(s)s"
        "  RETURNING last_position)"
        " INSERT INTO change_event (stream, position, event_id, request_id, request_event_count,"
        "  operation_type, object_type, namespace, name, object_uuid, operation)"
        " SELECT %(s)s, counter.last_position - 120000 + i, gen_random_uuid(), 'bulk', 1, 'update-table', 'table',"
        "  ARRAY['old'], 'busy', '00000000-0000-4000-8000-000000000001', '{}'"
        " FROM counter, generate_series(1, 120000) AS i",
        {"s": stream},
    )
    db.execute("ANALYZE change_event")
    page = browser.get("/ui/w/test/table", params={"ns": "old", "name": "early"})
    assert page.status_code == 200
    assert re.findall(r'class="event-op">([^<]+)<', TIMELINE.search(page.text).group(0)) == ["create-table"]
    # the statement storage/events.py sends, as PostgreSQL plans it on these rows
    from storage.events import _COLUMNS

    sql = _COLUMNS + " WHERE stream = %s AND object_uuid = %s::uuid ORDER BY position DESC LIMIT %s"
    plan = json.dumps(db.execute("EXPLAIN (FORMAT JSON) " + sql, (stream, uuid, 50)).fetchone()[0])
    assert '"Index Name": "change_event_by_object"' in plan, plan
    assert '"Seq Scan"' not in plan
