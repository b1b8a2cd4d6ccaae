"""Moving a table home (issue 50, docs/federation.md "Moving a table home"): a table of a federated
warehouse, served by Iceberg's own REST catalog server, becomes a table of a native warehouse
without a file copied, through the suite's gunicorn server (authentication on).

PyIceberg writes the table on the remote through Growler, the move registers it natively, and
PyIceberg keeps reading and appending to it there. Tested where it meets the rest: the remote's
copy is read-only through Growler while it is kept (PyIceberg's append and a drop are refused,
nothing reaches the remote); the move and its undo are in the change feed; an undo after a
native commit is refused; a remote that fails the drop leaves the move pending and answers what
to do, and the same request finishes it; a remote down before the register writes nothing;
refusals (rights, a location the native warehouse does not allow, a federated target) write
nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError, NoSuchTableError

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.api.maintenance_jobs_support import finished_run
from tests.conftest import TEST_CREDENTIAL, warehouse_body
from tests.integration.rest_reference_support import ReferenceServer
from tests.integration.test_federation import (
    MANAGEMENT,
    SCHEMA,
    TinyRemote,
    _create_warehouse,
    _grant,
    _principal,
)

ROWS = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


BUCKET = "growler-test-moves"  # the suite's warehouse holds the test bucket's root


@pytest.fixture(scope="module")
def remote_root(settings) -> str:
    S3ObjectStore(settings.s3).ensure_bucket(BUCKET)
    return f"s3://{BUCKET}/remote-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory, services, remote_root) -> Iterator[ReferenceServer]:
    """Iceberg's REST reference server writing its tables to the suite's S3 (S3FileIO), under
    ``remote_root``: a native warehouse allowing that prefix can take them in."""
    running = ReferenceServer(
        tmp_path_factory.mktemp("rest-reference-s3"),
        warehouse=remote_root,
        catalog={"io-impl": "org.apache.iceberg.aws.s3.S3FileIO", **_s3(services), "client.region": "us-east-1"},
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def federated(server, reference) -> str:
    return _create_warehouse(server, {"uri": reference.url, "warehouse": "remote", "timeout-ms": 5000})


@pytest.fixture(scope="module")
def home(server, services, remote_root) -> str:
    """A native warehouse that allows the remote's warehouse prefix: where moved tables live."""
    name = f"home-{uuid.uuid4().hex[:8]}"
    body = warehouse_body(services, name, f"s3://{BUCKET}/{name}", **{"allowed-locations": [f"{remote_root}/"]})
    created = httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json=body)
    assert created.status_code == 201, created.text
    assert httpx.post(f"{server.url}/v1/{name}/namespaces", json={"namespace": ["landed"]}).status_code == 200
    return name


def _s3(services) -> dict[str, str]:
    return {
        "s3.endpoint": services.s3_endpoint,
        "s3.path-style-access": "true",
        "s3.access-key-id": services.access_key,
        "s3.secret-access-key": services.secret_key,
    }


def _remote_catalog(server, services, federated: str) -> RestCatalog:
    """PyIceberg on the federated warehouse: the reference vends no storage access, so the client
    brings the S3 keys (as a client of that catalog would)."""
    return RestCatalog(
        "growler",
        uri=server.url,
        warehouse=federated,
        credential=TEST_CREDENTIAL,
        **_s3(services),
        **{"s3.region": "us-east-1"},
    )


def _remote_table(server, services, federated: str) -> tuple[str, RestCatalog]:
    """A new namespace on the remote with one table of two rows, written through Growler."""
    namespace = f"m_{uuid.uuid4().hex[:8]}"
    catalog = _remote_catalog(server, services, federated)
    catalog.create_namespace(namespace)
    table = catalog.create_table((namespace, "orders"), schema=SCHEMA)
    table.append(pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow()))
    return namespace, catalog


def _objects(settings, remote_root: str, namespace: str) -> list[str]:
    store = S3ObjectStore(settings.s3)
    return sorted(location.uri for location in store.list(Location.parse(f"{remote_root}/{namespace}/")))


