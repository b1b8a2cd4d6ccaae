"""Two clients, one table: Spark (Java Iceberg) and PyIceberg read each other's writes, row for row.

Both know only Growler's URL and warehouse. The table has one column of every common type
(nested ones included) and a NULL in each; both sides must return identical rows, compared after
normalising only how each client represents a value in Python (a Row vs a dict, bytearray vs bytes,
a time zone on timestamps).
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import BucketTransform, DayTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)

from tests.conftest import TEST_CREDENTIAL
from tests.integration.spark_support import CATALOG

pytestmark = pytest.mark.slow

COLUMNS = (
    "id bigint, name string, qty int, price double, amount decimal(10,2), active boolean, day date, "
    "ts timestamp, local_ts timestamp_ntz, payload binary, tags array<string>, "
    "address struct<city: string, zip: int>, attrs map<string, int>"
)
NAMES = [
    "id",
    "name",
    "qty",
    "price",
    "amount",
    "active",
    "day",
    "ts",
    "local_ts",
    "payload",
    "tags",
    "address",
    "attrs",
]


@pytest.fixture
def ns(spark, request) -> str:
    name = "xclient_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{name}")
    return name


@pytest.fixture
def catalog(server) -> RestCatalog:
    return RestCatalog("pyiceberg", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)


def canonical(value):
    """One Python representation per value, whichever client produced it."""
    if hasattr(value, "asDict"):  # a Spark Row (struct)
        value = value.asDict(recursive=True)
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def canonical_row(row: dict) -> dict:
    out = {k: canonical(v) for k, v in row.items()}
    if isinstance(out.get("attrs"), list):  # Arrow hands a map over as (key, value) pairs
        out["attrs"] = dict(out["attrs"])
    return out


def spark_rows(spark, table: str) -> list[dict]:
    """Every row as Spark reads it; timestamps with time zone as UTC wall-clock (session zone UTC)."""
    select = ", ".join("CAST(ts AS timestamp_ntz) AS ts" if n == "ts" else n for n in NAMES)
    rows = spark.sql(f"SELECT {select} FROM {table} ORDER BY id").collect()
    return [canonical_row(row.asDict(recursive=True)) for row in rows]


def pyiceberg_rows(catalog: RestCatalog, identifier: tuple[str, str]) -> list[dict]:
    table = catalog.load_table(identifier)
    rows = table.scan().to_arrow().sort_by("id").to_pylist()
    return [canonical_row(row) for row in rows]


# ------------------------------------------------------------------------------------------
# Spark writes, PyIceberg reads
# ------------------------------------------------------------------------------------------


def test_spark_writes_pyiceberg_reads_the_same_rows(spark, catalog, ns):
    table = f"{CATALOG}.{ns}.from_spark"
    spark.sql(
        f"CREATE TABLE {table} ({COLUMNS}) USING iceberg PARTITIONED BY (days(ts), bucket(4, id)) "
        "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
        "'write.update.mode' = 'merge-on-read')"
    )
    spark.sql(
        f"""INSERT INTO {table} VALUES
        (1, 'one', 10, 1.5, 12.34, true, DATE '2024-01-01', TIMESTAMP '2024-01-01 10:00:00',
         TIMESTAMP_NTZ '2024-01-01 10:00:00', X'0102', array('x', 'y'), named_struct('city', 'Oslo', 'zip', 150),
         map('k', 1, 'l', 2)),
        (2, 'two', 20, -0.25, 0.01, false, DATE '2024-02-29', TIMESTAMP '2024-02-29 23:59:59.123456',
         TIMESTAMP_NTZ '2024-02-29 23:59:59.123456', X'', array(), named_struct('city', 'Bergen', 'zip', 5003),
         map()),
        (3, 'three', 30, 3.0, 99999999.99, true, DATE '1970-01-01', TIMESTAMP '1970-01-01 00:00:00',
         TIMESTAMP_NTZ '1970-01-01 00:00:00', X'FF', array('z'), named_struct('city', 'Tromsø', 'zip', 9008),
         map('m', 3)),
        (4, NULL, NULL, NULL, NULL, NULL, NULL, TIMESTAMP '2024-01-01 11:00:00', NULL, NULL, NULL, NULL, NULL)"""
    )
    spark.sql(
        f"INSERT INTO {table} SELECT id + 10, name, qty, price, amount, active, day, ts, local_ts, "
        f"payload, tags, address, attrs FROM {table} WHERE id <= 2"
    )
    # row-level changes as position deletes: PyIceberg has to apply them when it reads
    spark.sql(f"DELETE FROM {table} WHERE id = 3")
    spark.sql(f"UPDATE {table} SET qty = 99, tags = array('updated') WHERE id = 11")

    expected = spark_rows(spark, table)
    assert [r["id"] for r in expected] == [1, 2, 4, 11, 12]
    assert expected[0] == {
        "id": 1,
        "name": "one",
        "qty": 10,
        "price": 1.5,
        "amount": Decimal("12.34"),
        "active": True,
        "day": date(2024, 1, 1),
        "ts": datetime(2024, 1, 1, 10, 0),
        "local_ts": datetime(2024, 1, 1, 10, 0),
        "payload": b"\x01\x02",
        "tags": ["x", "y"],
        "address": {"city": "Oslo", "zip": 150},
        "attrs": {"k": 1, "l": 2},
    }
    assert expected[3]["qty"] == 99 and expected[3]["tags"] == ["updated"]
    assert scalar_delete_files(spark, table) > 0

    identifier = (ns, "from_spark")
    assert pyiceberg_rows(catalog, identifier) == expected

    # the same snapshot, schema and spec, seen through PyIceberg
    loaded = catalog.load_table(identifier)
    current = spark.sql(f"SELECT snapshot_id FROM {table}.snapshots ORDER BY committed_at DESC LIMIT 1").collect()
    assert loaded.current_snapshot().snapshot_id == current[0][0]
    assert [f.name for f in loaded.schema().fields] == NAMES
    assert isinstance(loaded.schema().find_field("ts").field_type, TimestamptzType)
    assert isinstance(loaded.schema().find_field("local_ts").field_type, TimestampType)
    assert [str(f.transform) for f in loaded.spec().fields] == ["day", "bucket[4]"]
    # and a PyIceberg filter reads the same subset as Spark's
    filtered = loaded.scan(row_filter="qty >= 20").to_arrow().sort_by("id").column("id").to_pylist()
    assert filtered == [r["id"] for r in expected if r["qty"] is not None and r["qty"] >= 20]


def scalar_delete_files(spark, table: str) -> int:
    return spark.sql(f"SELECT count(*) FROM {table}.delete_files").collect()[0][0]


# ------------------------------------------------------------------------------------------
# PyIceberg writes, Spark reads (and writes back)
# ------------------------------------------------------------------------------------------

PY_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "qty", IntegerType(), required=False),
    NestedField(4, "price", DoubleType(), required=False),
    NestedField(5, "amount", DecimalType(10, 2), required=False),
    NestedField(6, "active", BooleanType(), required=False),
    NestedField(7, "day", DateType(), required=False),
    NestedField(8, "ts", TimestamptzType(), required=False),
    NestedField(9, "local_ts", TimestampType(), required=False),
    NestedField(10, "payload", BinaryType(), required=False),
    NestedField(11, "tags", ListType(14, StringType(), element_required=False), required=False),
    NestedField(
        12,
        "address",
        StructType(
            NestedField(15, "city", StringType(), required=False), NestedField(16, "zip", IntegerType(), required=False)
        ),
        required=False,
    ),
    NestedField(13, "attrs", MapType(17, StringType(), 18, IntegerType(), value_required=False), required=False),
)
PY_SPEC = PartitionSpec(
    PartitionField(source_id=8, field_id=1000, transform=DayTransform(), name="ts_day"),
    PartitionField(source_id=1, field_id=1001, transform=BucketTransform(4), name="id_bucket"),
)


def arrow_rows(rows: list[dict], schema: Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema.as_arrow())


PY_ROWS = [
    {
        "id": 1,
        "name": "one",
        "qty": 10,
        "price": 1.5,
        "amount": Decimal("12.34"),
        "active": True,
        "day": date(2024, 1, 1),
        "ts": datetime(2024, 1, 1, 10, 0, tzinfo=UTC),
        "local_ts": datetime(2024, 1, 1, 10, 0),
        "payload": b"\x01\x02",
        "tags": ["x", "y"],
        "address": {"city": "Oslo", "zip": 150},
        "attrs": [("k", 1), ("l", 2)],
    },
    {
        "id": 2,
        "name": "two",
        "qty": 20,
        "price": -0.25,
        "amount": Decimal("0.01"),
        "active": False,
        "day": date(2024, 2, 29),
        "ts": datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC),
        "local_ts": datetime(2024, 2, 29, 23, 59, 59, 123456),
        "payload": b"",
        "tags": [],
        "address": {"city": "Bergen", "zip": 5003},
        "attrs": [],
    },
    {
        "id": 3,
        "name": "three",
        "qty": 30,
        "price": 3.0,
        "amount": Decimal("99999999.99"),
        "active": True,
        "day": date(1970, 1, 1),
        "ts": datetime(1970, 1, 1, tzinfo=UTC),
        "local_ts": datetime(1970, 1, 1),
        "payload": b"\xff",
        "tags": ["z"],
        "address": {"city": "Tromsø", "zip": 9008},
        "attrs": [("m", 3)],
    },
    {"id": 4, "ts": datetime(2024, 1, 1, 11, 0, tzinfo=UTC)},
]


def test_pyiceberg_writes_spark_reads_the_same_rows(spark, catalog, ns):
    identifier = (ns, "from_pyiceberg")
    table = catalog.create_table(identifier, schema=PY_SCHEMA, partition_spec=PY_SPEC)
    table.append(arrow_rows(PY_ROWS[:2], PY_SCHEMA))
    table.append(arrow_rows(PY_ROWS[2:], PY_SCHEMA))
    table.delete("id == 3")  # PyIceberg rewrites the file (copy-on-write)

    expected = pyiceberg_rows(catalog, identifier)
    assert [r["id"] for r in expected] == [1, 2, 4]
    assert expected[0]["attrs"] == {"k": 1, "l": 2} and expected[0]["ts"] == datetime(2024, 1, 1, 10, 0)

    spark_name = f"{CATALOG}.{ns}.from_pyiceberg"
    assert spark_rows(spark, spark_name) == expected
    assert spark.table(spark_name).columns == NAMES

    # PyIceberg evolves the schema and appends; Spark (after a refresh of its table cache) sees both
    with table.update_schema() as update:
        update.add_column("note", StringType())
    table = catalog.load_table(identifier)
    table.append(arrow_rows([{"id": 5, "ts": datetime(2024, 3, 1, tzinfo=UTC), "note": "added"}], table.schema()))
    spark.sql(f"REFRESH TABLE {spark_name}")
    assert spark.table(spark_name).columns == [*NAMES, "note"]
    assert spark.sql(f"SELECT id, note FROM {spark_name} ORDER BY id").collect() == [
        (1, None),
        (2, None),
        (4, None),
        (5, "added"),
    ]

    # Spark writes back (an append and a row-level update); PyIceberg reads exactly what Spark reads
    spark.sql(
        f"INSERT INTO {spark_name} VALUES (6, 'six', NULL, NULL, NULL, NULL, NULL, "
        "TIMESTAMP '2024-03-02 00:00:00', NULL, NULL, array('from', 'spark'), NULL, NULL, 'spark')"
    )
    spark.sql(f"UPDATE {spark_name} SET qty = qty + 1 WHERE id = 1")
    names = [*NAMES, "note"]
    select = ", ".join("CAST(ts AS timestamp_ntz) AS ts" if n == "ts" else n for n in names)
    from_spark = [
        canonical_row(r.asDict(recursive=True))
        for r in spark.sql(f"SELECT {select} FROM {spark_name} ORDER BY id").collect()
    ]
    assert [r["id"] for r in from_spark] == [1, 2, 4, 5, 6]
    assert from_spark[0]["qty"] == 11
    assert pyiceberg_rows(catalog, identifier) == from_spark
