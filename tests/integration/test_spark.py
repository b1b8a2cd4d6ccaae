"""Spark 3.5 and 4.1 (PySpark + Iceberg's Spark runtime and S3FileIO) against a running gunicorn.

The session is configured with Growler's URL and warehouse name and asks for vended credentials
(``spark_support.catalog_conf``); everything about S3 (endpoint, region, addressing style, keys)
comes from the catalog. Every test runs once per Spark line (``spark_support``); one session per
line is shared by every test (a JVM start costs tens of seconds); each test works in its own
namespace. Results are checked through Spark, through the REST API (the metadata Growler
stores) and by listing the bucket.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import httpx
import pytest

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.integration.commit_barrier import CommitBarrierProxy
from tests.integration.spark_support import CATALOG, SparkError, add_catalog

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------


@pytest.fixture
def ns(spark, request) -> str:
    """A fresh namespace for this test, created through Spark."""
    name = "spark_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{name}")
    return name


@pytest.fixture
def objects(settings) -> S3ObjectStore:
    return S3ObjectStore(settings.s3)


def rows(spark, sql: str) -> list[tuple]:
    return [tuple(row) for row in spark.sql(sql).collect()]


def scalar(spark, sql: str):
    return spark.sql(sql).collect()[0][0]


def ns_path(namespace: str) -> str:
    return quote("\x1f".join(namespace.split(".")), safe="")


def load_table(server, namespace: str, name: str, warehouse: str | None = None) -> dict:
    """Growler's loadTable answer for ``namespace.name`` (404 -> None)."""
    url = f"{server.url}/v1/{warehouse or server.warehouse}/namespaces/{ns_path(namespace)}/tables/{name}"
    response = httpx.get(url, timeout=30)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()


@dataclass(frozen=True)
class Access:
    """A Spark catalog reaching storage one way: ``catalog`` names it, ``warehouse`` is its warehouse.

    ``bulk_deletes``: whether its DeleteObjects requests go through. Through remote signing on
    SeaweedFS they do not: the store does not check a body against its signature, so Growler's
    probe refuses to sign them (app/bulk_deletes.py) and Spark's procedures leave the files.
    """

    catalog: str
    warehouse: str
    bulk_deletes: bool = True
    # DROP TABLE ... PURGE left to the catalog (rest-catalog-purge): its purge waits in the bin
    catalog_purges: bool = False


STATIC_WAREHOUSE = "static_keys"


@pytest.fixture(scope="session")
def static_warehouse(server, settings) -> str:
    """A warehouse with keys of its own in ``static`` mode (the development opt-in: clients get its keys)."""
    bucket = "growler-static-keys"
    S3ObjectStore(settings.s3).ensure_bucket(bucket)
    storage = {
        "endpoint": settings.s3.endpoint,
        "credentials-mode": "static",
        "access-key-id": settings.s3.access_key,
        "secret-access-key": settings.s3.secret_key,
    }
    body = {"name": STATIC_WAREHOUSE, "location": f"s3://{bucket}/wh/", "storage": storage}
    response = httpx.post(f"{server.url}/management/v1/warehouses", json=body, timeout=30)
    assert response.status_code in (201, 409), response.text  # 409: made for the other Spark line
    return STATIC_WAREHOUSE


@pytest.fixture(params=["sts", "signing", "static"])
def access(request, spark, server, ns) -> Access:
    """Each way a Spark job reaches storage: temporary credentials (the default: ``growler`` asks for
    vended credentials, the default warehouse's mode is sts), remote signing (the same warehouse,
    the client asks to sign), and a static-keys warehouse. The scenarios that reach storage
    differently (CTAS/RTAS, MERGE, the procedures, purge) take it; the integration conftest keeps
    the two other modes to Spark 3.5."""
    uri = spark.conf.get(f"spark.sql.catalog.{CATALOG}.uri")
    if request.param == "sts":
        return Access(CATALOG, server.warehouse)
    if request.param == "signing":
        # as docs/security.md advises with signing: Growler purges a dropped table's files (a table that
        # is gone cannot be signed for, so Spark's own purge after the drop would be refused)
        options = {"header.X-Iceberg-Access-Delegation": "remote-signing", "rest-catalog-purge": "true"}
        catalog = add_catalog(spark, f"{CATALOG}_signing", uri, server.warehouse, **options)
        return Access(catalog, server.warehouse, bulk_deletes=False, catalog_purges=True)
    warehouse = request.getfixturevalue("static_warehouse")
    catalog = add_catalog(spark, f"{CATALOG}_static", uri, warehouse)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{ns}")
    return Access(catalog, warehouse)


