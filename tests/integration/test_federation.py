"""Federated warehouses (issue 50) against a real remote: Iceberg's own REST catalog server
(``RESTCatalogServer`` of iceberg-open-api's test fixtures, a JDBC catalog on SQLite and a local
warehouse directory), started once for the module, and tiny local HTTP servers for what a real
catalog does not do on demand (answer garbage, record what it was sent, die).

Through the suite's gunicorn server (authentication on), with PyIceberg and plain HTTP: tables
created, appended to and read back through Growler exist on the remote; grants hide what the
remote would show; a read-only federation refuses writes and writes nothing; garbage is a 502, a
dead remote a quick 503 with Retry-After and then an open circuit breaker; Growler's credential
toward the remote reaches the remote only, never the caller's token.

The server's jars (Jetty, sqlite-jdbc: bench/java/pom.xml) are fetched by ``make rest-reference``
(``make test-deps``) into ``.cache/bench-java-<version>/libs``; ``GROWLER_REST_REFERENCE_LIBS``
names another directory. Missing jars are an error, not a skip.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import psycopg
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.conftest import TEST_CREDENTIAL, TEST_SECRETS_KEY
from tests.integration.proc_support import wait_for

MANAGEMENT = "/management/v1"
SETTLE_S = 10  # grants reach every worker within a poll (twice a second)
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType(), required=False))


class TinyRemote:
    """A local HTTP server answering every request with ``answer(handler)`` -> (status, bytes),
    recording (method, path, headers, body) of each request."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler, bytes], tuple[int, bytes]]) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        recorded = self.requests

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorded.append((self.command, self.path, dict(self.headers.items()), body))
                status, data = answer(self, body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_HEAD = do_DELETE = _serve  # noqa: N815

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# -- fixtures --------------------------------------------------------------------------------------


def _create_warehouse(server, federation: dict[str, Any]) -> str:
    name = f"fed-{uuid.uuid4().hex[:10]}"
    response = httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json={"name": name, "federation": federation})
    assert response.status_code == 201, response.text
    return name


@pytest.fixture(scope="module")
def federated(server, reference) -> str:
    return _create_warehouse(server, {"uri": reference.url, "warehouse": "remote", "timeout-ms": 5000})


def _catalog(server, warehouse: str, credential: str = TEST_CREDENTIAL) -> RestCatalog:
    return RestCatalog("growler", uri=server.url, warehouse=warehouse, credential=credential)


def _principal(server) -> tuple[str, str, dict[str, str]]:
    """A new principal with a role of its own and no grants: (name, role, its auth header)."""
    name, role, secret = new_principal(server)
    token = httpx.post(
        f"{server.url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": name, "client_secret": secret},
    )
    assert token.status_code == 200, token.text
    return name, role, {"Authorization": f"Bearer {token.json()['access_token']}"}


def new_principal(server) -> tuple[str, str, str]:
    """A new principal with a role of its own and no grants: (name, role, its client secret)."""
    name = f"fed-user-{uuid.uuid4().hex[:8]}"
    created = httpx.post(f"{server.url}{MANAGEMENT}/principals", json={"name": name})
    assert created.status_code == 201, created.text
    role = f"role-{name}"
    assert httpx.post(f"{server.url}{MANAGEMENT}/roles", json={"name": role}).status_code == 201
    assert httpx.put(f"{server.url}{MANAGEMENT}/roles/{role}/members/{name}").status_code == 204
    return name, role, created.json()["client-secret"]


def _grant(server, role: str, privilege: str, securable: dict[str, Any]) -> None:
    body = {"privilege": privilege, "securable": securable}
    response = httpx.post(f"{server.url}{MANAGEMENT}/roles/{role}/grants", json=body)
    assert response.status_code == 201, response.text


# -- the catalog through Growler -------------------------------------------------------------------