def _move(server, federated: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves", json=body, headers=headers)


def _move_body(namespace: str, home: str, remote: str = "drop", name: str | None = None) -> dict[str, Any]:
    target: dict[str, Any] = {"warehouse": home, "namespace": ["landed"], **({"name": name} if name else {})}
    return {"namespace": [namespace], "name": "orders", "target": target, "remote": remote}


def _rows(table) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda row: row["id"])


def _moves(server, federated: str, namespace: str) -> list[dict[str, Any]]:
    """The recorded moves of the warehouse out of ``namespace`` (the module's tests share the warehouse)."""
    listed = httpx.get(f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves")
    assert listed.status_code == 200, listed.text
    return [move for move in listed.json()["moves"] if move["source"]["namespace"] == [namespace]]


def _native_row(settings, home: str, name: str) -> Any:
    with psycopg.connect(settings.database_url) as conn:
        return conn.execute(
            "SELECT e.metadata_location FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id"
            " JOIN warehouse w ON w.id = n.warehouse_id WHERE w.name = %s AND n.path = '{landed}' AND e.name = %s",
            (home, name),
        ).fetchone()


def _management_events(settings, custom_type: str, name: str) -> list[dict[str, Any]]:
    with psycopg.connect(settings.database_url) as conn:
        rows = conn.execute(
            "SELECT operation FROM change_event WHERE stream = 0 AND operation->>'custom-type' = %s"
            " AND operation->'properties'->>'namespace' LIKE %s ORDER BY position",
            (custom_type, f"%{name}%"),
        ).fetchall()
    return [row[0]["properties"] for row in rows]


def test_a_table_moves_home_and_pyiceberg_keeps_reading_and_writing_it(
    server, settings, services, reference, remote_root, federated, home
):
    namespace, remote_catalog = _remote_table(server, services, federated)
    before = reference.get(f"namespaces/{namespace}/tables/orders").json()["metadata-location"]
    files = _objects(settings, remote_root, namespace)
    assert files

    moved = _move(server, federated, _move_body(namespace, home, name="orders_home"))
    assert moved.status_code == 200, moved.text
    assert moved.json()["remote"] == "dropped"
    assert moved.json()["metadata-location"] == before
    assert moved.json()["target"] == {"warehouse": home, "namespace": ["landed"], "name": "orders_home"}
    assert moved.json()["moved-by"] == "test-admin"
    # gone from the remote, its files kept: they are the native table's now
    assert reference.get(f"namespaces/{namespace}/tables/orders").status_code == 404
    assert set(files) <= set(_objects(settings, remote_root, namespace))
    with pytest.raises(NoSuchTableError):
        remote_catalog.load_table((namespace, "orders"))
    assert _moves(server, federated, namespace) == []  # final: nothing left to undo

    native = RestCatalog("growler", uri=server.url, warehouse=home, credential=TEST_CREDENTIAL)
    table = native.load_table(("landed", "orders_home"))
    assert table.metadata_location == before
    assert _rows(table) == ROWS
    table.append(pa.Table.from_pylist([{"id": 3, "name": "c"}], schema=SCHEMA.as_arrow()))
    assert _rows(native.load_table(("landed", "orders_home"))) == [*ROWS, {"id": 3, "name": "c"}]
    # the move is in the feed: the register on the native warehouse's stream, the move itself on the
    # installation's, and the remote's drop on the federated warehouse's
    assert _management_events(settings, "x-move-table-home", namespace)[0]["metadata-location"] == before
    assert _management_events(settings, "x-move-table-home-finished", namespace) == [
        {"warehouse": federated, "namespace": [namespace], "name": "orders"}
    ]
    with psycopg.connect(settings.database_url) as conn:
        kinds = conn.execute(
            "SELECT e.operation_type, w.name FROM change_event e JOIN warehouse w ON w.id = e.stream"
            " WHERE e.name IN ('orders', 'orders_home') AND e.namespace && ARRAY[%s, 'landed']"
            " AND e.operation_type IN ('register-table', 'drop-table') ORDER BY e.created_at",
            (namespace,),
        ).fetchall()
    assert [tuple(row) for row in kinds] == [("register-table", home), ("drop-table", federated)]


def test_kept_copy_is_read_only_through_growler_and_the_move_is_undone_until_a_native_commit(
    server, settings, services, reference, federated, home
):
    namespace, remote_catalog = _remote_table(server, services, federated)
    at_move = reference.get(f"namespaces/{namespace}/tables/orders").json()["metadata-location"]
    kept = _move(server, federated, _move_body(namespace, home, "keep", name=f"k_{namespace}"))
    assert kept.status_code == 200, kept.text
    assert kept.json()["remote"] == "kept"
    assert [move["source"]["namespace"] for move in _moves(server, federated, namespace)] == [[namespace]]

    # the native table cannot be dropped or unregistered while the copy, which reads its files, stands
    native_url = f"{server.url}/v1/{home}/namespaces/landed/tables/k_{namespace}"
    for refused in (
        httpx.delete(native_url, params={"purgeRequested": "true"}),
        httpx.post(f"{native_url}/unregister"),
    ):
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["type"] == "TableMovedException"
        assert "undoTableMove" in refused.json()["error"]["message"]
    recursive = httpx.delete(
        f"{server.url}{MANAGEMENT}/warehouses/{home}/namespaces/landed", params={"recursive": "true"}
    )
    assert recursive.status_code == 409, recursive.text
    assert recursive.json()["error"]["type"] == "TableMovedException"
    assert _native_row(settings, home, f"k_{namespace}") is not None
    # and maintenance leaves its files alone
    policy = {
        "policy-type": "system.snapshot-expiry",
        "securable": {"type": "table", "warehouse": home, "namespace": ["landed"], "name": f"k_{namespace}"},
        "content": {"enable": True},
    }
    assert httpx.put(f"{server.url}{MANAGEMENT}/maintenance/policies", json=policy).status_code == 200
    with httpx.Client(base_url=server.url) as client:
        runs = f"{MANAGEMENT}/maintenance/warehouses/{home}/namespaces/landed/tables/k_{namespace}/runs"
        run = finished_run(client, runs, {"policy-type": "system.snapshot-expiry"})
    assert run["status"] == "skipped", run
    assert "moved home" in run["outcome"]["reason"]

    # the remote's copy: readable, not writable through Growler (nothing reaches the remote)
    remote_table = remote_catalog.load_table((namespace, "orders"))
    assert _rows(remote_table) == ROWS
    with pytest.raises(ForbiddenError, match=f"moved to warehouse {home}"):
        remote_table.append(pa.Table.from_pylist([{"id": 9, "name": "z"}], schema=SCHEMA.as_arrow()))
    dropped = httpx.delete(f"{server.url}/v1/{federated}/namespaces/{namespace}/tables/orders")
    assert dropped.status_code == 403, dropped.text
    assert "undo the move" in dropped.json()["error"]["message"]
    assert reference.get(f"namespaces/{namespace}/tables/orders").json()["metadata-location"] == at_move

    # undone: the native table is gone, the remote's copy writable again
    undo = f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves/undo"
    assert httpx.post(undo, json={"namespace": [namespace], "name": "orders"}).status_code == 204
    assert _native_row(settings, home, f"k_{namespace}") is None
    assert _moves(server, federated, namespace) == []
    remote_table = remote_catalog.load_table((namespace, "orders"))
    remote_table.append(pa.Table.from_pylist([{"id": 3, "name": "c"}], schema=SCHEMA.as_arrow()))
    assert _management_events(settings, "x-undo-table-move", namespace)[0]["target"] == (f"{home}.landed.k_{namespace}")

    # moved again and committed to natively: the undo would lose that commit (409, nothing written)
    assert _move(server, federated, _move_body(namespace, home, "keep", name=f"k_{namespace}")).status_code == 200
    native = RestCatalog("growler", uri=server.url, warehouse=home, credential=TEST_CREDENTIAL)
    native_table = native.load_table(("landed", f"k_{namespace}"))
    native_table.append(pa.Table.from_pylist([{"id": 4, "name": "d"}], schema=SCHEMA.as_arrow()))
    refused = httpx.post(undo, json={"namespace": [namespace], "name": "orders"})
    assert refused.status_code == 409, refused.text
    assert "committed to since the move" in refused.json()["error"]["message"]
    assert _native_row(settings, home, f"k_{namespace}")[0] == native_table.metadata_location
    # a move to elsewhere is refused while this one stands; remote drop finishes it
    elsewhere = _move(server, federated, _move_body(namespace, home, "keep", name="other"))
    assert elsewhere.status_code == 409, elsewhere.text
    finished = _move(server, federated, _move_body(namespace, home, "drop", name=f"k_{namespace}"))
    assert finished.status_code == 200, finished.text
    assert finished.json()["remote"] == "dropped"
    assert reference.get(f"namespaces/{namespace}/tables/orders").status_code == 404
    assert _rows(native.load_table(("landed", f"k_{namespace}"))) == [
        *ROWS,
        {"id": 3, "name": "c"},
        {"id": 4, "name": "d"},
    ]


def test_a_remote_failing_the_drop_leaves_the_move_pending_and_the_same_request_finishes_it(
    server, settings, services, reference, home
):
    """The remote answers loads (the reference's own) and fails the first drop: the move stands
    registered, its copy read-only, and says what to do; the retry drops it."""
    drops: list[str] = []

    def answer(handler, body: bytes) -> tuple[int, bytes]:
        if handler.command == "DELETE":
            drops.append(handler.path)
            if len(drops) == 1:
                error = {"error": {"message": "storage node down", "type": "ServiceFailureException", "code": 500}}
                return 500, json.dumps(error).encode()
        forwarded = httpx.request(handler.command, f"{reference.url}{handler.path}", content=body or None)
        return forwarded.status_code, forwarded.content

    tiny = TinyRemote(answer)
    try:
        federated = _create_warehouse(server, {"uri": tiny.url, "warehouse": "remote", "timeout-ms": 5000})
        # a nested namespace: its levels travel to the remote in the path with the remote's separator
        parent = f"p_{uuid.uuid4().hex[:8]}"
        catalog = _remote_catalog(server, services, federated)
        catalog.create_namespace(parent)
        catalog.create_namespace((parent, "inner"))
        created = catalog.create_table((parent, "inner", "orders"), schema=SCHEMA)
        created.append(pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow()))
        remote_path = f"namespaces/{parent}%2Einner/tables/orders"  # the reference advertises "." (%2E)
        body = {**_move_body(parent, home, name=f"p_{parent}"), "namespace": [parent, "inner"]}
        failed = _move(server, federated, body)
        assert failed.status_code == 500, failed.text
        message = failed.json()["error"]["message"]
        assert "storage node down" in message and "retry moveTableHome" in message
        listed = httpx.get(f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves").json()["moves"]
        assert [(move["source"]["namespace"], move["remote"]) for move in listed] == [
            ([parent, "inner"], "drop-pending")
        ]
        assert _native_row(settings, home, f"p_{parent}") is not None
        appended = httpx.post(
            f"{server.url}/v1/{federated}/namespaces/{parent}%1Finner/tables/orders",
            json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "b"}}]},
        )
        assert appended.status_code == 403, appended.text
        direct = reference.get(remote_path)
        assert direct.status_code == 200, direct.text
        assert direct.json()["metadata-location"] == created.metadata_location

        finished = _move(server, federated, body)
        assert finished.status_code == 200, finished.text
        assert finished.json()["remote"] == "dropped"
        assert len(drops) == 2 and all("purgeRequested=false" in path for path in drops)
        assert httpx.get(f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves").json()["moves"] == []
        assert reference.get(remote_path).status_code == 404
        native = RestCatalog("growler", uri=server.url, warehouse=home, credential=TEST_CREDENTIAL)
        assert _rows(native.load_table(("landed", f"p_{parent}"))) == ROWS
    finally:
        tiny.stop()


def test_refusals_write_nothing(server, settings, services, reference, federated, home):
    namespace, _ = _remote_table(server, services, federated)
    # no right on the source table
    name, role, headers = _principal(server)
    _grant(server, role, "create", {"type": "namespace", "warehouse": home, "namespace": ["landed"]})
    refused = _move(server, federated, _move_body(namespace, home, name=f"r_{namespace}"), headers)
    assert refused.status_code == 403, refused.text
    # drop and read on the source, but no create on the target namespace
    _, role2, headers2 = _principal(server)
    for privilege in ("drop", "read"):
        _grant(
            server,
            role2,
            privilege,
            {"type": "table", "warehouse": federated, "namespace": [namespace], "name": "orders"},
        )
    refused = _move(server, federated, _move_body(namespace, home, name=f"r_{namespace}"), headers2)
    assert refused.status_code == 403, refused.text
    # a federated target, a native source
    to_federated = _move(
        server, federated, {**_move_body(namespace, home), "target": {"warehouse": federated, "namespace": [namespace]}}
    )
    assert to_federated.status_code == 400, to_federated.text
    from_native = _move(server, home, _move_body(namespace, home))
    assert from_native.status_code == 400, from_native.text
    assert "not federated" in from_native.json()["error"]["message"]
    # a native warehouse that does not allow the remote's directory: registerTable's 400
    outside = _move(
        server,
        federated,
        _move_body(namespace, server.warehouse) | {"target": {"warehouse": server.warehouse, "namespace": ["landed"]}},
    )
    assert outside.status_code in (400, 404), outside.text
    # nothing was written: no native entry, no move, the remote still holds the table
    assert _native_row(settings, home, f"r_{namespace}") is None
    assert _moves(server, federated, namespace) == []
    assert reference.get(f"namespaces/{namespace}/tables/orders").status_code == 200
    assert _management_events(settings, "x-move-table-home", namespace) == []


def test_a_remote_down_before_the_register_writes_nothing(server, settings, home):
    tiny = TinyRemote(lambda handler, body: (200, b"{}"))
    federated = _create_warehouse(server, {"uri": tiny.url, "warehouse": "remote", "timeout-ms": 2000})
    tiny.stop()
    response = _move(server, federated, _move_body("gone", home, name="gone_orders"))
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"].isdigit()
    assert _native_row(settings, home, "gone_orders") is None
    assert _moves(server, federated, "gone") == []


def test_spark_reads_and_writes_a_table_moved_home(spark, server, settings, services, reference, federated, home):
    """The table PyIceberg wrote on the remote, moved home, read and appended to by Spark through
    the native warehouse (vended credentials for the remote's prefix, which the warehouse allows)."""
    from tests.integration.spark_support import add_catalog

    namespace, _ = _remote_table(server, services, federated)
    target = f"s_{namespace}_{spark.line.replace('.', '')}"
    moved = _move(server, federated, _move_body(namespace, home, name=target))
    assert moved.status_code == 200, moved.text
    catalog = add_catalog(spark, f"home_{namespace}_{spark.line.replace('.', '')}", server.url, home)
    table = f"{catalog}.landed.{target}"
    assert [tuple(row) for row in spark.sql(f"SELECT id, name FROM {table} ORDER BY id").collect()] == [
        (1, "a"),
        (2, "b"),
    ]
    spark.sql(f"INSERT INTO {table} VALUES (3, 'c')")
    native = RestCatalog("growler", uri=server.url, warehouse=home, credential=TEST_CREDENTIAL)
    assert _rows(native.load_table(("landed", target))) == [*ROWS, {"id": 3, "name": "c"}]
    assert reference.get(f"namespaces/{namespace}/tables/orders").status_code == 404


def test_protection_marks_hold_on_both_sides(server, settings, services, reference, federated, home):
    """A protected federated warehouse refuses a move that drops there (nothing written) and takes
    one that keeps the copy; a protected native namespace refuses the undo's unregister."""
    namespace, _ = _remote_table(server, services, federated)
    remote_marks = f"{server.url}{MANAGEMENT}/warehouses/{federated}/protections"
    native_marks = f"{server.url}{MANAGEMENT}/warehouses/{home}/protections"
    assert httpx.post(remote_marks, json={"type": "warehouse"}).status_code in (200, 201, 204)
    try:
        refused = _move(server, federated, _move_body(namespace, home, name=f"g_{namespace}"))
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["type"] == "ProtectedException"
        assert '"remote": "keep"' in refused.json()["error"]["message"]
        assert _native_row(settings, home, f"g_{namespace}") is None
        assert _management_events(settings, "x-move-table-home", namespace) == []
        kept = _move(server, federated, _move_body(namespace, home, "keep", name=f"g_{namespace}"))
        assert kept.status_code == 200, kept.text
    finally:
        assert httpx.post(f"{remote_marks}/remove", json={"type": "warehouse"}).status_code in (200, 204)
    undo = f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves/undo"
    mark = {"type": "namespace", "namespace": ["landed"]}
    assert httpx.post(native_marks, json=mark).status_code in (200, 201, 204)
    try:
        refused = httpx.post(undo, json={"namespace": [namespace], "name": "orders"})
        assert refused.status_code == 409, refused.text
        assert refused.json()["error"]["type"] == "ProtectedException"
        assert _native_row(settings, home, f"g_{namespace}") is not None
        assert [move["remote"] for move in _moves(server, federated, namespace)] == ["kept"]
    finally:
        assert httpx.post(f"{native_marks}/remove", json=mark).status_code in (200, 204)
    assert httpx.post(undo, json={"namespace": [namespace], "name": "orders"}).status_code == 204
    assert _native_row(settings, home, f"g_{namespace}") is None


def test_spark_creates_writes_and_reads_a_table_of_the_federated_warehouse(
    spark, server, services, reference, federated
):
    """Spark through Growler on the federated warehouse (issue 50's proof): the table is created,
    written and read on the remote, Growler's grants and feed in front. The reference vends no
    storage access, so Spark brings the S3 keys as a client of that catalog would."""
    from tests.integration.spark_support import add_catalog

    line = spark.line.replace(".", "")
    namespace = f"spark_{line}_{uuid.uuid4().hex[:6]}"
    catalog = add_catalog(
        spark,
        f"fed_{namespace}",
        server.url,
        federated,
        **{"io-impl": "org.apache.iceberg.aws.s3.S3FileIO", **_s3(services), "client.region": "us-east-1"},
    )
    spark.sql(f"CREATE NAMESPACE {catalog}.{namespace}")
    spark.sql(f"CREATE TABLE {catalog}.{namespace}.events (id bigint, name string) USING iceberg")
    spark.sql(f"INSERT INTO {catalog}.{namespace}.events VALUES (1, 'a'), (2, 'b')")
    rows = spark.sql(f"SELECT id, name FROM {catalog}.{namespace}.events ORDER BY id").collect()
    assert [tuple(row) for row in rows] == [(1, "a"), (2, "b")]
    direct = reference.get(f"namespaces/{namespace}/tables/events")
    assert direct.status_code == 200, direct.text
    assert direct.json()["metadata"]["current-snapshot-id"] is not None
    page = httpx.post(f"{server.url}/v1/{federated}/events", json={"page-size": 100})
    ours = [
        event
        for event in page.json()["events"]
        if event["operation"].get("identifier", {}).get("namespace") == [namespace]
    ]
    assert [event["operation"]["operation-type"] for event in ours][:2] == ["create-table", "update-table"]


def test_a_namespace_moves_home_table_by_table_and_a_rerun_finishes_it(
    server, settings, services, reference, federated, home
):
    """moveNamespaceHome: each table as moveTableHome. A name taken in the target stops it at that
    table, saying what moved; once the name is free the same request moves the rest."""
    namespace, catalog = _remote_table(server, services, federated)
    second = catalog.create_table((namespace, "returns"), schema=SCHEMA)
    second.append(pa.Table.from_pylist(ROWS[:1], schema=SCHEMA.as_arrow()))
    target = f"t_{namespace}"
    assert httpx.post(f"{server.url}/v1/{home}/namespaces", json={"namespace": [target]}).status_code == 200
    blocker = {"name": "returns", "schema": {"type": "struct", "fields": []}}
    assert httpx.post(f"{server.url}/v1/{home}/namespaces/{target}/tables", json=blocker).status_code == 200
    moves = f"{server.url}{MANAGEMENT}/warehouses/{federated}/namespace-moves"
    body = {"namespace": [namespace], "target": {"warehouse": home, "namespace": [target]}}

    stopped = httpx.post(moves, json=body)
    assert stopped.status_code == 409, stopped.text
    message = stopped.json()["error"]["message"]
    assert "1 of the 2 tables" in message and "(orders)" in message and "table returns:" in message
    assert reference.get(f"namespaces/{namespace}/tables/orders").status_code == 404  # moved, dropped there
    assert reference.get(f"namespaces/{namespace}/tables/returns").status_code == 200  # not moved: nothing of it
    assert httpx.delete(f"{server.url}/v1/{home}/namespaces/{target}/tables/returns").status_code == 204

    finished = httpx.post(moves, json=body)
    assert finished.status_code == 200, finished.text
    assert [(move["source"]["name"], move["remote"]) for move in finished.json()["moves"]] == [("returns", "dropped")]
    native = RestCatalog("growler", uri=server.url, warehouse=home, credential=TEST_CREDENTIAL)
    assert _rows(native.load_table((target, "orders"))) == ROWS
    assert _rows(native.load_table((target, "returns"))) == ROWS[:1]
    assert httpx.get(f"{server.url}/v1/{federated}/namespaces/{namespace}/tables").json()["identifiers"] == []


def test_a_namespace_moves_home_with_the_namespaces_below_it(server, settings, services, reference, federated, home):
    """moveNamespaceHome with nested: the tables of each namespace below go into the native
    namespace of the same relative path under the target, created there; the remote keeps the
    (now empty) namespaces, as a table's move keeps its namespace."""
    namespace, catalog = _remote_table(server, services, federated)
    catalog.create_namespace((namespace, "daily"))
    catalog.create_namespace((namespace, "daily", "eu"))
    deep = catalog.create_table((namespace, "daily", "eu", "sales"), schema=SCHEMA)
    deep.append(pa.Table.from_pylist(ROWS[:1], schema=SCHEMA.as_arrow()))
    target = f"n_{namespace}"
    assert httpx.post(f"{server.url}/v1/{home}/namespaces", json={"namespace": [target]}).status_code == 200
    moves = f"{server.url}{MANAGEMENT}/warehouses/{federated}/namespace-moves"
    body = {"namespace": [namespace], "target": {"warehouse": home, "namespace": [target]}, "nested": True}

    moved = httpx.post(moves, json=body)
    assert moved.status_code == 200, moved.text
    assert sorted((tuple(m["target"]["namespace"]), m["target"]["name"]) for m in moved.json()["moves"]) == [
        ((target,), "orders"),
        ((target, "daily", "eu"), "sales"),
    ]
    native = RestCatalog("growler", uri=server.url, warehouse=home, credential=TEST_CREDENTIAL)
    assert _rows(native.load_table((target, "orders"))) == ROWS
    assert _rows(native.load_table((target, "daily", "eu", "sales"))) == ROWS[:1]
    assert native.list_namespaces((target,)) == [(target, "daily")]
    remote_tables = httpx.get(f"{server.url}/v1/{federated}/namespaces/{namespace}%1Fdaily%1Feu/tables")
    assert remote_tables.status_code == 200 and remote_tables.json()["identifiers"] == []  # dropped there
    # without nested, a namespace's move leaves those below it alone (as before)
    again = httpx.post(moves, json={**body, "nested": False})
    assert again.status_code == 200 and again.json()["moves"] == [], again.text
