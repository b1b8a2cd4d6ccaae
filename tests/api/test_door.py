"""The operation door answers exactly as the full connexion + Flask stack does.

The same requests go to an app with the door (``fast_reads`` on) and to one without it, whose
responses connexion validates against the yaml; status, headers and body must be identical byte
for byte. A spy proves the door served the requests it should and left the others to connexion.
"""

from __future__ import annotations

import dataclasses
import json
import re
import uuid

import pytest

from app.edge.door import SERVED, OperationDoor
from app.edge.factory import load_spec
from app.edge.loop_reads import ListEntriesOnLoop, ListNamespacesOnLoop, LoadNamespaceOnLoop
from app.edge.operations import RouteTable
from app.edge.resolver import find_handler
from tests.api.tables_support import PREFIX, VARYING_HEADERS, assert_same_answer, create_request, table_url, tables_url
from tests.api.test_views import view_request
from tests.conftest import authenticated


@pytest.fixture(scope="module")
def full_stack_client(settings):
    from app.edge.factory import create_app

    return authenticated(create_app(dataclasses.replace(settings, fast_reads=False))).test_client()


@pytest.fixture(scope="module")
def door_client(settings):
    from app.edge.factory import create_app

    with authenticated(create_app(settings)).test_client() as client:
        yield client


@pytest.fixture
def client(door_client, clean_catalog):
    return door_client


@pytest.fixture
def on_the_loop(monkeypatch) -> list[str]:
    """The operations answered on the event loop (loadNamespaceMetadata and the listings)."""
    calls: list[str] = []
    for read in (LoadNamespaceOnLoop, ListNamespacesOnLoop, ListEntriesOnLoop):

        def spy_of(original):
            async def spy(self, kwargs, headers, in_thread):
                rendered = await original(self, kwargs, headers, in_thread)
                if rendered is not None:
                    calls.append(self.operation_id)
                return rendered

            return spy

        monkeypatch.setattr(read, "__call__", spy_of(read.__call__))
    return calls


@pytest.fixture
def served(monkeypatch, on_the_loop) -> list[str]:
    """The operations the door answered (in its thread or on the event loop), in order."""
    calls = on_the_loop
    original = OperationDoor._answer

    def spy(self, operation, kwargs, scope, data):
        answer = None
        try:
            answer = original(self, operation, kwargs, scope, data)
        except Exception:  # an error the handler raised: the door served it
            answer = ()
            raise
        finally:
            if answer is not None:  # None: a body the door hands to connexion
                calls.append(operation.operation_id)
        return answer

    monkeypatch.setattr(OperationDoor, "_answer", spy)
    return calls


@pytest.fixture
def catalog(client) -> None:
    for namespace in (["db"], ["db", "nested"], ["other"]):
        body = {"namespace": namespace, "properties": {"owner": "door"}}
        assert client.post(f"{PREFIX}/namespaces", json=body).status_code == 200
    for name in ("events", "clicks"):
        assert client.post(f"{PREFIX}/namespaces/db/tables", json=create_request(name)).status_code == 200
    assert client.post(f"{PREFIX}/namespaces/db/views", json=view_request("daily")).status_code == 200


def _same(door, full) -> None:
    assert_same_answer(door, full)