def objects_under(objects: S3ObjectStore, location: str) -> list[str]:
    return sorted(found.uri for found in objects.list(Location.parse(location)))


def wait_until_empty(objects: S3ObjectStore, location: str, timeout_s: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout_s
    remaining = objects_under(objects, location)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.3)
        remaining = objects_under(objects, location)
    return remaining


def snapshot_operations(spark, table: str) -> list[str]:
    return [r[0] for r in rows(spark, f"SELECT operation FROM {table}.snapshots ORDER BY committed_at")]


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


# ------------------------------------------------------------------------------------------
# maintenance procedures
# ------------------------------------------------------------------------------------------


def test_maintenance_procedures(spark, server, ns, objects, access):
    name = f"{ns}.compact"
    table = f"{access.catalog}.{name}"
    spark.sql(f"CREATE TABLE {table} (id bigint, payload string) USING iceberg")
    for i in range(1, 6):
        spark.sql(f"INSERT INTO {table} VALUES ({i}, 'p{i}')")
    expected = [(i, f"p{i}") for i in range(1, 6)]
    assert scalar(spark, f"SELECT count(*) FROM {table}.files") == 5
    assert scalar(spark, f"SELECT count(*) FROM {table}.manifests") == 5
    location = load_table(server, ns, "compact", access.warehouse)["metadata"]["location"]
    first_files = {o for o in objects_under(objects, location + "/data") if o.endswith(".parquet")}
    assert len(first_files) == 5

    # rewrite_data_files: five small files become one
    result = spark.sql(
        f"CALL {access.catalog}.system.rewrite_data_files(table => '{name}', options => map('min-input-files', '2'))"
    ).collect()[0]
    assert (result["rewritten_data_files_count"], result["added_data_files_count"]) == (5, 1)
    assert scalar(spark, f"SELECT count(*) FROM {table}.files") == 1
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == expected
    assert snapshot_operations(spark, table)[-1] == "replace"

    # rewrite_manifests: the manifests of the current snapshot become one
    before = scalar(spark, f"SELECT count(*) FROM {table}.manifests")
    result = spark.sql(f"CALL {access.catalog}.system.rewrite_manifests('{name}')").collect()[0]
    assert result["rewritten_manifests_count"] == before > 1
    assert result["added_manifests_count"] == 1
    assert scalar(spark, f"SELECT count(*) FROM {table}.manifests") == 1

    # expire_snapshots: keep only the current one; the compacted-away files are deleted (where
    # bulk deletes go through; through signing on SeaweedFS they are refused and the files stay)
    now = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=1)
    result = spark.sql(
        f"CALL {access.catalog}.system.expire_snapshots(table => '{name}', "
        f"older_than => TIMESTAMP '{now:%Y-%m-%d %H:%M:%S.%f}', retain_last => 1)"
    ).collect()[0]
    assert result["deleted_data_files_count"] == (5 if access.bulk_deletes else 0)
    assert scalar(spark, f"SELECT count(*) FROM {table}.snapshots") == 1
    metadata = load_table(server, ns, "compact", access.warehouse)["metadata"]
    assert len(metadata["snapshots"]) == 1
    assert metadata["snapshots"][0]["snapshot-id"] == metadata["current-snapshot-id"]
    remaining = {o for o in objects_under(objects, location + "/data") if o.endswith(".parquet")}
    if access.bulk_deletes:
        assert not remaining & first_files and len(remaining) == 1
    else:
        assert first_files < remaining and len(remaining) == 6
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == expected

    # remove_orphan_files: an object nobody references is found and deleted. The procedure refuses
    # older_than within the last 24 hours, so CALL (listing through S3FileIO's prefix listing)
    # runs with its default (3 days: nothing that young is touched), and the deletion of a
    # just-written orphan goes through the Spark action the procedure wraps.
    orphan = f"{location}/data/orphan-{int(time.time())}.parquet"
    objects.write_new(Location.parse(orphan), b"not referenced by any snapshot", "application/octet-stream")
    dry = rows(spark, f"CALL {access.catalog}.system.remove_orphan_files(table => '{name}', prefix_listing => true)")
    assert dry == []
    assert objects.exists(Location.parse(orphan))
    older_than = datetime.now(UTC) + timedelta(minutes=1)
    removed = spark.call("delete_orphan_files", table, int(older_than.timestamp() * 1000))
    if access.bulk_deletes:
        assert removed == [orphan]  # exactly the planted object: every file Growler wrote is referenced
    else:  # found, with the data files expire_snapshots could not delete; none of them deleted
        assert orphan in removed and first_files <= set(removed)
        assert all(objects.exists(Location.parse(uri)) for uri in first_files)
    assert objects.exists(Location.parse(orphan)) is not access.bulk_deletes
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == expected


