"""Data compaction on Spark: Growler starts a Spark job for what one process should not rewrite.

Partitions with delete files, or beyond the in-process bound (app/maintenance/data.py), need
Iceberg's ``rewrite_data_files``: its bin-pack applies delete files while it rewrites and its
commit validates against concurrent writes. When ``GROWLER_SPARK_SUBMIT`` and
``GROWLER_SPARK_CATALOG_URI`` are set (``SparkSettings``), the executor runs
``app/maintenance/spark_rewrite_job.py`` with that spark-submit on ``GROWLER_SPARK_MASTER`` (a cluster, or
``local[N]``), the jars of ``GROWLER_SPARK_JOB_JARS`` and the ``--conf`` of
``GROWLER_SPARK_CONF``, as a client of this catalog signed in with ``GROWLER_SPARK_CREDENTIAL`` (a
principal that may write the table; passed in the job's environment only, never logged). The job
commits through the REST API like any writer: a concurrent writer that conflicts makes the
procedure fail, and the run is recorded as failed, the call it was in not committed (each of the
job's commits is a complete rewrite of its partitions). The job is killed (its whole
process group) past ``GROWLER_SPARK_TIMEOUT_S`` and when the runner's lease is lost.

**Cluster deploy mode** (``spark.submit.deployMode=cluster`` on a standalone master): the driver
runs on a worker, so nothing it prints reaches Growler. The job is still the same Python file, run
by Spark's own JVM main class for Python applications (``org.apache.spark.deploy.PythonRunner``,
whose primary jar is the first of the job's jars - spark-submit refuses a ``.py`` primary resource
in this mode); spark-submit waits for the driver (``spark.standalone.submit.waitAppCompletion``)
and hands its environment to it through the master (never a command line). The job reports its
progress, then its result or its error, through the management API (reportMaintenanceRun) with a
token made for this run alone (``JobReports``; only its hash is stored); the answer tells it to
stop when the run should. Stopping the run kills spark-submit and the driver on the cluster
(``spark-class org.apache.spark.deploy.Client kill``). YARN and Kubernetes take the driver's
environment only as configuration on the command line, so cluster mode there is refused: client mode.

The job reports its progress as it goes: a ``GROWLER_JOB_PROGRESS {json}`` line on its output
before its first call of the procedure and after each (file groups and bytes done of total: see
spark_rewrite_job.py). They are read while the job runs and handed to ``progress`` - the
executor records them as the run's RunProgress, so getMaintenanceRun shows the job moving.
"""

from __future__ import annotations

import contextvars
import hashlib
import json
import logging
import os
import re
import secrets
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from app.ground.errors import CatalogError
from app.ground.settings import SparkSettings
from app.maintenance.context import RunControl
from app.maintenance.options import RewriteSettings
from storage.maintenance_rows import TableRef

log = logging.getLogger(__name__)

JOB_SCRIPT = Path(__file__).resolve().parent / "spark_rewrite_job.py"
RESULT = "GROWLER_JOB_RESULT "
PROGRESS = "GROWLER_JOB_PROGRESS "
PROGRESS_KEYS = ("file-groups-done", "file-groups-total", "bytes-done", "bytes-total")
TAIL_CHARS = 2000  # of the job's output kept for the run's error
OUTPUT_LINES = 5000
WATCH_S = 2.0  # how often a running job's guard looks at cancel, protection, drop, policy and lease
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"  # Spark's driver main class for a Python file
DRIVER_ID = re.compile(r"\b(driver-\d{14}-\d{4,})\b")  # a standalone master's name for a driver it runs
DRIVER_STATE = re.compile(r"State of driver (driver-\S+) is (\w+)")
KILL_TIMEOUT_S = 60
# What Spark's launcher gives a driver it starts itself on Java 17 (org.apache.spark.launcher.
# JavaModuleOptions) and a standalone worker does not give the driver it runs in cluster mode.
JAVA_MODULE_OPTIONS = " ".join(
    ["-XX:+IgnoreUnrecognizedVMOptions", "-Djdk.reflect.useDirectMethodHandle=false"]
    + [
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in (
            "java.lang",
            "java.lang.invoke",
            "java.lang.reflect",
            "java.io",
            "java.net",
            "java.nio",
            "java.util",
            "java.util.concurrent",
            "java.util.concurrent.atomic",
            "jdk.internal.ref",
            "sun.nio.ch",
            "sun.nio.cs",
            "sun.security.action",
            "sun.util.calendar",
        )
    ]
)


