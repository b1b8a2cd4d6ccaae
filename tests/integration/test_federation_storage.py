"""Storage access of Growler's own for a federated warehouse (issue 50, docs/federation.md "Storage
access of Growler's own"): Iceberg's REST reference server keeps the tables, on the suite's S3;
the federated warehouse has storage settings in Growler and an allowed location around the
remote's warehouse, so clients reach the files through Growler's signing - never with the keys
the remote or Growler use - bound to the table's own folders, the caller's grants and the
protection marks. A table the remote places outside the allowed locations keeps the remote's
answer, and Growler signs nothing for it. Management refusals write nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.conftest import TEST_CREDENTIAL, warehouse_body
from tests.integration.proc_support import wait_for
from tests.integration.rest_reference_support import ReferenceServer
from tests.integration.test_federation import MANAGEMENT, SCHEMA, SETTLE_S, _grant, _principal
from tests.integration.test_federation_moves import _s3

BUCKET = "growler-test-fedstore"
ROWS = [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]


@pytest.fixture(scope="module")
def remote_root(settings) -> str:
    S3ObjectStore(settings.s3).ensure_bucket(BUCKET)
    return f"s3://{BUCKET}/remote-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def reference(tmp_path_factory, services, remote_root) -> Iterator[ReferenceServer]:
    running = ReferenceServer(
        tmp_path_factory.mktemp("rest-reference-own-storage"),
        warehouse=remote_root,
        catalog={"io-impl": "org.apache.iceberg.aws.s3.S3FileIO", **_s3(services), "client.region": "us-east-1"},
    )
    try:
        yield running
    finally:
        running.stop()


def _storage(services) -> dict[str, Any]:
    """Growler's own storage settings for the remote's bucket: it signs with these keys."""
    return {
        "endpoint": services.s3_endpoint,
        "region": "us-east-1",
        "path-style": True,
        "credentials-mode": "remote-signing",
        "access-key-id": services.access_key,
        "secret-access-key": services.secret_key,
    }


@pytest.fixture(scope="module")
def federated(server, services, reference, remote_root) -> str:
    name = f"fed-own-{uuid.uuid4().hex[:8]}"
    body = {
        "name": name,
        "federation": {"uri": reference.url, "warehouse": "remote", "timeout-ms": 5000},
        "storage": _storage(services),
        "allowed-locations": [f"{remote_root}/"],
    }
    created = httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json=body)
    assert created.status_code == 201, created.text
    shown = created.json()
    assert shown["allowed-locations"] == [remote_root]
    assert shown["storage"]["has-own-keys"] is True and "secret-access-key" not in shown["storage"]
    return name


def _catalog(server, warehouse: str, **properties: str) -> RestCatalog:
    """PyIceberg with no S3 keys at all: whatever it reads or writes, Growler signs."""
    return RestCatalog("growler", uri=server.url, warehouse=warehouse, credential=TEST_CREDENTIAL, **properties)


def _table(server, federated: str) -> tuple[str, Any]:
    namespace = f"o_{uuid.uuid4().hex[:8]}"
    catalog = _catalog(server, federated)
    catalog.create_namespace(namespace)
    table = catalog.create_table((namespace, "orders"), schema=SCHEMA)
    table.append(pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow()))
    return namespace, table


def _sign(server, federated: str, namespace: str, method: str, uri: str, headers: dict[str, str] | None = None):
    body = {"region": "us-east-1", "uri": uri, "method": method, "headers": {}}
    path = f"{server.url}/v1/{federated}/namespaces/{namespace}/tables/orders/sign"
    return httpx.post(path, json=body, headers=headers)


def _object_uri(services, location: str) -> str:
    """An s3:// location as the path-style URL a client signs."""
    bucket_and_key = location.removeprefix("s3://")
    return f"{services.s3_endpoint.rstrip('/')}/{bucket_and_key}"


