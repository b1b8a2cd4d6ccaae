"""How a Spark rewrite job splits its work to report progress (app/maintenance/spark_rewrite_job.py)
and how Growler reads its progress lines (app/maintenance/spark.py): the pure parts, without Spark.
The job on a real Spark is tests/integration/test_maintenance.py (local) and
test_maintenance_cluster.py (a standalone cluster)."""

from __future__ import annotations

import datetime
import decimal

from app.maintenance.spark import progress_of
from app.maintenance.spark_rewrite_job import (
    CATALOG,
    MAX_CALLS,
    PROGRESS,
    Field,
    choose_calls,
    field_filter,
    partition_filter,
)

OPTIONS = {"target-file-size-bytes": "1000", "min-input-files": "2"}
TS = Field("ts_day", "day", "ts", "timestamptz")
CAT = Field("cat", "identity", "cat", "string")


def identity(name: str, source_type: str = "string") -> Field:
    return Field(name, "identity", name, source_type)


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
    fields = [identity("cat"), identity("n", "int")]
    assert partition_filter(fields, ("it's", 3)) == "(`cat` = 'it\\'s' AND `n` = 3)"
    assert partition_filter([identity("d", "date")], (datetime.date(2026, 1, 2),)) == "(`d` = DATE '2026-01-02')"
    assert partition_filter([identity("ok", "boolean"), identity("x")], (True, None)) == "(`ok` = true AND `x` IS NULL)"
    assert partition_filter([identity("p", "decimal(9, 2)")], (decimal.Decimal("1.50"),)) == "(`p` = 1.50)"
    assert partition_filter([identity("b", "binary")], (b"\x00",)) is None  # no literal: one call instead
    assert partition_filter([identity("f", "double")], (float("nan"),)) is None


def test_identity_timestamps_are_literals_of_their_column_type_whatever_the_time_zone():
    # PySpark hands a timestamptz value as a naive local time, a timestamp_ntz one as its wall clock
    local = datetime.datetime.fromtimestamp(1767312000)  # 2026-01-02 00:00:00 UTC in this process's zone
    tz = identity("at", "timestamptz")
    assert field_filter(tz, local) == "`at` = TIMESTAMP '2026-01-02 00:00:00+00:00'"
    ntz = identity("at", "timestamp")
    assert field_filter(ntz, datetime.datetime(2026, 1, 2, 3, 4, 5)) == "`at` = TIMESTAMP_NTZ '2026-01-02 03:04:05'"


def test_time_transforms_are_half_open_ranges_of_their_source_in_utc():
    # the files table shows a day as a DATE, an hour, month or year as an int counted from 1970
    assert field_filter(TS, datetime.date(2026, 1, 2)) == (
        "`ts` >= TIMESTAMP '2026-01-02 00:00:00+00:00' AND `ts` < TIMESTAMP '2026-01-03 00:00:00+00:00'"
    )
    hour = Field("tn_hour", "hour", "tn", "timestamp")
    assert field_filter(hour, 490930) == (
        "`tn` >= TIMESTAMP_NTZ '2026-01-02 10:00:00' AND `tn` < TIMESTAMP_NTZ '2026-01-02 11:00:00'"
    )
    month = Field("d_month", "month", "d", "date")
    assert field_filter(month, 671) == "`d` >= DATE '2025-12-01' AND `d` < DATE '2026-01-01'"  # December
    year = Field("ts_year", "year", "ts", "timestamptz")
    assert field_filter(year, 56) == (
        "`ts` >= TIMESTAMP '2026-01-01 00:00:00+00:00' AND `ts` < TIMESTAMP '2027-01-01 00:00:00+00:00'"
    )
    day_of_date = Field("d_day", "day", "d", "date")
    assert (
        field_filter(day_of_date, datetime.date(1970, 1, 1)) == "`d` >= DATE '1970-01-01' AND `d` < DATE '1970-01-02'"
    )


def test_time_partitions_before_1970_are_named_by_the_transform_itself():
    # there Iceberg widens a range's projection by a partition: the transform projects exactly
    assert field_filter(TS, datetime.date(1969, 12, 31)) == f"{CATALOG}.system.days(`ts`) = DATE '1969-12-31'"
    assert field_filter(Field("h", "hour", "tn", "timestamp"), -1) == f"{CATALOG}.system.hours(`tn`) = -1"
    assert field_filter(Field("m", "month", "d", "date"), -13) == f"{CATALOG}.system.months(`d`) = -13"
    assert field_filter(Field("y", "year", "ts", "timestamptz"), -2) == f"{CATALOG}.system.years(`ts`) = -2"
    assert field_filter(Field("y", "year", "ts", "timestamptz"), 10_000) is None  # beyond datetime: one call
    assert field_filter(Field("h", "hour", "t", "time"), 3) is None  # not a source this job names


