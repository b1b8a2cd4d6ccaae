"""Real clients read and write through remote signing, with no S3 key in their configuration.

A gunicorn server serves a warehouse in ``remote-signing`` mode; PyIceberg (its FsspecFileIO
with the ``S3V4RestSigner``, which needs ``s3fs``) is given the catalog URL and the warehouse
name, nothing else. Every S3 request it makes is signed by Growler's ``/sign`` endpoint, and
the keys never reach it.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.conftest import TEST_BUCKET, TEST_CREDENTIAL
from tests.integration.conftest import Server, start_server, stop_server

WAREHOUSE = "signed-clients"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("ts", pa.timestamp("us"))])


def _rows(*ids: int) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "name": f"n{i}", "ts": datetime(2024, 1, 1 + i % 3)} for i in ids], schema=ARROW
    )


@pytest.fixture(autouse=True)
def _one_io_thread(pyiceberg_io_on_one_thread) -> None:
    """PyIceberg signs on one I/O thread here (tests/integration/conftest.py says why)."""


@pytest.fixture(scope="module")
def signing_settings(settings):
    return dataclasses.replace(
        settings,
        warehouse=WAREHOUSE,
        warehouse_location=f"s3://{TEST_BUCKET}/{WAREHOUSE}/",
        storage_credentials_mode="remote-signing",
    )


@pytest.fixture(scope="module")
def signing_server(signing_settings, app, tmp_path_factory) -> Iterator[Server]:
    running = start_server(signing_settings, tmp_path_factory.mktemp("gunicorn-signing"))
    try:
        yield running
    finally:
        stop_server(running)


def test_pyiceberg_round_trip_through_remote_signing(signing_server, signing_settings):
    catalog = RestCatalog("signed", uri=signing_server.url, warehouse=WAREHOUSE, credential=TEST_CREDENTIAL)
    assert not any("access-key" in key or "secret" in key for key in catalog.properties)
    catalog.create_namespace("rs")
    table = catalog.create_table("rs.events", schema=SCHEMA)
    assert table.io.properties["s3.remote-signing-enabled"] == "true"
    assert type(table.io).__name__ == "FsspecFileIO"  # the FileIO that signs through the catalog
    assert "s3.secret-access-key" not in table.io.properties
    assert "s3.access-key-id" not in table.io.properties

    table.append(_rows(1, 2, 3))
    assert sorted(catalog.load_table("rs.events").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]

    table = catalog.load_table("rs.events")
    table.overwrite(_rows(10, 11))
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [10, 11]

    table.delete(EqualTo("id", 10))
    table = catalog.load_table("rs.events")
    assert table.scan().to_arrow()["id"].to_pylist() == [11]
    assert len(table.metadata.snapshots) >= 3

    store = S3ObjectStore(signing_settings.s3)
    location = Location.parse(table.location())
    written = [found.uri for found in store.list(location)]
    assert any(uri.endswith(".parquet") for uri in written) and any("metadata" in uri for uri in written)

    catalog.purge_table("rs.events")
    assert not catalog.table_exists("rs.events")


def test_pyiceberg_writes_its_own_data_and_metadata_paths_through_signing(signing_server, signing_settings):
    """``write.data.path`` and ``write.metadata.path`` outside the table's location (inside its
    namespace's): folders the table owns (issue 46), which the signer serves as it does the location."""
    catalog = RestCatalog("signed", uri=signing_server.url, warehouse=WAREHOUSE, credential=TEST_CREDENTIAL)
    catalog.create_namespace("paths")
    base = f"s3://{TEST_BUCKET}/{WAREHOUSE}/paths"
    properties = {"write.data.path": f"{base}/t-data", "write.metadata.path": f"{base}/t-meta"}
    table = catalog.create_table("paths.t", schema=SCHEMA, properties=properties)
    table.append(_rows(1, 2))
    table = catalog.load_table("paths.t")
    table.append(_rows(3))
    assert sorted(catalog.load_table("paths.t").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]
    store = S3ObjectStore(signing_settings.s3)
    data = [found.uri for found in store.list(Location.parse(f"{base}/t-data"))]
    metadata = [found.uri for found in store.list(Location.parse(f"{base}/t-meta"))]
    assert len([uri for uri in data if uri.endswith(".parquet")]) == 2
    assert any(uri.endswith(".avro") for uri in metadata) and any(uri.endswith(".metadata.json") for uri in metadata)
    assert not [found for found in store.list(Location.parse(table.location())) if found.uri.endswith(".parquet")]