# ------------------------------------------------------------------------------------------
# rename, drop, purge
# ------------------------------------------------------------------------------------------


def test_rename_table_across_namespaces(spark, server, ns):
    spark.sql(f"CREATE NAMESPACE {CATALOG}.{ns}_target")
    spark.sql(f"CREATE TABLE {CATALOG}.{ns}.before (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{ns}.before VALUES (1), (2)")
    original = load_table(server, ns, "before")

    spark.sql(f"ALTER TABLE {CATALOG}.{ns}.before RENAME TO {ns}_target.after")
    assert load_table(server, ns, "before") is None
    renamed = load_table(server, f"{ns}_target", "after")
    assert renamed["metadata-location"] == original["metadata-location"]
    assert renamed["metadata"]["table-uuid"] == original["metadata"]["table-uuid"]
    assert rows(spark, f"SELECT id FROM {CATALOG}.{ns}_target.after ORDER BY id") == [(1,), (2,)]
    with pytest.raises(Exception, match="(?i)TABLE_OR_VIEW_NOT_FOUND|not found"):
        spark.sql(f"SELECT * FROM {CATALOG}.{ns}.before").collect()
    assert [r[1] for r in rows(spark, f"SHOW TABLES IN {CATALOG}.{ns}_target")] == ["after"]

    # and the renamed table takes writes
    spark.sql(f"INSERT INTO {CATALOG}.{ns}_target.after VALUES (3)")
    assert scalar(spark, f"SELECT count(*) FROM {CATALOG}.{ns}_target.after") == 3


def make_table_with_files(
    spark, server, objects, catalog: str, ns: str, name: str, warehouse: str | None = None
) -> tuple[str, list[str]]:
    spark.sql(f"CREATE TABLE {catalog}.{ns}.{name} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {catalog}.{ns}.{name} VALUES (1)")
    spark.sql(f"INSERT INTO {catalog}.{ns}.{name} VALUES (2)")
    location = load_table(server, ns, name, warehouse)["metadata"]["location"]
    listing = objects_under(objects, location)
    assert sum(o.endswith(".parquet") for o in listing) == 2
    assert sum(o.endswith(".metadata.json") for o in listing) >= 3
    return location, listing


def purge_from_the_bin(server, warehouse: str, ns: str, name: str) -> None:
    """The default soft policy (issue 35) keeps a table dropped with purgeRequested in the recycle
    bin, its files in place, until its retention ends: an administrator's purge runs it now."""
    url = f"{server.url}/management/v1/warehouses/{warehouse}/bin"
    (unit,) = [u for u in httpx.get(url, params={"namespace": ns}, timeout=30).json()["units"] if u["name"] == name]
    assert unit["purge-requested"] is True
    assert httpx.delete(f"{url}/{unit['id']}", timeout=30).status_code == 204