def test_pyiceberg_writes_and_reads_through_growlers_signing_without_any_key(server, services, federated):
    namespace, table = _table(server, federated)
    loaded = _catalog(server, federated).load_table((namespace, "orders"))
    assert sorted(loaded.scan().to_arrow().to_pylist(), key=lambda row: row["id"]) == ROWS

    answer = httpx.get(
        f"{server.url}/v1/{federated}/namespaces/{namespace}/tables/orders",
        headers={"X-Iceberg-Access-Delegation": "vended-credentials"},
    )
    assert answer.status_code == 200, answer.text
    config = answer.json()["config"]
    assert config["s3.remote-signing-enabled"] == "true"
    assert config["s3.signer.endpoint"] == f"v1/{federated}/namespaces/{namespace}/tables/orders/sign"
    assert config["s3.endpoint"] == services.s3_endpoint
    # no key of anyone's: not the remote's, not Growler's
    assert "storage-credentials" not in answer.json()
    assert not {"s3.access-key-id", "s3.secret-access-key"} & config.keys()
    assert services.secret_key not in answer.text


def test_signing_is_bound_to_the_tables_folders_the_callers_grants_and_protection(server, services, federated):
    namespace, table = _table(server, federated)
    data_file = next(task.file.file_path for task in table.scan().plan_files())
    assert _sign(server, federated, namespace, "GET", _object_uri(services, data_file)).status_code == 200
    assert (
        _sign(
            server, federated, namespace, "PUT", _object_uri(services, f"{table.location()}/data/x.parquet")
        ).status_code
        == 200
    )

    other, _ = _table(server, federated)
    elsewhere = _object_uri(services, data_file.replace(f"/{namespace}/", f"/{other}/"))
    refused = _sign(server, federated, namespace, "GET", elsewhere)
    assert refused.status_code == 403, refused.text

    _, role, reader = _principal(server)
    _grant(server, role, "read", {"type": "table", "warehouse": federated, "namespace": [namespace], "name": "orders"})
    wait_for(  # the grant reaches each worker at its own poll
        lambda: _sign(server, federated, namespace, "GET", _object_uri(services, data_file), reader).status_code == 200,
        "the reader's grant on the workers",
        SETTLE_S,
    )
    write = _sign(
        server, federated, namespace, "PUT", _object_uri(services, f"{table.location()}/data/y.parquet"), reader
    )
    assert write.status_code == 403, write.text
    _, _, stranger = _principal(server)
    assert _sign(server, federated, namespace, "GET", _object_uri(services, data_file), stranger).status_code in (
        403,
        404,
    )

    mark = {"type": "table", "namespace": [namespace], "name": "orders"}
    marked = httpx.post(f"{server.url}{MANAGEMENT}/warehouses/{federated}/protections", json=mark)
    assert marked.status_code == 204, marked.text
    deleted = _sign(server, federated, namespace, "DELETE", _object_uri(services, data_file))
    assert deleted.status_code == 403 and "protected" in deleted.json()["error"]["message"], deleted.text
    assert _sign(server, federated, namespace, "GET", _object_uri(services, data_file)).status_code == 200


def test_a_caller_with_read_restrictions_gets_no_storage_access_of_growlers_own(server, services, federated):
    """Read restrictions meet Growler's own storage access: an untrusted restricted caller is
    neither signed for nor vended, and its loadTable is 403, as on a native table."""
    namespace, table = _table(server, federated)
    data_file = next(task.file.file_path for task in table.scan().plan_files())
    _, role, restricted = _principal(server)
    _grant(server, role, "read", {"type": "namespace", "warehouse": federated, "namespace": [namespace]})
    restriction = {
        "securable": {"type": "table", "namespace": [namespace], "name": "orders"},
        "grantee": {"type": "role", "name": role},
        "row-filter": {"type": "gt", "term": "id", "value": 1},
    }
    made = httpx.post(f"{server.url}{MANAGEMENT}/warehouses/{federated}/read-restrictions", json=restriction)
    assert made.status_code == 200, made.text
    path = f"{server.url}/v1/{federated}/namespaces/{namespace}/tables/orders"

    def refused() -> httpx.Response | None:
        answer = _sign(server, federated, namespace, "GET", _object_uri(services, data_file), restricted)
        return answer if answer.status_code == 403 else None

    signed = wait_for(refused, "the restriction on the workers", SETTLE_S)
    assert "not a trusted engine" in signed.json()["error"]["message"], signed.text
    for answer in (httpx.get(f"{path}/credentials", headers=restricted), httpx.get(path, headers=restricted)):
        assert answer.status_code == 403, answer.text
        assert services.secret_key not in answer.text


