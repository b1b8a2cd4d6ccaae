"""Spark (PySpark + Iceberg's Spark runtime) configured as a client of a Growler server, on two lines.

The suite proves Growler on Spark 3.5 (PySpark 3.5 from requirements-test.txt, in ``.venv``;
``iceberg-spark-runtime-3.5_2.12``) and Spark 4.1 (PySpark 4.1 in its own ``.venv-spark4``, made
by ``make venv-spark4``; ``iceberg-spark-runtime-4.1_2.13``): two PySpark releases cannot share one
environment, so every session runs in a driver process started with its line's interpreter
(``spark_driver.py``) and the tests talk to it through ``RemoteSpark``, a small stand-in for the
part of ``SparkSession`` they use (``sql(...).collect()``, ``table(...).columns``, ``conf``).
Both lines go through the same path, so a test means the same thing on each.

The session knows the catalog URL and the warehouse name, nothing else about storage: the
endpoint, region and addressing style of S3 come from loadTable's ``config``, the keys from its
``storage-credentials``, which the session asks for with ``X-Iceberg-Access-Delegation:
vended-credentials`` (the Java REST client sends no such header unless configured to).

The jars (one Iceberg release, pinned in the Makefile) are fetched by ``make spark-jars`` into
``.cache/spark-jars``; ``GROWLER_SPARK_JARS`` names another directory, ``GROWLER_SPARK4_PYTHON``
another Spark 4.1 interpreter. Missing jars or interpreters are an error, not a skip.
"""

from __future__ import annotations

import concurrent.futures
import glob
import itertools
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Listener
from pathlib import Path

from scripts.spark_cluster import java17_home  # noqa: F401 - shared with the bench; the tests import it from here
from tests.conftest import TEST_CREDENTIAL
from tests.integration.spark_driver import ROW

REPO = Path(__file__).resolve().parents[2]
DEFAULT_JAR_DIR = REPO / ".cache" / "spark-jars"
DRIVER_SCRIPT = Path(__file__).resolve().parent / "spark_driver.py"
CATALOG = "growler"
LINES = ("3.5", "4.1")
RUNTIME_JARS = {"3.5": "iceberg-spark-runtime-3.5_2.12-*.jar", "4.1": "iceberg-spark-runtime-4.1_2.13-*.jar"}
AWS_BUNDLE = "iceberg-aws-bundle-*.jar"
START_TIMEOUT_S = 300
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"


def jar_dir() -> Path:
    return Path(os.environ.get("GROWLER_SPARK_JARS") or DEFAULT_JAR_DIR)


def spark_jars(line: str = "3.5") -> list[str]:
    """The line's runtime jar and the AWS bundle, exactly one of each; a clear error when missing."""
    directory = jar_dir()
    found = []
    for pattern in (RUNTIME_JARS[line], AWS_BUNDLE):
        matches = sorted(glob.glob(str(directory / pattern)))
        if len(matches) != 1:
            raise RuntimeError(
                f"expected exactly one {pattern} in {directory}, found {len(matches)}: "
                "run `make spark-jars` (or set GROWLER_SPARK_JARS to a directory holding them)"
            )
        found.append(matches[0])
    return found


def line_python(line: str) -> str:
    """The interpreter whose PySpark is the line's: this one for 3.5, ``.venv-spark4``'s for 4.1."""
    if line == "3.5":
        return sys.executable
    python = os.environ.get("GROWLER_SPARK4_PYTHON") or str(REPO / ".venv-spark4" / "bin" / "python")
    if not os.access(python, os.X_OK):
        raise RuntimeError(
            f"no Spark 4.1 interpreter at {python}: run `make venv-spark4` (or set GROWLER_SPARK4_PYTHON)"
        )
    return python


def spark_env() -> dict[str, str]:
    """Environment for a process that starts a Spark JVM (JAVA_HOME pinned to Java 17)."""
    env = dict(os.environ)
    home = java17_home()
    if home:
        env["JAVA_HOME"] = home
    return env


