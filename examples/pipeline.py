"""A small Spark pipeline on a Growler catalog: ingest -> transform -> merge -> query.

    make run        # in one terminal: Growler on http://127.0.0.1:8181, warehouse "warehouse"
    make example    # in another: fetches the Iceberg jars once, then runs this script on Spark 3.5
    make example SPARK_LINE=4.1     # the same on Spark 4.1 (PySpark 4.1 from .venv-spark4)

or directly: ``.venv/bin/python examples/pipeline.py --uri http://127.0.0.1:8181 --warehouse warehouse``
(``.venv-spark4/bin/python ... --spark-line 4.1`` for Spark 4.1; ``--jars`` names the directory
holding ``iceberg-spark-runtime-3.5_2.12-*.jar`` or ``iceberg-spark-runtime-4.1_2.13-*.jar`` and
``iceberg-aws-bundle-*.jar``; ``make spark-jars`` puts them in ``.cache/spark-jars``).

Growler authenticates every request: the script sends the credential (``client_id:secret``) from
``--credential``, ``$GROWLER_CREDENTIAL`` or the file ``make run`` writes (``.growler/credential``);
the Iceberg client fetches a token from ``/v1/oauth/tokens`` and refreshes it before it expires.

Spark is told the catalog URL and the warehouse name, nothing else: the S3 endpoint, region and
addressing style come from Growler's loadTable ``config``, the keys from its vended
``storage-credentials``. Every run replaces the tables of namespace ``demo``; each step commits
an Iceberg snapshot, so the last query can compare the data before and after the merge.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
NS = "growler.demo"

# order_id, customer (messy, as typed in by hand), sku, qty, unit price, order time, status
RAW_ORDERS = [
    (1001, " Alice ", "tea-green", 2, 4.50, "2024-05-01 09:12:00", "paid"),
    (1002, "bob", "tea-black", 1, 3.90, "2024-05-01 10:40:00", "paid"),
    (1003, "CAROL", "mug", 1, 12.00, "2024-05-01 18:05:00", "paid"),
    (1004, "alice", "mug", 2, 12.00, "2024-05-02 08:30:00", "paid"),
    (1005, "Dave", "tea-green", 0, 4.50, "2024-05-02 11:00:00", "paid"),  # qty 0: dropped by the transform
    (1006, "bob ", "kettle", 1, 35.00, "2024-05-02 16:20:00", "pending"),
    (1007, "carol", "tea-black", 3, 3.90, "2024-05-03 07:55:00", "paid"),
]

# late news for the orders table: a quantity fix, a cancellation, a pending order paid, a new order
CORRECTIONS = [
    (1002, "bob", "tea-black", 2, 3.90, "2024-05-01 10:40:00", "paid"),
    (1003, "carol", "mug", 1, 12.00, "2024-05-01 18:05:00", "cancelled"),
    (1006, "bob", "kettle", 1, 35.00, "2024-05-02 16:20:00", "paid"),
    (1008, "erin", "tea-green", 4, 4.50, "2024-05-03 12:00:00", "paid"),
]

COLUMNS = "order_id bigint, customer string, sku string, qty int, unit_price double, ts string, status string"


RUNTIME_JARS = {"3.5": "iceberg-spark-runtime-3.5_2.12-*.jar", "4.1": "iceberg-spark-runtime-4.1_2.13-*.jar"}


def find_jars(directory: Path, line: str) -> list[str]:
    jars = []
    for pattern in (RUNTIME_JARS[line], "iceberg-aws-bundle-*.jar"):
        found = sorted(glob.glob(str(directory / pattern)))
        if not found:
            sys.exit(f"no {pattern} in {directory}: run `make spark-jars` or pass --jars")
        jars.append(found[-1])
    return jars


def spark_session(uri: str, warehouse: str, jars: list[str], credential: str | None = None):
    java_home = os.environ.get("GROWLER_SPARK_JAVA_HOME")
    if java_home:  # Spark 3.5 wants Java 8/11/17, 4.1 17/21; `make example` points this at a JDK 17
        os.environ["JAVA_HOME"] = java_home
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("growler-pipeline-example")
        .config("spark.jars", ",".join(jars))
        .config("spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
        .config("spark.sql.catalog.growler", "org.apache.iceberg.spark.SparkCatalog")
        .config("spark.sql.catalog.growler.type", "rest")
        .config("spark.sql.catalog.growler.uri", uri)
        .config("spark.sql.catalog.growler.warehouse", warehouse)
        .config("spark.sql.catalog.growler.header.X-Iceberg-Access-Delegation", "vended-credentials")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if credential:  # the Iceberg REST client's OAuth2 client credentials, refreshed by it
        builder = builder.config("spark.sql.catalog.growler.credential", credential)
    return builder.getOrCreate()


def default_credential() -> str | None:
    """``$GROWLER_CREDENTIAL``, else the bootstrap credential ``make run`` keeps in .growler/credential."""
    if os.environ.get("GROWLER_CREDENTIAL"):
        return os.environ["GROWLER_CREDENTIAL"]
    path = Path(os.environ.get("GROWLER_DATA_DIR") or REPO / ".growler") / "credential"
    return path.read_text().strip() if path.exists() else None


def step(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def run(spark) -> None:
    from pyspark.sql.functions import days

    spark.sparkContext.setLogLevel("ERROR")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {NS}")

    step("1. ingest: the raw batch lands as it came, partitioned by day")
    raw = spark.createDataFrame(RAW_ORDERS, COLUMNS).selectExpr("*", "to_timestamp(ts) AS order_ts").drop("ts")
    raw.writeTo(f"{NS}.raw_orders").using("iceberg").partitionedBy(days("order_ts")).createOrReplace()
    print(f"raw_orders: {spark.table(f'{NS}.raw_orders').count()} rows")

    step("2. transform: clean names, drop empty orders, compute amounts (CREATE OR REPLACE TABLE AS SELECT)")
    spark.sql(
        f"""CREATE OR REPLACE TABLE {NS}.orders USING iceberg PARTITIONED BY (days(order_ts)) AS
        SELECT order_id, lower(trim(customer)) AS customer, sku, qty, unit_price,
               round(qty * unit_price, 2) AS amount, order_ts, status
        FROM {NS}.raw_orders WHERE qty > 0"""
    )
    before_merge = spark.sql(f"SELECT snapshot_id FROM {NS}.orders.snapshots ORDER BY committed_at DESC LIMIT 1")
    before_merge = before_merge.collect()[0][0]
    spark.table(f"{NS}.orders").orderBy("order_id").show(truncate=False)

    step("3. merge: late corrections (update, cancel = delete, insert new)")
    corrections = spark.createDataFrame(CORRECTIONS, COLUMNS).selectExpr("*", "to_timestamp(ts) AS order_ts").drop("ts")
    corrections.createOrReplaceTempView("corrections")
    spark.sql(
        f"""MERGE INTO {NS}.orders t USING corrections c ON t.order_id = c.order_id
        WHEN MATCHED AND c.status = 'cancelled' THEN DELETE
        WHEN MATCHED THEN UPDATE SET qty = c.qty, amount = round(c.qty * t.unit_price, 2), status = c.status
        WHEN NOT MATCHED THEN INSERT (order_id, customer, sku, qty, unit_price, amount, order_ts, status)
          VALUES (c.order_id, c.customer, c.sku, c.qty, c.unit_price, round(c.qty * c.unit_price, 2),
                  c.order_ts, c.status)"""
    )
    spark.table(f"{NS}.orders").orderBy("order_id").show(truncate=False)

    step("4. query: revenue per customer (paid orders), now and before the merge (time travel)")
    spark.sql(
        f"""SELECT now.customer, now.revenue, before.revenue AS revenue_before_merge
        FROM (SELECT customer, round(sum(amount), 2) AS revenue FROM {NS}.orders
              WHERE status = 'paid' GROUP BY customer) now
        FULL OUTER JOIN (SELECT customer, round(sum(amount), 2) AS revenue FROM {NS}.orders
              VERSION AS OF {before_merge} WHERE status = 'paid' GROUP BY customer) before
        ON now.customer = before.customer
        ORDER BY now.customer"""
    ).show()
    spark.sql(
        f"SELECT date(order_ts) AS day, count(*) AS orders, round(sum(amount), 2) AS revenue "
        f"FROM {NS}.orders GROUP BY 1 ORDER BY 1"
    ).show()
    print("snapshots of demo.orders:")
    spark.sql(f"SELECT committed_at, snapshot_id, operation FROM {NS}.orders.snapshots ORDER BY committed_at").show(
        truncate=False
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uri", default=os.environ.get("GROWLER_URI", "http://127.0.0.1:8181"))
    parser.add_argument("--warehouse", default=os.environ.get("GROWLER_WAREHOUSE", "warehouse"))
    parser.add_argument("--spark-line", choices=sorted(RUNTIME_JARS), default="3.5")
    parser.add_argument(
        "--jars", type=Path, default=Path(os.environ.get("GROWLER_SPARK_JARS") or REPO / ".cache" / "spark-jars")
    )
    parser.add_argument("--credential", default=None, help="client_id:secret (default: see the docstring)")
    args = parser.parse_args()
    from pyspark import __version__ as pyspark_version

    if not pyspark_version.startswith(args.spark_line + "."):
        sys.exit(f"--spark-line {args.spark_line} but this interpreter has PySpark {pyspark_version}")
    credential = args.credential or default_credential()
    spark = spark_session(args.uri, args.warehouse, find_jars(args.jars, args.spark_line), credential)
    try:
        run(spark)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
