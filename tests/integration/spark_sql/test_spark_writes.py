"""Spark 3.5 and 4.1 (PySpark + Iceberg's Spark runtime and S3FileIO) against a running gunicorn:
partitioned writes and filtered reads, MERGE/UPDATE/DELETE (copy-on-write and merge-on-read),
CTAS/RTAS (staged creates), in each way of reaching storage where it differs.

The session is configured with Growler's URL and warehouse name and asks for vended credentials
(``spark_support.catalog_conf``); everything about S3 (endpoint, region, addressing style, keys)
comes from the catalog. Every test runs once per Spark line (``spark_support``); one session per
line is shared by every test (a JVM start costs tens of seconds); each test works in its own
namespace. Results are checked through Spark, through the REST API (the metadata Growler
stores) and by listing the bucket (fixtures in this directory's conftest.py).
"""

from __future__ import annotations

import re

import httpx
import pytest

from storage.objects import S3ObjectStore
from tests.integration.spark_sql.spark_sql_support import load_table, objects_under, rows, scalar, snapshot_operations
from tests.integration.spark_support import CATALOG

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------
# create, write, read
# ------------------------------------------------------------------------------------------

EVENTS = [  # id, ts, category, amount
    (1, "2024-01-01 08:00:00", "a", 1.5),
    (2, "2024-01-01 09:30:00", "b", 2.5),
    (3, "2024-01-01 23:59:59", "a", 3.5),
    (4, "2024-01-02 00:00:00", "b", 4.5),
    (5, "2024-01-02 12:00:00", "a", 5.5),
    (6, "2024-01-02 13:00:00", "c", 6.5),
    (7, "2024-01-03 01:00:00", "c", 7.5),
    (8, "2024-01-03 02:00:00", "a", 8.5),
]


def values_sql(events) -> str:
    return ", ".join(f"({i}, TIMESTAMP '{ts}', '{c}', {a})" for i, ts, c, a in events)


def test_partitioned_table_insert_and_filtered_select(spark, server, ns, objects):
    table = f"{CATALOG}.{ns}.events"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, ts timestamp, category string, amount double) "
        "USING iceberg PARTITIONED BY (days(ts), bucket(8, id))"
    )
    spark.sql(f"INSERT INTO {table} VALUES {values_sql(EVENTS[:5])}")
    spark.sql(f"INSERT INTO {table} VALUES {values_sql(EVENTS[5:])}")

    assert scalar(spark, f"SELECT count(*) FROM {table}") == 8
    assert rows(spark, f"SELECT id FROM {table} WHERE ts >= '2024-01-02' AND ts < '2024-01-03' ORDER BY id") == [
        (4,),
        (5,),
        (6,),
    ]
    assert rows(spark, f"SELECT id, category, amount FROM {table} WHERE id = 7") == [(7, "c", 7.5)]
    assert rows(
        spark,
        f"SELECT category, count(*), sum(amount) FROM {table} WHERE amount > 2 GROUP BY category ORDER BY category",
    ) == [("a", 3, 17.5), ("b", 2, 7.0), ("c", 2, 14.0)]
    assert rows(spark, f"SELECT id FROM {table} WHERE category = 'c' AND ts < '2024-01-03' ORDER BY id") == [(6,)]

    # the partition spec Growler stored, and the files laid out by it
    metadata = load_table(server, ns, "events")["metadata"]
    spec = next(s for s in metadata["partition-specs"] if s["spec-id"] == metadata["default-spec-id"])
    assert [(f["name"], f["transform"]) for f in spec["fields"]] == [("ts_day", "day"), ("id_bucket", "bucket[8]")]
    assert len(metadata["snapshots"]) == 2
    data_files = [o for o in objects_under(objects, metadata["location"]) if o.endswith(".parquet")]
    days = {re.search(r"ts_day=([0-9-]+)/", f).group(1) for f in data_files}
    assert days == {"2024-01-01", "2024-01-02", "2024-01-03"}
    assert all(re.search(r"/id_bucket=[0-7]/", f) for f in data_files)
    # Iceberg's own view of the files agrees with the bucket, partition values included
    files = rows(spark, f"SELECT file_path, partition.ts_day, partition.id_bucket FROM {table}.files")
    assert sorted(f[0] for f in files) == sorted(data_files)
    assert all(f"ts_day={day}/id_bucket={bucket}/" in path for path, day, bucket in files)
    assert scalar(spark, f"SELECT count(*) FROM {table}.partitions") == len({(d, b) for _, d, b in files})
    # the change feed (docs/events.md): the create, then one update-table per INSERT carrying its snapshot
    feed = httpx.post(
        f"{server.url}/v1/{server.warehouse}/events",
        json={"catalog-objects-by-name": [[*ns.split("."), "events"]]},
        timeout=30,
    ).json()["events"]
    operations = [event["operation"] for event in feed]
    assert [op["operation-type"] for op in operations][-2:] == ["update-table", "update-table"]
    assert {op["operation-type"] for op in operations[:-2]} <= {"create-table", "update-table"}
    added = [u["snapshot"] for op in operations[-2:] for u in op["updates"] if u["action"] == "add-snapshot"]
    assert [a["snapshot-id"] for a in added] == [snap["snapshot-id"] for snap in metadata["snapshots"]]
    assert [(a["summary"]["operation"], a["summary"]["added-records"]) for a in added] == [
        ("append", "5"),
        ("append", "3"),
    ]
    assert operations[-1]["metadata-location"] == load_table(server, ns, "events")["metadata-location"]


