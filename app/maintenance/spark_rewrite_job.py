"""The Spark job data compaction starts beyond the in-process bound (app/maintenance/spark.py).

Run by ``spark-submit`` of the configured Spark installation, never imported by Growler itself:
``spark-submit [options] app/maintenance/spark_rewrite_job.py '<json request>'``. The request names the
catalog's URI, the warehouse, the table (namespace levels and name) and the procedure's options;
the principal's credential comes in the environment (``GROWLER_SPARK_CREDENTIAL``), never on a
command line. The job configures an Iceberg REST catalog over Growler (storage from loadTable's
config and vended credentials, like any client), calls Iceberg's ``rewrite_data_files``
procedure - whose commit goes through Growler's commit loop and validates against concurrent
writes with Iceberg's rewrite semantics - and prints one ``GROWLER_JOB_RESULT {json}`` line.

**Progress.** Iceberg's procedure says nothing until it returns, so the job splits the work itself
where it can: when its data files are all in one partition spec, it reads the ``files`` metadata
table once, keeps the partitions the rewrite may touch (at least ``min-input-files`` data files, a
delete file, or a data file beyond ``max-file-size-bytes``) and calls the procedure once per batch
of them (at most ``MAX_CALLS`` calls, each with a ``where`` naming its partitions), printing one
``GROWLER_JOB_PROGRESS {json}`` line before the first and after each: file groups (batches) and
bytes (of the data and delete files in them) done of total. Each call is one commit, as with
Iceberg's ``partial-progress.enabled``: a job stopped between calls leaves the batches it committed
committed (every commit a complete rewrite: the same rows), and the next run plans from there.

A ``where`` selects exactly the files of the partitions it names - no more, no fewer - on their
source columns (``field_filter``; the spec's transforms come from the Iceberg table Spark's catalog
loads, ``table_specs``): an identity is ``col = value``; ``year``/``month``/``day``/``hour`` a
half-open range in UTC (``ts >= TIMESTAMP '2026-01-02 00:00:00+00:00' AND ts < ...``, a
timestamp_ntz or date column with literals of its own type), before 1970 the transform itself
(``system.days(ts) = DATE '1969-12-31'``: there Iceberg widens a range's projection by a
partition); ``truncate[W]`` of an int or long ``v <= col < v + W``, of a string ``col = v`` (shorter
than W) or ``startswith(col, v)``; ``bucket[N]`` Iceberg's function, ``system.bucket(N, col) = k``;
a null partition value ``col IS NULL``. Each of these becomes an Iceberg expression whose
projection on the spec is exactly that partition (checked on Iceberg 1.12 with Spark 3.5 and 4.1).
Any other table (unpartitioned, files in several specs, a nested source column, a truncated decimal
or binary, a value within W of an int's bounds, a bucket of a decimal, binary or uuid) is one call,
reported as one group.

**Where the reports go.** In client deploy mode Growler reads the lines above from the driver's
output. In cluster deploy mode the driver runs on the cluster, and the job finds
``GROWLER_JOB_REPORT_URL`` and ``GROWLER_JOB_REPORT_TOKEN`` in its environment: it posts each
progress report, then its result or its error, to the run's reportMaintenanceRun, signed in with
its credential (Growler's token endpoint, client credentials) and the run's token. An answer that
says stop (the run was cancelled, the table protected or dropped) or refuses the report (the run
ended, or another job took it over) stops the job before its next call of the procedure.
"""

from __future__ import annotations

import datetime
import decimal
import json
import math
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

CATALOG = "growler_maintenance"
RESULT = "GROWLER_JOB_RESULT "
PROGRESS = "GROWLER_JOB_PROGRESS "
MAX_CALLS = 64  # calls of the procedure per job at most: the partitions are batched to fit
ICEBERG_MIN_INPUT_FILES = 5  # Iceberg's default when the options say nothing
MAX_SIZE_SHARE = 1.8  # Iceberg's max-file-size-bytes default: 180% of the target
COUNTS = ("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count", "failed_data_files_count")