def catalog_conf(uri: str, warehouse: str, catalog: str = CATALOG, **options: str) -> dict[str, str]:
    """The whole Iceberg side of the configuration: a REST catalog at ``uri``, nothing about S3;
    the test admin's ``credential`` (every test server authenticates) unless ``options`` give one."""
    prefix = f"spark.sql.catalog.{catalog}"
    options = {"credential": TEST_CREDENTIAL, **options}
    conf = {
        "spark.sql.extensions": EXTENSIONS,
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "rest",
        f"{prefix}.uri": uri,
        f"{prefix}.warehouse": warehouse,
        # the Java client does not ask for vended credentials unless told to
        f"{prefix}.header.X-Iceberg-Access-Delegation": "vended-credentials",
    }
    conf.update({f"{prefix}.{key}": value for key, value in options.items()})
    return conf


class SparkError(Exception):
    """A failure inside the Spark driver: ``<exception class>: <message>``, as PySpark raised it."""


class Row(tuple):
    """A collected row: a tuple (compares equal to one) whose values are also reachable by field name."""

    _fields: tuple[str, ...]

    def __new__(cls, fields, values):
        row = super().__new__(cls, values)
        row._fields = tuple(fields)
        return row

    def __getitem__(self, key):
        if isinstance(key, str):
            return tuple.__getitem__(self, self._fields.index(key))
        return tuple.__getitem__(self, key)

    def asDict(self, recursive: bool = False) -> dict:  # noqa: N802 - PySpark's name
        def plain(value):
            if isinstance(value, Row):
                return value.asDict(True)
            if isinstance(value, list):
                return [plain(v) for v in value]
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value

        return {k: plain(v) if recursive else v for k, v in zip(self._fields, self, strict=True)}


def _rows(value):
    if isinstance(value, tuple) and len(value) == 3 and value[0] == ROW:
        return Row(value[1], [_rows(v) for v in value[2]])
    if isinstance(value, list):
        return [_rows(v) for v in value]
    if isinstance(value, dict):
        return {k: _rows(v) for k, v in value.items()}
    return value


class Frame:
    """A statement's collected result (the driver runs every statement eagerly)."""

    def __init__(self, columns: list[str], rows: list[Row]):
        self.columns = columns
        self._rows = rows

    def collect(self) -> list[Row]:
        return list(self._rows)


class Pending:
    """A statement sent to the driver and not yet answered (``RemoteSpark.submit``)."""

    def __init__(self, spark: RemoteSpark):
        self._spark = spark

    def result(self, timeout_s: float = 600) -> Frame:
        columns, rows = self._spark._receive(timeout_s)
        return Frame(columns, _rows(rows))


class _Conf:
    def __init__(self, spark: RemoteSpark):
        self._spark = spark

    def get(self, key: str) -> str:
        return self._spark._request(("conf_get", key))

    def set(self, key: str, value: str) -> None:
        self._spark._request(("conf_set", key, value))


