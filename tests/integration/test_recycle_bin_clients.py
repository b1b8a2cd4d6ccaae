"""The recycle bin (issue 35) with real clients against gunicorn on the default (soft) policy:
Spark (both lines, one test each on the shared drivers) and PyIceberg create and fill a table,
drop it, see the name reused, undrop it under a new name with the same rows, history and uuid,
write again; (PyIceberg) a drop with purge keeps the files until the purge (an administrator's,
here), then the table's files go."""

from __future__ import annotations

import re
import time

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.conftest import TEST_CREDENTIAL
from tests.integration.spark_support import CATALOG

pytestmark = pytest.mark.slow


def bin_units(server, namespace: str) -> list[dict]:
    url = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin"
    response = httpx.get(url, params={"namespace": namespace.replace(".", "\x1f")}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["units"]


def undrop(server, unit_id: int, **body: object) -> httpx.Response:
    url = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin/{unit_id}/undrop"
    return httpx.post(url, json=body, timeout=30)


def purge_now(server, unit_id: int) -> None:
    url = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin/{unit_id}"
    assert httpx.delete(url, timeout=30).status_code == 204


def objects_under(objects: S3ObjectStore, location: str) -> list[str]:
    return sorted(found.uri for found in objects.list(Location.parse(location)))


def wait_until_empty(objects: S3ObjectStore, location: str, timeout_s: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    remaining = objects_under(objects, location)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.3)
        remaining = objects_under(objects, location)
    return remaining


def test_spark_drop_undrop_and_reuse(spark, server, request):
    line = request.node.callspec.id.replace(".", "")
    ns = f"bin_{re.sub(r'[^a-z0-9]+', '_', line.lower())}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{ns}")
    table = f"{CATALOG}.{ns}.orders"
    spark.sql(f"CREATE TABLE {table} (id bigint, item string) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'tea'), (2, 'mug')")
    spark.sql(f"INSERT INTO {table} VALUES (3, 'pot')")
    history = [
        tuple(r) for r in spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at").collect()
    ]

    spark.sql(f"DROP TABLE {table}")
    assert [r[1] for r in spark.sql(f"SHOW TABLES IN {CATALOG}.{ns}").collect()] == []
    spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg")  # the name is free at once
    spark.sql(f"INSERT INTO {table} VALUES (100)")
    (unit,) = bin_units(server, ns)
    assert unit["kind"] == "table" and unit["name"] == "orders"
    assert undrop(server, unit["id"]).status_code == 409  # the old name is taken
    back = undrop(server, unit["id"], name="orders_before")
    assert back.status_code == 200, back.text

    restored = f"{CATALOG}.{ns}.orders_before"
    assert [tuple(r) for r in spark.sql(f"SELECT id, item FROM {restored} ORDER BY id").collect()] == [
        (1, "tea"),
        (2, "mug"),
        (3, "pot"),
    ]
    assert [
        tuple(r) for r in spark.sql(f"SELECT snapshot_id FROM {restored}.snapshots ORDER BY committed_at").collect()
    ] == history
    spark.sql(f"INSERT INTO {restored} VALUES (4, 'cup')")  # writable again
    assert spark.sql(f"SELECT count(*) FROM {restored}").collect()[0][0] == 4
    assert spark.sql(f"SELECT id FROM {table}").collect()[0][0] == 100  # the new table untouched
    # (a DROP ... PURGE left to the catalog waits in the bin: spark_sql/test_spark_maintenance.py's purge tests)


def test_pyiceberg_drop_undrop_same_rows_and_history(server, settings, clean_catalog):
    catalog = RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)
    catalog.create_namespace("shop")
    rows = pa.table({"id": pa.array([1, 2], pa.int64()), "item": pa.array(["tea", "mug"])})
    table = catalog.create_table("shop.items", schema=rows.schema)
    table.append(rows)
    table.append(rows.slice(0, 1))
    snapshots = [s.snapshot_id for s in catalog.load_table("shop.items").snapshots()]

    catalog.drop_table("shop.items")
    with pytest.raises(NoSuchTableError):
        catalog.load_table("shop.items")
    assert catalog.list_tables("shop") == []
    (unit,) = bin_units(server, "shop")
    assert undrop(server, unit["id"]).status_code == 200

    back = catalog.load_table("shop.items")
    assert back.metadata.table_uuid == table.metadata.table_uuid
    assert [s.snapshot_id for s in back.snapshots()] == snapshots
    assert sorted(back.scan().to_arrow()["id"].to_pylist()) == [1, 1, 2]
    back.append(rows)
    assert catalog.load_table("shop.items").scan().to_arrow().num_rows == 5

    objects = S3ObjectStore(settings.s3)
    location = back.location()
    catalog.purge_table("shop.items")  # purgeRequested=true: deferred to the end of the retention
    (unit,) = bin_units(server, "shop")
    assert unit["purge-requested"] is True and objects_under(objects, location)
    purge_now(server, unit["id"])
    assert wait_until_empty(objects, location) == []