def quoted(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(frozen=True)
class Field:
    """One partition field as the job names its partitions: ``name``, its place in the ``files``
    metadata table's partition struct; ``transform``, Iceberg's text of it (``identity``, ``day``,
    ``bucket[16]``, ``truncate[10]``, ...); ``column``, its source column when that is a top-level
    one (None: nested, which the job does not name); ``type``, the source's Iceberg type
    (``timestamptz``, ``timestamp``, ``date``, ``long``, ``string``, ...)."""

    name: str
    transform: str
    column: str | None
    type: str


def value_literal(value: Any) -> str | None:
    """A partition value as a Spark SQL literal; None when it has none this job writes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, int | float | decimal.Decimal):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, datetime.datetime):
        return f"TIMESTAMP {literal(value.isoformat(sep=' '))}"
    if isinstance(value, datetime.date):
        return f"DATE {literal(value.isoformat())}"
    return None


def moment_literal(moment: datetime.datetime, source_type: str) -> str | None:
    """An instant (UTC wall clock) as a literal of the source column's type. A timestamptz literal
    carries its offset, so the session's time zone never shifts it (Iceberg's time transforms count
    in UTC); a timestamp_ntz literal is a wall clock, as its column is."""
    if source_type == "timestamptz":
        return f"TIMESTAMP {literal(moment.isoformat(sep=' ') + '+00:00')}"
    if source_type == "timestamp":
        return f"TIMESTAMP_NTZ {literal(moment.isoformat(sep=' '))}"
    if source_type == "date" and moment.time() == datetime.time():
        return f"DATE {literal(moment.date().isoformat())}"
    return None


def identity_filter(column: str, source_type: str, value: Any) -> str | None:
    """``column = value``; a timestamp's literal of its column's type (PySpark hands a timestamptz
    value as a naive local time, which ``astimezone`` reads as such)."""
    if isinstance(value, datetime.datetime) and source_type in ("timestamptz", "timestamp"):
        moment = value.astimezone(datetime.UTC).replace(tzinfo=None) if source_type == "timestamptz" else value
        text = moment_literal(moment, source_type)
    else:
        text = value_literal(value)
    return None if text is None else f"{column} = {text}"


def time_range(transform: str, ordinal: int) -> tuple[datetime.datetime, datetime.datetime] | None:
    """The half-open range (UTC wall clock) of the source values whose ``transform`` (year, month,
    day, hour: counted from 1970) is ``ordinal``; None beyond what ``datetime`` holds."""
    epoch = datetime.datetime(1970, 1, 1)
    try:
        if transform in ("day", "hour"):
            step = datetime.timedelta(days=1) if transform == "day" else datetime.timedelta(hours=1)
            return epoch + ordinal * step, epoch + (ordinal + 1) * step
        per_year = 12 if transform == "month" else 1
        starts = [divmod(n, per_year) for n in (ordinal, ordinal + 1)]
        lower, upper = (datetime.datetime(1970 + years, months + 1, 1) for years, months in starts)
        return lower, upper
    except (OverflowError, ValueError):
        return None


TIME_FUNCTIONS = {"year": "years", "month": "months", "day": "days", "hour": "hours"}


def time_filter(column: str, transform: str, source_type: str, value: Any) -> str | None:
    """A year/month/day/hour partition as a half-open range of its source column. The ``files``
    table shows a day as a DATE, the others as ints counted from 1970. Before 1970 (a negative
    ordinal) Iceberg widens the range's projection by a partition (its fix for files written with
    an old bug), so there the partition is named by the transform itself - Iceberg's function in
    this catalog, ``system.days(ts) = DATE '1969-12-31'`` - which projects onto exactly it."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        ordinal = (value - datetime.date(1970, 1, 1)).days
    elif isinstance(value, int) and not isinstance(value, bool):
        ordinal = value
    else:
        return None
    bounds = time_range(transform, ordinal)
    if bounds is None or source_type not in ("timestamptz", "timestamp", "date"):
        return None
    if ordinal < 0:
        shown = f"DATE {literal(bounds[0].date().isoformat())}" if transform == "day" else str(ordinal)
        return f"{CATALOG}.system.{TIME_FUNCTIONS[transform]}({column}) = {shown}"
    lower, upper = (moment_literal(bound, source_type) for bound in bounds)
    if lower is None or upper is None:
        return None
    return f"{column} >= {lower} AND {column} < {upper}"


INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def truncate_filter(column: str, width: int, source_type: str, value: Any) -> str | None:
    """A ``truncate[W]`` partition. Of an int or long: ``v <= col < v + W`` (None within W of the
    type's bounds, where Iceberg's truncate wraps around and its projection with it). Of a string:
    a value shorter than W is the whole string (``col = v``), one of W code points its prefix
    (``startswith(col, v)``: Iceberg's startsWith, which projects onto exactly that partition)."""
    if source_type in INT_RANGE and isinstance(value, int) and not isinstance(value, bool):
        low, high = INT_RANGE[source_type]
        if value % width or value - width < low or value + width > high:
            return None
        return f"{column} >= {value} AND {column} < {value + width}"
    if source_type == "string" and isinstance(value, str) and len(value) <= width:
        return f"{column} = {literal(value)}" if len(value) < width else f"startswith({column}, {literal(value)})"
    return None


# the source types whose bucket partitions the job names (checked on Spark 3.5 and 4.1); others
# (decimal, binary, uuid) fall back to one call
BUCKETED = frozenset({"int", "long", "string", "date", "timestamp", "timestamptz"})


def field_filter(field: Field, value: Any) -> str | None:
    """The rows of ``field``'s partition ``value`` on its source column, exactly: None when this
    job cannot say it (a nested source, a transform or type it does not name)."""
    if field.column is None:
        return None
    column = quoted(field.column)
    if value is None:  # every transform maps null, and only null, to null
        return f"{column} IS NULL"
    kind, _, argument = field.transform.partition("[")
    if kind == "identity":
        return identity_filter(column, field.type, value)
    if kind in TIME_FUNCTIONS:
        return time_filter(column, kind, field.type, value)
    if not argument.rstrip("]").isdigit():
        return None
    width = int(argument.rstrip("]"))
    if kind == "truncate" and width > 0:
        return truncate_filter(column, width, field.type, value)
    if kind == "bucket" and field.type in BUCKETED and isinstance(value, int) and 0 <= value < width:
        # Iceberg's bucket function in the procedure's where becomes Iceberg's bucket term, which
        # projects onto exactly the bucket's partition
        return f"{CATALOG}.system.bucket({width}, {column}) = {value}"
    return None


def partition_filter(fields: list[Field], values: tuple[Any, ...]) -> str | None:
    """``where`` of one partition: every field's term (a void field, always null, has none)."""
    terms = []
    for field, value in zip(fields, values, strict=True):
        if field.transform == "void":
            continue
        term = field_filter(field, value)
        if term is None:
            return None
        terms.append(term)
    return "(" + " AND ".join(terms) + ")" if terms else None


def needs_look(stats: dict[str, int], options: dict[str, str]) -> bool:
    """Whether the procedure may rewrite something in a partition (a superset of its planner's
    choice: enough data files for a group, a delete file, or a file to split)."""
    target = int(options.get("target-file-size-bytes", "0") or 0)
    max_size = int(options.get("max-file-size-bytes", "0") or 0) or int(target * MAX_SIZE_SHARE)
    min_input = int(options.get("min-input-files", ICEBERG_MIN_INPUT_FILES))
    return (
        stats["data_files"] >= min(min_input, 2)
        or stats["delete_files"] > 0
        or (max_size > 0 and stats["largest"] > max_size)
    )


