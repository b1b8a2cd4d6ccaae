"""A federated warehouse whose remote is a second Growler, authentication on (issue 50's proof):
its own database, the suite's S3, its own bootstrap administrator and token endpoint.

The first Growler signs in to it with OAuth2 client credentials (the remote's token endpoint),
and PyIceberg reads and writes through the first one with the storage credentials the second one
vends; grants of the first hide what the remote's credential reaches; the remote's own change
feed holds the writes; a credential the remote refuses is a 502 naming the warehouse's settings,
never the remote's 401 passed on (a client would take it for its own token's); and a table moves
home from it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from storage.objects import S3ObjectStore
from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET, TEST_CREDENTIAL, warehouse_body
from tests.integration.conftest import Server, start_server, stop_server
from tests.integration.test_federation import (
    MANAGEMENT,
    SCHEMA,
    _create_warehouse,
    _grant,
    _principal,
    _table_loads,
)

BUCKET = "growler-test-moves"
ROWS = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


@pytest.fixture(scope="module")
def remote_growler(settings, services, tmp_path_factory) -> Iterator[tuple[Server, str]]:
    """A second Growler (two workers, authentication on) on a database of its own; its warehouse
    is ``remote`` under a prefix of its own in the suite's S3."""
    name = f"remote_{uuid.uuid4().hex[:8]}"
    if services.postgres is not None:
        services.postgres.create_catalog_database(name)
    else:
        with psycopg.connect(services.admin_database_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    S3ObjectStore(settings.s3).ensure_bucket(BUCKET)
    location = f"s3://{BUCKET}/{name}"
    running = start_server(
        settings,
        tmp_path_factory.mktemp("remote-growler"),
        extra_env={
            "GROWLER_DATABASE_URL": services.database_url.rsplit("/", 1)[0] + f"/{name}",
            "GROWLER_WAREHOUSE": "remote",
            "GROWLER_WAREHOUSE_LOCATION": location,
        },
    )
    try:
        yield running, location
    finally:
        stop_server(running)


def _oauth2(remote: Server, client_id: str = TEST_CLIENT_ID, secret: str = TEST_CLIENT_SECRET) -> dict:
    return {
        "uri": remote.url,
        "warehouse": "remote",
        "timeout-ms": 10000,
        "auth": {
            "type": "oauth2",
            "client-id": client_id,
            "client-secret": secret,
            "token-endpoint": f"{remote.url}/v1/oauth/tokens",
            "scope": "catalog",
        },
    }


@pytest.fixture(scope="module")
def federated(server, remote_growler) -> str:
    return _create_warehouse(server, _oauth2(remote_growler[0]))


def test_pyiceberg_writes_and_reads_through_growler_on_a_growler_with_authentication(server, remote_growler, federated):
    remote, _ = remote_growler
    catalog = RestCatalog("growler", uri=server.url, warehouse=federated, credential=TEST_CREDENTIAL)
    namespace = f"g_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    table = catalog.create_table((namespace, "orders"), schema=SCHEMA)
    # the storage credentials are the remote Growler's, vended for its table and passed on
    table.append(pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow()))
    loaded = catalog.load_table((namespace, "orders"))
    assert sorted(loaded.scan().to_arrow().to_pylist(), key=lambda row: row["id"]) == ROWS

    # the table is the remote's: asked directly (with a token of its own), it has the append
    direct = httpx.get(f"{remote.url}/v1/remote/namespaces/{namespace}/tables/orders")
    assert direct.status_code == 200, direct.text
    assert direct.json()["metadata-location"] == loaded.metadata_location
    # and its own change feed recorded the writes Growler forwarded
    feed = httpx.post(f"{remote.url}/v1/remote/events", json={"page-size": 100})
    assert feed.status_code == 200, feed.text
    kinds = [
        event["operation"]["operation-type"]
        for event in feed.json()["events"]
        if event["operation"].get("namespace") == [namespace]
        or event["operation"].get("identifier", {}).get("namespace") == [namespace]
    ]
    assert kinds[:1] == ["create-namespace"] and "create-table" in kinds and "update-table" in kinds


def test_grants_of_the_first_hide_what_the_remotes_credential_reaches(server, remote_growler, federated):
    catalog = RestCatalog("growler", uri=server.url, warehouse=federated, credential=TEST_CREDENTIAL)
    namespace = f"h_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    for name in ("open", "hidden"):
        catalog.create_table((namespace, name), schema=SCHEMA)
    _, role, headers = _principal(server)
    _grant(server, role, "read", {"type": "table", "warehouse": federated, "namespace": [namespace], "name": "open"})
    listed = httpx.get(f"{server.url}/v1/{federated}/namespaces/{namespace}/tables", headers=headers)
    assert listed.status_code == 200, listed.text
    assert [item["name"] for item in listed.json()["identifiers"]] == ["open"]
    refused = httpx.get(f"{server.url}/v1/{federated}/namespaces/{namespace}/tables/hidden", headers=headers)
    assert refused.status_code == 403, refused.text


