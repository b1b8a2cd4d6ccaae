"""``sts`` mode against SeaweedFS's own STS: credentials limited to one table's prefix.

A SeaweedFS of its own runs with its IAM/STS service (``EmbeddedS3(sts=True)``: one role that
may do anything on S3, assumable by Growler's identity). Growler asks it for credentials with
an inline session policy naming the table's prefix, and what they can and cannot do is checked
against the store itself: the table's objects yes; the prefix sibling (``tbl`` vs ``tbl2``),
the namespace and the bucket root no. PyIceberg and Spark (3.5 and 4.1) then write and read a
table with nothing but the catalog URL, using only the vended temporary credentials.
"""

from __future__ import annotations

import dataclasses
import io
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import minio
import pyarrow as pa
import pytest
from minio.error import S3Error
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from app.ground.locations import Location
from app.ground.settings import S3Settings, StsSettings
from tests.conftest import TEST_ACCESS_KEY, TEST_BUCKET, TEST_CREDENTIAL, TEST_SECRET_KEY
from tests.integration.conftest import Server, start_server, stop_server
from tests.integration.holding_proxy import HoldingProxy

WAREHOUSE = "sts"
DURATION_S = 900


@pytest.fixture(scope="module")
def sts_s3() -> Iterator:
    from scripts.processes import free_port
    from scripts.seaweedfs import EmbeddedS3

    root = Path(tempfile.mkdtemp(prefix="growler-sts-"))
    s3 = EmbeddedS3(root / "s3", free_port(), TEST_ACCESS_KEY, TEST_SECRET_KEY, sts=True)
    s3.start()
    try:
        s3.ensure_bucket(TEST_BUCKET)
        yield s3
    finally:
        s3.stop()


@pytest.fixture(scope="module")
def sts_settings(settings, sts_s3):
    from scripts.seaweedfs import STS_ROLE_ARN

    return dataclasses.replace(
        settings,
        warehouse=WAREHOUSE,
        warehouse_location=f"s3://{TEST_BUCKET}/{WAREHOUSE}/",
        s3=S3Settings(endpoint=sts_s3.endpoint, access_key=TEST_ACCESS_KEY, secret_key=TEST_SECRET_KEY),
        storage_credentials_mode="sts",
        sts=StsSettings(role_arn=STS_ROLE_ARN, duration_s=DURATION_S),
    )


@pytest.fixture(scope="module")
def sts_server(sts_settings, app, tmp_path_factory) -> Iterator[Server]:
    extra = {"GROWLER_STS_ROLE_ARN": sts_settings.sts.role_arn, "GROWLER_STS_DURATION_S": str(DURATION_S)}
    running = start_server(sts_settings, tmp_path_factory.mktemp("gunicorn-sts"), extra)
    try:
        yield running
    finally:
        stop_server(running)


def _client(sts_s3, config: dict) -> minio.Minio:
    return minio.Minio(
        f"127.0.0.1:{sts_s3.port}",
        access_key=config["s3.access-key-id"],
        secret_key=config["s3.secret-access-key"],
        session_token=config["s3.session-token"],
        secure=False,
        region="us-east-1",
    )


def _allowed(call) -> bool:
    try:
        result = call()
        if hasattr(result, "__next__"):
            list(result)
    except S3Error as exc:
        assert exc.code == "AccessDenied", exc.code
        return False
    return True


