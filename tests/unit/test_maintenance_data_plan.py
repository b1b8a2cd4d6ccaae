"""What a data compaction run records as its plan (app/maintenance/data.py ``DataPlan.view``): on
Spark the partitions the in-process rewrite leaves to it are part of the work, and counted."""

from __future__ import annotations

from types import SimpleNamespace

from app.maintenance.data import DataPlan


def sized(*sizes: int) -> list[SimpleNamespace]:
    return [SimpleNamespace(file_size_in_bytes=size) for size in sizes]


PLAN = DataPlan(
    7,
    groups={"0:a": sized(1, 2, 3)},
    skipped={"0:b": "has delete files (needs Spark)", "0:c": "sort (needs Spark)"},
    for_spark={"0:b": 5, "0:c": 4},
)


def test_in_process_the_skipped_partitions_are_said_and_not_counted():
    assert PLAN.view() == {
        "based-on-snapshot-id": 7,
        "partitions": {"0:a": 3},
        "files-to-rewrite": 3,
        "skipped": {"0:b": "has delete files (needs Spark)", "0:c": "sort (needs Spark)"},
    }


def test_on_spark_every_partition_the_job_takes_on_is_counted():
    assert PLAN.view(on_spark=True) == {
        "based-on-snapshot-id": 7,
        "partitions": {"0:a": 3, "0:b": 5, "0:c": 4},
        "files-to-rewrite": 12,
        "needs-spark": {"0:b": "has delete files (needs Spark)", "0:c": "sort (needs Spark)"},
    }