# ------------------------------------------------------------------------------------------
# row-level operations: MERGE, UPDATE, DELETE
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "format_version"),
    [("copy-on-write", 2), ("merge-on-read", 2), ("merge-on-read", 3)],
    ids=["cow-v2", "mor-v2", "mor-v3"],
)
def test_merge_update_delete(spark, server, ns, mode, format_version, access):
    table = f"{access.catalog}.{ns}.stock"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, name string, qty int) USING iceberg TBLPROPERTIES ("
        f"'format-version' = '{format_version}', 'write.delete.mode' = '{mode}', "
        f"'write.update.mode' = '{mode}', 'write.merge.mode' = '{mode}')"
    )
    spark.sql(f"INSERT INTO {table} VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30), (4, 'd', 40)")

    spark.sql(
        f"""MERGE INTO {table} t
        USING (SELECT * FROM VALUES (2, 'B', 21), (4, 'x', -1), (5, 'e', 50) AS s(id, name, qty)) s
        ON t.id = s.id
        WHEN MATCHED AND s.qty < 0 THEN DELETE
        WHEN MATCHED THEN UPDATE SET name = s.name, qty = s.qty
        WHEN NOT MATCHED THEN INSERT *"""
    )
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == [(1, "a", 10), (2, "B", 21), (3, "c", 30), (5, "e", 50)]

    spark.sql(f"UPDATE {table} SET qty = qty + 1 WHERE id IN (1, 3)")
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == [(1, "a", 11), (2, "B", 21), (3, "c", 31), (5, "e", 50)]

    spark.sql(f"DELETE FROM {table} WHERE id = 2")
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == [(1, "a", 11), (3, "c", 31), (5, "e", 50)]

    # the stored metadata: the format version asked for, one snapshot per statement
    metadata = load_table(server, ns, "stock", access.warehouse)["metadata"]
    assert metadata["format-version"] == format_version
    assert len(metadata["snapshots"]) == 4
    delete_files = scalar(spark, f"SELECT count(*) FROM {table}.delete_files")
    summary = {k: v for k, v in metadata["snapshots"][-1]["summary"].items()}
    if mode == "copy-on-write":
        assert delete_files == 0
        assert snapshot_operations(spark, table) == ["append", "overwrite", "overwrite", "overwrite"]
        assert summary.get("total-position-deletes", "0") == "0"
    else:
        assert delete_files > 0  # position deletes (v2) or deletion vectors (v3)
        assert int(summary["total-position-deletes"]) > 0
        if format_version == 3:
            formats = {r[0] for r in rows(spark, f"SELECT file_format FROM {table}.delete_files")}
            assert formats == {"PUFFIN"}  # deletion vectors
            assert metadata["next-row-id"] > 0  # row lineage kept by the catalog