def test_pyiceberg_creates_appends_and_reads_a_table_that_lives_on_the_remote(server, reference, federated):
    catalog = _catalog(server, federated)
    catalog.create_namespace("sales")
    table = catalog.create_table(("sales", "orders"), schema=SCHEMA)
    table.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=SCHEMA.as_arrow()))

    loaded = _catalog(server, federated).load_table(("sales", "orders"))
    assert sorted(loaded.scan().to_arrow().to_pylist(), key=lambda row: row["id"]) == [
        {"id": 1, "name": "a"},
        {"id": 2, "name": "b"},
        {"id": 3, "name": "c"},
    ]
    assert catalog.list_tables("sales") == [("sales", "orders")]
    # the table is the remote's: it answers it directly, with the snapshot the append made
    direct = reference.get("namespaces/sales/tables/orders")
    assert direct.status_code == 200, direct.text
    assert direct.json()["metadata"]["current-snapshot-id"] == loaded.metadata.current_snapshot_id
    assert direct.json()["metadata-location"] == loaded.metadata_location
    # and Growler holds no native row of it
    assert httpx.get(f"{server.url}/v1/{server.warehouse}/namespaces/sales").status_code == 404


def test_a_table_loaded_again_is_validated_with_the_references_etag(server, reference, federated):
    """Iceberg's reference server gives loadTable an ETag and answers If-None-Match with 304: a
    worker's next load of a table is the remote's 304 to the kept answer (app/federation/cache.py);
    at most one load a worker is the remote's full answer."""
    catalog = _catalog(server, federated)
    catalog.create_namespace("validated")
    catalog.create_table(("validated", "t"), schema=SCHEMA)
    url = f"{server.url}/v1/{federated}/namespaces/validated/tables/t"
    assert "ETag" in reference.get("namespaces/validated/tables/t").headers
    workers = int(os.environ.get("GROWLER_TEST_WORKERS", "2"))  # each keeps its own answers
    before = _table_loads(server)
    with httpx.Client() as client:
        loads = [client.get(url) for _ in range(10)]
    assert all(load.status_code == 200 and load.json() == loads[0].json() for load in loads)
    after = _table_loads(server)
    assert after.get("remote", 0) - before.get("remote", 0) <= workers
    assert after.get("validated", 0) - before.get("validated", 0) >= 10 - workers


def _table_loads(server) -> dict[str, float]:
    """growler_federation_table_loads_total by source, from the server's metrics."""
    counts: dict[str, float] = {}
    for line in httpx.get(f"{server.url}/metrics").text.splitlines():
        if line.startswith("growler_federation_table_loads_total{"):
            source = line.split('source="', 1)[1].split('"', 1)[0]
            counts[source] = float(line.rsplit(" ", 1)[1])
    return counts


def test_views_are_created_listed_loaded_renamed_and_dropped_on_the_remote(server, reference, federated):
    views = f"{server.url}/v1/{federated}/namespaces/sales/views"
    body = {
        "name": "recent",
        "schema": {
            "type": "struct",
            "schema-id": 0,
            "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
        },
        "view-version": {
            "version-id": 1,
            "timestamp-ms": int(time.time() * 1000),
            "schema-id": 0,
            "summary": {"engine-name": "test"},
            "representations": [{"type": "sql", "sql": "SELECT id FROM sales.orders", "dialect": "spark"}],
            "default-namespace": ["sales"],
        },
        "properties": {},
    }
    created = httpx.post(views, json=body)
    assert created.status_code == 200, created.text
    assert created.json()["metadata"]["current-version-id"] == 1
    assert httpx.get(views).json()["identifiers"] == [{"namespace": ["sales"], "name": "recent"}]
    assert httpx.head(f"{views}/recent").status_code == 204
    assert reference.get("namespaces/sales/views/recent").status_code == 200
    renamed = httpx.post(
        f"{server.url}/v1/{federated}/views/rename",
        json={
            "source": {"namespace": ["sales"], "name": "recent"},
            "destination": {"namespace": ["sales"], "name": "latest"},
        },
    )
    assert renamed.status_code == 204, renamed.text
    assert reference.get("namespaces/sales/views/recent").status_code == 404
    assert (
        httpx.get(f"{views}/latest").json()["metadata"]["versions"][0]["representations"][0]["sql"].startswith("SELECT")
    )
    assert httpx.delete(f"{views}/latest").status_code == 204
    assert reference.get("namespaces/sales/views/latest").status_code == 404


