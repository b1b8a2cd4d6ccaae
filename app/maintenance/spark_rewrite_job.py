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
where it can: when every field of the table's partition spec is an identity (its data files all in
one spec), it reads the ``files`` metadata table once, keeps the partitions the rewrite may touch
(at least ``min-input-files`` data files, a delete file, or a data file beyond
``max-file-size-bytes``) and calls the procedure once per batch of them (at most ``MAX_CALLS``
calls, each with a ``where`` naming its partitions' values), printing one
``GROWLER_JOB_PROGRESS {json}`` line before the first and after each: file groups (batches) and
bytes (of the data and delete files in them) done of total. Each call is one commit, as with
Iceberg's ``partial-progress.enabled``: a job stopped between calls leaves the batches it committed
committed (every commit a complete rewrite: the same rows), and the next run plans from there.
Any other table (unpartitioned, transforms, several specs) is one call, reported as one group.

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
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
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


def value_literal(value: Any) -> str | None:
    """A partition value as a Spark SQL literal; None when it has none this job writes."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | decimal.Decimal):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return literal(value)
    if isinstance(value, datetime.datetime):
        return f"TIMESTAMP {literal(value.isoformat(sep=' '))}"
    if isinstance(value, datetime.date):
        return f"DATE {literal(value.isoformat())}"
    return None


def partition_filter(names: list[str], values: tuple[Any, ...]) -> str | None:
    """``where`` of one partition of identity fields: every column equal to its value (or null)."""
    terms = []
    for name, value in zip(names, values, strict=True):
        if value is None:
            terms.append(f"{quoted(name)} IS NULL")
            continue
        text = value_literal(value)
        if text is None:
            return None
        terms.append(f"{quoted(name)} = {text}")
    return "(" + " AND ".join(terms) + ")"


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


def plan_calls(spark: Any, table: str, options: dict[str, str]) -> tuple[list[str | None], list[int]]:
    """The ``where`` of each call and the bytes it covers (``choose_calls``), from one grouped read
    of the table's ``files`` metadata table."""
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
    return choose_calls(names, set(spark.table(f"{CATALOG}.{table}").columns), stats, options)


def choose_calls(
    names: list[str], columns: set[str], partitions: list[dict[str, Any]], options: dict[str, str]
) -> tuple[list[str | None], list[int]]:
    """Per batch of the partitions the rewrite may touch, its ``where`` and bytes (at most
    ``MAX_CALLS``; none when no partition needs a look); ``[None]`` - one call, the whole table -
    when the partitions cannot be named: a field that is not an identity (its name is no column),
    files in several specs, a value with no literal."""
    whole = sum(p["bytes"] for p in partitions)
    if not names or len({p["spec_id"] for p in partitions}) > 1 or not set(names) <= columns:
        return [None], [whole]
    chosen = []
    for stats in sorted(partitions, key=lambda p: str(p["partition"])):
        if not needs_look(stats, options):
            continue
        where = partition_filter(names, stats["partition"])
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