class SparkJobFailed(CatalogError):
    code, error_type = 500, "SparkJobFailed"


@dataclass(frozen=True)
class RewriteRequest:
    warehouse: str
    table: tuple[str, ...]  # namespace levels, then the name
    target_file_size: int
    rewrite: RewriteSettings = field(default_factory=lambda: RewriteSettings.of({}))


@dataclass(frozen=True)
class JobReports:
    """Where a job whose driver Growler cannot read reports (cluster deploy mode): the run's
    reportMaintenanceRun URL and the token issued to this job alone; ``result`` reads what the
    job reported as its end (``{"result": {...}}`` or ``{"error": "..."}``) once it has ended."""

    url: str
    token: str = field(repr=False)
    result: Callable[[], dict[str, Any] | None]


def report_token_hash(token: str) -> bytes:
    """What is stored of a run's report token: its SHA-256 (a random token: no salt needed)."""
    return hashlib.sha256(token.encode()).digest()


def report_url(catalog_uri: str, warehouse: str, levels: tuple[str, ...], name: str, run_id: int) -> str:
    """The run's reportMaintenanceRun URL on the catalog the job signs in to (levels joined by the
    spec's unit separator)."""
    namespace = quote("\x1f".join(levels), safe="")
    return (
        f"{catalog_uri.rstrip('/')}/management/v1/maintenance/warehouses/{quote(warehouse, safe='')}"
        f"/namespaces/{namespace}/tables/{quote(name, safe='')}/runs/{run_id}/report"
    )


def issue_reports(settings: SparkSettings, control: RunControl, run_id: int, table: TableRef) -> JobReports:
    """The report channel of a job whose driver runs on the cluster: a token for this job alone
    (its hash in the run's row, replacing any earlier job's) and the run's report URL."""
    token = secrets.token_urlsafe(32)
    control.issue_report_token(run_id, report_token_hash(token))
    url = report_url(settings.catalog_uri, table.warehouse, table.namespace, table.name, run_id)
    return JobReports(url, token, lambda: control.job_result(run_id))


def rewrite_options(target_file_size: int, rewrite: RewriteSettings | None = None) -> dict[str, str]:
    """Iceberg's rewrite toward the target, with the policy's thresholds (``RewriteSettings``):
    by default every file with a delete file is rewritten (applied), in one commit."""
    return {"target-file-size-bytes": str(target_file_size), **(rewrite or RewriteSettings.of({})).options()}


# What the job's environment never carries over from Growler's: the catalog's own settings, its
# database's and the warehouses' storage credentials (the job reads tables with the credentials
# loadTable vends it, scoped to the table). Only the job's own credential is passed, on purpose.
SCRUBBED_PREFIXES = ("GROWLER_", "AWS_", "PG", "DATABASE_URL", "MINIO_", "S3_")


def job_environment(
    settings: SparkSettings, environ: Mapping[str, str], reports: JobReports | None = None
) -> dict[str, str]:
    env = {key: value for key, value in environ.items() if not key.upper().startswith(SCRUBBED_PREFIXES)}
    if settings.credential:
        env["GROWLER_SPARK_CREDENTIAL"] = settings.credential
    if reports is not None:
        env["GROWLER_JOB_REPORT_URL"] = reports.url
        env["GROWLER_JOB_REPORT_TOKEN"] = reports.token
    if settings.java_home:
        env["JAVA_HOME"] = settings.java_home
    return env


def conf_pairs(settings: SparkSettings) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in filter(None, (item.strip() for item in settings.conf.split(","))):
        key, _, value = item.partition("=")
        pairs[key.strip()] = value.strip()
    return pairs