def test_truncate_and_bucket_partitions_select_exactly_their_values():
    n = Field("n_trunc", "truncate[10]", "n", "int")
    assert field_filter(n, 10) == "`n` >= 10 AND `n` < 20"
    assert field_filter(n, -10) == "`n` >= -10 AND `n` < 0"
    assert field_filter(n, 2**31 - 8) is None  # near the type's bounds Iceberg's truncate wraps around
    assert field_filter(n, -(2**31)) is None
    assert field_filter(n, 15) is None  # not a truncated value
    long = Field("id_trunc", "truncate[1000]", "id", "long")
    assert field_filter(long, 3_000_000_000) == "`id` >= 3000000000 AND `id` < 3000001000"
    s = Field("s_trunc", "truncate[3]", "s", "string")
    assert field_filter(s, "abc") == "startswith(`s`, 'abc')"  # the prefix of every longer string
    assert field_filter(s, "ab") == "`s` = 'ab'"  # shorter than the width: the whole string
    assert field_filter(s, "a'%") == "startswith(`s`, 'a\\'%')"  # startswith, no LIKE pattern
    assert field_filter(Field("p_trunc", "truncate[10]", "p", "decimal(9, 2)"), decimal.Decimal("1.00")) is None
    bucket = Field("id_bucket", "bucket[16]", "id", "long")
    assert field_filter(bucket, 7) == f"{CATALOG}.system.bucket(16, `id`) = 7"
    assert field_filter(bucket, 16) is None
    assert field_filter(Field("u_bucket", "bucket[16]", "u", "uuid"), 3) is None  # not a type checked on Spark
    for field in (n, s, bucket, TS):
        assert field_filter(field, None) == f"`{field.column}` IS NULL"  # the null partition


def test_fields_the_job_cannot_name_make_the_whole_table_one_call():
    two = [stats(("a",), size=10), stats(("b",), size=20)]
    nested = Field("loc_city", "identity", None, "string")
    assert choose_calls(["loc_city"], {0: [nested]}, two, OPTIONS) == ([None], [30])
    unknown = Field("x_zorder", "zorder", "x", "long")
    assert choose_calls(["x_zorder"], {0: [unknown]}, two, OPTIONS) == ([None], [30])
    assert choose_calls(["cat"], {}, two, OPTIONS) == ([None], [30])  # specs not loaded
    assert choose_calls(["cat", "cat"], {0: [CAT]}, [stats(("a", "a"), size=5)], OPTIONS) == ([None], [5])
    voided = Field("cat", "void", "cat", "string")  # a dropped field: always null, no term
    assert choose_calls(["cat"], {0: [voided]}, [stats((None,), size=5)], OPTIONS) == ([None], [5])


def test_only_the_partitions_the_rewrite_may_touch_are_called_with_their_bytes():
    partitions = [
        stats(("a",), data=4, size=400),
        stats(("b",), data=1, size=50),  # one small file: nothing to rewrite
        stats(("c",), data=1, deletes=1, size=70),  # a delete file to apply
        stats(("d",), data=1, largest=5000, size=5000),  # a file to split (beyond 1.8 x the target)
    ]
    calls, sizes = choose_calls(["cat"], {0: [CAT]}, partitions, OPTIONS)
    assert calls == ["(`cat` = 'a')", "(`cat` = 'c')", "(`cat` = 'd')"]
    assert sizes == [400, 70, 5000]
    assert choose_calls(["cat"], {0: [CAT]}, [stats(("b",), data=1)], OPTIONS) == ([], [])  # in shape: no call


def test_identity_and_transform_fields_of_one_spec_name_a_partition_together():
    # the struct holds every spec's fields (an older spec's too): the files' spec picks its own
    names = ["cat", "old_bucket", "ts_day"]
    specs = {0: [identity("cat")], 1: [CAT, TS]}
    partitions = [
        stats(("a", None, datetime.date(2026, 1, 2)), spec=1, size=30),
        stats((None, None, None), spec=1, size=40),
    ]
    calls, sizes = choose_calls(names, specs, partitions, OPTIONS)
    assert calls == [
        "(`cat` = 'a' AND `ts` >= TIMESTAMP '2026-01-02 00:00:00+00:00'"
        " AND `ts` < TIMESTAMP '2026-01-03 00:00:00+00:00')",
        "(`cat` IS NULL AND `ts` IS NULL)",
    ]
    assert sizes == [30, 40]


def test_many_partitions_are_batched_into_at_most_max_calls():
    partitions = [
        stats((datetime.date(2026, 1, 1) + datetime.timedelta(days=i),), size=i) for i in range(MAX_CALLS * 3 + 1)
    ]
    calls, sizes = choose_calls(["ts_day"], {0: [TS]}, partitions, OPTIONS)
    assert len(calls) <= MAX_CALLS and sum(sizes) == sum(p["bytes"] for p in partitions)
    assert sum(call.count(" OR ") + 1 for call in calls) == len(partitions)  # each partition in one call


def test_a_table_whose_partitions_cannot_be_named_is_one_call_of_the_whole_table():
    mixed = [stats(("a",), size=10), stats(("b",), size=20, spec=1)]
    specs = {0: [CAT], 1: [CAT]}
    assert choose_calls(["cat"], specs, mixed, OPTIONS) == ([None], [30])  # several specs
    assert choose_calls(["cat"], {0: []}, [stats((), size=5)], OPTIONS) == ([None], [5])  # unpartitioned spec
    assert choose_calls(["cat"], {0: [CAT]}, [], OPTIONS) == ([], [])  # no files: nothing to call


def test_growler_reads_progress_lines_even_after_other_output_and_ignores_the_rest():
    line = PROGRESS + '{"file-groups-done": 1, "file-groups-total": 2, "bytes-done": 5, "bytes-total": 9}\n'
    expected = {"file-groups-done": 1, "file-groups-total": 2, "bytes-done": 5, "bytes-total": 9}
    assert progress_of(line) == expected
    assert progress_of("26/12/07 00:00:01 WARN something " + line) == expected  # a log line's tail
    assert progress_of("26/12/07 INFO SparkContext: Running Spark version 3.5\n") is None
    assert progress_of(PROGRESS + "{not json\n") is None
    assert progress_of(PROGRESS + '{"file-groups-done": 1}\n') is None
