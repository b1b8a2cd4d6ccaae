"""A Spark job that outlives the temporary credentials it was given (``test_sts_long_job.py``).

Run with the Spark 3.5 interpreter (``.venv/bin/python``): ``python sts_long_job_driver.py
<config.json>``, the config written by ``sts_long_job_support``: the jars, the catalog's Spark
configuration, the table, where to write the report, the pace of the inserts and how far past the
credentials' expiry to keep writing.

The job creates its table, reads the expiry of the credentials its table's FileIO was given
(``s3.session-token-expires-at-ms`` from the create's answer), then inserts one row every
``interval_s`` (one of them half an interval before that expiry, and once more right at
``margin_s`` past it) until an insert that started ``margin_s`` past it has succeeded. The
catalog keeps its tables cached for the whole run (``cache.expiration-interval-ms=-1``): every
insert goes through that one table and its one FileIO, as a long streaming or batch job does; with
Spark's default 30 s cache each insert would load the table anew and get fresh credentials, so no
refresh would ever be needed. At the end it reads the expiry again: the same value says the FileIO
was never replaced, so the writes past the expiry went out with credentials it refreshed itself.

The report (JSON, rewritten after every insert so a crash leaves what was done) holds the
table's location, the expiry at the start and at the end, each insert's id and times (epoch ms),
and the first failure, after which the job stops (exit status 1). Only the standard library and
PySpark are imported, as in ``spark_driver.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any

from spark_driver import build_session

EXPIRY = "s3.session-token-expires-at-ms"
# Past the expiry plus this, without having reached the margin, the job gives up: something is stuck.
GIVE_UP_AFTER_EXPIRY_S = 600


def now_ms() -> int:
    return int(time.time() * 1000)


def save(report: dict[str, Any], path: str) -> None:
    """Replace the report at once: the test never reads a half-written one."""
    partial = f"{path}.partial"
    with open(partial, "w") as out:
        json.dump(report, out)
    os.replace(partial, path)


def iceberg_table(spark, table: str):
    """The Iceberg table behind ``table``, as the catalog (and its cache) hands it to every statement."""
    return spark._jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)


def expiry_ms(spark, table: str) -> int:
    return int(iceberg_table(spark, table).io().properties().get(EXPIRY))


def run(spark, config: dict[str, Any], report: dict[str, Any]) -> None:
    table, path = config["table"], config["report"]
    namespace = table.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, written_at_ms BIGINT) USING iceberg")
    report["location"] = iceberg_table(spark, table).location()
    expires = report["expires_at_ms"] = expiry_ms(spark, table)
    save(report, path)
    stop_after = expires + int(config["margin_s"] * 1000)
    give_up_after = expires + GIVE_UP_AFTER_EXPIRY_S * 1000
    # Inserts go out at the expiry - interval / 2 + k * interval: one half an interval before the
    # expiry, after the provider's refresh is due (the AWS SDK jitters it between five minutes and
    # one minute before), so that refresh comes from an insert ahead of the expiry, as it must.
    interval_ms = int(float(config["interval_s"]) * 1000)
    anchor = expires - interval_ms // 2
    for insert_id in range(1_000_000):
        started = now_ms()
        spark.sql(f"INSERT INTO {table} VALUES ({insert_id}, {started})")
        report["inserts"].append({"id": insert_id, "started_ms": started, "finished_ms": now_ms()})
        save(report, path)
        if started >= stop_after:
            break
        if now_ms() > give_up_after:
            raise TimeoutError(f"still short of {stop_after} at {now_ms()} ms")
        # The job's pace (one small insert a minute, light beside the suite), not a wait for anything;
        # the last insert goes out as soon as it may (the job is about as long as the whole suite).
        now = now_ms()
        time.sleep(max(0, min((anchor - now) % interval_ms, stop_after - now)) / 1000)
    report["expires_at_ms_at_end"] = expiry_ms(spark, table)


def main(config_path: str) -> int:
    with open(config_path) as source:
        config = json.load(source)
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    config["scratch"] = tempfile.mkdtemp(prefix="growler-long-job-")
    report: dict[str, Any] = {"inserts": [], "error": None}
    spark = None
    try:
        spark = build_session(config)
        run(spark, config, report)
    except Exception as exc:  # noqa: BLE001 - the report carries the failure to the test
        report["error"] = f"{type(exc).__name__}: {exc}"[:4000]  # a Java failure brings its whole stack
    finally:
        report["ended_ms"] = now_ms()
        save(report, config["report"])
        if spark is not None:
            spark.stop()
        shutil.rmtree(config["scratch"], ignore_errors=True)
    return 1 if report["error"] else 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