# ------------------------------------------------------------------------------------------
# CTAS / RTAS (staged create)
# ------------------------------------------------------------------------------------------


def test_create_and_replace_table_as_select(spark, server, settings, ns, access):
    source = f"{access.catalog}.{ns}.src"
    spark.sql(f"CREATE TABLE {source} (id bigint, category string) USING iceberg")
    spark.sql(f"INSERT INTO {source} VALUES (1, 'a'), (2, 'b'), (3, 'a'), (4, 'c')")

    ctas = f"{access.catalog}.{ns}.derived"
    spark.sql(
        f"CREATE TABLE {ctas} USING iceberg PARTITIONED BY (category) "
        f"TBLPROPERTIES ('steward' = 'ctas') AS SELECT id, category FROM {source} WHERE category = 'a'"
    )
    assert rows(spark, f"SELECT * FROM {ctas} ORDER BY id") == [(1, "a"), (3, "a")]
    created = load_table(server, ns, "derived", access.warehouse)["metadata"]
    assert len(created["snapshots"]) == 1
    assert created["properties"]["steward"] == "ctas"
    assert [f["name"] for f in created["partition-specs"][-1]["fields"]] == ["category"]

    spark.sql(f"REPLACE TABLE {ctas} USING iceberg AS SELECT id, id * 10 AS tenfold FROM {source}")
    assert spark.table(ctas).columns == ["id", "tenfold"]
    assert rows(spark, f"SELECT * FROM {ctas} ORDER BY id") == [(1, 10), (2, 20), (3, 30), (4, 40)]
    replaced = load_table(server, ns, "derived", access.warehouse)["metadata"]
    assert replaced["table-uuid"] == created["table-uuid"]  # the same table, a new version
    assert len(replaced["snapshots"]) == 2
    assert len(replaced["schemas"]) == 2
    default_spec = next(s for s in replaced["partition-specs"] if s["spec-id"] == replaced["default-spec-id"])
    assert default_spec["fields"] == []  # the replacement is unpartitioned
    # the old data is still reachable by time travel
    first = created["current-snapshot-id"]
    assert rows(spark, f"SELECT id FROM {ctas} VERSION AS OF {first} ORDER BY id") == [(1,), (3,)]

    # CREATE OR REPLACE of a new name creates it
    spark.sql(f"CREATE OR REPLACE TABLE {access.catalog}.{ns}.fresh USING iceberg AS SELECT 42 AS answer")
    assert rows(spark, f"SELECT * FROM {access.catalog}.{ns}.fresh") == [(42,)]

    # every object the staged creates and the replace wrote lies in one of the tables' locations
    tables = [
        load_table(server, ns, name, access.warehouse)["metadata"]["location"] for name in ("src", "derived", "fresh")
    ]
    folder = tables[0].rsplit("/", 1)[0]
    written = objects_under(S3ObjectStore(settings.s3), folder)
    assert sum(o.endswith(".parquet") for o in written) >= 4
    assert [o for o in written if not any(o.startswith(table + "/") for table in tables)] == []

    # a CTAS whose query fails leaves no table behind (the create was staged, never committed)
    with pytest.raises(Exception, match="boom"):
        spark.sql(
            f"CREATE TABLE {access.catalog}.{ns}.broken USING iceberg AS "
            f"SELECT id, CAST(IF(id > 2, raise_error('boom'), id) AS bigint) AS checked FROM {source}"
        )
    assert load_table(server, ns, "broken", access.warehouse) is None
    assert "broken" not in [r[1] for r in rows(spark, f"SHOW TABLES IN {access.catalog}.{ns}")]