def batches(items: list[Any], count: int) -> list[list[Any]]:
    size = -(-len(items) // count)
    return [items[i : i + size] for i in range(0, len(items), size)]


def table_specs(spark: Any, table: str) -> dict[int, list[Field]] | None:
    """The table's partition specs by id, from the Iceberg table Spark's catalog loads (through
    Py4J: ``Spark3Util.loadIcebergTable``): the same catalog, REST loadTable and table the procedure
    rewrites, every spec of it by id (a data file's ``spec_id`` names its own) with each field's
    transform and source exactly as Iceberg has them. The metadata tables show partition values,
    not transforms; ``DESCRIBE`` only the current spec, as text. None when it cannot be loaded
    (the job then makes one call)."""
    from py4j.protocol import Py4JError  # PySpark's own dependency, beside it in the job

    try:
        loaded = spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
            spark._jsparkSession, f"{CATALOG}.{table}"
        )
        schema = loaded.schema()
        top_level = {int(column.fieldId()) for column in schema.columns()}
        specs = {}
        for spec_id, spec in loaded.specs().items():
            fields = []
            for field in spec.fields():
                source = schema.findField(field.sourceId())
                fields.append(
                    Field(
                        name=str(field.name()),
                        transform=str(field.transform().toString()),
                        column=str(source.name()) if int(field.sourceId()) in top_level else None,
                        type=str(source.type().toString()) if source is not None else "",
                    )
                )
            specs[int(spec_id)] = fields
        return specs
    except (Py4JError, AttributeError) as error:
        print(f"partition specs not loaded, one call of the whole table: {error}", file=sys.stderr, flush=True)
        return None


def plan_calls(spark: Any, table: str, options: dict[str, str]) -> tuple[list[str | None], list[int]]:
    """The ``where`` of each call and the bytes it covers (``choose_calls``), from one grouped read
    of the table's ``files`` metadata table and its partition specs (``table_specs``)."""
    files = spark.table(f"{CATALOG}.{table}.files")
    if "partition" not in files.columns:  # unpartitioned: one call
        whole = files.selectExpr("coalesce(sum(file_size_in_bytes), 0) AS bytes").collect()[0]["bytes"]
        return [None], [int(whole)]
    names = list(files.schema["partition"].dataType.fieldNames())
    rows = spark.sql(
        "SELECT spec_id, partition, count_if(content = 0) AS data_files, count_if(content <> 0) AS delete_files,"
        " coalesce(max(CASE WHEN content = 0 THEN file_size_in_bytes END), 0) AS largest,"
        f" sum(file_size_in_bytes) AS bytes FROM {CATALOG}.{table}.files GROUP BY spec_id, partition"
    ).collect()
    stats = [
        {
            "spec_id": row["spec_id"],
            "partition": tuple(row["partition"]),
            **{key: int(row[key]) for key in ("data_files", "delete_files", "largest", "bytes")},
        }
        for row in rows
    ]
    return choose_calls(names, table_specs(spark, table) or {}, stats, options)


def choose_calls(
    names: list[str], specs: dict[int, list[Field]], partitions: list[dict[str, Any]], options: dict[str, str]
) -> tuple[list[str | None], list[int]]:
    """Per batch of the partitions the rewrite may touch, its ``where`` and bytes (at most
    ``MAX_CALLS``; none when no partition needs a look). ``names`` are the fields of the ``files``
    table's partition struct (every spec's), ``specs`` the table's specs by id. ``[None]`` - one
    call, the whole table - when the partitions cannot be named: files in several specs (a
    ``where`` on source columns would select across them), a spec not known, a field not in the
    struct by one name, a field or value ``field_filter`` cannot say."""
    whole = sum(p["bytes"] for p in partitions)
    spec_ids = {p["spec_id"] for p in partitions}
    if not partitions:
        return [], []
    fields = specs.get(next(iter(spec_ids))) if len(spec_ids) == 1 else None
    if not fields or len(set(names)) < len(names) or any(field.name not in names for field in fields):
        return [None], [whole]
    positions = [names.index(field.name) for field in fields]
    chosen = []
    for stats in sorted(partitions, key=lambda p: str(p["partition"])):
        if not needs_look(stats, options):
            continue
        where = partition_filter(fields, tuple(stats["partition"][i] for i in positions))
        if where is None:
            return [None], [whole]
        chosen.append((where, stats["bytes"]))
    if not chosen:
        return [], []
    grouped = batches(chosen, MAX_CALLS)
    return [" OR ".join(w for w, _ in group) for group in grouped], [sum(b for _, b in group) for group in grouped]


class JobStopped(Exception):
    """Growler answered a report with stop, or refused it: the job makes no further call."""


_TOKENS: dict[str, str] = {}  # the bearer token, fetched once