def test_vended_credentials_reach_only_the_table(sts_server, sts_settings, sts_s3):
    url = f"{sts_server.url}/v1/{WAREHOUSE}"
    httpx.post(f"{url}/namespaces", json={"namespace": ["ns"]}).raise_for_status()
    for name in ("tbl", "tbl2"):
        request = {
            "name": name,
            "location": f"s3://{TEST_BUCKET}/{WAREHOUSE}/ns/{name}",
            "schema": {
                "type": "struct",
                "schema-id": 0,
                "fields": [{"id": 1, "name": "id", "type": "long", "required": False}],
            },
        }
        httpx.post(f"{url}/namespaces/ns/tables", json=request).raise_for_status()
    before = time.time()
    loaded = httpx.get(f"{url}/namespaces/ns/tables/tbl", headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert loaded.status_code == 200, loaded.text
    (credential,) = loaded.json()["storage-credentials"]
    config = credential["config"]
    assert credential["prefix"] == f"s3://{TEST_BUCKET}/{WAREHOUSE}/ns/tbl"
    assert config["s3.access-key-id"] != TEST_ACCESS_KEY
    assert TEST_SECRET_KEY not in loaded.text
    expires_s = int(config["s3.session-token-expires-at-ms"]) / 1000
    assert before + DURATION_S - 60 <= expires_s <= time.time() + DURATION_S + 60  # they expire

    client = _client(sts_s3, config)
    own = Location.parse(loaded.json()["metadata-location"]).key
    assert _allowed(lambda: client.get_object(TEST_BUCKET, own).read())
    assert _allowed(lambda: client.put_object(TEST_BUCKET, f"{WAREHOUSE}/ns/tbl/data/x", io.BytesIO(b"1"), 1))
    assert _allowed(lambda: client.list_objects(TEST_BUCKET, prefix=f"{WAREHOUSE}/ns/tbl/", recursive=True))
    assert _allowed(lambda: client.remove_object(TEST_BUCKET, f"{WAREHOUSE}/ns/tbl/data/x"))

    admin = sts_s3.client()
    sibling = next(admin.list_objects(TEST_BUCKET, prefix=f"{WAREHOUSE}/ns/tbl2/", recursive=True)).object_name
    assert not _allowed(lambda: client.get_object(TEST_BUCKET, sibling).read())
    assert not _allowed(lambda: client.put_object(TEST_BUCKET, f"{WAREHOUSE}/ns/tbl2/data/x", io.BytesIO(b"1"), 1))
    assert not _allowed(lambda: client.remove_object(TEST_BUCKET, sibling))
    assert not _allowed(lambda: client.list_objects(TEST_BUCKET, prefix=f"{WAREHOUSE}/ns/", recursive=True))
    assert not _allowed(lambda: client.put_object(TEST_BUCKET, "elsewhere", io.BytesIO(b"1"), 1))
    assert admin.stat_object(TEST_BUCKET, sibling) is not None

    refreshed = httpx.get(f"{url}/namespaces/ns/tables/tbl/credentials").json()["storage-credentials"]
    assert refreshed[0]["config"]["s3.access-key-id"] != config["s3.access-key-id"]  # fresh ones
    assert "s3.secret-access-key" not in sts_server.log() and TEST_SECRET_KEY not in sts_server.log()


def test_pyiceberg_round_trip_with_sts_credentials(sts_server):
    catalog = RestCatalog("sts", uri=sts_server.url, warehouse=WAREHOUSE, credential=TEST_CREDENTIAL)
    catalog.create_namespace_if_not_exists("py")
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    table = catalog.create_table("py.t", schema=schema)
    assert table.io.properties["s3.access-key-id"] != TEST_ACCESS_KEY
    table.append(pa.Table.from_pylist([{"id": 1}, {"id": 2}], schema=pa.schema([pa.field("id", pa.int64())])))
    table = catalog.load_table("py.t")
    table.overwrite(pa.Table.from_pylist([{"id": 3}], schema=pa.schema([pa.field("id", pa.int64())])))
    assert catalog.load_table("py.t").scan().to_arrow()["id"].to_pylist() == [3]
    catalog.purge_table("py.t")
    assert not catalog.table_exists("py.t")


@pytest.mark.slow
@pytest.mark.parametrize("line", ["3.5", "4.1"])
def test_spark_round_trip_with_sts_credentials(sts_server, sts_s3, line):
    """Spark with no S3 key in its configuration: S3FileIO uses the table-scoped credentials of
    ``storage-credentials`` for create, insert, overwrite, delete, expire_snapshots (which deletes
    the expired files itself, with DeleteObjects) and DROP TABLE ... PURGE (Spark deletes the files)."""
    from tests.integration.spark_support import DRIVERS, catalog_conf

    conf = catalog_conf(sts_server.url, WAREHOUSE)
    assert not any("s3" in key.lower() or "secret" in key.lower() for key in conf)
    spark, catalog = DRIVERS.catalog(line, sts_server.url, WAREHOUSE)
    namespace = f"sparksts{line.replace('.', '')}"
    table = f"{catalog}.{namespace}.t"
    admin = sts_s3.client()

    def parquet_files() -> list[str]:
        listed = admin.list_objects(TEST_BUCKET, prefix=f"{WAREHOUSE}/{namespace}/", recursive=True)
        return [found.object_name for found in listed if found.object_name.endswith(".parquet")]

    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
        spark.sql(f"CREATE TABLE {table} (id bigint, name string) USING iceberg PARTITIONED BY (name)")
        spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'a')")
        assert sorted(row[0] for row in spark.sql(f"SELECT id FROM {table}").collect()) == [1, 2, 3]
        spark.sql(f"INSERT OVERWRITE {table} VALUES (10, 'a'), (11, 'c')")
        spark.sql(f"DELETE FROM {table} WHERE id = 10")
        assert [row[0] for row in spark.sql(f"SELECT id FROM {table}").collect()] == [11]
        assert len(parquet_files()) > 1
        # the default keeps 5 days; a day ahead holds in any session time zone
        now = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
        spark.sql(
            f"CALL {catalog}.system.expire_snapshots(table => '{namespace}.t', "
            f"older_than => TIMESTAMP '{now}', retain_last => 1)"
        )
        assert [row[0] for row in spark.sql(f"SELECT id FROM {table}").collect()] == [11]
        assert len(parquet_files()) == 1  # Spark deleted the expired snapshots' files
        spark.sql(f"DROP TABLE {table} PURGE")
        assert parquet_files() == []
    except Exception:
        print(spark.log())
        raise
    assert TEST_SECRET_KEY not in sts_server.log()


