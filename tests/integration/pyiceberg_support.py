"""The PyIceberg table tests' data and helpers (tests/integration/pyiceberg_tables/, test_maintenance.py):
the ``shop.sales`` schema and partition spec, rows as Arrow tables, a catalog configured as a user
would (Growler's URL, warehouse and the test admin's credential, nothing about storage)."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import (
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.conftest import TEST_CREDENTIAL

NS = "shop"

# A small table: an id, a category (identity partition), a timestamp (day partition), and an
# int and a float column for the type-widening scenario.
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
    NestedField(4, "qty", IntegerType(), required=False),
    NestedField(5, "price", FloatType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"),
    PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"),
)
ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("category", pa.string()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.float32()),
    ]
)


def rows(*ids: int) -> pa.Table:
    """Rows with deterministic values derived from the id: category a/b, two different days."""
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "category": "a" if i % 2 else "b",
                "ts": datetime(2024, 1, 1 + i % 2, 12, 0, 0),
                "qty": i * 10,
                "price": i + 0.5,
            }
            for i in ids
        ],
        schema=ARROW_SCHEMA,
    )


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def new_catalog(server) -> RestCatalog:
    return RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)


def objects_under(objects: S3ObjectStore, location: str) -> list[str]:
    return sorted(found.uri for found in objects.list(Location.parse(location)))


def create_sales(catalog: RestCatalog, name: str = "sales", **kwargs):
    return catalog.create_table((NS, name), schema=SCHEMA, partition_spec=SPEC, **kwargs)
