"""The change feed (issue 36): every change writes its event in its own transaction, and
``POST /v1/{prefix}/events`` serves them (openapi/events.yaml).

Exactness under concurrency: writers on several tables racing (server-side retries and 409s), a
commit whose connection broke after it was sent (its outcome looked up), a commit whose database
step failed after the swap: exactly one event per acknowledged change, none for a refused one,
and each table's events in the order of its metadata log.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.composition.services import services_of
from storage.events import EventRows
from tests.api.authz_support import WAREHOUSE
from tests.api.tables_support import PREFIX, append, create_request, table_url, tables_url

pytestmark = pytest.mark.usefixtures("clean_catalog")
EVENTS = f"{PREFIX}/events"


def feed(client, **request):
    response = client.post(EVENTS, json=request)
    assert response.status_code == 200, response.text
    return response.json()


def everything(client, **request) -> list[dict]:
    """Every event, page after page, until a page comes back empty."""
    events, token = [], None
    while True:
        page = feed(client, **request, **({"continuation-token": token} if token else {}))
        assert "continuation-token" in page
        token = page["continuation-token"]
        if not page["events"]:
            return events
        events += page["events"]


def types(events) -> list[str]:
    return [event["operation"]["operation-type"] for event in events]


def test_every_change_has_its_event_in_commit_order(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"], "properties": {"a": "1"}}).status_code == 200
    client.post(f"{PREFIX}/namespaces/db/properties", json={"removals": ["a", "gone"], "updates": {"b": "2"}})
    created = client.post(tables_url(), json=create_request("t")).json()
    table_uuid = created["metadata"]["table-uuid"]
    committed = append(client, table_url("t"), 11, 1, None)
    assert committed.status_code == 200
    rename = {"source": {"namespace": ["db"], "name": "t"}, "destination": {"namespace": ["db"], "name": "u"}}
    assert client.post(f"{PREFIX}/tables/rename", json=rename).status_code == 204
    assert client.delete(table_url("u"), params={"purgeRequested": "true"}).status_code == 204
    assert client.delete(f"{PREFIX}/namespaces/db").status_code == 204

    events = everything(client)
    assert types(events) == [
        "create-namespace",
        "update-namespace-properties",
        "create-table",
        "update-table",
        "rename-table",
        "drop-table",
        "drop-namespace",
    ]
    ops = [event["operation"] for event in events]
    assert ops[0] == {"operation-type": "create-namespace", "namespace": ["db"], "properties": {"a": "1"}}
    assert (ops[1]["updated"], ops[1]["removed"], ops[1]["missing"]) == (["b"], ["a"], ["gone"])
    assert ops[2]["identifier"] == {"namespace": ["db"], "name": "t"} and ops[2]["table-uuid"] == table_uuid
    update = ops[3]
    assert update["table-uuid"] == table_uuid
    assert update["previous-metadata-location"] == created["metadata-location"]
    assert update["metadata-location"] == committed.json()["metadata-location"]
    added = next(u for u in update["updates"] if u["action"] == "add-snapshot")["snapshot"]
    assert (added["snapshot-id"], added["summary"]["operation"]) == (11, "append")
    assert ops[4]["destination"] == {"namespace": ["db"], "name": "u"} and ops[4]["table-uuid"] == table_uuid
    assert (ops[5]["identifier"]["name"], ops[5]["purge"]) == ("u", True)
    for event in events:
        assert event["request-event-count"] == 1 and event["actor"]["principal"] == "test-admin"
        assert event["timestamp-ms"] > 0 and event["event-id"]
    assert len({event["request-id"] for event in events}) == len(events)


def test_views_and_transactions(client):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    for name in ("a", "b"):
        client.post(tables_url(), json=create_request(name))
    view = {
        "name": "v",
        "schema": {
            "type": "struct",
            "schema-id": 0,
            "fields": [{"id": 1, "name": "x", "type": "long", "required": False}],
        },
        "view-version": {
            "version-id": 1,
            "timestamp-ms": 1,
            "schema-id": 0,
            "summary": {},
            "default-namespace": ["db"],
            "representations": [{"type": "sql", "sql": "SELECT 1 AS x", "dialect": "spark"}],
        },
        "properties": {},
    }
    assert client.post(f"{PREFIX}/namespaces/db/views", json=view).status_code == 200
    assert client.delete(f"{PREFIX}/namespaces/db/views/v").status_code == 204
    changes = [
        {
            "identifier": {"namespace": ["db"], "name": name},
            "requirements": [],
            "updates": [{"action": "set-properties", "updates": {"k": name}}],
        }
        for name in ("a", "b")
    ]
    assert client.post(f"{PREFIX}/transactions/commit", json={"table-changes": changes}).status_code == 204
    events = everything(client)
    assert types(events)[-4:] == ["create-view", "drop-view", "update-table", "update-table"]
    transaction = events[-2:]
    assert {e["operation"]["identifier"]["name"] for e in transaction} == {"a", "b"}
    assert transaction[0]["request-id"] == transaction[1]["request-id"]
    assert [e["request-event-count"] for e in transaction] == [2, 2]


def test_refused_changes_write_no_event(client, db):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    before = db.execute("SELECT count(*) FROM change_event").fetchone()[0]
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 409
    assert client.post(tables_url(), json=create_request("t")).status_code == 409
    assert append(client, table_url("t"), 5, 1, 999).status_code == 409  # a requirement fails
    assert append(client, table_url("nope"), 5, 1, None).status_code == 404
    assert client.delete(f"{PREFIX}/namespaces/db").status_code == 409  # not empty
    no_op = {"requirements": [], "updates": []}
    assert client.post(table_url("t"), json=no_op).status_code == 200  # nothing changed: no event
    assert db.execute("SELECT count(*) FROM change_event").fetchone()[0] == before


def test_concurrent_writers_one_event_per_acknowledged_commit_in_log_order(app, client, db):
    """Writers race on three tables: appends whose requirement goes stale (409) and property
    changes the server retries after a lost compare-and-set."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    names = ["t0", "t1", "t2"]
    for name in names:
        client.post(tables_url(), json=create_request(name))
    start = threading.Barrier(6)

    def writer(number: int) -> list[tuple[str, int, str]]:
        own = app.test_client()
        start.wait()
        outcomes = []
        for step in range(6):
            name = names[(number + step) % 3]
            if step % 2:
                response = append(own, table_url(name), number * 100 + step + 1, 1, None)  # 409 once main exists
            else:
                body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {f"w{number}": "x"}}]}
                response = own.post(table_url(name), json=body)
            location = response.json().get("metadata-location", "") if response.status_code == 200 else ""
            outcomes.append((name, response.status_code, location))
        return outcomes

    with ThreadPoolExecutor(6) as pool:
        outcomes = [o for result in pool.map(writer, range(6)) for o in result]
    assert {status for _, status, _ in outcomes} <= {200, 409}
    acknowledged = sorted(location for _, status, location in outcomes if status == 200)
    updates = [e for e in everything(client) if e["operation"]["operation-type"] == "update-table"]
    assert sorted(e["operation"]["metadata-location"] for e in updates) == acknowledged  # one each, none else
    for name in names:
        metadata = client.get(table_url(name)).json()
        log = [entry["metadata-file"] for entry in metadata["metadata"]["metadata-log"]]
        chain = [*log, metadata["metadata-location"]][1:]  # after the create's version
        mine = [e["operation"] for e in updates if e["operation"]["identifier"]["name"] == name]
        assert [op["metadata-location"] for op in mine] == chain
        assert [op["previous-metadata-location"] for op in mine] == [*log][: len(chain)]