def test_drop_table_keeps_files_and_purge_deletes_them(spark, server, ns, objects, access):
    """DROP TABLE ... PURGE: the catalog drops the entry, and the reachable files go (Spark deletes
    them itself with the credentials it was vended; through signing, Growler's purger does, once
    the recycle bin lets it: an administrator's purge here, the retention's end otherwise)."""
    kept, kept_objects = make_table_with_files(spark, server, objects, access.catalog, ns, "kept", access.warehouse)
    purged, _ = make_table_with_files(spark, server, objects, access.catalog, ns, "purged", access.warehouse)

    spark.sql(f"DROP TABLE {access.catalog}.{ns}.kept")
    spark.sql(f"DROP TABLE {access.catalog}.{ns}.purged PURGE")
    assert load_table(server, ns, "kept", access.warehouse) is None
    assert load_table(server, ns, "purged", access.warehouse) is None
    assert rows(spark, f"SHOW TABLES IN {access.catalog}.{ns}") == []

    if access.catalog_purges:  # through signing the purge is the catalog's: it waits in the bin
        assert objects_under(objects, purged)
        purge_from_the_bin(server, access.warehouse, ns, "purged")
    # every data, manifest and metadata file is gone
    assert wait_until_empty(objects, purged) == []
    assert objects_under(objects, kept) == kept_objects


def test_drop_table_purge_delegated_to_the_catalog(spark, server, ns, objects):
    """With rest-catalog-purge, Spark sends purgeRequested=true and Growler's purger deletes the files."""
    uri = spark.conf.get(f"spark.sql.catalog.{CATALOG}.uri")
    purging = add_catalog(spark, "growler_purging", uri, server.warehouse, **{"rest-catalog-purge": "true"})
    location, _ = make_table_with_files(spark, server, objects, purging, ns, "purged")

    spark.sql(f"DROP TABLE {purging}.{ns}.purged PURGE")
    assert load_table(server, ns, "purged") is None
    assert objects_under(objects, location)  # in the recycle bin until its retention ends (issue 35)
    purge_from_the_bin(server, server.warehouse, ns, "purged")
    assert wait_until_empty(objects, location) == []


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


# ------------------------------------------------------------------------------------------
# two Spark drivers committing to one table from the same base
# ------------------------------------------------------------------------------------------

ROUNDS = 3
ROWS_PER_ROUND = 100


@pytest.fixture
def barrier(server):
    proxy = CommitBarrierProxy(server.url, "shared")
    try:
        yield proxy
    finally:
        proxy.close()


def test_two_spark_drivers_commit_from_the_same_base(spark, second_spark, server, ns, barrier):
    """The race forced, every round: both drivers' appends held until both are built on one base.

    Then the proxy lets them through one after the other: the first lands, the second is a commit
    from a stale base that Growler refuses with 409 CommitFailedException (never losing or forking
    a snapshot); the Java client refreshes and retries it on top. Every round, the same outcome.
    """
    name = f"{CATALOG}.{ns}.shared"
    spark.sql(f"CREATE TABLE {name} (id bigint, who string) USING iceberg")
    # each driver a catalog through the proxy; the second driver is another process: its own JVM,
    # REST client and table cache
    first = add_catalog(spark, f"first_{ns}", barrier.url, server.warehouse, **{"header.X-Test-Driver": "first"})
    second = add_catalog(
        second_spark, f"second_{ns}", barrier.url, server.warehouse, **{"header.X-Test-Driver": "second"}
    )
    drivers = {"first": (spark, f"{first}.{ns}.shared"), "second": (second_spark, f"{second}.{ns}.shared")}
    for driver, table in drivers.values():  # warm up: load the table, no commit through the barrier
        assert rows(driver, f"SELECT count(*) FROM {table}") == [(0,)]
    for round_number in range(ROUNDS):
        held = barrier.arm(parties=2)
        pending = []
        for offset, (who, (driver, table)) in enumerate(drivers.items()):
            low = (2 * round_number + offset) * ROWS_PER_ROUND
            select = f"SELECT id, '{who}' FROM range({low}, {low + ROWS_PER_ROUND})"
            pending.append(driver.submit(f"INSERT INTO {table} {select}"))
        for statement in pending:
            statement.result()
        assert sorted(held.arrived) == ["first", "second"], held
        winner, loser = held.arrived
        assert [(a.driver, a.status, a.error_type) for a in held.answers] == [
            (winner, 200, None),
            (loser, 409, "CommitFailedException"),
        ]
    # each refused commit was retried once, on top, and landed
    assert sorted(a.driver for a in barrier.passed_commits) == sorted(r.arrived[1] for r in barrier.rounds)
    assert all(a.status == 200 for a in barrier.passed_commits)

    spark.sql(f"REFRESH TABLE {name}")
    total = ROUNDS * ROWS_PER_ROUND
    assert rows(spark, f"SELECT count(*), count(DISTINCT id) FROM {name}") == [(2 * total, 2 * total)]
    assert rows(spark, f"SELECT who, count(*) FROM {name} GROUP BY who ORDER BY who") == [
        ("first", total),
        ("second", total),
    ]
    # every commit is in one linear history: no snapshot was lost or forked off
    snapshots = rows(spark, f"SELECT snapshot_id, parent_id FROM {name}.snapshots ORDER BY committed_at")
    assert len(snapshots) == 2 * ROUNDS
    assert snapshots[0][1] is None
    assert all(parent == previous for (_, parent), (previous, _) in zip(snapshots[1:], snapshots, strict=False))
    metadata = load_table(server, ns, "shared")["metadata"]
    assert [entry["snapshot-id"] for entry in metadata["snapshot-log"]] == [s for s, _ in snapshots]
    # and in commit order, each round's winner then its loser
    writer_of = dict(
        rows(
            spark,
            f"""SELECT e.snapshot_id, first(f.who) FROM {name}.entries e
            JOIN (SELECT DISTINCT input_file_name() AS path, who FROM {name}) f ON e.data_file.file_path = f.path
            WHERE e.status = 1 GROUP BY e.snapshot_id""",
        )
    )
    assert [writer_of[s] for s, _ in snapshots] == [who for r in barrier.rounds for who in r.arrived]


