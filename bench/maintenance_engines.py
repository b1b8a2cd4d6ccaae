"""The engines the maintenance benchmark (bench/maintenance.py) writes and queries with, each a
client of Growler configured as a user would: the catalog's URL and a credential, storage from
loadTable (vended, table-scoped credentials).

- ``SparkClient``: PySpark 3.5 (``.venv``'s) in this process, ``local[2]``, Iceberg's Spark runtime
  from ``.cache/spark-jars`` (``make spark-jars``). It writes the small-file table and times the
  Spark query. It runs in local mode on purpose: a session on the standalone cluster would hold
  its cores and starve the compaction the benchmark measures there.
- ``duckdb_query``: DuckDB's ``iceberg`` extension (from its PyPI wheels, no download) attached to
  the REST endpoint, as tests/integration/test_duckdb.py configures it.
"""

from __future__ import annotations

import glob
import os
import time
from pathlib import Path
from typing import Any

from bench.targets import REPO
from scripts.duckdb_growler import attached
from scripts.spark_cluster import java17_home

CATALOG = "growler"
RUNTIME_JAR = "iceberg-spark-runtime-3.5_2.12-*.jar"
AWS_BUNDLE = "iceberg-aws-bundle-*.jar"


def spark_jars() -> list[str]:
    """Iceberg's Spark 3.5 runtime and AWS bundle: GROWLER_SPARK_JARS's directory, else .cache/spark-jars."""
    directory = Path(os.environ.get("GROWLER_SPARK_JARS") or REPO / ".cache" / "spark-jars")
    found = []
    for pattern in (RUNTIME_JAR, AWS_BUNDLE):
        matches = sorted(glob.glob(str(directory / pattern)))
        if len(matches) != 1:
            raise RuntimeError(f"expected one {pattern} in {directory}, found {len(matches)}: run `make spark-jars`")
        found.append(matches[0])
    return found


class SparkClient:
    """One local Spark session with Growler's warehouse as catalog ``growler`` (no metadata cache:
    a query after the compaction sees the compacted table)."""

    def __init__(self, uri: str, warehouse: str, credential: str, driver_memory: str = "1g") -> None:
        home = java17_home()
        if home:
            os.environ["JAVA_HOME"] = home  # the JVM PySpark starts (Spark 3.5: Java 17)
        from pyspark.sql import SparkSession

        prefix = f"spark.sql.catalog.{CATALOG}"
        builder = (
            SparkSession.builder.master("local[2]")
            .appName("growler-bench-maintenance")
            .config("spark.jars", ",".join(spark_jars()))
            .config("spark.driver.memory", driver_memory)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "8")
            .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
            .config(prefix, "org.apache.iceberg.spark.SparkCatalog")
            .config(f"{prefix}.type", "rest")
            .config(f"{prefix}.uri", uri)
            .config(f"{prefix}.warehouse", warehouse)
            .config(f"{prefix}.credential", credential)
            .config(f"{prefix}.cache-enabled", "false")
            .config(f"{prefix}.header.X-Iceberg-Access-Delegation", "vended-credentials")
        )
        self.session = builder.getOrCreate()
        self.session.sparkContext.setLogLevel("WARN")

    def sql(self, statement: str) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.session.sql(statement).collect()]

    def append_small_files(self, table: str, first_id: int, tasks: int, rows_per_file: int, partitions: int) -> None:
        """One append (one commit) of ``tasks`` write tasks, each holding a contiguous block of ids
        that covers every partition: with fanout writers and no write distribution, each task
        writes one small file per partition, ``tasks * partitions`` files in all."""
        rows = tasks * rows_per_file * partitions
        frame = self.session.range(first_id, first_id + rows, numPartitions=tasks).selectExpr(
            "id", f"cast(id % {partitions} as int) AS part", "sha2(cast(id as string), 256) AS payload"
        )
        frame.writeTo(table).append()

    def timed(self, statement: str) -> tuple[float, list[tuple[Any, ...]]]:
        start = time.perf_counter()
        rows = self.sql(statement)
        return time.perf_counter() - start, rows

    def stop(self) -> None:
        self.session.stop()


def duckdb_query(base_url: str, warehouse: str, client_id: str, secret: str, query: str) -> tuple[float, list[Any]]:
    """``query`` (naming the table ``growler.<namespace>.<table>``) in a fresh in-memory DuckDB
    attached to Growler; the seconds it took (attaching not included) and its rows."""
    con = attached(base_url, warehouse, client_id, secret)
    try:
        start = time.perf_counter()
        rows = con.execute(query).fetchall()
        return time.perf_counter() - start, rows
    finally:
        con.close()