def test_a_transaction_commits_on_the_remote_after_growlers_grants(server, reference, federated):
    orders = httpx.get(f"{server.url}/v1/{federated}/namespaces/sales/tables/orders").json()["metadata"]
    change = {
        "identifier": {"namespace": ["sales"], "name": "orders"},
        "requirements": [{"type": "assert-table-uuid", "uuid": orders["table-uuid"]}],
        "updates": [{"action": "set-properties", "updates": {"owner": "federation"}}],
    }
    commit = f"{server.url}/v1/{federated}/transactions/commit"
    _, role, headers = _principal(server)
    _grant(server, role, "read", {"type": "table", "warehouse": federated, "namespace": ["sales"], "name": "orders"})
    refused = wait_for(
        lambda: (r := httpx.post(commit, json={"table-changes": [change]}, headers=headers)).status_code == 403 and r,
        "the grant to reach the workers",
        SETTLE_S,
    )
    assert "lacks write" in refused.json()["error"]["message"]
    assert "owner" not in reference.get("namespaces/sales/tables/orders").json()["metadata"]["properties"]
    committed = httpx.post(commit, json={"table-changes": [change]})
    assert committed.status_code == 204, committed.text
    assert reference.get("namespaces/sales/tables/orders").json()["metadata"]["properties"]["owner"] == "federation"


def test_the_remote_errors_pass_through_with_their_status_and_message(server, reference, federated):
    response = httpx.get(f"{server.url}/v1/{federated}/namespaces/nowhere/tables/none")
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    direct = reference.get("namespaces/nowhere/tables/none").json()["error"]
    assert (error["code"], error["type"], error["message"]) == (404, direct["type"], direct["message"])
    assert "nowhere" in error["message"]
    assert httpx.head(f"{server.url}/v1/{federated}/namespaces/nowhere").status_code == 404


def test_grants_hide_tables_the_remote_shows(server, reference, federated):
    catalog = _catalog(server, federated)
    catalog.create_namespace("hr")
    catalog.create_table(("hr", "open"), schema=SCHEMA)
    catalog.create_table(("hr", "salaries"), schema=SCHEMA)
    _, role, headers = _principal(server)
    _grant(server, role, "read", {"type": "table", "warehouse": federated, "namespace": ["hr"], "name": "open"})

    tables = f"{server.url}/v1/{federated}/namespaces/hr/tables"
    listed = wait_for(
        lambda: (r := httpx.get(tables, headers=headers)).status_code == 200 and r.json()["identifiers"],
        "the grant to reach the workers",
        SETTLE_S,
    )
    assert listed == [{"namespace": ["hr"], "name": "open"}]
    remote_names = {item["name"] for item in reference.get("namespaces/hr/tables").json()["identifiers"]}
    assert remote_names == {"open", "salaries"}  # what the remote's credential reaches
    hidden = httpx.get(f"{tables}/salaries", headers=headers)
    assert hidden.status_code == 403, hidden.text
    assert hidden.json()["error"]["type"] == "ForbiddenException"
    assert httpx.get(f"{tables}/open", headers=headers).status_code == 200
    # the namespace listing is filtered as well: the principal sees hr (a grant below it) only
    namespaces = httpx.get(f"{server.url}/v1/{federated}/namespaces", headers=headers)
    assert namespaces.status_code == 200 and namespaces.json()["namespaces"] == [["hr"]]
    # and a write it holds no grant for is refused before the remote is asked
    drop = httpx.delete(f"{tables}/open", headers=headers)
    assert drop.status_code == 403
    assert reference.get("namespaces/hr/tables/open").status_code == 200


def test_a_read_only_federation_refuses_writes_and_writes_nothing(server, reference, federated):
    read_only = _create_warehouse(server, {"uri": reference.url, "warehouse": "remote", "read-only": True})
    catalog = _catalog(server, read_only)
    with pytest.raises(ForbiddenError, match="read-only federation"):
        catalog.create_namespace("never")
    assert reference.get("namespaces/never").status_code == 404
    created = httpx.post(
        f"{server.url}/v1/{read_only}/namespaces/sales/tables",
        json={"name": "never", "schema": {"type": "struct", "schema-id": 0, "fields": []}},
    )
    assert created.status_code == 403, created.text
    assert "read-only federation" in created.json()["error"]["message"]
    assert reference.get("namespaces/sales/tables/never").status_code == 404
    # reads are served: the table the first test made is there
    assert catalog.load_table(("sales", "orders")).scan().to_arrow().num_rows == 3