def test_signing_log_holds_no_secret(signing_server, signing_settings):
    catalog = RestCatalog("signed", uri=signing_server.url, warehouse=WAREHOUSE, credential=TEST_CREDENTIAL)
    catalog.create_namespace_if_not_exists("logs")
    table = catalog.create_table_if_not_exists("logs.t", schema=SCHEMA)
    table.append(_rows(1))
    assert table.scan().to_arrow().num_rows == 1
    log = signing_server.log()
    assert "signRequest" in log
    assert signing_settings.s3.secret_key not in log
    assert "Signature=" not in log


@pytest.mark.parametrize("line", ["3.5", "4.1"])
def test_spark_round_trip_through_remote_signing(signing_server, signing_settings, line):
    """Spark 3.5 and 4.1 with Iceberg 1.12: S3FileIO signs every request through ``/sign``
    (``s3.remote-signing-enabled``): create, insert, overwrite, delete, expire_snapshots (whose
    DeleteObjects Growler refuses here: SeaweedFS does not check a body against its signature, see
    app/storage_access/bulk_deletes.py), purge."""
    from tests.integration.spark_support import DRIVERS

    # rest-catalog-purge: Growler purges a dropped table's files. Left to Spark (Iceberg 1.12's
    # default), the purge would sign for a table that no longer exists, which the signer refuses.
    options = {"header.X-Iceberg-Access-Delegation": "remote-signing", "rest-catalog-purge": "true"}
    spark, catalog = DRIVERS.catalog(line, signing_server.url, WAREHOUSE, **options)
    try:
        namespace = f"sparkrs{line.replace('.', '')}"
        table = f"{catalog}.{namespace}.t"
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{namespace}")
        spark.sql(f"CREATE TABLE {table} (id bigint, name string) USING iceberg PARTITIONED BY (name)")
        spark.sql(f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'a')")
        assert sorted(row[0] for row in spark.sql(f"SELECT id FROM {table}").collect()) == [1, 2, 3]
        spark.sql(f"INSERT OVERWRITE {table} VALUES (10, 'a'), (11, 'c')")
        spark.sql(f"DELETE FROM {table} WHERE id = 10")
        assert [row[0] for row in spark.sql(f"SELECT id FROM {table}").collect()] == [11]
        store = S3ObjectStore(signing_settings.s3)
        root = Location.parse(f"s3://{TEST_BUCKET}/{WAREHOUSE}/{namespace}/")
        written = {f.uri for f in store.list(root) if f.uri.endswith(".parquet")}
        assert len(written) > 1
        # the default keeps 5 days; a day ahead holds in any session time zone
        now = (datetime.now(UTC) + timedelta(days=1)).strftime("%Y-%m-%d %H:%M:%S")
        spark.sql(
            f"CALL {catalog}.system.expire_snapshots(table => '{namespace}.t', "
            f"older_than => TIMESTAMP '{now}', retain_last => 1)"
        )
        assert [row[0] for row in spark.sql(f"SELECT id FROM {table}").collect()] == [11]
        # the snapshots expired; their files stay: the bulk delete was refused, not signed
        assert len(spark.sql(f"SELECT * FROM {table}.snapshots").collect()) == 1
        assert {f.uri for f in store.list(root) if f.uri.endswith(".parquet")} == written
        spark.sql(f"DROP TABLE {table} PURGE")
        # The default soft policy (issue 35) keeps the dropped table in the recycle bin, its purge
        # waiting for the retention's end: an administrator's purge runs it now.
        bin_url = f"{signing_server.url}/management/v1/warehouses/{WAREHOUSE}/bin"
        (unit,) = httpx.get(bin_url, params={"namespace": namespace}, timeout=30).json()["units"]
        assert unit["purge-requested"] is True and {f.uri for f in store.list(root) if f.uri.endswith(".parquet")}
        assert httpx.delete(f"{bin_url}/{unit['id']}", timeout=30).status_code == 204
        # Growler's purger deletes the files in the background: wait, bounded, for it.
        deadline = time.monotonic() + 90
        while (left := [f.uri for f in store.list(root)]) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert left == []
    except Exception:
        print(spark.log())
        raise
