"""Growler instances over one PostgreSQL and one S3, behind nginx round robin: one catalog.

Two instances (each a gunicorn master of its own with one worker, so its caches are the
instance's), as if on hosts of their own: two prove what three would, at two thirds of the cost.
What a client does through any of them is seen by all: its own writes (documents, ETags), a drop
and re-create, a new or deleted warehouse, a revoke, a rotated secret (within the documented
bound: the authentication state is polled twice a second), an Idempotency-Key's answer; purges
run once; killing an instance mid-commit loses no acknowledged commit; and a rolling restart
under writers fails no request.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from app.ground.locations import parse as parse_location
from storage.objects import S3ObjectStore
from tests.api.tables_support import create_request
from tests.conftest import TEST_CREDENTIAL, warehouse_body
from tests.integration.fleet_support import Fleet, start_fleet, stop_fleet

# docs/security.md: a management change is seen "on every worker and replica within about a
# second" (each polls auth_state twice a second); one more poll period of slack for a loaded machine.
# Checked by ``_seen_within`` against when each request was sent, never when its answer came back.
WITHIN_S = 1.5
SECOND_BUCKET = "growler-fleet-second"
FLEET_SIZE = 2


@pytest.fixture(scope="module")
def fleet(settings, app, tmp_path_factory) -> Iterator[Fleet]:
    # `app` first: it has migrated the database, so the instances start against a ready schema
    running = start_fleet(settings, tmp_path_factory.mktemp("fleet"), size=FLEET_SIZE)
    try:
        yield running
    finally:
        stop_fleet(running)


def _prefix(url: str, warehouse: str) -> str:
    return f"{url}/v1/{warehouse}"


def _namespace(fleet: Fleet) -> str:
    name = f"fleet_{uuid.uuid4().hex[:8]}"
    created = httpx.post(f"{_prefix(fleet.url, fleet.warehouse)}/namespaces", json={"namespace": [name]}, timeout=30)
    assert created.status_code == 200, created.text
    return name


def _table_url(url: str, fleet: Fleet, namespace: str, table: str) -> str:
    return f"{_prefix(url, fleet.warehouse)}/namespaces/{namespace}/tables/{table}"


def _commit(url: str, properties: dict[str, str], **headers: str) -> httpx.Response:
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": properties}]}
    return httpx.post(url, json=body, headers=headers, timeout=60)


def _until(condition, timeout_s: float) -> float | None:
    """Seconds until ``condition()`` held, or None if it did not within ``timeout_s``."""
    start = time.monotonic()
    while time.monotonic() - start < timeout_s:
        if condition():
            return time.monotonic() - start
        time.sleep(0.02)
    return None


def _seen_within(condition, since: float) -> None:
    """Asks ``condition()`` until it holds; an ask sent ``WITHIN_S`` or more after ``since`` (when
    the change's request returned) must hold. Timed by when each ask was sent, not when its answer
    came: how long requests take on a slow or busy machine does not count, only when the instance
    applied the change - at its next poll of auth_state, a timer that a slow machine does not stretch."""
    while True:
        asked = time.monotonic()
        if condition():
            return
        assert asked - since < WITHIN_S, f"still not seen in a request sent {asked - since:.2f} s after the change"


def _catalog(url: str, warehouse: str) -> RestCatalog:
    return RestCatalog(
        "fleet", uri=url, warehouse=warehouse, credential=TEST_CREDENTIAL,
        **{"header.X-Iceberg-Access-Delegation": "vended-credentials"},
    )  # fmt: skip


def test_pyiceberg_reads_its_own_writes_through_any_instance(fleet):
    namespace = _namespace(fleet)
    writer = _catalog(fleet.url, fleet.warehouse)  # through nginx: each request to the next instance
    readers = [_catalog(server.url, fleet.warehouse) for server in fleet.servers]  # one per instance
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "item": pa.array(["tea", "mug"])})
    table = writer.create_table(f"{namespace}.items", schema=rows.schema)
    for reader in readers:  # every instance has loaded (and cached) the table before the writes
        assert reader.load_table(f"{namespace}.items").scan().to_arrow().num_rows == 0
    for round_ in range(1, 4):
        table.append(rows)
        assert writer.load_table(f"{namespace}.items").scan().to_arrow().num_rows == 2 * round_
        for reader in readers:  # each instance answers with this write at once
            loaded = reader.load_table(f"{namespace}.items")
            assert loaded.metadata.current_snapshot_id == table.metadata.current_snapshot_id
            assert loaded.scan().to_arrow().num_rows == 2 * round_


@pytest.mark.parametrize("line", ["3.5"], ids=lambda line: f"spark{line}")
def test_spark_and_pyiceberg_read_each_others_writes_through_any_instance(fleet, line):
    """Spark (the shared driver of its line, a catalog of its own through nginx, its table cache off
    so that every read asks the catalog) and PyIceberg on each instance see each other's writes."""
    from tests.integration.spark_support import DRIVERS

    spark, name = DRIVERS.catalog(line, fleet.url, fleet.warehouse, **{"cache-enabled": "false"})
    namespace = _namespace(fleet)
    table = f"{name}.{namespace}.events"
    spark.sql(f"CREATE TABLE {table} (id bigint, what string) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'spark'), (2, 'spark')")
    readers = [_catalog(server.url, fleet.warehouse) for server in fleet.servers]
    for reader in readers:
        assert reader.load_table(f"{namespace}.events").scan().to_arrow().num_rows == 2
    rows = pa.table({"id": pa.array([3], pa.int64()), "what": pa.array(["pyiceberg"])})
    readers[-1].load_table(f"{namespace}.events").append(rows)  # through the last instance
    # Spark's read goes through nginx to any instance: it sees the append at once
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {table}").collect()) == [1, 2, 3]


def test_a_commit_on_one_instance_invalidates_every_others_caches(fleet):
    namespace = _namespace(fleet)
    one = fleet.servers[0]
    created = httpx.post(f"{_prefix(one.url, fleet.warehouse)}/namespaces/{namespace}/tables", json=create_request("t"))
    assert created.status_code == 200, created.text
    # every instance loads the table: its parsed document, answer and ETag are now cached there
    etags = {}
    for server in fleet.servers:
        loaded = httpx.get(_table_url(server.url, fleet, namespace, "t"))
        assert loaded.status_code == 200
        etags[server.url] = loaded.headers["etag"]
        again = httpx.get(
            _table_url(server.url, fleet, namespace, "t"), headers={"If-None-Match": loaded.headers["etag"]}
        )
        assert again.status_code == 304
    committed = _commit(_table_url(fleet.servers[1].url, fleet, namespace, "t"), {"written-by": "instance-1"})
    assert committed.status_code == 200, committed.text
    location = committed.json()["metadata-location"]
    for server in fleet.servers:  # at once, no bound: the pointer is read from PostgreSQL
        fresh = httpx.get(_table_url(server.url, fleet, namespace, "t"), headers={"If-None-Match": etags[server.url]})
        assert fresh.status_code == 200, server.url
        assert fresh.json()["metadata-location"] == location
        assert fresh.json()["metadata"]["properties"]["written-by"] == "instance-1"


def test_a_drop_and_re_create_is_seen_by_every_instance_at_once(fleet):
    namespace = _namespace(fleet)
    one = fleet.servers[0]
    tables = f"{_prefix(one.url, fleet.warehouse)}/namespaces/{namespace}/tables"
    first = httpx.post(tables, json=create_request("t")).json()["metadata"]["table-uuid"]
    for server in fleet.servers:
        assert httpx.get(_table_url(server.url, fleet, namespace, "t")).json()["metadata"]["table-uuid"] == first
    assert httpx.delete(_table_url(one.url, fleet, namespace, "t")).status_code == 204
    for server in fleet.servers:
        assert httpx.get(_table_url(server.url, fleet, namespace, "t")).status_code == 404
    second = httpx.post(tables, json=create_request("t", properties={"generation": "2"})).json()
    assert second["metadata"]["table-uuid"] != first
    for server in fleet.servers:
        loaded = httpx.get(_table_url(server.url, fleet, namespace, "t")).json()
        assert loaded["metadata"]["table-uuid"] == second["metadata"]["table-uuid"]
        assert loaded["metadata"]["properties"]["generation"] == "2"


def test_a_new_and_a_deleted_warehouse_on_every_instance(fleet, services):
    S3ObjectStore(fleet.settings.s3).ensure_bucket(SECOND_BUCKET)
    name = f"wh{uuid.uuid4().hex[:8]}"
    body = warehouse_body(services, name, f"s3://{SECOND_BUCKET}/{name}")
    assert httpx.post(f"{fleet.servers[0].url}/management/v1/warehouses", json=body).status_code == 201
    for server in fleet.servers:  # a name not cached is read from PostgreSQL: at once
        config = httpx.get(f"{server.url}/v1/config", params={"warehouse": name})
        assert config.status_code == 200, config.text
        assert config.json()["overrides"]["prefix"] == name
        assert (
            httpx.post(
                f"{_prefix(server.url, name)}/namespaces", json={"namespace": [f"n{server.url[-5:]}"]}
            ).status_code
            == 200
        )
    for server in fleet.servers:
        for namespace in httpx.get(f"{_prefix(server.url, name)}/namespaces").json()["namespaces"]:
            httpx.delete(f"{_prefix(server.url, name)}/namespaces/{namespace[0]}")
    assert httpx.delete(f"{fleet.servers[0].url}/management/v1/warehouses/{name}").status_code == 204
    deleted = time.monotonic()
    for server in fleet.servers:  # every instance had it cached: gone within the bound
        _seen_within(
            lambda s=server: httpx.get(f"{s.url}/v1/config", params={"warehouse": name}).status_code == 404, deleted
        )


def _reader(fleet: Fleet, namespace: str) -> tuple[dict, str]:
    """A principal with read on ``namespace`` (through a role): (its credential, the role)."""
    management = f"{fleet.servers[0].url}/management/v1"
    credential = httpx.post(f"{management}/principals", json={"name": f"reader-{uuid.uuid4().hex[:8]}"}).json()
    role = f"readers-{uuid.uuid4().hex[:8]}"
    grant = {
        "privilege": "read",
        "securable": {"type": "namespace", "warehouse": fleet.warehouse, "namespace": [namespace]},
    }
    assert httpx.post(f"{management}/roles", json={"name": role}).status_code == 201
    assert httpx.put(f"{management}/roles/{role}/members/{credential['client-id']}").status_code == 204
    assert httpx.post(f"{management}/roles/{role}/grants", json=grant).status_code == 201
    return credential, role


def _token(url: str, client_id: str, secret: str) -> str:
    answer = httpx.post(
        f"{url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret, "scope": "catalog"},
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["access_token"]


def test_a_revoke_and_a_rotated_secret_reach_every_instance_within_the_bound(fleet):
    namespace = _namespace(fleet)
    tables = f"{_prefix(fleet.servers[0].url, fleet.warehouse)}/namespaces/{namespace}/tables"
    assert httpx.post(tables, json=create_request("t")).status_code == 200
    credential, role = _reader(fleet, namespace)
    token = _token(fleet.servers[0].url, credential["client-id"], credential["client-secret"])

    def status(server, bearer: str) -> int:
        url = _table_url(server.url, fleet, namespace, "t")
        return httpx.get(url, headers={"Authorization": f"Bearer {bearer}", "Connection": "close"}).status_code

    # the grant is cached on every instance
    assert [status(s, token) for s in fleet.servers] == [200] * FLEET_SIZE
    grant = {
        "privilege": "read",
        "securable": {"type": "namespace", "warehouse": fleet.warehouse, "namespace": [namespace]},
    }
    management = f"{fleet.servers[1].url}/management/v1"
    assert httpx.post(f"{management}/roles/{role}/grants/revoke", json=grant).status_code == 204
    revoked = time.monotonic()
    for server in fleet.servers:  # nothing left to see: the namespace is hidden (404, not 403)
        _seen_within(lambda s=server: status(s, token) == 404, revoked)

    # the grant back, then the secret rotated on the last instance: the old tokens are refused everywhere
    assert httpx.post(f"{management}/roles/{role}/grants", json=grant).status_code == 201
    regranted = time.monotonic()
    for server in fleet.servers:
        _seen_within(lambda s=server: status(s, token) == 200, regranted)
    rotated = httpx.post(f"{fleet.servers[-1].url}/management/v1/principals/{credential['client-id']}/rotate")
    assert rotated.status_code == 200, rotated.text
    rotated_at = time.monotonic()
    for server in fleet.servers:
        _seen_within(lambda s=server: status(s, token) == 401, rotated_at)
    new_secret = rotated.json()["client-secret"]
    for server in fleet.servers:  # the new secret works through every instance's token endpoint
        assert status(server, _token(server.url, credential["client-id"], new_secret)) == 200


def test_an_idempotency_key_replays_on_every_instance(fleet):
    namespace = f"fleet_{uuid.uuid4().hex[:8]}"
    key = str(uuid.uuid4())
    answers = [
        httpx.post(
            f"{_prefix(s.url, fleet.warehouse)}/namespaces",
            json={"namespace": [namespace]},
            headers={"Idempotency-Key": key},
        )
        for s in fleet.servers
    ]
    assert [a.status_code for a in answers] == [200] * FLEET_SIZE  # not 409: run once, then replayed
    assert all(a.json() == answers[0].json() for a in answers)

    assert httpx.post(f"{_prefix(fleet.servers[0].url, fleet.warehouse)}/namespaces/{namespace}/tables",
                      json=create_request("t")).status_code == 200  # fmt: skip
    commit_key = str(uuid.uuid4())
    commits = [
        _commit(_table_url(s.url, fleet, namespace, "t"), {"once": "yes"}, **{"Idempotency-Key": commit_key})
        for s in fleet.servers
    ]
    assert [c.status_code for c in commits] == [200] * FLEET_SIZE
    assert len({c.json()["metadata-location"] for c in commits}) == 1
    loaded = httpx.get(_table_url(fleet.servers[-1].url, fleet, namespace, "t")).json()
    assert loaded["metadata-location"] == commits[0].json()["metadata-location"]
    assert len(loaded["metadata"]["metadata-log"]) == 1  # one commit after the create, not one each


def test_purges_run_once_across_instances(fleet, services):
    namespace = _namespace(fleet)
    catalog = RestCatalog("fleet", uri=fleet.url, warehouse=fleet.warehouse, credential=TEST_CREDENTIAL)
    rows = pa.table({"id": pa.array([1], pa.int64())})
    locations = []
    for index in range(6):
        table = catalog.create_table(f"{namespace}.p{index}", schema=rows.schema)
        table.append(rows)
        locations.append(table.metadata.location)
    # dropped with purge through nginx: each instance is woken for half of them; both
    # housekeepers then look for work at once
    for index in range(6):
        dropped = httpx.delete(_table_url(fleet.url, fleet, namespace, f"p{index}"), params={"purgeRequested": "true"})
        assert dropped.status_code == 204
    # the default soft policy keeps them in the recycle bin until their retention ends: an
    # administrator's purge queues each now (through nginx too)
    bin_url = f"{fleet.url}/management/v1/warehouses/{fleet.warehouse}/bin"
    units = httpx.get(bin_url, params={"namespace": namespace}, timeout=30).json()["units"]
    assert sorted(unit["name"] for unit in units) == [f"p{index}" for index in range(6)]
    for unit in units:
        assert httpx.delete(f"{bin_url}/{unit['id']}", timeout=30).status_code == 204
    store = S3ObjectStore(fleet.settings.s3)

    def purged() -> bool:
        return all(next(iter(store.list(parse_location(location + "/"))), None) is None for location in locations)

    assert _until(purged, 60) is not None

    done: dict[str, list[str]] = {}

    def every_purge_logged() -> bool:
        """Each location's "purged" log lines, once every purge has logged (a line is written
        just after the last object went: the objects may be gone a moment before it is there)."""
        logs = "\n".join(s.log() for s in fleet.servers)
        done.update({loc: re.findall(rf"purged \d+ objects under {re.escape(loc)}/?\s", logs) for loc in locations})
        return all(done.values())

    assert _until(every_purge_logged, 30) is not None, done
    for location, lines in done.items():
        assert len(lines) == 1, (location, lines)  # exactly one instance purged it
    logs = "\n".join(s.log() for s in fleet.servers)
    assert "purge of" not in logs  # no instance failed one (e.g. found it half-deleted by another)


def test_killing_an_instance_mid_commit_loses_no_acknowledged_commit(fleet):
    namespace = _namespace(fleet)
    tables = f"{_prefix(fleet.servers[0].url, fleet.warehouse)}/namespaces/{namespace}/tables"
    assert httpx.post(tables, json=create_request("t")).status_code == 200
    victim = FLEET_SIZE - 1
    acknowledged: list[str] = []
    unanswered: list[str] = []
    survivor_failures: list[str] = []  # the instance that stays up must answer every commit
    in_flight = threading.Event()
    stop = threading.Event()

    def write(writer: int, server_index: int) -> None:
        url = _table_url(fleet.servers[server_index].url, fleet, namespace, "t")
        for n in range(200):
            if stop.is_set():
                return
            key = f"w{writer}-{n}"
            if server_index == victim:
                in_flight.set()
            try:
                answer = _commit(url, {key: "1"})
            except httpx.HTTPError as exc:
                if server_index != victim:
                    survivor_failures.append(f"{key}: {type(exc).__name__}")
                unanswered.append(key)  # the connection died with the instance: no acknowledgement
                return
            if answer.status_code == 200:
                acknowledged.append(key)
            elif server_index != victim:
                survivor_failures.append(f"{key}: {answer.status_code} {answer.text[:200]}")

    threads = [threading.Thread(target=write, args=(w, i)) for w, i in ((0, victim), (1, victim), (2, 0))]
    for thread in threads:
        thread.start()
    try:
        assert _until(lambda: sum(k.startswith(("w0", "w1")) for k in acknowledged) >= 4, 60) is not None
        in_flight.clear()
        assert in_flight.wait(10)  # a commit is on its way to the victim right now
        fleet.kill(victim)
        # the survivor's writer goes on committing past the kill: three more acknowledged
        survived = sum(k.startswith("w2") for k in acknowledged)
        assert _until(lambda: sum(k.startswith("w2") for k in acknowledged) >= survived + 3, 30) is not None
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        fleet.start_again(victim)
    assert unanswered, "no commit was in flight when the instance died"
    assert not survivor_failures, survivor_failures[:5]
    for server in fleet.servers:  # the restarted one included
        properties = httpx.get(_table_url(server.url, fleet, namespace, "t")).json()["metadata"]["properties"]
        missing = [key for key in acknowledged if key not in properties]
        assert not missing, missing


def test_a_rolling_restart_under_writers_fails_no_request(fleet):
    namespace = _namespace(fleet)
    tables = f"{_prefix(fleet.url, fleet.warehouse)}/namespaces/{namespace}/tables"
    assert httpx.post(tables, json=create_request("t")).status_code == 200
    url = _table_url(fleet.url, fleet, namespace, "t")
    acknowledged: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def write(writer: int) -> None:
        with httpx.Client(timeout=60) as client:
            n = 0
            while not stop.is_set():
                key = f"w{writer}-{n}"
                n += 1
                body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {key: "1"}}]}
                try:
                    answer = client.post(url, json=body)
                    loaded = client.get(url)
                except httpx.HTTPError as exc:
                    failures.append(f"{key}: {type(exc).__name__}")
                    continue
                if answer.status_code == 200:
                    acknowledged.append(key)
                else:
                    failures.append(f"{key}: commit {answer.status_code} {answer.text[:200]}")
                if loaded.status_code != 200:
                    failures.append(f"{key}: load {loaded.status_code}")

    threads = [threading.Thread(target=write, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    try:
        for index in range(len(fleet.servers)):
            before = len(acknowledged)
            fleet.restart(index)  # graceful stop, then a new master on the same port
            assert _until(lambda b=before: len(acknowledged) > b + 3, 30) is not None  # writes go on
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert not failures, failures[:10]
    properties = httpx.get(url).json()["metadata"]["properties"]
    assert not [key for key in acknowledged if key not in properties]
    assert len(acknowledged) > 10