def cluster_mode(settings: SparkSettings) -> bool:
    """Whether the driver runs on the cluster (``spark.submit.deployMode=cluster``); checked."""
    mode = conf_pairs(settings).get("spark.submit.deployMode", "client")
    if mode not in ("client", "cluster"):
        raise SparkJobFailed(f"spark.submit.deployMode must be client or cluster, not {mode!r}")
    if mode == "cluster" and not settings.master.startswith("spark://"):
        raise SparkJobFailed(
            "Cluster deploy mode is supported on a Spark standalone master (spark://) only: YARN and"
            " Kubernetes would take the job's credential and report token as configuration on spark-submit's"
            " command line. Use client mode there (the default: the driver runs beside Growler, the"
            " executors on the cluster)"
        )
    return mode == "cluster"


def command(settings: SparkSettings, rewrite: RewriteSettings | None = None) -> list[str]:
    """spark-submit's arguments: the operator's conf first, then the policy's resources (a policy
    near the table wins over the operator's defaults for its own job)."""
    args = [settings.submit, "--master", settings.master]
    if settings.jars:
        args += ["--jars", settings.jars]
    explicit = conf_pairs(settings)
    rewrite = rewrite or RewriteSettings.of({})
    conf = {**explicit, **rewrite.resources(explicit, standalone=settings.master.startswith("spark://"))}
    if conf.get("spark.submit.deployMode") == "cluster":  # a JVM main class runs the Python file
        conf["spark.standalone.submit.waitAppCompletion"] = "true"
        # (the worker reads extraJavaOptions only, not defaultJavaOptions: Spark's options go first)
        conf["spark.driver.extraJavaOptions"] = f"{JAVA_MODULE_OPTIONS} {conf.get('spark.driver.extraJavaOptions', '')}"
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        primary = settings.jars.split(",")[0] if settings.jars else ""
        if not primary:
            raise SparkJobFailed(
                "Cluster deploy mode needs the job's jars (GROWLER_SPARK_JOB_JARS): the first is the driver's"
            )
        return [*args, "--class", PYTHON_RUNNER, primary, str(JOB_SCRIPT), ""]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return [*args, str(JOB_SCRIPT)]


def progress_of(line: str) -> dict[str, int] | None:
    """A job's progress line (it may follow other output on its line: Spark's logs share the pipe);
    None for any other line, or one that does not parse."""
    at = line.find(PROGRESS)
    if at < 0:
        return None
    try:
        reported = json.loads(line[at + len(PROGRESS) :])
        return {key: int(reported[key]) for key in PROGRESS_KEYS}
    except (ValueError, KeyError, TypeError):
        return None


def run_rewrite(
    settings: SparkSettings,
    request: RewriteRequest,
    stop: threading.Event,
    progress: Callable[[dict[str, int]], None] = lambda _progress: None,
    reports: JobReports | None = None,
) -> dict[str, Any]:
    """Run the job to its end and answer the procedure's result row; SparkJobFailed otherwise.
    Each progress line the job prints is handed to ``progress`` as it comes (in the reader thread);
    in cluster deploy mode the job reports through ``reports`` instead (its progress goes straight
    to the run's row), and its end is read from there."""
    on_cluster = cluster_mode(settings)
    if on_cluster and reports is None:
        raise SparkJobFailed("Cluster deploy mode reports through the run's report channel: it runs as a job only")
    body = {
        "uri": settings.catalog_uri,
        "warehouse": request.warehouse,
        "table": list(request.table),
        "options": rewrite_options(request.target_file_size, request.rewrite),
        **request.rewrite.procedure_args(),
    }
    env = job_environment(settings, os.environ, reports if on_cluster else None)
    job = subprocess.Popen(  # noqa: S603 - the operator's spark-submit, arguments as a list
        [*command(settings, request.rewrite), json.dumps(body)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: killed whole (the JVM and its Python)
    )
    output: deque[str] = deque(maxlen=OUTPUT_LINES)  # Spark logs a lot: the last lines only
    drivers: list[str] = []  # cluster deploy mode: the driver the master runs for this job

    def read() -> None:
        for line in job.stdout or []:
            output.append(line)
            if on_cluster and not drivers and (named := DRIVER_ID.search(line)):
                drivers.append(named.group(1))
            reported = progress_of(line)
            if reported is not None:
                try:
                    progress(reported)
                except Exception as exc:  # noqa: BLE001 - progress is a view: never fails the job
                    log.warning("cannot record a Spark job's progress: %s", type(exc).__name__)

    reader = threading.Thread(target=read, name="spark-job-output", daemon=True)
    reader.start()
    waited = 0.0
    while job.poll() is None:
        if stop.wait(1.0) or waited > settings.timeout_s:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
            reader.join()
            if drivers:  # the driver runs on the cluster: killing spark-submit does not end it
                _kill_driver(settings, drivers[0], env)
            raise SparkJobFailed("The Spark job was stopped: " + ("lease lost" if stop.is_set() else "timed out"))
        waited += 1.0
    reader.join()
    text = "".join(output)
    if reports is not None and on_cluster:
        return _reported_end(reports, text, drivers)
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT):
            if job.returncode == 0:
                return json.loads(line[len(RESULT) :])
    log.warning("spark rewrite job of %s exited with %s", request.table[-1], job.returncode)
    raise SparkJobFailed(f"The Spark job exited with status {job.returncode}: {_tail(text)}")