class RemoteSpark:
    """A SparkSession of one line, living in a driver process (its own JVM, REST client and caches)."""

    def __init__(
        self, line: str, uri: str | None, warehouse: str = "", app_name: str = "growler-test", **catalog_options: str
    ):
        """``uri`` None: a session with Iceberg's extensions and no catalog yet (``add_catalog``)."""
        self.line = line
        self.conf = _Conf(self)
        self._lock = threading.Lock()
        self._log = tempfile.NamedTemporaryFile(prefix=f"growler-spark{line}-", suffix=".log", delete=False)
        authkey = secrets.token_bytes(16)
        config = {
            "app_name": app_name,
            "jars": spark_jars(line),
            "conf": catalog_conf(uri, warehouse, **catalog_options) if uri else {"spark.sql.extensions": EXTENSIONS},
        }
        with Listener(("127.0.0.1", 0), authkey=authkey) as listener:
            self.process = subprocess.Popen(
                [line_python(line), str(DRIVER_SCRIPT), str(listener.address[1]), authkey.hex(), json.dumps(config)],
                env=spark_env(),
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            accepted: list = []
            acceptor = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
            acceptor.start()
            acceptor.join(START_TIMEOUT_S)
            while acceptor.is_alive() and self.process.poll() is None:
                acceptor.join(1)
            if not accepted:
                log = self.log()
                self.stop()
                raise RuntimeError(f"Spark {line} driver did not connect:\n{log}")
        self._connection = accepted[0]
        try:
            kind, self.version = self._receive_raw(START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        assert kind == "ready", kind

    def log(self) -> str:
        return Path(self._log.name).read_text(errors="replace")[-20000:]

    def _receive_raw(self, timeout_s: float):
        waited = 0.0
        while not self._connection.poll(1):
            waited += 1
            if self.process.poll() is not None:
                raise RuntimeError(f"Spark {self.line} driver exited with {self.process.returncode}:\n{self.log()}")
            if waited >= timeout_s:
                raise TimeoutError(f"Spark {self.line} driver did not answer in {timeout_s} s:\n{self.log()}")
        return self._connection.recv()

    def _receive(self, timeout_s: float = 600):
        try:
            answer = self._receive_raw(timeout_s)
        finally:
            self._lock.release()
        if answer[0] == "error":
            raise SparkError(f"{answer[1]}: {answer[2]}")
        return answer[1] if len(answer) == 2 else answer[1:]

    def _request(self, request: tuple):
        self._send(request)
        return self._receive()

    def _send(self, request: tuple) -> None:
        self._lock.acquire()  # one statement at a time per driver, as in one SparkSession thread
        try:
            self._connection.send(request)
        except BaseException:
            self._lock.release()
            raise

    def submit(self, query: str) -> Pending:
        """Send ``query`` and return at once; ``.result()`` waits for its rows (two drivers at work)."""
        self._send(("sql", query))
        return Pending(self)

    def sql(self, query: str) -> Frame:
        return self.submit(query).result()

    def table(self, name: str) -> Frame:
        return self.sql(f"SELECT * FROM {name}")

    def call(self, name: str, *args):
        """One of ``spark_driver.CALLS`` (JVM-level helpers), run in the driver."""
        return self._request(("call", name, list(args)))

    def stop(self) -> None:
        if getattr(self, "_connection", None) is not None:
            try:
                self._connection.send(("stop",))
                self.process.wait(timeout=120)
            except (OSError, subprocess.TimeoutExpired):
                pass
            self._connection.close()
            self._connection = None
        if self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait()
        self._log.close()
        os.unlink(self._log.name)


def add_catalog(spark: RemoteSpark, name: str, uri: str, warehouse: str, **options: str) -> str:
    """Register another Growler catalog in a running session (catalogs are instantiated on first use)."""
    for key, value in catalog_conf(uri, warehouse, name, **options).items():
        if key != "spark.sql.extensions":
            spark.conf.set(key, value)
    return name


class SharedDrivers:
    """Spark drivers shared by every Spark test of the run: one per line (``"main"``), and a
    ``"second"`` per line for the tests that race two drivers (two JVMs, REST clients, caches).

    A driver's JVM takes about ten seconds to start and its first statements run cold (class
    loading, JIT); a driver per test paid that a dozen times per run. Tests share a driver and
    tell their catalogs apart by name: ``catalog(line, uri, warehouse, **options)`` registers a
    catalog under a name no other test uses, with its own REST client, credentials, headers and
    FileIO, so what one test configures never reaches another.

    ``prestart`` queues drivers to start in the background, one after the other, as soon as the
    run knows it needs them (the integration conftest calls it after collection): the JVMs boot
    while earlier tests run, without all booting at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._starting: dict[tuple[str, str], concurrent.futures.Future] = {}
        self._starter = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="spark-start")
        self._names = itertools.count(1)

    def prestart(self, line: str, role: str = "main") -> None:
        with self._lock:
            if (line, role) not in self._starting:
                self._starting[line, role] = self._starter.submit(
                    RemoteSpark, line, None, app_name=f"growler-test-{line}-{role}"
                )

    def get(self, line: str, role: str = "main") -> RemoteSpark:
        self.prestart(line, role)
        return self._starting[line, role].result(timeout=START_TIMEOUT_S * 4)

    def catalog(self, line: str, uri: str, warehouse: str, **options: str) -> tuple[RemoteSpark, str]:
        """The line's (main) driver and a catalog registered in it under a fresh name."""
        spark = self.get(line)
        return spark, add_catalog(spark, f"growler_{next(self._names)}", uri, warehouse, **options)

    def stop_all(self) -> None:
        with self._lock:
            starting, self._starting = self._starting, {}
        for future in starting.values():
            try:
                future.result(timeout=START_TIMEOUT_S * 4).stop()
            except BaseException:  # noqa: BLE001 - a driver that never started has nothing to stop
                pass


DRIVERS = SharedDrivers()