def test_a_slow_sts_does_not_hold_up_the_workers_other_requests(sts_settings, sts_s3, app, tmp_path):
    """loadTable with vended credentials calls STS; with one worker and STS held, the worker still
    answers other requests: the call runs in a thread, not on the worker's event loop."""
    proxy = HoldingProxy(sts_s3.endpoint, held=b"POST ")
    extra = {
        "GROWLER_STS_ROLE_ARN": sts_settings.sts.role_arn,
        "GROWLER_STS_DURATION_S": str(DURATION_S),
        "GROWLER_STS_ENDPOINT": proxy.endpoint,
        "GROWLER_WORKERS": "1",
    }
    server = start_server(sts_settings, tmp_path, extra)
    try:
        url = f"{server.url}/v1/{WAREHOUSE}"
        httpx.post(f"{url}/namespaces", json={"namespace": ["slow"]}).raise_for_status()
        request = {
            "name": "t",
            "schema": {"type": "struct", "fields": [{"id": 1, "name": "x", "type": "long", "required": False}]},
        }
        httpx.post(f"{url}/namespaces/slow/tables", json=request).raise_for_status()
        table = f"{url}/namespaces/slow/tables/t"
        httpx.get(table).raise_for_status()  # the caller's grants and the warehouse are cached now
        proxy.holding = True
        answers: dict[str, httpx.Response] = {}

        def load() -> None:
            answers["load"] = httpx.get(
                table, headers={"X-Iceberg-Access-Delegation": "vended-credentials"}, timeout=60
            )

        loader = threading.Thread(target=load)
        loader.start()
        assert proxy.request_held.wait(30), "loadTable never asked STS"
        # while STS holds the worker's call, the same worker answers a namespace and a table
        assert httpx.get(f"{url}/namespaces/slow", timeout=10).status_code == 200
        assert httpx.get(table, timeout=10).status_code == 200
        assert loader.is_alive() and "load" not in answers
        proxy.release.set()
        loader.join(60)
        loaded = answers["load"]
        assert loaded.status_code == 200, loaded.text
        [credential] = loaded.json()["storage-credentials"]
        assert credential["config"]["s3.session-token"]
    finally:
        proxy.close()
        stop_server(server)