def test_a_commit_whose_connection_broke_has_its_event_exactly_if_it_took_effect(client, app, db, monkeypatch):
    from storage.entries import CommitOutcomeUnknown

    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    repository = services_of(app.app).tables.repository
    real_swap = repository.swap_metadata
    applied = []

    def swap_then_break(swaps, before_commit, events):
        if applied[-1]:
            real_swap(swaps, before_commit=before_commit, events=events)
        raise CommitOutcomeUnknown("server closed the connection unexpectedly")

    monkeypatch.setattr(repository, "swap_metadata", swap_then_break)
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    applied.append(True)
    assert client.post(table_url("t"), json=body).status_code == 200  # the outcome is looked up: it took effect
    applied.append(False)  # never took effect: looked up as a lost race, retried, and refused in the end
    body["updates"][0]["updates"]["a"] = "2"
    assert client.post(table_url("t"), json=body).status_code == 409
    monkeypatch.undo()
    assert types(everything(client)) == ["create-namespace", "create-table", "update-table"]


def test_a_commit_retried_on_the_server_writes_one_event(client, app, monkeypatch):
    """The first compare-and-set loses (forced: as when another writer got there first), the server
    retries, and only the winning attempt's transaction writes an event."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    service = services_of(app.app).tables
    real_swap = service.repository.swap_metadata
    attempts = []

    def lose_the_first(swaps, before_commit, events):
        attempts.append([event.event_id for event in events])
        if len(attempts) == 1:
            return False
        return real_swap(swaps, before_commit=before_commit, events=events)

    monkeypatch.setattr(service.repository, "swap_metadata", lose_the_first)
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"mine": "1"}}]}
    assert client.post(table_url("t"), json=body).status_code == 200
    monkeypatch.undo()
    assert len(attempts) == 2 and attempts[0] != attempts[1]  # each attempt had its own event
    updates = [e for e in everything(client) if e["operation"]["operation-type"] == "update-table"]
    assert [e["event-id"] for e in updates] == attempts[1]  # only the winner's


def test_a_failure_after_the_swap_before_the_commit_writes_no_event(client, app, monkeypatch):
    """The metadata file's write fails while the swap waits for it: the transaction rolls back."""
    from app.ground.errors import ServiceUnavailable

    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    tables = services_of(app.app).tables

    def fail(*_args):
        raise ServiceUnavailable("Object storage is unavailable, retry later")

    monkeypatch.setattr(tables.objects, "write_new", fail)
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    assert client.post(table_url("t"), json=body).status_code == 503
    monkeypatch.undo()
    assert types(everything(client)) == ["create-namespace", "create-table"]


