"""Spark (PySpark + Iceberg's Spark runtime) configured as a client of a Growler server.

The session knows the catalog URL and the warehouse name, nothing else about storage: the
endpoint, region and addressing style of S3 come from loadTable's ``config``, the keys from its
``storage-credentials``, which the session asks for with ``X-Iceberg-Access-Delegation:
vended-credentials`` (the Java REST client sends no such header unless configured to).

The jars (``iceberg-spark-runtime-3.5_2.12`` and ``iceberg-aws-bundle``, one Iceberg release,
pinned in the Makefile) are fetched by ``make spark-jars`` into ``.cache/spark-jars``;
``GROWLER_SPARK_JARS`` names another directory. Missing jars are an error, not a skip.

Also runnable as a script, for a second, independent Spark driver (its own JVM and catalog
cache): ``python spark_support.py append <uri> <warehouse> <table> <warm-up table> <who> <first-id>
<batches> <rows>``.
"""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_JAR_DIR = REPO / ".cache" / "spark-jars"
CATALOG = "growler"
JAR_PATTERNS = ("iceberg-spark-runtime-3.5_2.12-*.jar", "iceberg-aws-bundle-*.jar")


def jar_dir() -> Path:
    return Path(os.environ.get("GROWLER_SPARK_JARS") or DEFAULT_JAR_DIR)


def spark_jars() -> list[str]:
    """The two jars, exactly one of each; a clear error (never a skip) when they are missing."""
    directory = jar_dir()
    found = []
    for pattern in JAR_PATTERNS:
        matches = sorted(glob.glob(str(directory / pattern)))
        if len(matches) != 1:
            raise RuntimeError(
                f"expected exactly one {pattern} in {directory}, found {len(matches)}: "
                "run `make spark-jars` (or set GROWLER_SPARK_JARS to a directory holding them)"
            )
        found.append(matches[0])
    return found


def java17_home() -> str | None:
    """Spark 3.5 runs on Java 8/11/17: prefer GROWLER_SPARK_JAVA_HOME, then an installed JDK 17."""
    explicit = os.environ.get("GROWLER_SPARK_JAVA_HOME")
    if explicit:
        return explicit
    for candidate in sorted(glob.glob("/usr/lib/jvm/java-17-openjdk*")) + sorted(glob.glob("/usr/lib/jvm/*17*")):
        if os.path.exists(os.path.join(candidate, "bin", "java")):
            return candidate
    return os.environ.get("JAVA_HOME")


def spark_env() -> dict[str, str]:
    """Environment for a process that starts a Spark JVM (JAVA_HOME pinned to Java 17)."""
    env = dict(os.environ)
    home = java17_home()
    if home:
        env["JAVA_HOME"] = home
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def catalog_conf(uri: str, warehouse: str, catalog: str = CATALOG) -> dict[str, str]:
    """The whole Iceberg side of the configuration: a REST catalog at ``uri``, nothing about S3."""
    prefix = f"spark.sql.catalog.{catalog}"
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": uri,
        f"{prefix}.warehouse": warehouse,
        # the Java client does not ask for vended credentials unless told to
        f"{prefix}.header.X-Iceberg-Access-Delegation": "vended-credentials",
    }


def add_catalog(spark, name: str, uri: str, warehouse: str, **options: str) -> str:
    """Register another Growler catalog in a running session (catalogs are instantiated on first use)."""
    for key, value in catalog_conf(uri, warehouse, name).items():
        if key != "spark.sql.extensions":
            spark.conf.set(key, value)
    for key, value in options.items():
        spark.conf.set(f"spark.sql.catalog.{name}.{key}", value)
    return name


def build_session(uri: str, warehouse: str, app_name: str = "growler-test", catalog: str = CATALOG):
    """A small local SparkSession (2 threads, no UI, few shuffle partitions) with Growler as ``catalog``."""
    os.environ.update(spark_env())
    from pyspark.sql import SparkSession

    scratch = tempfile.mkdtemp(prefix="growler-spark-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)  # after session.stop (atexit is LIFO)
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.jars", ",".join(spark_jars()))
        .config("spark.driver.memory", "1g")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", os.path.join(scratch, "spark-warehouse"))
        .config("spark.local.dir", os.path.join(scratch, "local"))
        .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={scratch} -Dderby.system.home={scratch}")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in catalog_conf(uri, warehouse, catalog).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


_shared: dict[tuple[str, str], object] = {}


def shared_session(uri: str, warehouse: str):
    """One SparkSession (one JVM) per test run, whichever module asks first; stopped at exit."""
    key = (uri, warehouse)
    if key not in _shared:
        session = build_session(uri, warehouse)
        atexit.register(session.stop)
        _shared[key] = session
    return _shared[key]


def _append_main(uri: str, warehouse: str, table: str, warmup: str, who: str, first_id: str, batches: str, rows: str):
    """Append ``batches`` batches of ``rows`` rows (ids from ``first_id``, tagged ``who``), one commit each.

    One row into ``warmup`` first (loading the classes of the write path), then "ready" on stdout.
    """
    spark = build_session(uri, warehouse, app_name=f"growler-test-{who}")
    try:
        start, batch_count, row_count = int(first_id), int(batches), int(rows)
        spark.sql(f"INSERT INTO {warmup} VALUES ('{who}')")
        print("ready", flush=True)
        for batch in range(batch_count):
            low = start + batch * row_count
            spark.sql(f"INSERT INTO {table} SELECT id, '{who}' FROM range({low}, {low + row_count})")
        print("appended", batch_count * row_count, flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    if len(sys.argv) == 10 and sys.argv[1] == "append":
        _append_main(*sys.argv[2:])
    else:
        sys.exit(__doc__)
