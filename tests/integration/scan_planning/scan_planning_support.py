"""What the scan-planning tests share: the partitioned v2 table PyIceberg writes (six bands of ids, a
copy-on-write delete, two merge-on-read position deletes), the filters, and client and server
catalogs. The oracle is PyIceberg itself: for every filter, the files Growler plans are exactly
the files PyIceberg plans on the client from the same snapshot, and reading through Growler's plan
returns the same rows as reading through the client's own."""

from __future__ import annotations

import math
import time
from datetime import datetime

import pyarrow as pa
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestWriterV2
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType, TimestampType

from tests.conftest import TEST_CREDENTIAL

NS = "planning"
TABLE = "events"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
    NestedField(4, "qty", IntegerType(), required=False),
    NestedField(5, "price", DoubleType(), required=False),
    NestedField(6, "name", StringType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"),
    PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"),
)
ARROW = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("category", pa.string()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.float64()),
        pa.field("name", pa.string()),
    ]
)
NAMES = ["alice", "albert", "bob", "carol", None]


def batch(ids: range) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "category": "abc"[i % 3],
                "ts": datetime(2024, 1, 1 + (i // 3) % 3, i % 24, 0, 0),
                "qty": None if i % 7 == 0 else i * 10,
                "price": math.nan if i % 11 == 0 else i + 0.25,
                "name": NAMES[i % len(NAMES)],
            }
            for i in ids
        ],
        schema=ARROW,
    )


# Each append holds ids of one band, so files have disjoint id ranges and metrics prune them.
BANDS = [range(0, 8), range(8, 16), range(16, 24), range(24, 32), range(32, 40), range(40, 48)]

FILTERS = [
    AlwaysTrue(),
    AlwaysFalse(),
    EqualTo("category", "a"),
    NotEqualTo("category", "a"),
    LessThan("id", 10),
    LessThanOrEqual("id", 16),
    GreaterThan("id", 40),
    GreaterThanOrEqual("qty", 300),
    EqualTo("id", 1000),
    In("category", {"a", "c"}),
    In("id", {3, 33, 45}),
    NotIn("id", {1, 2, 3}),
    IsNull("qty"),
    NotNull("qty"),
    IsNaN("price"),
    NotNaN("price"),
    StartsWith("name", "al"),
    NotStartsWith("name", "al"),
    And(EqualTo("category", "b"), GreaterThan("id", 20)),
    Or(EqualTo("category", "a"), LessThan("id", 5)),
    Not(EqualTo("category", "a")),
    GreaterThanOrEqual("ts", "2024-01-03T00:00:00"),
    And(LessThan("ts", "2024-01-02T00:00:00"), In("category", {"a", "b"})),
    Or(IsNull("name"), GreaterThan("price", 40.0)),
    And(Not(In("category", {"a"})), LessThanOrEqual("price", 12.5)),
]


def client_catalog(server) -> RestCatalog:
    return RestCatalog("client", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)


def server_catalog(server) -> RestCatalog:
    return RestCatalog(
        "server",
        uri=server.url,
        warehouse=server.warehouse,
        credential=TEST_CREDENTIAL,
        **{"scan-planning-mode": "server"},
    )


class DeleteManifestWriter(ManifestWriterV2):
    """PyIceberg writes no delete files; its v2 manifest writer, labelled as a delete manifest, does."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class AddDeleteFiles(_FastAppendFiles):
    def new_manifest_writer(self, spec):
        return DeleteManifestWriter(
            spec, self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
        )


POS_FILE_PATH_ID, POS_POS_ID = 2147483546, 2147483545


def add_position_deletes(table, targets: list[tuple[DataFile, list[int]]]) -> list[str]:
    """Commit one position delete file per (data file, positions): a merge-on-read delete as Spark writes it."""
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(POS_FILE_PATH_ID)}),
            pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_POS_ID)}),
        ]
    )
    written = []
    delete_files = []
    for number, (data_file, positions) in enumerate(targets):
        location = f"{table.location()}/data/pos-deletes-{number}-{time.monotonic_ns()}.parquet"
        rows = pa.Table.from_pylist([{"file_path": data_file.file_path, "pos": p} for p in positions], schema=schema)
        with table.io.new_output(location).create() as stream:
            pq.write_table(rows, stream)
        delete_files.append(
            DataFile.from_args(
                content=DataFileContent.POSITION_DELETES,
                file_path=location,
                file_format=FileFormat.PARQUET,
                partition=data_file.partition,
                record_count=len(positions),
                file_size_in_bytes=len(table.io.new_input(location)),
                spec_id=data_file.spec_id,
            )
        )
        written.append(location)
    with table.transaction() as transaction:
        with AddDeleteFiles(Operation.OVERWRITE, transaction, table.io) as producer:
            for delete_file in delete_files:
                producer.append_data_file(delete_file)
    return written


def planned(tasks) -> set[tuple[str, frozenset[str]]]:
    return {(t.file.file_path, frozenset(d.file_path for d in t.delete_files)) for t in tasks}


def rows_of(arrow: pa.Table) -> list[dict]:
    """Rows by id, NaN spelled out (NaN != NaN would fail equal rows)."""
    rows = [
        {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()} for row in arrow.to_pylist()
    ]
    return sorted(rows, key=lambda r: r["id"])
