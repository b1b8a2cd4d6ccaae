"""How a Spark rewrite job splits its work to report progress (app/maintenance/spark_rewrite_job.py)
and how Growler reads its progress lines (app/maintenance/spark.py): the pure parts, without Spark.
The job on a real Spark is tests/integration/test_maintenance.py (local) and
test_maintenance_cluster.py (a standalone cluster)."""

from __future__ import annotations

import datetime
import decimal

from app.maintenance.spark import progress_of
from app.maintenance.spark_rewrite_job import MAX_CALLS, PROGRESS, choose_calls, partition_filter

OPTIONS = {"target-file-size-bytes": "1000", "min-input-files": "2"}


def stats(partition: tuple, data: int = 2, deletes: int = 0, largest: int = 10, size: int = 100, spec: int = 0):
    return {
        "spec_id": spec,
        "partition": partition,
        "data_files": data,
        "delete_files": deletes,
        "largest": largest,
        "bytes": size,
    }


def test_identity_partitions_are_named_by_their_values_in_a_where_each():
    assert partition_filter(["cat", "n"], ("it's", 3)) == "(`cat` = 'it\\'s' AND `n` = 3)"
    assert partition_filter(["d"], (datetime.date(2026, 1, 2),)) == "(`d` = DATE '2026-01-02')"
    assert partition_filter(["ok", "x"], (True, None)) == "(`ok` = true AND `x` IS NULL)"
    assert partition_filter(["p"], (decimal.Decimal("1.50"),)) == "(`p` = 1.50)"
    assert partition_filter(["b"], (b"\x00",)) is None  # no literal: the job makes one call instead


def test_only_the_partitions_the_rewrite_may_touch_are_called_with_their_bytes():
    partitions = [
        stats(("a",), data=4, size=400),
        stats(("b",), data=1, size=50),  # one small file: nothing to rewrite
        stats(("c",), data=1, deletes=1, size=70),  # a delete file to apply
        stats(("d",), data=1, largest=5000, size=5000),  # a file to split (beyond 1.8 x the target)
    ]
    calls, sizes = choose_calls(["cat"], {"cat", "id"}, partitions, OPTIONS)
    assert calls == ["(`cat` = 'a')", "(`cat` = 'c')", "(`cat` = 'd')"]
    assert sizes == [400, 70, 5000]
    assert choose_calls(["cat"], {"cat"}, [stats(("b",), data=1)], OPTIONS) == ([], [])  # in shape: no call


def test_many_partitions_are_batched_into_at_most_max_calls():
    partitions = [stats((f"p{i:04d}",), size=i) for i in range(MAX_CALLS * 3 + 1)]
    calls, sizes = choose_calls(["cat"], {"cat"}, partitions, OPTIONS)
    assert len(calls) <= MAX_CALLS and sum(sizes) == sum(p["bytes"] for p in partitions)
    assert sum(call.count(" OR ") + 1 for call in calls) == len(partitions)  # each partition in one call


def test_a_table_whose_partitions_cannot_be_named_is_one_call_of_the_whole_table():
    two = [stats(("a",), size=10), stats(("b",), size=20)]
    assert choose_calls(["id_bucket"], {"id", "cat"}, two, OPTIONS) == ([None], [30])  # a transform
    mixed = [stats(("a",), size=10), stats(("b",), size=20, spec=1)]
    assert choose_calls(["cat"], {"cat"}, mixed, OPTIONS) == ([None], [30])  # several specs
    assert choose_calls([], set(), [stats((), size=5)], OPTIONS) == ([None], [5])  # unpartitioned


def test_growler_reads_progress_lines_even_after_other_output_and_ignores_the_rest():
    line = PROGRESS + '{"file-groups-done": 1, "file-groups-total": 2, "bytes-done": 5, "bytes-total": 9}\n'
    expected = {"file-groups-done": 1, "file-groups-total": 2, "bytes-done": 5, "bytes-total": 9}
    assert progress_of(line) == expected
    assert progress_of("26/12/07 00:00:01 WARN something " + line) == expected  # a log line's tail
    assert progress_of("26/12/07 INFO SparkContext: Running Spark version 3.5\n") is None
    assert progress_of(PROGRESS + "{not json\n") is None
    assert progress_of(PROGRESS + '{"file-groups-done": 1}\n') is None
