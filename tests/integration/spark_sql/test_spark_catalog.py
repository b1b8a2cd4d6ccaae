"""Spark 3.5 and 4.1 (PySpark + Iceberg's Spark runtime) against a running gunicorn: nested namespaces
and their properties, two warehouses created through the management API, views.

The session is configured with Growler's URL and warehouse name and asks for vended credentials
(``spark_support.catalog_conf``); everything about S3 (endpoint, region, addressing style, keys)
comes from the catalog. Every test runs once per Spark line (``spark_support``); one session per
line is shared by every test (a JVM start costs tens of seconds); each test works in its own
namespace. Results are checked through Spark, through the REST API (the metadata Growler
stores) and by listing the bucket (fixtures in this directory's conftest.py).
"""

from __future__ import annotations

import httpx
import pytest

from storage.objects import S3ObjectStore
from tests.integration.spark_sql.spark_sql_support import load_table, ns_path, objects_under, rows, scalar
from tests.integration.spark_support import CATALOG, add_catalog

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------
# namespaces
# ------------------------------------------------------------------------------------------


def test_namespaces_nested_and_properties(spark, server, ns):
    spark.sql(f"CREATE NAMESPACE {CATALOG}.{ns}.inner WITH DBPROPERTIES ('steward' = 'etl', 'tier' = 'gold')")
    spark.sql(f"CREATE NAMESPACE {CATALOG}.{ns}.inner.deepest")

    assert rows(spark, f"SHOW NAMESPACES IN {CATALOG}.{ns}") == [(f"{ns}.inner",)]
    assert rows(spark, f"SHOW NAMESPACES IN {CATALOG}.{ns}.inner") == [(f"{ns}.inner.deepest",)]
    top_level = [r[0] for r in rows(spark, f"SHOW NAMESPACES IN {CATALOG}")]
    assert ns in top_level and f"{ns}.inner" not in top_level

    spark.sql(f"ALTER NAMESPACE {CATALOG}.{ns}.inner SET DBPROPERTIES ('tier' = 'silver', 'team' = 'data')")
    described = dict(rows(spark, f"DESCRIBE NAMESPACE EXTENDED {CATALOG}.{ns}.inner"))
    assert "(steward,etl), (team,data), (tier,silver)" in described["Properties"]

    # what Growler stores, over its own API
    response = httpx.get(f"{server.url}/v1/{server.warehouse}/namespaces/{ns_path(ns + '.inner')}")
    assert response.status_code == 200
    properties = response.json()["properties"]
    assert {k: properties[k] for k in ("steward", "tier", "team")} == {
        "steward": "etl",
        "tier": "silver",
        "team": "data",
    }
    assert properties["owner"]  # Spark sets it to the current user

    # a table three levels deep
    spark.sql(f"CREATE TABLE {CATALOG}.{ns}.inner.deepest.t (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{ns}.inner.deepest.t VALUES (1), (2)")
    assert rows(spark, f"SELECT id FROM {CATALOG}.{ns}.inner.deepest.t ORDER BY id") == [(1,), (2,)]
    assert load_table(server, f"{ns}.inner.deepest", "t")["metadata"]["location"].startswith(
        f"s3://growler-test-warehouse/{ns}/inner/deepest/t"
    )

    # non-empty namespaces refuse to go; empty ones go
    with pytest.raises(Exception, match="(?i)not empty|NamespaceNotEmpty"):
        spark.sql(f"DROP NAMESPACE {CATALOG}.{ns}.inner.deepest")
    spark.sql(f"DROP TABLE {CATALOG}.{ns}.inner.deepest.t")
    spark.sql(f"DROP NAMESPACE {CATALOG}.{ns}.inner.deepest")
    assert rows(spark, f"SHOW NAMESPACES IN {CATALOG}.{ns}.inner") == []


# ------------------------------------------------------------------------------------------
# warehouses created through the management API
# ------------------------------------------------------------------------------------------


