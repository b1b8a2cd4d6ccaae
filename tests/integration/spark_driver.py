"""A Spark driver process serving one SparkSession to the test process over a local connection.

Run with the interpreter of a PySpark line (``.venv/bin/python`` for Spark 3.5,
``.venv-spark4/bin/python`` for Spark 4.1: the two PySpark releases cannot share one
environment): ``python spark_driver.py <port> <authkey-hex> <config-json>``. It connects to the
test process (``multiprocessing.connection``, authenticated, loopback only), builds the session,
answers ``("ready", spark_version)`` and then serves requests until ``("stop",)`` or a closed
connection:

- ``("sql", query)``: runs the statement and collects its rows, answered as
  ``("ok", columns, rows)``; rows and structs travel as ``(ROW, fields, values)`` tuples (Spark
  never yields a plain tuple, so the tag is unambiguous), everything else as the Python value
  PySpark produced (datetime, Decimal, bytearray, list, dict...);
- ``("conf_get", key)`` / ``("conf_set", key, value)``: the runtime SQL configuration;
- ``("call", name, args)``: one of the helpers below (``CALLS``: JVM-level actions, the
  DataFrame reader);

and any failure as ``("error", exception class, message)``. Only the standard library and PySpark
are imported: the driver's environment holds nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from multiprocessing.connection import Client

ROW = "\x00row"


def build_session(config: dict):
    """A small local SparkSession (2 threads, no UI, few shuffle partitions) with the catalogs of ``config``;
    ``threads`` and ``driver_memory`` in ``config`` make it smaller still (a job that runs beside the suite)."""
    from pyspark.sql import SparkSession

    scratch = config["scratch"]
    threads = int(config.get("threads", 2))
    builder = (
        SparkSession.builder.master(f"local[{threads}]")
        .appName(config.get("app_name", "growler-test"))
        .config("spark.jars", ",".join(config["jars"]))
        .config("spark.driver.memory", config.get("driver_memory", "1g"))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(threads))
        .config("spark.default.parallelism", str(threads))
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", os.path.join(scratch, "spark-warehouse"))
        .config("spark.local.dir", os.path.join(scratch, "local"))
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch} -Dderby.system.home={scratch}")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in config["conf"].items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def portable(value):
    """A collected value as plain picklable Python, Rows (and structs) tagged with their field names."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return (ROW, list(value.__fields__) if hasattr(value, "__fields__") else [], [portable(v) for v in value])
    if isinstance(value, list):
        return [portable(v) for v in value]
    if isinstance(value, dict):
        return {portable(k): portable(v) for k, v in value.items()}
    return value


def delete_orphan_files(spark, table: str, older_than_ms: int) -> list[str]:
    """SparkActions.deleteOrphanFiles (what CALL remove_orphan_files runs), without the 24-hour floor."""
    jvm = spark._jvm
    iceberg_table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table)
    result = (
        jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
        .deleteOrphanFiles(iceberg_table)
        .olderThan(older_than_ms)
        .usePrefixListing(True)
        .execute()
    )
    locations, iterator = [], result.orphanFileLocations().iterator()
    while iterator.hasNext():
        locations.append(iterator.next())
    return sorted(locations)


def read_count(spark, table: str, options: dict[str, str]) -> int:
    """Rows the DataFrame reader sees with ``options`` (``snapshot-id``, ``as-of-timestamp``...)."""
    return spark.read.options(**options).table(table).count()


def concurrent_inserts(spark, table: str, writers: int, inserts: int) -> list[list]:
    """``writers`` threads of this session, released together by a barrier, each running
    ``inserts`` INSERTs of ``(writer, n)`` into ``table``: ``[writer, n, None | error]`` per
    INSERT (the error: the exception's class and message, as the job would surface it)."""
    import threading

    barrier = threading.Barrier(writers)
    outcomes: list[list] = []

    def write(writer: int) -> None:
        barrier.wait()
        for n in range(inserts):
            try:
                spark.sql(f"INSERT INTO {table} VALUES ({writer}, {n})")
                outcomes.append([writer, n, None])
            except Exception as exc:  # noqa: BLE001 - what a job would see, reported as it is
                outcomes.append([writer, n, f"{type(exc).__name__}: {exc}"])

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(outcomes, key=lambda o: (o[0], o[1]))


CALLS = {
    "delete_orphan_files": delete_orphan_files,
    "read_count": read_count,
    "concurrent_inserts": concurrent_inserts,
}


def handle(spark, request: tuple):
    kind = request[0]
    if kind == "sql":
        frame = spark.sql(request[1])
        return ("ok", list(frame.columns), [portable(row) for row in frame.collect()])
    if kind == "conf_get":
        return ("ok", spark.conf.get(request[1]))
    if kind == "conf_set":
        spark.conf.set(request[1], request[2])
        return ("ok", None)
    if kind == "call":
        return ("ok", CALLS[request[1]](spark, *request[2]))
    raise ValueError(f"unknown request {kind!r}")


def main(port: str, authkey_hex: str, config_json: str) -> None:
    config = json.loads(config_json)
    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    config["scratch"] = tempfile.mkdtemp(prefix="growler-spark-")
    connection = Client(("127.0.0.1", int(port)), authkey=bytes.fromhex(authkey_hex))
    try:
        spark = build_session(config)
        connection.send(("ready", spark.version))
        while True:
            try:
                request = connection.recv()
            except EOFError:
                break
            if request[0] == "stop":
                break
            try:
                answer = handle(spark, request)
            except Exception as exc:  # noqa: BLE001 - every failure goes back to the test, which raises it
                answer = ("error", type(exc).__name__, str(exc))
            connection.send(answer)
        spark.stop()
    finally:
        connection.close()
        shutil.rmtree(config["scratch"], ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