SERVED_REQUESTS = [
    ("GET", "/v1/config", "getConfig", 200),
    ("GET", "/v1/config?warehouse=test", "getConfig", 200),
    ("GET", "/v1/config?warehouse=nowhere", "getConfig", 404),
    ("GET", f"{PREFIX}/namespaces", "listNamespaces", 200),
    ("GET", f"{PREFIX}/namespaces?parent=db", "listNamespaces", 200),
    ("GET", f"{PREFIX}/namespaces?pageSize=1", "listNamespaces", 200),
    ("GET", f"{PREFIX}/namespaces?pageToken=", "listNamespaces", 200),
    ("GET", f"{PREFIX}/namespaces?pageToken=null&pageSize=2", "listNamespaces", 200),
    ("GET", f"{PREFIX}/namespaces?pageToken=not-a-token", "listNamespaces", 400),
    ("GET", f"{PREFIX}/namespaces?parent=missing", "listNamespaces", 404),
    ("GET", "/v1/namespaces", "listNamespaces", 200),  # unprefixed: the default warehouse
    ("GET", "/v1/no-such-warehouse/namespaces", "listNamespaces", 404),
    ("GET", f"{PREFIX}/namespaces/db", "loadNamespaceMetadata", 200),
    ("GET", f"{PREFIX}/namespaces/db%1Fnested", "loadNamespaceMetadata", 200),
    ("GET", f"{PREFIX}/namespaces/missing", "loadNamespaceMetadata", 404),
    ("HEAD", f"{PREFIX}/namespaces/db", "namespaceExists", 204),
    ("HEAD", f"{PREFIX}/namespaces/missing", "namespaceExists", 404),
    ("GET", f"{PREFIX}/namespaces/db/tables", "listTables", 200),
    ("GET", f"{PREFIX}/namespaces/db/tables?pageSize=1", "listTables", 200),
    ("GET", f"{PREFIX}/namespaces/missing/tables", "listTables", 404),
    ("HEAD", f"{PREFIX}/namespaces/db/tables/events", "tableExists", 204),
    ("HEAD", f"{PREFIX}/namespaces/db/tables/missing", "tableExists", 404),
    ("GET", f"{PREFIX}/namespaces/db/tables/events/credentials", "loadCredentials", 200),
    ("GET", f"{PREFIX}/namespaces/db/tables/missing/credentials", "loadCredentials", 404),
    ("GET", f"{PREFIX}/namespaces/db/views", "listViews", 200),
    ("GET", f"{PREFIX}/namespaces/db/views/daily", "loadView", 200),
    ("GET", f"{PREFIX}/namespaces/db/views/daily?referenced-by=db%1Fouter", "loadView", 200),
    ("GET", f"{PREFIX}/namespaces/db/views/missing", "loadView", 404),
    ("HEAD", f"{PREFIX}/namespaces/db/views/daily", "viewExists", 204),
    ("HEAD", f"{PREFIX}/namespaces/db/views/events", "viewExists", 404),
    ("GET", f"{PREFIX}/namespaces/db/functions", "listFunctions", 200),
    ("GET", f"{PREFIX}/namespaces/db/functions/missing", "loadFunction", 404),
]


@pytest.mark.parametrize(("method", "path", "operation_id", "status"), SERVED_REQUESTS)
def test_the_door_answers_like_the_full_stack(
    client, full_stack_client, catalog, served, method, path, operation_id, status
):
    door = client.request(method, path)
    full = full_stack_client.request(method, path)
    assert door.status_code == status
    _same(door, full)
    assert served == [operation_id]


def test_every_operation_the_door_serves_is_covered():
    reads = {operation_id for _, _, operation_id, _ in SERVED_REQUESTS}
    writes = {operation_id for _, _, _, operation_id, _ in SERVED_WRITES}
    assert reads | writes == SERVED


def test_pages_follow_on_both_paths(client, full_stack_client, catalog, served):
    url = f"{PREFIX}/namespaces/db/tables?pageSize=1&pageToken="
    first = client.get(url)
    token = first.json()["next-page-token"]
    _same(first, full_stack_client.get(url))
    following = f"{PREFIX}/namespaces/db/tables?pageSize=1&pageToken={token}"
    second = client.get(following)
    _same(second, full_stack_client.get(following))
    assert [first.json()["identifiers"], second.json()["identifiers"]] == [
        [{"namespace": ["db"], "name": "clicks"}],
        [{"namespace": ["db"], "name": "events"}],
    ]
    assert served == ["listTables"] * 2


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", f"{PREFIX}/namespaces?pageSize=0", 400),  # minimum 1: connexion's message
        ("GET", f"{PREFIX}/namespaces?pageSize=abc", 400),
        ("GET", f"{PREFIX}/namespaces?pageSize=+1", 200),  # int() takes it; the door leaves it to connexion
        ("GET", f"{PREFIX}/namespaces?pageSize=01", 200),
        ("GET", f"{PREFIX}/namespaces?extra=1", 400),  # strict validation
        ("GET", f"{PREFIX}/namespaces?parent=db&parent=other", 200),  # repeated key
        ("GET", f"{PREFIX}/namespaces/d%62", 200),  # an escape other than the separator
        ("GET", f"{PREFIX}/namespaces/", 307),  # a trailing slash: the router redirects
        ("POST", f"{PREFIX}/namespaces/db/properties", 400),  # a write (and no body)
    ],
)
def test_anything_else_goes_through_connexion(client, full_stack_client, catalog, served, method, path, status):
    door = client.request(method, path, follow_redirects=False)
    assert door.status_code == status
    _same(door, full_stack_client.request(method, path, follow_redirects=False))
    assert served == []


