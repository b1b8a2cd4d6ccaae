"""The Spark job data compaction starts beyond the in-process bound (app/maintenance/spark.py).

Run by ``spark-submit`` of the configured Spark installation, never imported by Growler itself:
``spark-submit [options] app/maintenance/spark_rewrite_job.py '<json request>'``. The request names the
catalog's URI, the warehouse, the table (namespace levels and name) and the procedure's options;
the principal's credential comes in the environment (``GROWLER_SPARK_CREDENTIAL``), never on a
command line. The job configures an Iceberg REST catalog over Growler (storage from loadTable's
config and vended credentials, like any client), calls Iceberg's ``rewrite_data_files``
procedure - whose commit goes through Growler's commit loop and validates against concurrent
writes with Iceberg's rewrite semantics - and prints one ``GROWLER_JOB_RESULT {json}`` line.
"""

from __future__ import annotations

import json
import os
import sys

CATALOG = "growler_maintenance"
RESULT = "GROWLER_JOB_RESULT "


def quoted(part: str) -> str:
    return "`" + part.replace("`", "``") + "`"


def literal(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


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
    try:
        table = ".".join(quoted(part) for part in request["table"])
        options = ", ".join(f"{literal(k)}, {literal(str(v))}" for k, v in sorted(request["options"].items()))
        named = [name for name in ("strategy", "sort_order") if request.get(name)]  # sort, z-order
        extra = "".join(f", {name} => {literal(request[name])}" for name in named)
        rows = spark.sql(
            f"CALL {CATALOG}.system.rewrite_data_files(table => {literal(table)}{extra}, options => map({options}))"
        ).collect()
        result = rows[0].asDict() if rows else {}
    finally:
        spark.stop()
    print(RESULT + json.dumps(result, default=str), flush=True)


if __name__ == "__main__":
    main()
