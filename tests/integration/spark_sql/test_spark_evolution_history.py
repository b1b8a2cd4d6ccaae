"""Spark 3.5 and 4.1 (PySpark + Iceberg's Spark runtime) against a running gunicorn: schema and
partition evolution, time travel by version and timestamp, tables named like metadata tables,
branches and tags.

The session is configured with Growler's URL and warehouse name and asks for vended credentials
(``spark_support.catalog_conf``); everything about S3 (endpoint, region, addressing style, keys)
comes from the catalog. Every test runs once per Spark line (``spark_support``); one session per
line is shared by every test (a JVM start costs tens of seconds); each test works in its own
namespace. Results are checked through Spark, through the REST API (the metadata Growler
stores) and by listing the bucket (fixtures in this directory's conftest.py).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.integration.spark_sql.spark_sql_support import load_table, objects_under, rows, scalar
from tests.integration.spark_support import CATALOG, SparkError

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------
# schema and partition evolution
# ------------------------------------------------------------------------------------------


def test_alter_table_columns_and_partition_field(spark, server, ns, objects):
    table = f"{CATALOG}.{ns}.people"
    spark.sql(f"CREATE TABLE {table} (id bigint, name string, age int) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'ann', 30)")

    spark.sql(f"ALTER TABLE {table} ADD COLUMN score double")
    spark.sql(f"ALTER TABLE {table} RENAME COLUMN name TO label")
    spark.sql(f"ALTER TABLE {table} DROP COLUMN age")
    spark.sql(f"ALTER TABLE {table} ALTER COLUMN id COMMENT 'the key'")
    spark.sql(f"ALTER TABLE {table} ADD PARTITION FIELD bucket(4, id)")
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('steward' = 'etl')")
    spark.sql(f"INSERT INTO {table} VALUES (2, 'bob', 2.5)")

    assert spark.table(table).columns == ["id", "label", "score"]
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == [(1, "ann", None), (2, "bob", 2.5)]

    metadata = load_table(server, ns, "people")["metadata"]
    schema = next(s for s in metadata["schemas"] if s["schema-id"] == metadata["current-schema-id"])
    assert [(f["id"], f["name"], f["type"]) for f in schema["fields"]] == [
        (1, "id", "long"),
        (2, "label", "string"),
        (4, "score", "double"),
    ]
    assert schema["fields"][0]["doc"] == "the key"
    assert metadata["last-column-id"] == 4
    assert len(metadata["schemas"]) == 5  # add, rename, drop, comment: a new schema each
    assert [[(f["name"], f["transform"]) for f in s["fields"]] for s in metadata["partition-specs"]] == [
        [],
        [("id_bucket_4", "bucket[4]")],
    ]
    assert metadata["default-spec-id"] == 1
    assert metadata["properties"]["steward"] == "etl"
    assert metadata["last-partition-id"] == 1000

    # the old file stays unpartitioned, the new one lands in a bucket
    data_files = [o for o in objects_under(objects, metadata["location"]) if o.endswith(".parquet")]
    assert len(data_files) == 2
    assert sum("/id_bucket_4=" in f for f in data_files) == 1
    assert rows(spark, f"SELECT spec_id, count(*) FROM {table}.files GROUP BY spec_id ORDER BY spec_id") == [
        (0, 1),
        (1, 1),
    ]


# ------------------------------------------------------------------------------------------
# time travel, branches and tags
# ------------------------------------------------------------------------------------------


def test_time_travel_by_version_and_timestamp(spark, ns):
    table = f"{CATALOG}.{ns}.timeline"
    spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg")
    for i in (1, 2, 3):
        spark.sql(f"INSERT INTO {table} VALUES ({i})")
    # commit times in epoch milliseconds (no time zone to get wrong)
    snapshots = rows(spark, f"SELECT snapshot_id, unix_millis(committed_at) FROM {table}.snapshots ORDER BY 2")
    assert len(snapshots) == 3
    (s1, t1), (s2, t2), (s3, t3) = snapshots
    assert t1 < t2 < t3

    assert rows(spark, f"SELECT id FROM {table} VERSION AS OF {s1}") == [(1,)]
    assert rows(spark, f"SELECT id FROM {table} VERSION AS OF {s2} ORDER BY id") == [(1,), (2,)]
    assert rows(spark, f"SELECT id FROM {table} FOR SYSTEM_VERSION AS OF {s3} ORDER BY id") == [(1,), (2,), (3,)]

    def as_of(millis: int) -> str:
        return f"SELECT id FROM {table} TIMESTAMP AS OF timestamp_millis({millis}) ORDER BY id"

    assert rows(spark, as_of(t2)) == [(1,), (2,)]
    assert rows(spark, as_of((t2 + t3) // 2)) == [(1,), (2,)]
    assert rows(spark, as_of(t3 - 1)) == [(1,), (2,)]
    assert rows(spark, as_of(t3)) == [(1,), (2,), (3,)]
    with pytest.raises(Exception, match="(?i)Cannot find a snapshot older than"):
        spark.sql(as_of(t1 - 5000)).collect()

    # the DataFrame reader's options reach the same snapshots: Iceberg's own on Spark 3.5, Spark's
    # built-in ones on 4.1 (Iceberg's Spark 4.1 runtime refuses its old options for Spark's)
    if spark.line == "3.5":
        assert spark.call("read_count", table, {"snapshot-id": str(s1)}) == 1
        assert spark.call("read_count", table, {"as-of-timestamp": str(t2)}) == 2
    else:
        t2_text = datetime.fromtimestamp(t2 / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        assert spark.call("read_count", table, {"versionAsOf": str(s1)}) == 1
        assert spark.call("read_count", table, {"timestampAsOf": t2_text}) == 2
        with pytest.raises(SparkError, match="no longer supported, use Spark built-in `versionAsOf`"):
            spark.call("read_count", table, {"snapshot-id": str(s1)})
    history = rows(spark, f"SELECT snapshot_id, is_current_ancestor FROM {table}.history ORDER BY made_current_at")
    assert history == [(s1, True), (s2, True), (s3, True)]


def test_tables_named_like_metadata_tables(spark, server, ns):
    """``history``, ``files``, ``snapshots`` are fine table names: Spark looks them up as tables first."""
    for name in ("history", "files", "snapshots"):
        spark.sql(f"CREATE TABLE {CATALOG}.{ns}.{name} (id bigint) USING iceberg")
        spark.sql(f"INSERT INTO {CATALOG}.{ns}.{name} VALUES (7)")
        assert rows(spark, f"SELECT id FROM {CATALOG}.{ns}.{name}") == [(7,)]
        assert scalar(spark, f"SELECT count(*) FROM {CATALOG}.{ns}.{name}.snapshots") == 1
        assert load_table(server, ns, name) is not None


def test_branches_and_tags(spark, server, ns):
    table = f"{CATALOG}.{ns}.orders"
    spark.sql(f"CREATE TABLE {table} (id bigint, status string) USING iceberg")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'new'), (2, 'new')")
    spark.sql(f"ALTER TABLE {table} CREATE TAG v1")
    spark.sql(f"ALTER TABLE {table} CREATE BRANCH audit RETAIN 7 DAYS")

    # writes to the branch leave main alone
    spark.sql(f"INSERT INTO {table}.branch_audit VALUES (3, 'audit')")
    spark.sql(f"UPDATE {table}.branch_audit SET status = 'checked' WHERE id = 1")
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == [(1, "new"), (2, "new")]
    assert rows(spark, f"SELECT * FROM {table} VERSION AS OF 'audit' ORDER BY id") == [
        (1, "checked"),
        (2, "new"),
        (3, "audit"),
    ]
    assert rows(spark, f"SELECT * FROM {table}.branch_audit ORDER BY id") == rows(
        spark, f"SELECT * FROM {table} VERSION AS OF 'audit' ORDER BY id"
    )
    refs = dict((name, kind) for name, kind in rows(spark, f"SELECT name, type FROM {table}.refs"))
    assert refs == {"main": "BRANCH", "audit": "BRANCH", "v1": "TAG"}

    stored = load_table(server, ns, "orders")["metadata"]
    assert stored["refs"]["audit"]["max-ref-age-ms"] == 7 * 24 * 3600 * 1000
    assert stored["refs"]["v1"]["snapshot-id"] == stored["refs"]["main"]["snapshot-id"]
    assert stored["refs"]["audit"]["snapshot-id"] != stored["refs"]["main"]["snapshot-id"]

    # fast-forward main to the audited branch
    result = rows(spark, f"CALL {CATALOG}.system.fast_forward('{ns}.orders', 'main', 'audit')")
    assert result[0][0] == "main"
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == [(1, "checked"), (2, "new"), (3, "audit")]
    assert rows(spark, f"SELECT * FROM {table} VERSION AS OF 'v1' ORDER BY id") == [(1, "new"), (2, "new")]
    stored = load_table(server, ns, "orders")["metadata"]
    assert stored["refs"]["main"]["snapshot-id"] == stored["refs"]["audit"]["snapshot-id"]
    assert stored["current-snapshot-id"] == stored["refs"]["main"]["snapshot-id"]

    spark.sql(f"ALTER TABLE {table} DROP TAG v1")
    spark.sql(f"ALTER TABLE {table} DROP BRANCH audit")
    assert set(load_table(server, ns, "orders")["metadata"]["refs"]) == {"main"}