def test_two_warehouses_created_through_the_management_api(spark, server, settings, request):
    """Two warehouses in buckets of their own, each with keys of its own (one signing, one vending
    its static keys), each used by Spark through its name: the files land in each one's location."""
    line = request.node.callspec.id.replace(".", "")
    uri = spark.conf.get(f"spark.sql.catalog.{CATALOG}.uri")
    s3 = settings.s3
    created = []
    for mode in ("remote-signing", "static"):
        name = f"managed_{mode.replace('-', '_')}_{line}"
        bucket = f"growler-managed-{mode}-{line}"
        S3ObjectStore(s3).ensure_bucket(bucket)
        # keys of each warehouse's own (static mode takes nothing else: never the server's)
        storage = {"endpoint": s3.endpoint, "credentials-mode": mode}
        storage.update({"access-key-id": s3.access_key, "secret-access-key": s3.secret_key})
        body = {"name": name, "location": f"s3://{bucket}/wh/", "storage": storage}
        response = httpx.post(f"{server.url}/management/v1/warehouses", json=body, timeout=30)
        assert response.status_code in (201, 409), response.text  # 409: the other Spark line's run
        catalog = add_catalog(spark, f"growler_{name}", uri, name)
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.sales")
        spark.sql(f"CREATE OR REPLACE TABLE {catalog}.sales.orders (id bigint, mode string) USING iceberg")
        spark.sql(f"INSERT INTO {catalog}.sales.orders VALUES (1, '{mode}'), (2, '{mode}')")
        created.append((catalog, bucket, mode))
    for catalog, bucket, mode in created:
        assert rows(spark, f"SELECT id, mode FROM {catalog}.sales.orders ORDER BY id") == [(1, mode), (2, mode)]
        listing = objects_under(S3ObjectStore(s3), f"s3://{bucket}/wh/sales/")
        assert sum(o.endswith(".parquet") for o in listing) >= 1
        assert sum(o.endswith(".metadata.json") for o in listing) >= 1
        assert all(o.startswith(f"s3://{bucket}/wh/sales/orders") for o in listing)


# ------------------------------------------------------------------------------------------
# views
# ------------------------------------------------------------------------------------------


def test_views(spark, server, ns):
    table = f"{CATALOG}.{ns}.sales"
    spark.sql(f"CREATE TABLE {table} (id bigint, region string, amount double) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'eu', 10.0), (2, 'us', 20.0), (3, 'eu', 5.0)")

    view = f"{CATALOG}.{ns}.by_region"
    spark.sql(
        f"CREATE VIEW {view} (region, total COMMENT 'sum of amounts') COMMENT 'sales per region' AS "
        f"SELECT region, sum(amount) FROM {table} GROUP BY region"
    )
    assert rows(spark, f"SELECT * FROM {view} ORDER BY region") == [("eu", 15.0), ("us", 20.0)]
    assert [r[1] for r in rows(spark, f"SHOW VIEWS IN {CATALOG}.{ns}")] == ["by_region"]

    view_url = f"{server.url}/v1/{server.warehouse}/namespaces/{ns}/views/by_region"
    stored = httpx.get(view_url).json()["metadata"]
    assert len(stored["versions"]) == 1
    representation = stored["versions"][0]["representations"][0]
    assert representation["dialect"] == "spark" and "GROUP BY region" in representation["sql"]

    # the view follows its table
    spark.sql(f"INSERT INTO {table} VALUES (4, 'us', 1.0)")
    assert rows(spark, f"SELECT * FROM {view} ORDER BY region") == [("eu", 15.0), ("us", 21.0)]

    # Iceberg's Spark extensions (3.5) refuse ALTER VIEW ... AS ("use CREATE OR REPLACE VIEW"): that is
    # the statement that replaces a view's query (a replaceView commit adding a version)
    spark.sql(f"CREATE OR REPLACE VIEW {view} AS SELECT region, count(*) AS orders FROM {table} GROUP BY region")
    assert rows(spark, f"SELECT * FROM {view} ORDER BY region") == [("eu", 2), ("us", 2)]
    stored = httpx.get(view_url).json()["metadata"]
    assert len(stored["versions"]) == 2
    assert stored["current-version-id"] == max(v["version-id"] for v in stored["versions"])

    spark.sql(f"ALTER VIEW {view} SET TBLPROPERTIES ('steward' = 'bi')")
    assert httpx.get(view_url).json()["metadata"]["properties"]["steward"] == "bi"

    # a view and a table cannot share a name
    with pytest.raises(Exception, match="(?i)already exists"):
        spark.sql(f"CREATE VIEW {CATALOG}.{ns}.sales AS SELECT 1")

    spark.sql(f"DROP VIEW {view}")
    assert rows(spark, f"SHOW VIEWS IN {CATALOG}.{ns}") == []
    assert httpx.get(view_url).status_code == 404
    assert scalar(spark, f"SELECT count(*) FROM {table}") == 4  # the table is untouched
