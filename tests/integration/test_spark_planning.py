"""Iceberg's Java client (Spark 3.5, Iceberg 1.12) reading through Growler's scan plans.

Growler runs with ``GROWLER_SCAN_PLANNING_MODE=server``, so every loadTable's config says
``scan-planning-mode=server``; the Spark catalog itself says ``client``. Java honours the table's
config over its own (``RESTSessionCatalog`` logs the mismatch), so it plans every scan with
planTableScan/fetchScanTasks (``RESTTableScan``) instead of reading manifests: the switch works
on a client that was told otherwise.
The table is Spark's own: a partitioned v2 table with merge-on-read deletes (position delete
files), so the plan carries delete files and the Java client applies them. Growler's plans are
also compared with PyIceberg's client-side plans of the same table (data and delete files).
"""

from __future__ import annotations

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)

from tests.conftest import TEST_CREDENTIAL

pytestmark = pytest.mark.slow

NS = "spark_planning"
FILTERS = [
    AlwaysTrue(),
    AlwaysFalse(),
    EqualTo("region", "eu"),
    NotEqualTo("region", "eu"),
    LessThan("id", 10),
    LessThanOrEqual("id", 20),
    GreaterThan("id", 25),
    GreaterThanOrEqual("amount", 250),
    In("id", {1, 2, 33}),
    NotIn("region", {"us"}),
    IsNull("amount"),
    NotNull("amount"),
    StartsWith("region", "e"),
    NotStartsWith("region", "e"),
    And(EqualTo("region", "us"), LessThan("id", 15)),
    Or(GreaterThan("amount", 250), In("id", {1, 2})),
    Not(EqualTo("region", "us")),
    And(GreaterThanOrEqual("id", 10), LessThan("id", 20)),
    Or(IsNull("amount"), EqualTo("id", 7)),
    EqualTo("id", 1000),
    In("region", {"eu", "us"}),
]


@pytest.fixture(scope="module")
def server(settings, app, tmp_path_factory):
    """This module's own gunicorn, telling clients to plan on the server."""
    from tests.integration.conftest import start_server, stop_server

    running = start_server(settings, tmp_path_factory.mktemp("planning"), {"GROWLER_SCAN_PLANNING_MODE": "server"})
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def planning_spark(server, app):
    """The shared Spark 3.5 driver and a catalog in it whose client would plan locally
    (``scan-planning-mode: client``): the table config's ``server`` must win."""
    from tests.integration.spark_support import DRIVERS

    return DRIVERS.catalog("3.5", server.url, server.warehouse, **{"scan-planning-mode": "client"})


def planned(table, row_filter) -> set[tuple[str, frozenset[str]]]:
    return {
        (t.file.file_path, frozenset(d.file_path for d in t.delete_files))
        for t in table.scan(row_filter=row_filter).plan_files()
    }


def planned_operations(server) -> int:
    return server.log().count('"operation":"planTableScan"')


def test_spark_reads_merge_on_read_table_through_server_plans(planning_spark, server, clean_catalog):
    spark, catalog = planning_spark
    spark.sql(f"CREATE NAMESPACE {catalog}.{NS}").collect()
    spark.sql(
        f"CREATE TABLE {catalog}.{NS}.orders (id bigint, region string, amount int) USING iceberg"
        " PARTITIONED BY (region)"
        " TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read',"
        " 'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read')"
    ).collect()
    for band in range(3):
        values = ", ".join(f"({i}, '{'eu' if i % 2 else 'us'}', {i * 10})" for i in range(band * 10, band * 10 + 10))
        spark.sql(f"INSERT INTO {catalog}.{NS}.orders VALUES {values}").collect()
    spark.sql(f"DELETE FROM {catalog}.{NS}.orders WHERE id IN (3, 4, 17, 25)").collect()
    spark.sql(  # merge-on-read MERGE: position deletes for the updated row, a new data file
        f"MERGE INTO {catalog}.{NS}.orders t USING (SELECT 8 AS id, 'us' AS region, 999 AS amount"
        " UNION ALL SELECT 40, 'eu', NULL) s ON t.id = s.id"
        " WHEN MATCHED THEN UPDATE SET t.amount = s.amount WHEN NOT MATCHED THEN INSERT *"
    ).collect()

    loaded = httpx.get(f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/orders").json()
    assert loaded["config"]["scan-planning-mode"] == "server"
    before = planned_operations(server)
    rows = spark.sql(f"SELECT id FROM {catalog}.{NS}.orders ORDER BY id").collect()
    assert [r[0] for r in rows] == [i for i in range(30) if i not in (3, 4, 17, 25)] + [40]
    filtered = spark.sql(f"SELECT id FROM {catalog}.{NS}.orders WHERE region = 'eu' AND id < 20 ORDER BY id").collect()
    assert [r[0] for r in filtered] == [i for i in range(20) if i % 2 and i not in (3, 17)]
    assert planned_operations(server) >= before + 2, "the Java client did not plan on the server"

    # Growler's plans of Spark's table = PyIceberg's client-side plans, delete files included
    local = RestCatalog("client", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL).load_table(
        (NS, "orders")
    )
    remote = RestCatalog(
        "server",
        uri=server.url,
        warehouse=server.warehouse,
        credential=TEST_CREDENTIAL,
        **{"scan-planning-mode": "server"},
    ).load_table((NS, "orders"))
    assert spark.sql(f"SELECT amount FROM {catalog}.{NS}.orders WHERE id = 8").collect()[0][0] == 999
    for row_filter in FILTERS:
        local_plan = planned(local, row_filter)
        assert planned(remote, row_filter) == local_plan
        assert any(deletes for _, deletes in local_plan) or row_filter != AlwaysTrue()
        assert sorted(remote.scan(row_filter=row_filter).to_arrow().column("id").to_pylist()) == sorted(
            local.scan(row_filter=row_filter).to_arrow().column("id").to_pylist()
        )