def test_a_get_with_a_body_goes_through_connexion(client, full_stack_client, catalog, served):
    door = client.request("GET", f"{PREFIX}/namespaces/db", content=b"{}")
    _same(door, full_stack_client.request("GET", f"{PREFIX}/namespaces/db", content=b"{}"))
    assert served == []


def test_the_request_is_logged_and_counted_as_its_operation(client, catalog, served, capfd):
    capfd.readouterr()
    client.get(f"{PREFIX}/namespaces/db%1Fnested", headers={"X-Request-Id": "door-log-check"})
    lines = [line for line in capfd.readouterr().err.splitlines() if "door-log-check" in line]
    assert len(lines) == 1
    assert '"operation":"loadNamespaceMetadata"' in lines[0] and '"status":200' in lines[0]
    assert '"namespace":"db.nested"' in lines[0] or '"namespace":"db\\u001fnested"' in lines[0]
    assert served == ["loadNamespaceMetadata"]
    assert 'operation="loadNamespaceMetadata"' in client.get("/metrics").text


def test_the_route_table_routes_every_operation_of_the_spec_to_itself():
    """Each path template with sample values finds its own operation: literal segments win over
    parameters (``/tables/rename`` is not a table named "rename"), as in connexion's router."""
    spec = load_spec()
    routes = RouteTable.compile(spec, find_handler)
    checked = 0
    for template, item in spec["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "put", "post", "delete", "head", "patch"):
                continue
            path = "/".join("x1" if part.startswith("{") else part for part in template.split("/"))
            found = routes.match(method.upper(), path)
            assert found is not None and found[0].operation_id == operation["operationId"], (method, template)
            checked += 1
    assert checked == len(routes.operations()) > 30


# -- writes ------------------------------------------------------------------------------------

_SET_PROPERTY = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]}

_REPORT = {
    "report-type": "commit-report",
    "table-name": "db.missing",
    "snapshot-id": 1,
    "sequence-number": 1,
    "operation": "append",
    "metrics": {},
}
_NOWHERE = {"namespace": ["missing"], "name": "t"}
_REGISTER = {"name": "t", "metadata-location": "s3://growler-test-warehouse/nowhere/00000-x.metadata.json"}
_VIEWS = f"{PREFIX}/namespaces/db/views"