def test_a_table_outside_the_allowed_locations_keeps_the_remotes_answer_and_is_not_signed(
    server, services, federated, reference
):
    namespace = f"x_{uuid.uuid4().hex[:8]}"
    catalog = _catalog(server, federated)
    catalog.create_namespace(namespace)
    outside = f"s3://{BUCKET}/outside-{uuid.uuid4().hex[:8]}/orders"
    created = httpx.post(
        f"{server.url}/v1/{federated}/namespaces/{namespace}/tables",
        json={"name": "orders", "schema": SCHEMA.model_dump(by_alias=True), "location": outside},
    )
    assert created.status_code == 200, created.text
    assert created.json()["metadata"]["location"] == outside
    assert "s3.remote-signing-enabled" not in created.json().get("config", {})

    refused = _sign(server, federated, namespace, "GET", _object_uri(services, f"{outside}/metadata/x.json"))
    assert refused.status_code == 403, refused.text
    assert "outside the allowed locations" in refused.json()["error"]["message"]


def test_own_storage_settings_are_checked_and_a_refusal_writes_nothing(server, services, reference, remote_root):
    native = f"native-{uuid.uuid4().hex[:8]}"
    body = warehouse_body(services, native, f"s3://{BUCKET}/{native}")
    assert httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json=body).status_code == 201
    federation = {"uri": reference.url, "warehouse": "remote"}
    cases = [
        ({"storage": _storage(services), "allowed-locations": [f"s3://{BUCKET}/{native}/inner/"]}, "overlaps"),
        ({"allowed-locations": [f"{remote_root}/"]}, "give storage too"),
        ({"storage": _storage(services)}, "needs allowed-locations"),
        ({"location": f"{remote_root}/"}, "no location of its own"),
    ]
    for fields, words in cases:
        name = f"fed-bad-{uuid.uuid4().hex[:8]}"
        refused = httpx.post(
            f"{server.url}{MANAGEMENT}/warehouses", json={"name": name, "federation": federation, **fields}
        )
        assert refused.status_code == 400, refused.text
        assert words in refused.json()["error"]["message"]
        assert httpx.get(f"{server.url}{MANAGEMENT}/warehouses/{name}").status_code == 404

    # a federated warehouse without storage of its own takes it later, and gives it up again
    name = f"fed-later-{uuid.uuid4().hex[:8]}"
    assert (
        httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json={"name": name, "federation": federation}).status_code
        == 201
    )
    overlapping = {"storage": _storage(services), "allowed-locations": [f"s3://{BUCKET}/{native}/"]}
    clashing = httpx.put(f"{server.url}{MANAGEMENT}/warehouses/{name}", json=overlapping)
    assert clashing.status_code == 400 and "overlaps" in clashing.json()["error"]["message"], clashing.text
    own = {"storage": _storage(services), "allowed-locations": [f"s3://{BUCKET}/later-{uuid.uuid4().hex[:8]}/"]}
    updated = httpx.put(f"{server.url}{MANAGEMENT}/warehouses/{name}", json=own)
    assert updated.status_code == 200, updated.text
    assert updated.json()["storage"]["credentials-mode"] == "remote-signing"
    # a native warehouse cannot then take those folders
    clash = warehouse_body(services, f"native-{uuid.uuid4().hex[:8]}", own["allowed-locations"][0] + "sub")
    assert httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json=clash).status_code == 400
    off = httpx.put(f"{server.url}{MANAGEMENT}/warehouses/{name}", json={"storage": {"credentials-mode": "none"}})
    assert off.status_code == 200, off.text
    assert off.json()["allowed-locations"] == [] and off.json()["storage"]["credentials-mode"] == "none"