def test_pages_polling_and_filters(client):
    for namespace in (["a"], ["a", "b"], ["c"]):
        client.post(f"{PREFIX}/namespaces", json={"namespace": namespace})
    made = {}
    for namespace, name in (("a", "t"), ("a%1Fb", "t"), ("c", "v")):
        made[(namespace, name)] = client.post(tables_url(namespace), json=create_request(name)).json()
    # pages of two, to the end, then a poll that finds nothing, then one that finds what came since
    pages, token = [], None
    for _ in range(10):
        page = feed(client, **{"page-size": 2, **({"continuation-token": token} if token else {})})
        token = page["continuation-token"]
        if not page["events"]:
            break
        pages.append(len(page["events"]))
    assert pages == [2, 2, 2]
    assert feed(client, **{"continuation-token": token})["events"] == []
    client.post(f"{PREFIX}/namespaces/c/properties", json={"updates": {"x": "1"}})
    polled = feed(client, **{"continuation-token": token})
    assert types(polled["events"]) == ["update-namespace-properties"]

    by_type = everything(client, **{"operation-types": ["create-table"]})
    assert [e["operation"]["identifier"]["namespace"] for e in by_type] == [["a"], ["a", "b"], ["c"]]
    assert types(everything(client, **{"object-types": ["namespace"]})) == ["create-namespace"] * 3 + [
        "update-namespace-properties"
    ]
    under_a = everything(client, **{"catalog-objects-by-name": [["a"]]})
    assert len(under_a) == 4  # namespaces a and a.b, tables a.t and a.b.t
    exact = everything(client, **{"catalog-objects-by-name": [["a", "b", "t"]]})
    assert types(exact) == ["create-table"]
    table_uuid = made[("c", "v")]["metadata"]["table-uuid"]
    by_uuid = everything(client, **{"catalog-objects-by-uuid": [table_uuid]})
    assert [e["operation"]["table-uuid"] for e in by_uuid] == [table_uuid]
    last = polled["events"][0]["timestamp-ms"]
    assert types(everything(client, **{"since-timestamp-ms": last})) == ["update-namespace-properties"]
    # a filter that matches nothing still moves the token to the end: the next poll is cheap
    empty = feed(client, **{"operation-types": ["drop-view"]})
    assert empty["events"] == [] and feed(client, **{"continuation-token": empty["continuation-token"]})["events"] == []


def test_a_reader_sees_only_the_events_of_what_it_may_read(client, principals):
    for namespace in ("a", "c"):
        client.post(f"{PREFIX}/namespaces", json={"namespace": [namespace]})
        client.post(tables_url(namespace), json=create_request("t"))
    reader = principals.new("events")
    principals.grant(reader, "read", "namespace", WAREHOUSE, ("a",))
    seen = everything(reader.client)
    assert types(seen) == ["create-namespace", "create-table"]
    assert all(
        ("a" in e["operation"].get("namespace", [])) or e["operation"]["identifier"]["namespace"] == ["a"] for e in seen
    )
    stranger = principals.new("stranger")
    refused = stranger.client.post(EVENTS, json={})
    assert refused.status_code == 403


