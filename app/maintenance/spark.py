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

The job reports its progress as it goes: a ``GROWLER_JOB_PROGRESS {json}`` line on its output
before its first call of the procedure and after each (file groups and bytes done of total: see
spark_rewrite_job.py). They are read while the job runs and handed to ``progress`` - the
executor records them as the run's RunProgress, so getMaintenanceRun shows the job moving.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.ground.errors import CatalogError
from app.ground.settings import SparkSettings
from app.maintenance.options import RewriteSettings

log = logging.getLogger(__name__)

JOB_SCRIPT = Path(__file__).resolve().parent / "spark_rewrite_job.py"
RESULT = "GROWLER_JOB_RESULT "
PROGRESS = "GROWLER_JOB_PROGRESS "
PROGRESS_KEYS = ("file-groups-done", "file-groups-total", "bytes-done", "bytes-total")
TAIL_CHARS = 2000  # of the job's output kept for the run's error
OUTPUT_LINES = 5000
WATCH_S = 2.0  # how often a running job's guard looks at cancel, protection, drop, policy and lease


class SparkJobFailed(CatalogError):
    code, error_type = 500, "SparkJobFailed"


@dataclass(frozen=True)
class RewriteRequest:
    warehouse: str
    table: tuple[str, ...]  # namespace levels, then the name
    target_file_size: int
    rewrite: RewriteSettings = field(default_factory=lambda: RewriteSettings.of({}))


def rewrite_options(target_file_size: int, rewrite: RewriteSettings | None = None) -> dict[str, str]:
    """Iceberg's rewrite toward the target, with the policy's thresholds (``RewriteSettings``):
    by default every file with a delete file is rewritten (applied), in one commit."""
    return {"target-file-size-bytes": str(target_file_size), **(rewrite or RewriteSettings.of({})).options()}


# What the job's environment never carries over from Growler's: the catalog's own settings, its
# database's and the warehouses' storage credentials (the job reads tables with the credentials
# loadTable vends it, scoped to the table). Only the job's own credential is passed, on purpose.
SCRUBBED_PREFIXES = ("GROWLER_", "AWS_", "PG", "DATABASE_URL", "MINIO_", "S3_")


def job_environment(settings: SparkSettings, environ: Mapping[str, str]) -> dict[str, str]:
    env = {key: value for key, value in environ.items() if not key.upper().startswith(SCRUBBED_PREFIXES)}
    if settings.credential:
        env["GROWLER_SPARK_CREDENTIAL"] = settings.credential
    if settings.java_home:
        env["JAVA_HOME"] = settings.java_home
    return env


def conf_pairs(settings: SparkSettings) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for item in filter(None, (item.strip() for item in settings.conf.split(","))):
        key, _, value = item.partition("=")
        pairs[key.strip()] = value.strip()
    return pairs


def check_deploy(settings: SparkSettings) -> None:
    """Spark refuses cluster deploy mode for Python applications on a standalone master (the job is
    a Python file): refused here with a clear message rather than a spark-submit error."""
    mode = conf_pairs(settings).get("spark.submit.deployMode", "client")
    if mode not in ("client", "cluster"):
        raise SparkJobFailed(f"spark.submit.deployMode must be client or cluster, not {mode!r}")
    if mode == "cluster" and settings.master.startswith("spark://"):
        raise SparkJobFailed(
            "Cluster deploy mode is not supported for Python applications on a Spark standalone master"
            " (spark://): use client mode (the default: the driver runs beside Growler, the executors on"
            " the cluster), or YARN or Kubernetes for cluster mode"
        )


def command(settings: SparkSettings, rewrite: RewriteSettings | None = None) -> list[str]:
    """spark-submit's arguments: the operator's conf first, then the policy's resources (a policy
    near the table wins over the operator's defaults for its own job)."""
    args = [settings.submit, "--master", settings.master]
    if settings.jars:
        args += ["--jars", settings.jars]
    explicit = conf_pairs(settings)
    rewrite = rewrite or RewriteSettings.of({})
    conf = {**explicit, **rewrite.resources(explicit, standalone=settings.master.startswith("spark://"))}
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
) -> dict[str, Any]:
    """Run the job to its end and answer the procedure's result row; SparkJobFailed otherwise.
    Each progress line the job prints is handed to ``progress`` as it comes (in the reader thread)."""
    check_deploy(settings)
    body = {
        "uri": settings.catalog_uri,
        "warehouse": request.warehouse,
        "table": list(request.table),
        "options": rewrite_options(request.target_file_size, request.rewrite),
        **request.rewrite.procedure_args(),
    }
    env = job_environment(settings, os.environ)
    job = subprocess.Popen(  # noqa: S603 - the operator's spark-submit, arguments as a list
        [*command(settings, request.rewrite), json.dumps(body)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: killed whole (the JVM and its Python)
    )
    output: deque[str] = deque(maxlen=OUTPUT_LINES)  # Spark logs a lot: the last lines only

    def read() -> None:
        for line in job.stdout or []:
            output.append(line)
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
            raise SparkJobFailed("The Spark job was stopped: " + ("lease lost" if stop.is_set() else "timed out"))
        waited += 1.0
    reader.join()
    text = "".join(output)
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT):
            if job.returncode == 0:
                return json.loads(line[len(RESULT) :])
    log.warning("spark rewrite job of %s exited with %s", request.table[-1], job.returncode)
    raise SparkJobFailed(f"The Spark job exited with status {job.returncode}: {_tail(text)}")


def run_guarded(
    settings: SparkSettings,
    request: RewriteRequest,
    guard: Callable[[], None],
    stops: tuple[type[BaseException], ...],
    every_s: float = WATCH_S,
    progress: Callable[[dict[str, int]], None] = lambda _progress: None,
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
        return run_rewrite(settings, request, stop, lambda reported: progress_context.run(progress, reported))
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