def _reported_end(reports: JobReports, text: str, drivers: list[str]) -> dict[str, Any]:
    """A cluster-mode job's end: what it reported (its result, or its error), else the driver's
    final state as spark-submit saw it, and where its log is."""
    end = reports.result() or {}
    if isinstance(end.get("result"), dict):
        return end["result"]
    if end.get("error"):
        raise SparkJobFailed(f"The Spark job failed: {end['error']}")
    states = DRIVER_STATE.findall(text)
    driver = drivers[0] if drivers else "not submitted"
    state = states[-1][1] if states else "unknown"
    raise SparkJobFailed(
        f"The Spark job's driver ({driver}) ended in state {state} without reporting a result: its log is in the"
        f" work directory of the worker that ran it. spark-submit said: {_tail(text)}"
    )


def _kill_driver(settings: SparkSettings, driver: str, env: dict[str, str]) -> None:
    """Ask the standalone master to kill the job's driver (Spark's own client, as spark-submit's
    ``--kill`` needs the master's REST server, off by default)."""
    spark_class = str(Path(settings.submit).parent / "spark-class")
    try:
        subprocess.run(  # noqa: S603 - Spark's launcher, arguments as a list
            [spark_class, "org.apache.spark.deploy.Client", "kill", settings.master, driver],
            env=env,
            capture_output=True,
            timeout=KILL_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("cannot kill Spark driver %s: %s", driver, type(exc).__name__)


def run_guarded(
    settings: SparkSettings,
    request: RewriteRequest,
    guard: Callable[[], None],
    stops: tuple[type[BaseException], ...],
    every_s: float = WATCH_S,
    progress: Callable[[dict[str, int]], None] = lambda _progress: None,
    reports: JobReports | None = None,
) -> dict[str, Any]:
    """``run_rewrite`` with ``guard`` called every ``every_s`` in a watcher thread (in the caller's
    context): when it raises one of ``stops``, the job is killed and that exception raised here.
    Other errors (the database away a moment) are logged: the lease decides then. ``progress`` is
    called with each progress line of the job, in the caller's context as well (the run's)."""
    stop = threading.Event()
    stopped: list[BaseException] = []
    context = contextvars.copy_context()
    progress_context = contextvars.copy_context()  # (one context is entered by one thread at a time)

    def watch() -> None:
        while not stop.wait(every_s):
            try:
                context.run(guard)
            except stops as exc:
                stopped.append(exc)
                stop.set()
            except Exception as exc:  # noqa: BLE001 - transient: the next look tries again
                log.warning("cannot check a Spark job's table: %s", type(exc).__name__)

    watcher = threading.Thread(target=watch, name="spark-job-guard", daemon=True)
    watcher.start()
    try:
        return run_rewrite(settings, request, stop, lambda reported: progress_context.run(progress, reported), reports)
    except SparkJobFailed:
        if stopped:  # killed because the guard stopped the run: say why
            raise stopped[0] from None
        raise
    finally:
        stop.set()
        watcher.join()


def _tail(text: str) -> str:
    """The job's last lines, credential-free: the secret never reaches the job's arguments or conf."""
    lines = [line for line in text.splitlines() if line.strip() and " WARN " not in line and " INFO " not in line]
    return "\n".join(lines)[-TAIL_CHARS:]