def test_garbage_from_the_remote_is_a_502(server):
    garbage = TinyRemote(lambda handler, body: (200, b"<html>surprise</html>"))
    try:
        name = _create_warehouse(server, {"uri": garbage.url, "warehouse": "w"})
        response = httpx.get(f"{server.url}/v1/{name}/namespaces")
        assert response.status_code == 502, response.text
        assert response.json()["error"]["type"] == "BadGatewayException"
        assert "not JSON" in response.json()["error"]["message"]
    finally:
        garbage.stop()


def test_an_answer_not_in_the_spec_shape_is_a_502(server):
    def answer(handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
        if handler.path.startswith("/v1/config"):
            return 200, b'{"defaults": {}, "overrides": {}}'
        if handler.path.startswith("/v1/namespaces/a/tables"):
            return 500, b'{"oops": true}'  # an error without the Iceberg error body
        return 200, b'{"namespaces": "not a list"}'

    remote = TinyRemote(answer)
    try:
        name = _create_warehouse(server, {"uri": remote.url, "warehouse": "w"})
        listing = httpx.get(f"{server.url}/v1/{name}/namespaces")
        assert listing.status_code == 502 and "not a list of namespaces" in listing.json()["error"]["message"]
        failed = httpx.get(f"{server.url}/v1/{name}/namespaces/a/tables")
        assert failed.status_code == 502 and "without an Iceberg error body" in failed.json()["error"]["message"]
    finally:
        remote.stop()


def test_growlers_credential_reaches_the_remote_only_and_oauth2_tokens_are_cached(server, settings):
    token_requests: list[bytes] = []

    def answer(handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
        if handler.path == "/v1/oauth/tokens":
            token_requests.append(body)
            return 200, b'{"access_token": "remote-token-1", "token_type": "bearer", "expires_in": 3600}'
        if handler.path.startswith("/v1/config"):
            return 200, b'{"defaults": {}, "overrides": {"prefix": "their-prefix"}}'
        return 200, b'{"namespaces": [["x"]]}'

    remote = TinyRemote(answer)
    try:
        name = _create_warehouse(
            server,
            {
                "uri": remote.url,
                "warehouse": "their warehouse",
                "auth": {"type": "oauth2", "client-id": "growler", "client-secret": "s3cr3t-client"},
            },
        )
        for _ in range(4):
            listed = httpx.get(f"{server.url}/v1/{name}/namespaces")
            assert listed.status_code == 200 and listed.json()["namespaces"] == [["x"]]
        catalog_calls = [r for r in remote.requests if r[1].startswith("/v1/their-prefix/namespaces")]
        assert len(catalog_calls) == 4
        assert all(headers.get("Authorization") == "Bearer remote-token-1" for _, _, headers, _ in catalog_calls)
        assert any(r[1] == "/v1/config?warehouse=their%20warehouse" for r in remote.requests)
        # one token a worker (the suite's server has two), the secret sent to the token endpoint only
        assert 1 <= len(token_requests) <= 2
        assert all(b"client_secret=s3cr3t-client" in body for body in token_requests)
        # the caller's Growler token never reaches the remote
        assert not any("remote-token-1" not in headers.get("Authorization", "") for _, _, headers, _ in catalog_calls)
        shown = httpx.get(f"{server.url}{MANAGEMENT}/warehouses/{name}").json()
        assert shown["federation"]["auth"] == {"type": "oauth2", "client-id": "growler", "has-secret": True}
        assert "s3cr3t-client" not in json.dumps(shown)
        with psycopg.connect(settings.database_url) as conn:
            stored = conn.execute(
                "SELECT federation::text, federation_secret FROM warehouse WHERE name = %s", (name,)
            ).fetchone()
        assert "s3cr3t-client" not in stored[0] and b"s3cr3t-client" not in bytes(stored[1])
        assert TEST_SECRETS_KEY  # sealed with the suite's key: the server opened it to get a token
    finally:
        remote.stop()


def test_a_dead_remote_is_a_quick_503_then_the_breaker_opens(server):
    remote = TinyRemote(lambda handler, body: (200, b'{"defaults": {}, "overrides": {}, "namespaces": []}'))
    name = _create_warehouse(server, {"uri": remote.url, "warehouse": "w", "timeout-ms": 2000})
    assert httpx.get(f"{server.url}/v1/{name}/namespaces").status_code == 200
    remote.stop()
    messages = []
    for _ in range(20):  # each worker has its breaker: five failures each open them
        # a hang would end in the client's timeout (httpx raises): the answer must come first
        response = httpx.get(f"{server.url}/v1/{name}/namespaces", timeout=30)
        assert response.status_code == 503, response.text
        assert int(response.headers["Retry-After"]) >= 1
        messages.append(response.json()["error"]["message"])
        if "failed repeatedly" in messages[-1]:
            break
    assert "cannot be reached" in messages[0]
    assert "failed repeatedly" in messages[-1], messages


def test_a_warehouses_own_breaker_settings_open_it_sooner_and_for_longer(server):
    """breaker-failures 1 and a 120 s cool-down: each worker's first failure opens its breaker
    (the default needs five), and the Retry-After counts down from 120 s (the default from 30)."""
    remote = TinyRemote(lambda handler, body: (200, b'{"defaults": {}, "overrides": {}, "namespaces": []}'))
    settings = {"uri": remote.url, "warehouse": "w", "timeout-ms": 2000, "breaker-failures": 1}
    name = _create_warehouse(server, {**settings, "breaker-cooldown-ms": 120_000})
    assert httpx.get(f"{server.url}/v1/{name}/namespaces").status_code == 200
    remote.stop()
    unreachable = 0
    for _ in range(20):  # each worker opens its own breaker at its first failure
        response = httpx.get(f"{server.url}/v1/{name}/namespaces", timeout=30)
        assert response.status_code == 503, response.text
        if "failed repeatedly" in response.json()["error"]["message"]:
            assert int(response.headers["Retry-After"]) > 60  # of 120 s, not the default 30
            break
        unreachable += 1
    else:
        raise AssertionError("the breaker never opened")
    assert 1 <= unreachable <= int(os.environ.get("GROWLER_TEST_WORKERS", "2"))  # one failure per worker


def test_a_remote_that_does_not_answer_in_time_is_a_503_not_a_hang(server):
    release = threading.Event()
    held = threading.Event()

    def answer(handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
        if handler.path.startswith("/v1/config"):
            return 200, b'{"defaults": {}, "overrides": {}}'
        held.set()
        release.wait(60)  # holds the request past the warehouse's timeout, until the test ends
        return 200, b'{"namespaces": []}'

    remote = TinyRemote(answer)
    try:
        name = _create_warehouse(server, {"uri": remote.url, "warehouse": "w", "timeout-ms": 300})
        response = httpx.get(f"{server.url}/v1/{name}/namespaces", timeout=50)
        # Growler answered on its own timeout while the remote still held the request (it is
        # released only below): not the remote's answer, and not a hang (the client's timeout)
        assert held.is_set() and not release.is_set()
        assert response.status_code == 503, response.text
        assert "cannot be reached" in response.json()["error"]["message"]
        assert response.headers["Retry-After"].isdigit()
    finally:
        release.set()
        remote.stop()


def test_a_protection_mark_on_a_federated_warehouse_stops_drops_and_renames(server, reference, federated):
    catalog = _catalog(server, federated)
    catalog.create_namespace("kept")
    catalog.create_table(("kept", "t"), schema=SCHEMA)
    marks = f"{server.url}{MANAGEMENT}/warehouses/{federated}/protections"
    marked = httpx.post(marks, json={"type": "warehouse"})
    assert marked.status_code in (200, 201, 204), marked.text
    try:
        tables = f"{server.url}/v1/{federated}/namespaces/kept/tables"
        dropped = httpx.delete(f"{tables}/t")
        assert dropped.status_code == 409, dropped.text
        error = dropped.json()["error"]
        assert error["type"] == "ProtectedException", error
        assert (
            error["message"].startswith("Cannot drop table kept.t: warehouse ")
            and "remove the protection" in error["message"]
        )
        rename = {"source": {"namespace": ["kept"], "name": "t"}, "destination": {"namespace": ["kept"], "name": "u"}}
        renamed = httpx.post(f"{server.url}/v1/{federated}/tables/rename", json=rename)
        assert renamed.status_code == 409, renamed.text
        assert httpx.delete(f"{server.url}/v1/{federated}/namespaces/kept").status_code == 409
        # refused before the remote was asked: the table is still there
        assert reference.get("namespaces/kept/tables/t").status_code == 200
    finally:
        assert httpx.post(f"{marks}/remove", json={"type": "warehouse"}).status_code in (200, 204)
    assert httpx.delete(f"{server.url}/v1/{federated}/namespaces/kept/tables/t").status_code == 204


def test_marks_on_a_remote_namespace_and_table_stop_their_drops_and_renames(server, federated):
    """Protection marks on the remote's objects (migration 0040): kept by path, checked to exist in
    the remote when set, listed with the warehouse's marks, refusing the forwarded drop, purge and
    rename before the remote is asked - and nothing else."""
    catalog = _catalog(server, federated)
    namespace = f"marked_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace((namespace, "sub"))
    for name in ("t", "other"):
        catalog.create_table((namespace, "sub", name), schema=SCHEMA)
    marks = f"{server.url}{MANAGEMENT}/warehouses/{federated}/protections"
    table_mark = {"type": "table", "namespace": [namespace, "sub"], "name": "t"}
    namespace_mark = {"type": "namespace", "namespace": [namespace]}
    missing = httpx.post(marks, json={"type": "table", "namespace": [namespace, "sub"], "name": "nothing"})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException", missing.text
    assert httpx.post(marks, json=table_mark).status_code == 204
    listed = httpx.get(marks).json()
    assert table_mark in [{k: v for k, v in mark.items() if v is not None} for mark in listed["marks"]], listed
    encoded = f"{namespace}%1Fsub"
    tables = f"{server.url}/v1/{federated}/namespaces/{encoded}/tables"
    for url in (f"{tables}/t", f"{tables}/t?purgeRequested=true"):
        refused = httpx.delete(url)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["message"] == (
            f"Cannot drop table {namespace}.sub.t: table {namespace}.sub.t is protected; remove the protection"
            " first (manage-grants)"
        )
    rename = {
        "source": {"namespace": [namespace, "sub"], "name": "t"},
        "destination": {"namespace": [namespace, "sub"], "name": "u"},
    }  # noqa: E501
    assert httpx.post(f"{server.url}/v1/{federated}/tables/rename", json=rename).status_code == 409
    assert httpx.get(f"{tables}/t").status_code == 200  # still in the remote: it was never asked
    assert httpx.delete(f"{tables}/other").status_code == 204  # not marked: forwarded
    # a namespace's mark covers everything below it
    assert httpx.post(marks, json=namespace_mark).status_code == 204
    assert httpx.post(f"{marks}/remove", json=table_mark).status_code == 204
    still = httpx.delete(f"{tables}/t")
    assert still.status_code == 409 and f"namespace {namespace} is protected" in still.text, still.text
    assert httpx.post(f"{marks}/remove", json=namespace_mark).status_code == 204
    assert httpx.delete(f"{tables}/t").status_code == 204
    left = httpx.get(marks).json()["marks"]
    assert not [mark for mark in left if (mark.get("namespace") or [""])[0] == namespace], left


def test_writes_through_growler_enter_its_change_feed_with_the_remotes_uuids(server, reference):
    """A federated warehouse's events endpoint is Growler's: the writes made through Growler, in
    order, named as a native warehouse names them (uuids from the remote's answers)."""
    warehouse = _create_warehouse(server, {"uri": reference.url, "warehouse": "remote", "timeout-ms": 5000})
    catalog = _catalog(server, warehouse)
    namespace = f"feed_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace, {"owner": "ops"})
    table = catalog.create_table((namespace, "orders"), schema=SCHEMA)
    table.append(pa.table({"id": [1], "name": ["a"]}, schema=SCHEMA.as_arrow()))
    catalog.rename_table((namespace, "orders"), (namespace, "orders2"))
    catalog.drop_table((namespace, "orders2"))
    refused = httpx.post(f"{server.url}/v1/{warehouse}/namespaces", json={"namespace": [namespace]})
    assert refused.status_code == 409  # the remote's refusal: no event

    events, token = [], None
    while True:
        body = {"page-size": 100, **({"continuation-token": token} if token else {})}
        page = httpx.post(f"{server.url}/v1/{warehouse}/events", json=body)
        assert page.status_code == 200, page.text
        token = page.json()["continuation-token"]
        if not page.json()["events"]:
            break
        events += page.json()["events"]
    operations = [event["operation"] for event in events]
    assert [op["operation-type"] for op in operations] == [
        "create-namespace",
        "create-table",
        "update-table",
        "rename-table",
        "drop-table",
    ]
    table_uuid = str(table.metadata.table_uuid)
    assert operations[0]["properties"]["owner"] == "ops"  # as the remote holds them (with its location)
    assert {op.get("table-uuid") for op in operations[1:]} == {table_uuid}
    assert operations[2]["metadata-location"] == table.metadata_location  # the append's new version
    assert operations[3]["destination"] == {"namespace": [namespace], "name": "orders2"}
    assert all(event["actor"]["principal"] == "test-admin" for event in events)


def test_a_commit_made_on_the_remote_directly_is_found_when_loaded_and_recorded_once(server, reference):
    """Behind Growler's back: PyIceberg appends through the reference itself; the next load
    through Growler records one update-table by the remote catalog, with both metadata locations."""
    warehouse = _create_warehouse(server, {"uri": reference.url, "warehouse": "remote", "timeout-ms": 5000})
    namespace = f"outside_{uuid.uuid4().hex[:8]}"
    through_growler = _catalog(server, warehouse)
    through_growler.create_namespace(namespace)
    created = through_growler.create_table((namespace, "orders"), schema=SCHEMA)
    direct = RestCatalog("reference", uri=reference.url)
    table = direct.load_table((namespace, "orders"))
    table.append(pa.table({"id": [1], "name": ["a"]}, schema=SCHEMA.as_arrow()))
    for _ in range(2):  # two loads (on either worker): one event
        loaded = _catalog(server, warehouse).load_table((namespace, "orders"))
        assert loaded.metadata_location == table.metadata_location

    page = httpx.post(f"{server.url}/v1/{warehouse}/events", json={"page-size": 100})
    assert page.status_code == 200, page.text
    events = [event for event in page.json()["events"] if event["operation"].get("namespace") != [namespace]]
    assert [(event["operation"]["operation-type"], event.get("actor")) for event in events] == [
        ("create-table", {"principal": "test-admin", "source": "growler"}),
        ("update-table", {"source": "remote-catalog"}),
    ]
    outside = events[1]["operation"]
    assert outside["previous-metadata-location"] == created.metadata_location
    assert outside["metadata-location"] == table.metadata_location
    assert outside["table-uuid"] == str(created.metadata.table_uuid)
    assert outside["updates"] == [] and outside["requirements"] == []


def test_a_view_replaced_on_the_remote_directly_is_found_when_loaded_and_recorded_once(server, reference):
    """Views as tables: a view created through Growler and replaced on the reference itself; the
    next loads through Growler record one update-view by the remote catalog."""
    warehouse = _create_warehouse(server, {"uri": reference.url, "warehouse": "remote", "timeout-ms": 5000})
    namespace = f"outside_view_{uuid.uuid4().hex[:8]}"
    assert httpx.post(f"{server.url}/v1/{warehouse}/namespaces", json={"namespace": [namespace]}).status_code == 200
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}

    def version(version_id: int, sql: str) -> dict[str, Any]:
        return {
            "version-id": version_id,
            "timestamp-ms": int(time.time() * 1000),
            "schema-id": 0,
            "summary": {"engine-name": "test"},
            "representations": [{"type": "sql", "sql": sql, "dialect": "spark"}],
            "default-namespace": [namespace],
        }

    views = f"{server.url}/v1/{warehouse}/namespaces/{namespace}/views"
    body = {"name": "recent", "schema": schema, "view-version": version(1, "SELECT 1 AS id"), "properties": {}}
    created = httpx.post(views, json=body)
    assert created.status_code == 200, created.text
    replace = {
        "requirements": [{"type": "assert-view-uuid", "uuid": created.json()["metadata"]["view-uuid"]}],
        "updates": [
            {"action": "add-view-version", "view-version": version(2, "SELECT 2 AS id")},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }
    direct = httpx.post(f"{reference.url}/v1/namespaces/{namespace}/views/recent", json=replace, timeout=10)
    assert direct.status_code == 200, direct.text
    for _ in range(2):  # two loads (on either worker): one event
        loaded = httpx.get(f"{views}/recent")
        assert loaded.json()["metadata-location"] == direct.json()["metadata-location"]

    page = httpx.post(f"{server.url}/v1/{warehouse}/events", json={"page-size": 100})
    assert page.status_code == 200, page.text
    events = [event for event in page.json()["events"] if event["operation"].get("namespace") != [namespace]]
    assert [(event["operation"]["operation-type"], event.get("actor")) for event in events] == [
        ("create-view", {"principal": "test-admin", "source": "growler"}),
        ("update-view", {"source": "remote-catalog"}),
    ]
    outside = events[1]["operation"]
    assert outside["previous-metadata-location"] == created.json()["metadata-location"]
    assert outside["metadata-location"] == direct.json()["metadata-location"]
    assert outside["view-uuid"] == created.json()["metadata"]["view-uuid"]


def test_read_restrictions_bind_to_the_schema_the_remote_answers(server, reference, federated):
    """A restriction on a table the reference serves (by path): an untrusted restricted principal
    gets 403; marked a trusted engine, it gets the reference's answer with the spec's
    read-restrictions bound to the schema the reference answered (tests/api/
    test_read_restrictions_federated.py has the rest: credentials, planning, drops, renames)."""
    namespace = f"restricted_{uuid.uuid4().hex[:8]}"
    admin = _catalog(server, federated)
    admin.create_namespace(namespace)
    admin.create_table((namespace, "people"), schema=SCHEMA)
    name, role, headers = _principal(server)
    _grant(server, role, "read", {"type": "namespace", "warehouse": federated, "namespace": [namespace]})
    restriction = {
        "securable": {"type": "table", "namespace": [namespace], "name": "people"},
        "grantee": {"type": "role", "name": role},
        "row-filter": {"type": "gt", "term": "id", "value": 1},
        "columns": [{"name": "name", "action": "hide"}],
    }
    restrictions = f"{server.url}{MANAGEMENT}/warehouses/{federated}/read-restrictions"
    assert httpx.post(restrictions, json=restriction).status_code == 200
    table = f"{server.url}/v1/{federated}/namespaces/{namespace}/tables/people"

    def answered(status: int) -> httpx.Response | None:
        """The answer once the worker serving it follows the change (each at its own poll)."""
        response = httpx.get(table, headers=headers, timeout=30)
        return response if response.status_code == status else None

    refused = wait_for(lambda: answered(403), "the restriction on the workers", SETTLE_S)
    assert "not a trusted engine" in refused.json()["error"]["message"]
    trusted = httpx.put(f"{server.url}{MANAGEMENT}/principals/{name}/trusted-engine", json={"trusted-engine": True})
    assert trusted.status_code == 200, trusted.text
    answer = wait_for(lambda: answered(200), "the trust on the workers", SETTLE_S)
    assert answer.json()["metadata"]["table-uuid"] == str(admin.load_table((namespace, "people")).metadata.table_uuid)
    assert answer.json()["read-restrictions"] == {
        "required-row-filter": {"type": "gt", "term": "id", "value": 1},
        "required-column-projections": [{"action": "replace-with-null", "field-id": 2}],
    }


def test_the_reference_stopped_gives_503_with_retry_after(server, reference, federated):
    reference.stop()
    response = httpx.get(f"{server.url}/v1/{federated}/namespaces/sales/tables", timeout=30)  # a hang: it raises
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"].isdigit()
    assert response.json()["error"]["type"] == "ServiceUnavailableException"