def test_a_credential_the_remote_refuses_is_a_502_naming_the_settings(server, remote_growler):
    remote, _ = remote_growler
    warehouse = _create_warehouse(server, _oauth2(remote, secret="not-the-secret"))
    response = httpx.get(f"{server.url}/v1/{warehouse}/namespaces")
    assert response.status_code == 502, response.text
    message = response.json()["error"]["message"]
    assert warehouse in message and "credential" in message
    anonymous = _create_warehouse(server, {"uri": remote.url, "warehouse": "remote", "timeout-ms": 10000})
    response = httpx.get(f"{server.url}/v1/{anonymous}/namespaces")
    assert response.status_code == 502, response.text
    assert anonymous in response.json()["error"]["message"]


def test_a_table_moves_home_from_a_growler(server, services, remote_growler, federated):
    remote, location = remote_growler
    home = f"home-{uuid.uuid4().hex[:8]}"
    body = warehouse_body(services, home, f"s3://{BUCKET}/{home}", **{"allowed-locations": [f"{location}/"]})
    assert httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json=body).status_code == 201
    assert httpx.post(f"{server.url}/v1/{home}/namespaces", json={"namespace": ["landed"]}).status_code == 200
    catalog = RestCatalog("growler", uri=server.url, warehouse=federated, credential=TEST_CREDENTIAL)
    namespace = f"m_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(namespace)
    catalog.create_table((namespace, "orders"), schema=SCHEMA).append(
        pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow())
    )
    move = {"namespace": [namespace], "name": "orders", "target": {"warehouse": home, "namespace": ["landed"]}}
    # a protection mark on the remote's table refuses a move that would drop the remote's copy
    marks = f"{server.url}{MANAGEMENT}/warehouses/{federated}/protections"
    mark = {"type": "table", "namespace": [namespace], "name": "orders"}
    assert httpx.post(marks, json=mark).status_code == 204
    refused = httpx.post(f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves", json=move)
    assert refused.status_code == 409 and '"remote": "keep"' in refused.json()["error"]["message"], refused.text
    assert httpx.post(f"{marks}/remove", json=mark).status_code == 204
    moved = httpx.post(f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves", json=move)
    assert moved.status_code == 200, moved.text
    assert moved.json()["remote"] == "dropped"
    assert httpx.get(f"{remote.url}/v1/remote/namespaces/{namespace}/tables/orders").status_code == 404
    native = RestCatalog("growler", uri=server.url, warehouse=home, credential=TEST_CREDENTIAL)
    table = native.load_table(("landed", "orders"))
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda row: row["id"]) == ROWS


def test_changes_made_on_the_remote_directly_enter_the_feed_once(server, services, remote_growler, federated):
    """The remote's change feed mirrored (app/federation/mirror.py): a change made on the remote
    behind Growler's back enters Growler's feed once, with the remote as its actor, each commit as
    its own event; a write through Growler is there once (Growler's own record; the remote's event
    of it, which carries Growler's request id, is passed over)."""
    remote, _ = remote_growler
    with psycopg.connect(services.database_url, autocommit=True) as db:
        warehouse_id = db.execute("SELECT id FROM warehouse WHERE name = %s", (federated,)).fetchone()[0]
        # the mirror has started: it stands at the remote's head (housekeeping's round, every 10 s)
        _wait_until(
            lambda: (
                db.execute(
                    "SELECT continuation_token IS NOT NULL AND served FROM federated_event_cursor"
                    " WHERE warehouse_id = %s",
                    (warehouse_id,),
                ).fetchone()
                == (True,)
            ),
            "the mirror to start",
        )
    through = RestCatalog("growler", uri=server.url, warehouse=federated, credential=TEST_CREDENTIAL)
    namespace = f"f_{uuid.uuid4().hex[:8]}"
    through.create_namespace(namespace)
    direct = RestCatalog("remote", uri=remote.url, warehouse="remote", credential=TEST_CREDENTIAL)
    outside = direct.create_table((namespace, "outside"), schema=SCHEMA)
    for rows in (ROWS[:1], ROWS[1:]):  # two commits behind Growler's back
        outside.append(pa.Table.from_pylist(rows, schema=SCHEMA.as_arrow()))
    direct.drop_table((namespace, "outside"))

    def mine() -> list[dict]:
        answer = httpx.post(f"{server.url}/v1/{federated}/events", json={"page-size": 1000})
        assert answer.status_code == 200, answer.text
        return [e for e in answer.json()["events"] if _namespace_of(e["operation"]) == [namespace]]

    _wait_until(lambda: any(e["operation"]["operation-type"] == "drop-table" for e in mine()), "the drop mirrored")
    events = mine()
    assert [e["operation"]["operation-type"] for e in events] == [
        "create-namespace", "create-table", "update-table", "update-table", "drop-table",
    ]  # fmt: skip
    assert events[0]["actor"].get("source") != "remote-catalog"  # Growler's own record of its write
    assert all(e["actor"]["source"] == "remote-catalog" and e["actor"]["remote-event-id"] for e in events[1:])
    updates = events[2:4]
    assert updates[0]["operation"]["metadata-location"] != updates[1]["operation"]["metadata-location"]
    assert updates[1]["operation"]["metadata-location"] == outside.metadata_location


def test_loads_are_validated_with_the_remotes_etag_and_a_commit_through_growler_is_seen_at_once(
    server, remote_growler, federated
):
    """Caching, honestly (app/federation/cache.py): a worker's next load of a table asks the remote
    with the ETag of its last answer, and the remote's 304 serves it (the remote sends no metadata);
    within a warehouse's cache-ttl-ms the remote is not asked at all - until a commit made through
    Growler (from any connection, on any worker) moves the table's recorded version. Each worker
    keeps its own answers, and a connection may be handed to the other worker: at most one load a
    worker is the remote's full answer."""
    remote, _ = remote_growler
    namespace = f"c_{uuid.uuid4().hex[:8]}"
    catalog = RestCatalog("growler", uri=server.url, warehouse=federated, credential=TEST_CREDENTIAL)
    catalog.create_namespace(namespace)
    catalog.create_table((namespace, "t"), schema=SCHEMA)
    url = f"{server.url}/v1/{federated}/namespaces/{namespace}/tables/t"
    ours, theirs = _table_loads(server), _remote_loads(remote)
    loads = _loads(url)
    assert all(load.json() == loads[0].json() for load in loads)
    made, answered = _delta(_table_loads(server), ours), _delta(_remote_loads(remote), theirs)
    assert made.get("remote", 0) <= WORKERS and made.get("validated", 0) >= LOADS - WORKERS, made
    assert answered == {"200": made.get("remote", 0), "304": made.get("validated", 0)}, answered
    committed = _set_property(url, "k", "1")
    assert committed["metadata-location"] != loads[0].json()["metadata-location"]
    assert {load.json()["metadata-location"] for load in _loads(url)} == {committed["metadata-location"]}
    # a client's own validator is the remote's to answer: its 304 is passed on, not taken for garbage
    validated = httpx.get(url, headers={"If-None-Match": loads[0].headers["ETag"]})
    assert validated.status_code == 200  # the table changed since
    etag = httpx.get(url).headers["ETag"]
    validated = httpx.get(url, headers={"If-None-Match": etag})
    assert (validated.status_code, validated.content, validated.headers["ETag"]) == (304, b"", etag)

    kept = _create_warehouse(server, {**_oauth2(remote), "cache-ttl-ms": 60000})
    shown = httpx.get(f"{server.url}{MANAGEMENT}/warehouses/{kept}").json()["federation"]
    assert shown["cache-ttl-ms"] == 60000
    url = f"{server.url}/v1/{kept}/namespaces/{namespace}/tables/t"
    ours, theirs = _table_loads(server), _remote_loads(remote)
    loads = _loads(url)
    assert all(load.json() == loads[0].json() for load in loads)
    made, answered = _delta(_table_loads(server), ours), _delta(_remote_loads(remote), theirs)
    assert made.get("remote", 0) <= WORKERS and made.get("kept", 0) >= LOADS - WORKERS, made
    assert sum(answered.values()) == made.get("remote", 0) + made.get("validated", 0) <= WORKERS, answered
    committed = _set_property(url, "k", "2")  # another connection: whichever worker
    after = {load.json()["metadata-location"] for load in _loads(url)}
    assert after == {committed["metadata-location"]}  # on every worker, within the TTL


LOADS = 10
WORKERS = int(os.environ.get("GROWLER_TEST_WORKERS", "2"))  # the suite's server's (tests/integration/conftest.py)


def _loads(url: str) -> list[httpx.Response]:
    with httpx.Client() as client:
        answers = [client.get(url) for _ in range(LOADS)]
    assert all(answer.status_code == 200 for answer in answers), [a.text for a in answers if a.status_code != 200]
    return answers


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before.get(key, 0) for key in after if after[key] != before.get(key, 0)}


def _set_property(url: str, key: str, value: str) -> dict:
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {key: value}}]}
    answer = httpx.post(url, json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _remote_loads(remote: Server) -> dict[str, float]:
    """The remote's loadTable answers by status, from its own metrics."""
    text = httpx.get(f"{remote.url}/metrics").text
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("growler_http_requests_total{") and 'operation="loadTable"' in line:
            status = line.split('status="', 1)[1].split('"', 1)[0]
            counts[status] = counts.get(status, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def _namespace_of(operation: dict) -> list[str] | None:
    return operation.get("namespace") or (operation.get("identifier") or {}).get("namespace")


def _wait_until(condition, what: str, deadline_s: float = 90.0) -> None:
    """Poll ``condition`` (housekeeping runs its rounds every 10 s); a hang guard, not a speed bound."""
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"waited {deadline_s:g} s for {what}"
        time.sleep(0.2)