def test_vended_credentials_of_growlers_own_for_a_table_inside_the_allowed_locations(server, services, reference):
    """A second federation of the same remote vends (``static``: the warehouse's keys, prefixed by
    the table's location) for a table the remote keeps inside its allowed location."""
    folder = f"s3://{BUCKET}/vended-{uuid.uuid4().hex[:8]}"
    name = f"fed-vend-{uuid.uuid4().hex[:8]}"
    body = {
        "name": name,
        "federation": {"uri": reference.url, "warehouse": "remote", "timeout-ms": 5000},
        "storage": {**_storage(services), "credentials-mode": "static"},
        "allowed-locations": [f"{folder}/"],
    }
    assert httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json=body).status_code == 201
    namespace = f"v_{uuid.uuid4().hex[:8]}"
    catalog = _catalog(server, name)
    catalog.create_namespace(namespace)
    table = catalog.create_table((namespace, "orders"), schema=SCHEMA, location=f"{folder}/orders")
    table.append(pa.Table.from_pylist(ROWS, schema=SCHEMA.as_arrow()))
    assert (
        sorted(catalog.load_table((namespace, "orders")).scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == ROWS
    )

    path = f"{server.url}/v1/{name}/namespaces/{namespace}/tables/orders"
    loaded = httpx.get(path, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    (credential,) = loaded.json()["storage-credentials"]
    assert credential["prefix"] == f"{folder}/orders"
    assert credential["config"]["s3.access-key-id"] == services.access_key
    refreshed = httpx.get(f"{path}/credentials")
    assert refreshed.status_code == 200, refreshed.text
    assert [c["prefix"] for c in refreshed.json()["storage-credentials"]] == [f"{folder}/orders"]
    # without delegation asked, no key leaves Growler
    plain = httpx.get(path)
    assert "storage-credentials" not in plain.json() and services.secret_key not in plain.text


# -- moving a table home with a copy of its files (app/table_moves/copying.py) ---------------------


@pytest.fixture(scope="module")
def home(server, services) -> str:
    """A native warehouse that allows nothing of the remote's: a copy is the only way in."""
    name = f"home-{uuid.uuid4().hex[:8]}"
    created = httpx.post(
        f"{server.url}{MANAGEMENT}/warehouses", json=warehouse_body(services, name, f"s3://{BUCKET}/{name}")
    )
    assert created.status_code == 201, created.text
    assert httpx.post(f"{server.url}/v1/{name}/namespaces", json={"namespace": ["landed"]}).status_code == 200
    return name


def _objects(settings, location: str) -> list[str]:
    return sorted(found.uri for found in S3ObjectStore(settings.s3).list(Location.parse(location)))


def _copy_move(server, federated: str, namespace: str, home: str, name: str, remote: str) -> httpx.Response:
    body = {
        "namespace": [namespace],
        "name": "orders",
        "target": {"warehouse": home, "namespace": ["landed"], "name": name},
        "remote": remote,
        "files": "copy",
    }
    return httpx.post(f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves", json=body)


def test_a_table_moves_home_with_a_copy_of_its_files_and_owns_them(server, services, settings, federated, home):
    namespace, table = _table(server, federated)
    remote_location = table.location()
    remote_files = _objects(settings, remote_location)
    name = f"copied_{uuid.uuid4().hex[:6]}"

    moved = _copy_move(server, federated, namespace, home, name, "drop")
    assert moved.status_code == 200, moved.text
    assert moved.json()["remote"] == "dropped"
    assert moved.json()["source-metadata-location"] == table.metadata_location

    native = RestCatalog(
        "home",
        uri=server.url,
        warehouse=home,
        credential=TEST_CREDENTIAL,
        **_s3(services),
        **{"s3.region": "us-east-1"},
    )
    landed = native.load_table(("landed", name))
    location = landed.location()
    assert location.startswith(f"s3://{BUCKET}/{home}/") and moved.json()["metadata-location"].startswith(location)
    assert sorted(landed.scan().to_arrow().to_pylist(), key=lambda row: row["id"]) == ROWS
    # every file the native table reaches is its own copy; the remote's files are where they were
    assert len(landed.metadata.snapshots) == 1
    for snapshot in landed.metadata.snapshots:
        assert snapshot.manifest_list.startswith(f"{location}/metadata/")
        for manifest in snapshot.manifests(landed.io):
            assert manifest.manifest_path.startswith(f"{location}/metadata/")
    assert all(task.file.file_path.startswith(f"{location}/data/") for task in landed.scan().plan_files())
    assert _objects(settings, remote_location) == remote_files  # dropped there without a purge
    # the native table is a table like any other: it takes an append
    landed.append(pa.Table.from_pylist([{"id": 4, "name": "d"}], schema=SCHEMA.as_arrow()))
    assert len(native.load_table(("landed", name)).scan().to_arrow()) == 3


def test_a_copied_move_is_undone_with_its_copy_and_refusals_copy_nothing(
    server, services, settings, reference, federated, home
):
    namespace, table = _table(server, federated)
    name = f"undone_{uuid.uuid4().hex[:6]}"
    moved = _copy_move(server, federated, namespace, home, name, "keep")
    assert moved.status_code == 200, moved.text
    copy_location = moved.json()["metadata-location"].rsplit("/metadata/", 1)[0]
    assert _objects(settings, copy_location)
    undo = {"namespace": [namespace], "name": "orders"}
    undone = httpx.post(f"{server.url}{MANAGEMENT}/warehouses/{federated}/table-moves/undo", json=undo)
    assert undone.status_code == 204, undone.text
    assert _objects(settings, copy_location) == []
    assert httpx.get(f"{server.url}/v1/{home}/namespaces/landed/tables/{name}").status_code == 404
    assert reference.get(f"namespaces/{namespace}/tables/orders").status_code == 200

    # a federated warehouse without Growler's own storage access: nothing to read the files with
    plain = f"fed-plain-{uuid.uuid4().hex[:8]}"
    body = {"name": plain, "federation": {"uri": reference.url, "warehouse": "remote"}}
    assert httpx.post(f"{server.url}{MANAGEMENT}/warehouses", json=body).status_code == 201
    refused = _copy_move(server, plain, namespace, home, f"refused_{uuid.uuid4().hex[:6]}", "keep")
    assert refused.status_code == 400, refused.text
    assert "own storage access" in refused.json()["error"]["message"]
    listed = httpx.get(f"{server.url}/v1/{home}/namespaces/landed/tables").json()["identifiers"]
    assert not [item for item in listed if item["name"].startswith("refused_")]


def test_spark_reads_and_writes_a_table_moved_home_with_a_copy(spark, server, services, federated, home):
    """The copy is an Iceberg table like any other for Spark: read through the native warehouse
    (its own vended keys), appended to, its new files under the copy's location."""
    from tests.integration.spark_support import add_catalog

    namespace, _ = _table(server, federated)
    line = spark.line.replace(".", "")
    name = f"spark_copy_{line}_{uuid.uuid4().hex[:6]}"
    moved = _copy_move(server, federated, namespace, home, name, "drop")
    assert moved.status_code == 200, moved.text
    catalog = add_catalog(spark, f"copied_{line}_{uuid.uuid4().hex[:6]}", server.url, home)
    table = f"{catalog}.landed.{name}"
    assert [tuple(row) for row in spark.sql(f"SELECT id, name FROM {table} ORDER BY id").collect()] == [
        (1, "a"),
        (2, "b"),
    ]
    spark.sql(f"INSERT INTO {table} VALUES (3, 'c')")
    native = RestCatalog("home", uri=server.url, warehouse=home, credential=TEST_CREDENTIAL, **_s3(services))
    landed = native.load_table(("landed", name))
    assert sorted(landed.scan().to_arrow().to_pylist(), key=lambda row: row["id"]) == [*ROWS, {"id": 3, "name": "c"}]
    assert all(task.file.file_path.startswith(f"{landed.location()}/") for task in landed.scan().plan_files())
