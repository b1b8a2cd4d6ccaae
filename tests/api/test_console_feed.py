"""The console's change feed and maintenance pages (issue 38), and a table page's timeline, through
the whole ASGI stack as tests/api/test_console.py drives the other pages.

What each page may show is the API's answer: the events page reads the feed through the
service behind ``POST /v1/{prefix}/events`` (app/events/feed.py) with its per-event filter, the
maintenance page the management API's maintenance service (app/maintenance/service.py) with its rights.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from app.composition.services import services_of
from tests.api.authz_support import MANAGEMENT, PREFIX, securable_body, wait_for_version
from tests.api.maintenance_jobs_support import finished_run
from tests.api.test_console import ESCAPED, SCRIPT, make_table, reader, sign_in

TIMELINE = re.compile(r'id="table-events".*?</table>', re.S)
EXPIRY = "system.snapshot-expiry"
BACKGROUND = (
    "growler-housekeeping",
    "growler-events-publisher",
    "growler-auth-state",
    "maintenance-lease",
    "growler-startup",
)
HANDFUL = 8  # statements a page may send at most (issue 38: "no page issues more than a handful")


@pytest.fixture
def browser(app, clean_catalog):
    """A client with no bearer token, signed in to the console as the test admin."""
    client = app.anonymous_client()
    assert sign_in(client).status_code == 303
    return client


def warm(browser, app, database_url: str, path: str, params: dict[str, str]) -> None:
    """Fill the caller's cached grants for the counted request after it: first wait until the
    app's authorizer polled the database's current ``auth_state.version`` (a management change
    just before, such as a policy put, moves it; a poll landing between the warm request and the
    counted one would otherwise empty the cache in between), then send the request once."""
    wait_for_version(lambda: services_of(app.app).authorizer._version(), database_url)
    assert browser.get(path, params=params).status_code == 200


@contextmanager
def counted_queries() -> Iterator[list[str]]:
    """The SQL statements the app's request threads send meanwhile (the app runs in this process;
    psycopg's cursor ``execute`` is where every statement of the storage layer goes through),
    not those of its background threads (housekeeping, the change feed publisher's lease, the
    authentication state's poll, which may fall within the count at any time)."""
    sent: list[str] = []
    original = psycopg.Cursor.execute

    def execute(self, query, params=None, **kwargs):
        if not threading.current_thread().name.startswith(BACKGROUND):
            sent.append(str(query)[:80])
        return original(self, query, params, **kwargs)

    psycopg.Cursor.execute = execute
    try:
        yield sent
    finally:
        psycopg.Cursor.execute = original


def test_a_table_timeline_finds_its_events_however_old_through_the_uuid_index(browser, app, db) -> None:
    """Its events lie behind 101,000 newer events of another table (the old timeline looked
    through the last 100,000 positions only); the lookup is a scan of change_event_by_object."""
    created = make_table(app.test_client(), ["old"], "early")
    uuid = created["metadata"]["table-uuid"]
    stream = db.execute("SELECT stream FROM change_event WHERE object_uuid = %s", (uuid,)).fetchone()[0]
    db.execute(
        "INSERT INTO change_event (stream, position, event_id, request_id, request_event_count,"
        "  operation_type, object_type, namespace, name, object_uuid, operation)"
        " SELECT %(s)s, nextval('change_event_position'), gen_random_uuid(), 'bulk', 1, 'update-table', 'table',"
        "  ARRAY['old'], 'busy', '00000000-0000-4000-8000-000000000001', '{}'"
        " FROM generate_series(1, 101000) AS i",
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


def _ops(text: str) -> list[str]:
    return re.findall(r'class="event-op">([^<]+)<', text)


def _objects(text: str) -> list[str]:
    return re.findall(r'class="event-object">[a-z]+ <a [^>]+>([^<]+)</a>', text)


def _next(text: str) -> str:
    return re.search(r'id="events-next" href="([^"]+)"', text).group(1).replace("&amp;", "&")


def test_the_events_page_pages_and_filters_the_feed_in_few_queries(browser, app, services) -> None:
    admin = app.test_client()
    make_table(admin, ["ev"], "one")
    make_table(admin, ["ev"], "two")
    make_table(admin, ["other"], "three")
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}
    assert admin.post(f"{PREFIX}/namespaces/ev/tables/one", json=body).status_code == 200
    # the navigation, the warehouse and namespace pages, and a table's page link to it
    assert 'href="/ui/events"' in browser.get("/ui/").text
    assert 'href="/ui/events?warehouse=test"' in browser.get("/ui/events").text
    assert "/ui/events?warehouse=test" in browser.get("/ui/w/test").text
    assert 'id="namespace-events-link"' in browser.get("/ui/w/test/namespace", params={"ns": "ev"}).text
    table_page = browser.get("/ui/w/test/table", params={"ns": "ev", "name": "one"}).text
    link = re.search(r'id="table-events-link"|href="([^"]+)" id="table-events-link"', table_page).group(1)
    assert link == "/ui/events?warehouse=test&amp;ns=ev&amp;name=one"

    warm(browser, app, services.database_url, "/ui/events", {"warehouse": "test"})
    with counted_queries() as sent:
        page = browser.get("/ui/events", params={"warehouse": "test"})
    assert page.status_code == 200 and len(sent) <= HANDFUL, sent
    assert _ops(page.text) == ["create-namespace", "create-table", "create-table"] + [
        "create-namespace",
        "create-table",
        "update-table",
    ]
    assert _objects(page.text) == ["ev", "ev.one", "ev.two", "other", "other.three", "ev.one"]
    assert "set-properties" in page.text and "test-admin" in page.text
    # filters: operation, object type, an object (typed, or from a link)
    only = browser.get("/ui/events", params={"warehouse": "test", "op": "update-table"})
    assert _ops(only.text) == ["update-table"]
    spaces = browser.get("/ui/events", params={"warehouse": "test", "type": "namespace"})
    assert _objects(spaces.text) == ["ev", "other"]
    typed = browser.get("/ui/events", params={"warehouse": "test", "object": "ev.one"})
    assert _objects(typed.text) == ["ev.one", "ev.one"]
    assert _objects(browser.get(link.replace("&amp;", "&")).text) == ["ev.one", "ev.one"]
    recent = browser.get("/ui/events", params={"warehouse": "test", "since": "1h", "object": "other"})
    assert _objects(recent.text) == ["other", "other.three"]
    # paged by the feed's sealed token: two at a time, every event once, then an empty page
    seen, url = [], "/ui/events?warehouse=test&size=2"
    for _ in range(4):
        step = browser.get(url)
        seen += _objects(step.text)
        url = _next(step.text)
    assert seen == _objects(page.text) and 'id="events-none"' in step.text
    # refused input: a 400 page, never a 500
    for params in ({"op": "drop-everything"}, {"type": "principal"}, {"since": "ever"}, {"page": "forged"}):
        assert browser.get("/ui/events", params={"warehouse": "test", **params}).status_code == 400, params
    assert browser.get("/ui/events", params={"warehouse": "test", "page": "x" * 2000}).status_code == 400


def test_events_and_maintenance_pages_show_a_reader_only_what_it_may_read(app, principals, clean_catalog) -> None:
    admin = app.test_client()
    make_table(admin, ["shown"], "open_table")
    make_table(admin, ["private"], "secret_table")
    expiry = {"enable": True, "config": {"min_snapshot_to_keep": 3}}
    body = {"policy-type": EXPIRY, "securable": securable_body("namespace", "test", ("private",)), "content": expiry}
    assert admin.put(f"{MANAGEMENT}/maintenance/policies", json=body).status_code == 200
    _, client = reader(app, principals, "reader", "shown")
    page = client.get("/ui/events", params={"warehouse": "test"})
    assert page.status_code == 200
    assert _objects(page.text) == ["shown", "shown.open_table"]
    assert "private" not in page.text and "secret_table" not in page.text
    typed = client.get("/ui/events", params={"warehouse": "test", "object": "private"})
    assert typed.status_code == 200 and "secret_table" not in typed.text and 'id="events-none"' in typed.text
    # a warehouse it does not see: the endpoint's answer
    assert client.get("/ui/events", params={"warehouse": "other"}).status_code in (403, 404)
    # maintenance: refused where the management API refuses (read or manage-maintenance needed)
    for params in ({"ns": "private", "name": "secret_table"}, {"ns": "private"}):
        refused = client.get("/ui/maintenance", params={"warehouse": "test", **params})
        assert refused.status_code in (403, 404) and "min_snapshot_to_keep" not in refused.text, params
    mine = client.get("/ui/maintenance", params={"warehouse": "test", "ns": "shown", "name": "open_table"})
    assert mine.status_code == 200 and 'id="no-runs"' in mine.text


def test_event_and_maintenance_pages_render_names_as_text(browser, app) -> None:
    admin = app.test_client()
    assert admin.post(f"{PREFIX}/namespaces", json={"namespace": [SCRIPT]}).status_code == 200
    page = browser.get("/ui/events", params={"warehouse": "test", "object": SCRIPT})
    assert page.status_code == 200 and SCRIPT not in page.text and ESCAPED in page.text
    content = {"enable": False, "config": {"note": SCRIPT}}
    body = {"policy-type": EXPIRY, "securable": securable_body("namespace", "test", (SCRIPT,)), "content": content}
    assert admin.put(f"{MANAGEMENT}/maintenance/policies", json=body).status_code == 200
    page = browser.get("/ui/maintenance", params={"warehouse": "test", "ns": SCRIPT})
    assert page.status_code == 200 and SCRIPT not in page.text and "alert(1)" in page.text


def test_the_maintenance_page_shows_policies_health_and_runs(browser, app, services) -> None:
    admin = app.test_client()
    make_table(admin, ["kept"], "t")
    expiry = {"enable": True, "config": {"min_snapshot_to_keep": 3}}
    body = {"policy-type": EXPIRY, "securable": securable_body("namespace", "test", ("kept",)), "content": expiry}
    assert admin.put(f"{MANAGEMENT}/maintenance/policies", json=body).status_code == 200
    table = f"{MANAGEMENT}/maintenance/warehouses/test/namespaces/kept/tables/t"
    run = finished_run(admin, f"{table}/runs", {"policy-type": EXPIRY, "dry-run": True})
    # reached from the navigation, a namespace's page and a table's page
    assert 'href="/ui/maintenance"' in browser.get("/ui/").text
    assert 'id="namespace-maintenance-link"' in browser.get("/ui/w/test/namespace", params={"ns": "kept"}).text
    assert 'id="table-maintenance-link"' in browser.get("/ui/w/test/table", params={"ns": "kept", "name": "t"}).text

    at_namespace = browser.get("/ui/maintenance", params={"warehouse": "test", "ns": "kept"})
    assert at_namespace.status_code == 200
    attached = re.search(r'id="attached-policies".*?</table>', at_namespace.text, re.S).group(0)
    assert EXPIRY in attached and "min_snapshot_to_keep" in attached
    assert 'id="no-policies"' in browser.get("/ui/maintenance", params={"warehouse": "test"}).text

    table_page = {"warehouse": "test", "ns": "kept", "name": "t"}
    warm(browser, app, services.database_url, "/ui/maintenance", table_page)  # the manifests cached too
    with counted_queries() as sent:
        page = browser.get("/ui/maintenance", params=table_page)
    assert page.status_code == 200, page.text
    # two calls of the maintenance service, each resolving the table by its name (3 keyed lookups):
    # effective policies (5 statements) and health with its last runs (6); the manifests cached
    assert len(sent) <= 11, sent
    effective = re.search(r'id="effective-policies".*?</table>', page.text, re.S).group(0)
    assert EXPIRY in effective and "inherited from the namespace" in effective
    assert "Snapshots</dt><dd>0 (0 expirable now)" in page.text
    row = re.search(rf'id="run-{run["id"]}".*?</tr>', page.text, re.S).group(0)
    assert f'<td class="run-status">{run["status"]}' in row and "<td>yes</td>" in row  # a dry run
    assert re.search(r"<td>\d+\.\d s</td>", row) and "<summary>Plan</summary>" in row
    # the typed form of the warehouse page reaches the same page
    typed = browser.get("/ui/maintenance", params={"warehouse": "test", "dotted": "kept", "name": "t"})
    assert typed.status_code == 200 and f'id="run-{run["id"]}"' in typed.text


def test_the_maintenance_page_runs_a_job_shows_it_queued_and_cancels_it(browser, app) -> None:
    """The Run button queues a job (runMaintenance); while the table's lease is held elsewhere it
    stays queued, the page shows it with a Cancel button, and the Cancel button cancels it."""
    from app.maintenance.lease import TableLease

    admin = app.test_client()
    make_table(admin, ["kept"], "t")
    service = services_of(app.app).maintenance
    table = service.maintenance.table("test", ("kept",), "t")
    held = TableLease(service.maintenance, table.entry_id, 600)
    assert held.take()
    try:
        page_params = {"warehouse": "test", "ns": "kept", "name": "t"}
        page = browser.get("/ui/maintenance", params=page_params)
        token = re.search(r'id="run-maintenance".*?name="csrf" value="([^"]+)"', page.text, re.S).group(1)
        ran = browser.post(
            "/ui/maintenance/run",
            params=page_params,
            data={"csrf": token, "policy-type": EXPIRY, "dry-run": "yes"},
            follow_redirects=False,
        )
        assert ran.status_code == 303, ran.text
        (run,) = service.maintenance.runs(table.entry_id, 5)
        assert run.status == "queued"
        page = browser.get("/ui/maintenance", params=page_params)
        row = re.search(rf'id="run-{run.id}".*?</tr>', page.text, re.S).group(0)
        assert '<td class="run-status">queued' in row and 'class="cancel-run"' in row
        assert '<td class="run-trigger">request by test-admin</td>' in row  # who asked for it
        token = re.search(r'name="csrf" value="([^"]+)"', row).group(1)
        cancelled = browser.post(
            "/ui/maintenance/cancel",
            params={**page_params, "run": run.id},
            data={"csrf": token},
            follow_redirects=False,
        )
        assert cancelled.status_code == 303, cancelled.text
        row = re.search(rf'id="run-{run.id}".*?</tr>', browser.get("/ui/maintenance", params=page_params).text, re.S)
        assert '<td class="run-status">cancelled' in row.group(0) and 'class="cancel-run"' not in row.group(0)
    finally:
        service.maintenance.release_lease(table.entry_id, held.holder)
