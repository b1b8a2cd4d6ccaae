"""Server-side planning for a caller with read restrictions (app/rules/scan/restricted.py and its use
in app/rules/scan/planning.py): the row filter prunes and stays in every residual, and restricted
(hidden or transformed) columns decide nothing and answer nothing - no pruning by the caller's
filter on them, no statistics, no partition values.

The manifests are in memory (a ``ManifestSource`` of two data files: one of region eu with
salaries 10-20, one of region us with salaries 30-40), so every case plans for real with
PyIceberg's evaluators and nothing is read from storage.
"""

from __future__ import annotations

from typing import Any

from pyiceberg.conversions import to_bytes
from pyiceberg.expressions import (
    AlwaysTrue,
    And,
    EqualTo,
    GreaterThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    Or,
)
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadataUtil
from pyiceberg.transforms import IdentityTransform
from pyiceberg.typedef import Record
from pyiceberg.types import (
    DoubleType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
)

from app.rules.requests.scans import PlanTableScanRequest
from app.rules.restrictions.policies import ColumnRule, Restrictions
from app.rules.scan.files import partition_values
from app.rules.scan.planning import plan_scan, resolve_scan, task_pages
from app.rules.scan.restricted import restricted_fields, scan_restriction, without_columns

FIELDS = [
    {"id": 1, "name": "id", "type": "long", "required": True},
    {"id": 2, "name": "region", "type": "string", "required": False},
    {"id": 3, "name": "salary", "type": "double", "required": False},
    {"id": 4, "name": "email", "type": "string", "required": False},
]
METADATA = TableMetadataUtil.parse_obj(
    {
        "format-version": 2,
        "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
        "location": "s3://bucket/hr/people",
        "last-sequence-number": 1,
        "last-updated-ms": 1,
        "last-column-id": 4,
        "current-schema-id": 0,
        "schemas": [{"type": "struct", "schema-id": 0, "fields": FIELDS}],
        "default-spec-id": 0,
        "partition-specs": [{"spec-id": 0, "fields": []}],
        "last-partition-id": 999,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "current-snapshot-id": 1,
        "snapshots": [
            {
                "snapshot-id": 1,
                "sequence-number": 1,
                "timestamp-ms": 1,
                "manifest-list": "s3://bucket/hr/people/metadata/snap-1.avro",
                "summary": {"operation": "append"},
                "schema-id": 0,
            }
        ],
    }
)
SCHEMA = METADATA.schema()
EU_FILE = "s3://bucket/hr/people/data/eu.parquet"
US_FILE = "s3://bucket/hr/people/data/us.parquet"
EU_ONLY = {"type": "eq", "term": "region", "value": "eu"}
RESTRICTED = Restrictions((EU_ONLY,), (ColumnRule("email", "mask-alphanum"), ColumnRule("salary", "hide")))
EVERY_STAT = ["id", "region", "salary", "email"]


def _data_file(path: str, region: str, salaries: tuple[float, float], partition: Record | None = None) -> DataFile:
    data_file = DataFile.from_args(
        content=DataFileContent.DATA,
        file_path=path,
        file_format=FileFormat.PARQUET,
        partition=partition if partition is not None else Record(),
        record_count=2,
        file_size_in_bytes=100,
        lower_bounds={2: to_bytes(StringType(), region), 3: to_bytes(DoubleType(), salaries[0])},
        upper_bounds={2: to_bytes(StringType(), region), 3: to_bytes(DoubleType(), salaries[1])},
        value_counts={1: 2, 2: 2, 3: 2, 4: 2},
        null_value_counts={1: 0, 2: 0, 3: 0, 4: 0},
        nan_value_counts={3: 0},
        column_sizes={1: 8, 2: 8, 3: 8, 4: 8},
    )
    data_file.spec_id = 0
    return data_file


class Manifests:
    """One data manifest holding the eu and the us file."""

    files = (_data_file(EU_FILE, "eu", (10.0, 20.0)), _data_file(US_FILE, "us", (30.0, 40.0)))

    def manifests(self, manifest_list: str) -> list[ManifestFile]:
        return [
            ManifestFile.from_args(
                manifest_path="s3://bucket/hr/people/metadata/m0.avro",
                manifest_length=1,
                partition_spec_id=0,
                content=ManifestContent.DATA,
                sequence_number=1,
                min_sequence_number=1,
                added_snapshot_id=1,
            )
        ]

    def entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        return [
            ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED,
                snapshot_id=1,
                sequence_number=1,
                file_sequence_number=1,
                data_file=data_file,
            )
            for data_file in self.files
        ]


def _plan(restrictions: Restrictions | None, **request: Any) -> list[dict[str, Any]]:
    scan = resolve_scan(METADATA, PlanTableScanRequest.model_validate(request), restrictions)
    (page,) = task_pages(scan, plan_scan(scan, Manifests()), 100)
    return page["file-scan-tasks"]


def _stats_keys(task: dict[str, Any]) -> set[int]:
    found: set[int] = set()
    for key in (
        "column-sizes",
        "value-counts",
        "null-value-counts",
        "nan-value-counts",
        "lower-bounds",
        "upper-bounds",
    ):
        found.update(task["data-file"].get(key, {}).get("keys", []))
    return found