def test_a_token_past_the_retention_is_gone(client, app):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    token = feed(client)["continuation-token"]
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["other"]})
    rows = EventRows(services_of(app.app).events.rows.db)
    assert rows.prune(0) == 2
    gone = client.post(EVENTS, json={"continuation-token": token})
    assert gone.status_code == 410 and gone.json()["error"]["code"] == 410
    fresh = feed(client)  # starting again without a token works
    assert fresh["events"] == [] and feed(client, **{"continuation-token": fresh["continuation-token"]})["events"] == []


@pytest.mark.parametrize(
    "body",
    [
        {"continuation-token": "not-a-token"},
        {"page-size": 0},
        {"operation-types": ["explode-table"]},
        {"object-types": ["function"]},
        {"catalog-objects-by-uuid": ["not-a-uuid"]},
        {"custom-filters": {"x": 1}},
        {"unknown-field": 1},
        {"catalog-objects-by-name": [[]]},
    ],
)
def test_bad_input_is_400(client, body):
    response = client.post(EVENTS, json=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "BadRequestException"


def test_the_endpoint_is_advertised(client):
    assert "POST /v1/{prefix}/events" in client.get("/v1/config", params={"warehouse": "test"}).json()["endpoints"]


def test_management_changes_are_recorded_on_the_installation_stream(client, db):
    stream = "SELECT operation->>'custom-type', operation->'properties' FROM change_event WHERE stream = 0"
    db.execute("DELETE FROM change_event WHERE stream = 0")
    role = f"feed-{uuid.uuid4().hex[:8]}"
    assert client.post("/management/v1/roles", json={"name": role}).status_code == 201
    assert client.post("/management/v1/roles", json={"name": role}).status_code == 409  # refused: none
    assert client.delete(f"/management/v1/roles/{role}").status_code == 204
    assert db.execute(stream + " ORDER BY position").fetchall() == [
        ("x-create-role", {"role": role}),
        ("x-delete-role", {"role": role}),
    ]
    assert feed(client)["events"] == []  # not served by a warehouse's feed

    db.execute("DELETE FROM change_event WHERE stream = 0")
    name = f"feed-{uuid.uuid4().hex[:8]}"
    created = client.post("/management/v1/principals", json={"name": name})
    assert created.status_code == 201, created.text
    assert client.post(f"/management/v1/principals/{name}/rotate").status_code == 200
    assert client.delete(f"/management/v1/principals/{name}").status_code == 204
    recorded = db.execute("SELECT operation::text FROM change_event WHERE stream = 0 ORDER BY position").fetchall()
    assert db.execute(stream + " ORDER BY position").fetchall() == [
        ("x-create-principal", {"principal": name, "admin": False}),
        ("x-rotate-principal", {"principal": name}),
        ("x-delete-principal", {"principal": name}),
    ] and not any(created.json()["client-secret"] in row[0] for row in recorded)


def test_the_recycle_bin_and_protection_record_their_changes(client, db):
    """A soft drop, an undrop under a new name, a recursive namespace drop, an administrator's
    purge and protection marks each write their event with the change (issue 35 on issue 36)."""
    from tests.api.bin_support import protect, undrop, unit_of, unprotect

    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert client.post(tables_url(), json=create_request("t")).status_code == 200
    assert client.delete(table_url("t")).status_code == 204
    assert undrop(client, unit_of(client, "t")["id"], name="t2").status_code == 200
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db", "inner"]}).status_code == 200
    dropped = client.delete(f"/management/v1/warehouses/{WAREHOUSE}/namespaces/db", params={"recursive": "true"})
    assert dropped.status_code == 200, dropped.text
    assert client.delete(f"/management/v1/warehouses/{WAREHOUSE}/bin/{dropped.json()['id']}").status_code == 204

    operations = [event["operation"] for event in everything(client)]
    kinds = [(o["operation-type"], o.get("custom-type")) for o in operations]
    assert kinds[-5:] == [
        ("drop-table", None),
        ("custom", "x-undrop-table"),
        ("create-namespace", None),
        ("drop-namespace", None),
        ("custom", "x-purge-namespace"),
    ]
    assert operations[-4]["identifier"] == {"namespace": ["db"], "name": "t2"}
    assert operations[-4]["origin"] == ["db"]
    assert operations[-2]["recursive"] is True

    stream = "SELECT operation->>'custom-type' FROM change_event WHERE stream = 0 ORDER BY position"
    db.execute("DELETE FROM change_event WHERE stream = 0")
    assert protect(client, "warehouse").status_code == 204
    assert unprotect(client, "warehouse").status_code == 204
    assert [row[0] for row in db.execute(stream).fetchall()] == ["x-protect", "x-unprotect"]