def bearer(uri: str) -> str | None:
    """A token from the catalog's token endpoint for the job's credential (``id:secret``)."""
    credential = os.environ.get("GROWLER_SPARK_CREDENTIAL")
    if not credential:
        return None
    if "token" not in _TOKENS:
        client_id, _, secret = credential.partition(":")
        form = urllib.parse.urlencode(
            {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret, "scope": "catalog"}
        ).encode()
        with urllib.request.urlopen(f"{uri.rstrip('/')}/v1/oauth/tokens", form, timeout=30) as answer:  # noqa: S310
            _TOKENS["token"] = json.load(answer)["access_token"]
    return _TOKENS["token"]


def post_report(uri: str, body: dict[str, Any]) -> None:
    """One report to the run's reportMaintenanceRun (cluster deploy mode; nothing otherwise)."""
    url, token = os.environ.get("GROWLER_JOB_REPORT_URL"), os.environ.get("GROWLER_JOB_REPORT_TOKEN")
    if not url or not token:
        return
    headers = {"Content-Type": "application/json", "X-Growler-Run-Token": token}
    signed = bearer(uri)
    if signed:
        headers["Authorization"] = f"Bearer {signed}"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - the catalog's URL
            stop = bool(json.load(answer).get("stop"))
    except urllib.error.HTTPError as refused:
        raise JobStopped(f"Growler refused the job's report: {refused.code} {refused.read()[:500]!r}") from None
    if stop:
        raise JobStopped("Growler asked the job to stop (the run was cancelled, or its table protected or dropped)")


def report(done: int, total: int, bytes_done: int, bytes_total: int, uri: str = "") -> None:
    progress = {
        "file-groups-done": done,
        "file-groups-total": total,
        "bytes-done": bytes_done,
        "bytes-total": bytes_total,
    }
    print(PROGRESS + json.dumps(progress), flush=True)
    post_report(uri, {"progress": progress})


def main() -> None:
    from pyspark.sql import SparkSession  # the job's interpreter has PySpark; Growler's need not

    request = json.loads(sys.argv[1])
    prefix = f"spark.sql.catalog.{CATALOG}"
    builder = (
        SparkSession.builder.appName(f"growler-rewrite-data-files-{request['table'][-1]}")
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
        .config(f"{prefix}.type", "rest")
        .config(f"{prefix}.uri", request["uri"])
        .config(f"{prefix}.warehouse", request["warehouse"])
        .config(f"{prefix}.header.X-Iceberg-Access-Delegation", "vended-credentials")
    )
    credential = os.environ.get("GROWLER_SPARK_CREDENTIAL")
    if credential:
        builder = builder.config(f"{prefix}.credential", credential)
    spark = builder.getOrCreate()
    result: dict[str, Any] = dict.fromkeys(COUNTS, 0)  # (none: a table the rewrite finds in shape)
    try:
        table = ".".join(quoted(part) for part in request["table"])
        options = ", ".join(f"{literal(k)}, {literal(str(v))}" for k, v in sorted(request["options"].items()))
        named = [name for name in ("strategy", "sort_order") if request.get(name)]  # sort, z-order
        extra = "".join(f", {name} => {literal(request[name])}" for name in named)
        calls, sizes = plan_calls(spark, table, {k: str(v) for k, v in request["options"].items()})
        total_bytes = sum(sizes)
        report(0, len(calls), 0, total_bytes, request["uri"])
        done_bytes = 0
        for index, (where, size) in enumerate(zip(calls, sizes, strict=True), start=1):
            narrowed = f", where => {literal(where)}" if where is not None else ""
            rows = spark.sql(
                f"CALL {CATALOG}.system.rewrite_data_files(table => {literal(table)}{extra}{narrowed},"
                f" options => map({options}))"
            ).collect()
            for key, value in (rows[0].asDict() if rows else {}).items():
                if isinstance(value, int):
                    result[key] = result.get(key, 0) + value
            done_bytes += size
            report(index, len(calls), done_bytes, total_bytes, request["uri"])
    except JobStopped:
        raise
    except Exception as exc:
        post_report(request["uri"], {"error": f"{type(exc).__name__}: {exc}"[:2000]})
        raise
    finally:
        spark.stop()
    print(RESULT + json.dumps(result, default=str), flush=True)
    post_report(request["uri"], {"result": {key: value for key, value in result.items() if isinstance(value, int)}})


if __name__ == "__main__":
    main()