# (method, path, body, operation, status): answers that change nothing, so both apps give the
# same bytes from the same catalog
SERVED_WRITES = [
    ("POST", f"{PREFIX}/namespaces", {"namespace": ["db"]}, "createNamespace", 409),
    ("DELETE", f"{PREFIX}/namespaces/missing", None, "dropNamespace", 404),
    ("DELETE", f"{PREFIX}/namespaces/db", None, "dropNamespace", 409),  # not empty
    ("POST", f"{PREFIX}/namespaces/missing/properties", {"updates": {"a": "1"}}, "updateProperties", 404),
    ("POST", f"{PREFIX}/namespaces/missing/register", _REGISTER, "registerTable", 404),
    ("DELETE", table_url("missing"), None, "dropTable", 404),
    ("POST", table_url("missing") + "/unregister", None, "unregisterTable", 404),
    ("POST", f"{PREFIX}/tables/rename", {"source": _NOWHERE, "destination": _NOWHERE}, "renameTable", 404),
    ("POST", table_url("missing") + "/metrics", _REPORT, "reportMetrics", 404),
    (
        "POST",
        f"{PREFIX}/transactions/commit",
        {"table-changes": [{"identifier": _NOWHERE, "requirements": [], "updates": []}]},
        "commitTransaction",
        404,
    ),
    ("POST", _VIEWS, view_request("daily"), "createView", 409),
    ("POST", _VIEWS, view_request("events"), "createView", 409),  # a table's name
    ("POST", f"{PREFIX}/namespaces/missing/register-view", _REGISTER, "registerView", 404),
    ("POST", f"{_VIEWS}/missing", {"requirements": [], "updates": []}, "replaceView", 404),
    ("DELETE", f"{_VIEWS}/missing", None, "dropView", 404),
    ("POST", f"{PREFIX}/views/rename", {"source": _NOWHERE, "destination": _NOWHERE}, "renameView", 404),
    ("POST", tables_url("missing"), create_request("t"), "createTable", 404),
    ("POST", tables_url(), create_request("events"), "createTable", 409),
    ("POST", tables_url(), create_request("daily"), "createTable", 409),  # a view's name
    ("POST", table_url("missing"), _SET_PROPERTY, "updateTable", 404),
    ("POST", table_url("events"), {"requirements": [], "updates": []}, "updateTable", 200),
    (
        "POST",
        table_url("events"),
        {"requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.UUID(int=7))}], "updates": []},
        "updateTable",
        409,
    ),
    (
        "POST",
        table_url("events"),
        {"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 1}], "updates": []},
        "updateTable",
        409,
    ),
]


@pytest.mark.parametrize(("method", "path", "body", "operation_id", "status"), SERVED_WRITES)
def test_the_door_writes_like_the_full_stack(
    client, full_stack_client, catalog, served, method, path, body, operation_id, status
):
    door = client.request(method, path, json=body)
    full = full_stack_client.request(method, path, json=body)
    assert door.status_code == status, door.text
    assert served == [operation_id]
    served.clear()
    _same(door, full)
    assert served == []  # the full stack's app has no door


_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")


def _without_identity(response) -> dict:
    """The answer with what differs between two creates of one table made apart: uuids (the
    table's, its files' and location's) and times, which the two apps cannot share."""
    text = _UUID.sub("<uuid>", response.text)
    return json.loads(re.sub(r'("(?:last-updated-ms|timestamp-ms)":)\d+', r'\1"<ms>"', text))


def _headers(response) -> dict:
    return {k: v for k, v in response.headers.items() if k not in VARYING_HEADERS | {"etag"}}


def test_a_create_and_a_commit_through_the_door_answer_as_the_full_stacks_do(
    client, full_stack_client, catalog, served
):
    made = {}
    for name, app_client in (("door", client), ("full", full_stack_client)):
        created = app_client.post(tables_url(), json=create_request("fresh"))
        committed = app_client.post(table_url("fresh"), json=_SET_PROPERTY)
        assert created.status_code == committed.status_code == 200, (created.text, committed.text)
        assert created.headers["etag"] and committed.headers["etag"]
        made[name] = (created, committed)
        assert app_client.delete(table_url("fresh") + "?purgeRequested=true").status_code == 204
    assert served == ["createTable", "updateTable", "dropTable"]
    for door, full in zip(made["door"], made["full"], strict=True):
        assert _without_identity(door) == _without_identity(full)
        assert _headers(door) == _headers(full)


def test_a_write_the_door_took_is_replayed_by_the_full_stack_and_back(client, full_stack_client, catalog, served):
    """Idempotency-Key: the answer one path stored is the one the other replays, byte for byte."""
    for first_client, second_client, name in ((client, full_stack_client, "a"), (full_stack_client, client, "b")):
        headers = {"Idempotency-Key": str(uuid.uuid4())}
        first = first_client.post(tables_url(), json=create_request(name), headers=headers)
        replayed = second_client.post(tables_url(), json=create_request(name), headers=headers)
        assert first.status_code == replayed.status_code == 200
        assert replayed.content == first.content
        assert replayed.headers.get("Idempotent-Replayed") == "true"
    assert served == ["createTable", "createTable"]


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        ({"schema": {"type": "struct", "fields": []}}, {}, 400),  # no name: connexion's message
        ({"name": "t", "schema": {"type": "struct", "fields": []}, "extra": "x" * 70_000}, {}, 404),  # over 64 KB
        (None, {"content-type": "text/plain"}, 415),
    ],
)
def test_bodies_the_door_does_not_take_go_to_connexion(
    client, full_stack_client, catalog, served, body, headers, status
):
    def send(app_client):
        if body is None:
            return app_client.post(tables_url("missing"), content=b"{}", headers=headers)
        return app_client.post(tables_url("missing"), json=body, headers=headers)

    door = send(client)
    assert door.status_code == status, door.text
    _same(door, send(full_stack_client))
    assert served == []


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (f"{PREFIX}/namespaces/db", None),  # a read the door answers in its thread
        (f"{PREFIX}/namespaces/db/properties", {"updates": {"a": "1"}}),  # a write
    ],
)
def test_an_answer_the_yaml_does_not_allow_is_refused_on_both_paths(
    client, full_stack_client, catalog, served, monkeypatch, path, body
):
    """GROWLER_VALIDATE_RESPONSES (on in the tests): the door checks its answers as connexion does."""
    from app.edge import loop_reads
    from app.namespaces import NamespaceService

    def broken(*_args):
        return {"namespace": "db", "properties": {}}  # the namespace must be an array

    monkeypatch.setattr(loop_reads, "namespace_answer", broken)  # on the event loop
    monkeypatch.setattr(NamespaceService, "load_namespace", broken)  # in a thread
    monkeypatch.setattr(NamespaceService, "update_namespace_properties", lambda *_args: {"updated": "a"})
    door = client.request("GET" if body is None else "POST", path, json=body)
    assert door.status_code == 500, door.text
    _same(door, full_stack_client.request("GET" if body is None else "POST", path, json=body))
    assert len(served) == 1