def test_the_row_filter_prunes_and_stays_in_every_residual() -> None:
    free = _plan(None, **{"stats-fields": EVERY_STAT})
    assert [task["data-file"]["file-path"] for task in free] == [EU_FILE, US_FILE]
    assert all(task["residual-filter"] is True for task in free)
    assert {_stats_keys(task) == {1, 2, 3, 4} for task in free} == {True}

    restricted = _plan(RESTRICTED, **{"stats-fields": EVERY_STAT})
    assert [task["data-file"]["file-path"] for task in restricted] == [EU_FILE]  # us: no allowed row
    assert restricted[0]["residual-filter"] == EU_ONLY
    assert _stats_keys(restricted[0]) == {1, 2}  # asked for all: none of salary (hidden), email (masked)


def test_the_callers_filter_on_a_restricted_column_prunes_nothing_and_is_kept_in_the_residual() -> None:
    """Pruning by ``salary > 25`` would answer which files hold such salaries: the eu file, whose
    salaries are 10-20, is planned all the same, the filter left to the engine."""
    over = {"type": "gt", "term": "salary", "value": 25}
    assert [task["data-file"]["file-path"] for task in _plan(None, filter=over)] == [US_FILE]  # it would prune

    (task,) = _plan(RESTRICTED, filter=over)
    assert task["data-file"]["file-path"] == EU_FILE
    assert task["residual-filter"] == {
        "type": "and",
        "left": EU_ONLY,
        "right": {"type": "gt", "term": "salary", "value": 25.0},
    }

    # a not around it is pushed down first: still no pruning by salary
    not_under = {"type": "not", "child": {"type": "lt-eq", "term": "salary", "value": 25}}
    assert [task["data-file"]["file-path"] for task in _plan(RESTRICTED, filter=not_under)] == [EU_FILE]
    # a filter on visible columns prunes as ever, and adds nothing to the residual
    (visible,) = _plan(RESTRICTED, filter={"type": "eq", "term": "id", "value": 1})
    assert visible["residual-filter"] == {
        "type": "and",
        "left": EU_ONLY,
        "right": {"type": "eq", "term": "id", "value": 1},
    }


def test_a_row_filter_that_does_not_bind_plans_no_file() -> None:
    gone = Restrictions(({"type": "eq", "term": "department", "value": "hr"},), ())
    assert _plan(gone) == []


def test_a_select_of_hidden_columns_only_is_planned_without_their_statistics() -> None:
    """The answer carries no projection: the select changes nothing of it, never widens it."""
    tasks = _plan(RESTRICTED, select=["salary"], **{"stats-fields": ["salary", "email"]})
    assert [task["data-file"]["file-path"] for task in tasks] == [EU_FILE]
    assert _stats_keys(tasks[0]) == set()


def test_without_columns_only_widens_and_says_whether_it_did() -> None:
    salary = frozenset({3})
    assert without_columns(EqualTo("region", "eu"), salary, SCHEMA) == (EqualTo("region", "eu"), False)
    assert without_columns(Or(EqualTo("region", "eu"), GreaterThan("salary", 5.0)), salary, SCHEMA) == (
        AlwaysTrue(),
        True,
    )
    weakened, replaced = without_columns(
        Not(And(LessThanOrEqual("salary", 1.0), EqualTo("region", "eu"))), salary, SCHEMA
    )
    assert replaced and weakened == AlwaysTrue()  # not(a and b) = not a or not b: true once not a is
    weakened, replaced = without_columns(Not(Or(GreaterThan("salary", 1.0), EqualTo("region", "eu"))), salary, SCHEMA)
    assert replaced and weakened == NotEqualTo("region", "eu")
    assert without_columns(GreaterThan("salary", 1.0), frozenset(), SCHEMA) == (GreaterThan("salary", 1.0), False)


def test_restricting_a_nested_type_restricts_every_field_in_it() -> None:
    schema = Schema(
        NestedField(1, "id", LongType()),
        NestedField(
            2,
            "contact",
            StructType(NestedField(3, "email", StringType()), NestedField(4, "phones", ListType(5, StringType()))),
        ),
        NestedField(6, "scores", MapType(7, StringType(), 8, IntegerType())),
    )
    assert restricted_fields(schema, [2]) == {2, 3, 4, 5}
    assert restricted_fields(schema, [6, 1]) == {1, 6, 7, 8}
    assert restricted_fields(schema, [42]) == {42}  # not in this schema: itself only
    restriction = scan_restriction(Restrictions((), (ColumnRule("contact", "hide"),)), schema)
    assert restriction.withheld == {2, 3, 4, 5}
    assert restriction.digest == Restrictions((), (ColumnRule("contact", "hide"),)).digest


def test_a_partition_value_of_a_restricted_column_is_answered_null() -> None:
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"),
        PartitionField(source_id=3, field_id=1001, transform=IdentityTransform(), name="salary"),
    )
    data_file = _data_file(EU_FILE, "eu", (10.0, 10.0), Record("eu", 10.0))
    assert partition_values(data_file, spec, SCHEMA) == ["eu", 10.0]
    assert partition_values(data_file, spec, SCHEMA, frozenset({3, 4})) == ["eu", None]