# ------------------------------------------------------------------------------------------
# eight writers in one Spark job, each way of reaching storage
# ------------------------------------------------------------------------------------------

WRITERS, INSERTS = 8, 3
# What a storage permission error looks like to a Spark job (S3FileIO, the AWS SDK, the signer).
# A storage refusal in an exception's text; "403" as a whole number only: a conflict's message
# names snapshot ids, long numbers that may hold the digits 403.
STORAGE_REFUSAL = re.compile(r"AccessDenied|Access Denied|\b403\b|Forbidden|S3Exception|SignatureDoesNotMatch")


def test_concurrent_writers_meet_retries_or_clean_conflicts_never_storage_errors(spark, server, ns, objects, access):
    """8 threads of one Spark job, released by a barrier, append to one table: every lost race
    ends in Iceberg's retry or a clean CommitFailedException, never a storage permission error
    (the orphans of a lost race are cleaned up one object at a time, which signing allows), and
    every acknowledged INSERT, and nothing else, is in the table; nothing is written outside it."""
    name = f"{ns}.contended"
    table = f"{access.catalog}.{name}"
    spark.sql(f"CREATE TABLE {table} (writer int, n int) USING iceberg")
    outcomes = spark.call("concurrent_inserts", table, WRITERS, INSERTS)
    assert len(outcomes) == WRITERS * INSERTS
    errors = [error for _, _, error in outcomes if error is not None]
    assert all("CommitFailedException" in error for error in errors), errors
    # the exceptions and their causes, not the stack frames (whose line numbers may read "403")
    causes = [[line for line in e.splitlines() if not line.strip().startswith("at ")] for e in errors]
    assert not [c for c in causes if any(STORAGE_REFUSAL.search(line) for line in c)], causes
    acknowledged = sorted((writer, n) for writer, n, error in outcomes if error is None)
    assert len(acknowledged) > WRITERS  # the retries carried most of them through
    spark.sql(f"REFRESH TABLE {table}")
    assert rows(spark, f"SELECT writer, n FROM {table} ORDER BY writer, n") == acknowledged
    assert snapshot_operations(spark, table) == ["append"] * len(acknowledged)
    location = load_table(server, ns, "contended", access.warehouse)["metadata"]["location"]
    namespace_root = location.rsplit("/", 1)[0]
    assert all(o.startswith(location + "/") for o in objects_under(objects, namespace_root))