def _who_answers(monkeypatch, loop_read: type) -> list[str]:
    """What answers each request from now on: ``loop_read`` on the event loop ("<operationId> on
    the loop", or "loop: none" when it leaves the request to the handler) and the door's thread."""
    answered: list[str] = []
    original_loop, original_thread = loop_read.__call__, OperationDoor._answer

    async def loop_spy(self, kwargs, headers, in_thread):
        rendered = await original_loop(self, kwargs, headers, in_thread)
        answered.append(f"{self.operation_id} on the loop" if rendered is not None else "loop: none")
        return rendered

    def thread_spy(self, operation, kwargs, scope, data):
        answered.append("thread")
        return original_thread(self, operation, kwargs, scope, data)

    monkeypatch.setattr(loop_read, "__call__", loop_spy)
    monkeypatch.setattr(OperationDoor, "_answer", thread_spy)
    return answered


def test_a_namespace_is_read_on_the_event_loop_and_a_missing_one_in_a_thread(client, catalog, monkeypatch):
    answered = _who_answers(monkeypatch, LoadNamespaceOnLoop)
    assert client.get(f"{PREFIX}/namespaces/db%1Fnested").json()["namespace"] == ["db", "nested"]
    assert client.get(f"{PREFIX}/namespaces/missing").status_code == 404
    assert answered == ["loadNamespaceMetadata on the loop", "loop: none", "thread"]


def test_namespaces_are_listed_on_the_event_loop_and_what_the_handler_must_judge_in_a_thread(
    client, full_stack_client, catalog, monkeypatch
):
    answered = _who_answers(monkeypatch, ListNamespacesOnLoop)
    first = client.get(f"{PREFIX}/namespaces?pageSize=1&pageToken=")
    token = first.json()["next-page-token"]
    second = client.get(f"{PREFIX}/namespaces?pageSize=1&pageToken={token}")
    nested = client.get(f"{PREFIX}/namespaces?parent=db")
    assert [first.json()["namespaces"], second.json()["namespaces"], nested.json()["namespaces"]] == [
        [["db"]],
        [["other"]],
        [["db", "nested"]],
    ]
    assert answered == ["listNamespaces on the loop"] * 3
    for response, path in (
        (first, "namespaces?pageSize=1&pageToken="),
        (second, f"namespaces?pageSize=1&pageToken={token}"),
        (nested, "namespaces?parent=db"),
    ):
        _same(response, full_stack_client.get(f"{PREFIX}/{path}"))
    answered.clear()
    assert client.get(f"{PREFIX}/namespaces?parent=missing").status_code == 404
    assert client.get(f"{PREFIX}/namespaces?pageToken=not-a-token").status_code == 400
    assert answered == ["loop: none", "thread"] * 2


def test_tables_and_views_are_listed_on_the_event_loop_and_what_the_handler_must_judge_in_a_thread(
    client, full_stack_client, catalog, monkeypatch
):
    answered = _who_answers(monkeypatch, ListEntriesOnLoop)
    paths = [
        "namespaces/db/tables",
        "namespaces/db/tables?pageSize=1&pageToken=",
        "namespaces/db/views?pageToken=",
        "namespaces/db%1Fnested/tables",
    ]
    for path in paths:
        _same(client.get(f"{PREFIX}/{path}"), full_stack_client.get(f"{PREFIX}/{path}"))
    assert answered == [
        "listTables on the loop",
        "listTables on the loop",
        "listViews on the loop",
        "listTables on the loop",
    ]
    answered.clear()
    namespace_token = client.get(f"{PREFIX}/namespaces?pageSize=1&pageToken=").json()["next-page-token"]
    for path, status in (("namespaces/missing/tables", 404), (f"namespaces/db/views?pageToken={namespace_token}", 400)):
        door = client.get(f"{PREFIX}/{path}")
        assert door.status_code == status
        _same(door, full_stack_client.get(f"{PREFIX}/{path}"))
    assert answered == ["loop: none", "thread"] * 2
