"""Spark SQL's standard sequences after a DROP TABLE on the default warehouse (soft deletion policy,
a recycle bin), once per Spark line: they work as on a catalog without a bin (docs/recycle-bin.md,
"take-overs"), and the bin keeps what it holds without ever taking a live table's place.

At one explicit location, in turn: ``CREATE TABLE ... LOCATION`` after a drop, ``CREATE OR REPLACE
TABLE ... LOCATION ... AS SELECT`` after a drop (a staged create and its commit), and
``CALL system.register_table`` of the first table's last metadata file after a drop (its rows
back, writable). Each dropped table waits in the bin meanwhile; an undrop over the live table is 409.
"""

from __future__ import annotations

import httpx
import pytest

from tests.integration.spark_sql.spark_sql_support import load_table, ns_path, rows
from tests.integration.spark_support import CATALOG

pytestmark = pytest.mark.slow


def bin_of(server, ns: str) -> list[dict]:
    url = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin"
    response = httpx.get(url, params={"namespace": ns}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["units"]


def test_create_replace_and_register_at_a_dropped_tables_location(spark, server, ns):
    namespace = httpx.get(f"{server.url}/v1/{server.warehouse}/namespaces/{ns_path(ns)}", timeout=30).json()
    location = f"{namespace['properties']['location'].rstrip('/')}/orders_explicit"
    table = f"{CATALOG}.{ns}.orders"
    spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg LOCATION '{location}'")
    spark.sql(f"INSERT INTO {table} VALUES (1), (2)")
    first = load_table(server, ns, "orders")

    spark.sql(f"DROP TABLE {table}")
    spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg LOCATION '{location}'")
    spark.sql(f"INSERT INTO {table} VALUES (10)")
    assert rows(spark, f"SELECT id FROM {table}") == [(10,)]

    spark.sql(f"DROP TABLE {table}")
    spark.sql(
        f"CREATE OR REPLACE TABLE {table} USING iceberg LOCATION '{location}'"
        " AS SELECT id FROM VALUES (100L), (200L) AS v(id)"
    )
    assert rows(spark, f"SELECT id FROM {table} ORDER BY id") == [(100,), (200,)]
    assert load_table(server, ns, "orders")["metadata"]["location"] == location

    spark.sql(f"DROP TABLE {table}")
    spark.sql(
        f"CALL {CATALOG}.system.register_table(table => '{ns}.orders', metadata_file => '{first['metadata-location']}')"
    )
    assert rows(spark, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,)]
    spark.sql(f"INSERT INTO {table} VALUES (3)")
    assert rows(spark, f"SELECT id FROM {table} ORDER BY id") == [(1,), (2,), (3,)]
    assert load_table(server, ns, "orders")["metadata"]["table-uuid"] == first["metadata"]["table-uuid"]

    units = bin_of(server, ns)
    assert [unit["name"] for unit in units] == ["orders", "orders", "orders"]
    base = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin"
    for unit in units:  # none comes back over the live table (the location is what is taken)
        refused = httpx.post(f"{base}/{unit['id']}/undrop", json={"name": f"orders_{unit['id']}"}, timeout=30)
        assert refused.status_code == 409 and refused.json()["error"]["type"] == "LocationTakenException"
