"""Data compaction on Spark: Growler starts a Spark job for what one process should not rewrite.

Partitions with delete files, or beyond the in-process bound (app/maintenance_data.py), need
Iceberg's ``rewrite_data_files``: its bin-pack applies delete files while it rewrites and its
commit validates against concurrent writes. When ``GROWLER_SPARK_SUBMIT`` and
``GROWLER_SPARK_CATALOG_URI`` are set (``SparkSettings``), the executor runs
``app/spark_rewrite_job.py`` with that spark-submit on ``GROWLER_SPARK_MASTER`` (a cluster, or
``local[N]``), the jars of ``GROWLER_SPARK_JOB_JARS`` and the ``--conf`` of
``GROWLER_SPARK_CONF``, as a client of this catalog signed in with ``GROWLER_SPARK_CREDENTIAL`` (a
principal that may write the table; passed in the job's environment only, never logged). The job
commits through the REST API like any writer: a concurrent writer that conflicts makes the
procedure fail, and the run is recorded as failed, nothing half done. The job is killed (its whole
process group) past ``GROWLER_SPARK_TIMEOUT_S`` and when the runner's lease is lost.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.ground.errors import CatalogError
from app.ground.settings import SparkSettings

log = logging.getLogger(__name__)

JOB_SCRIPT = Path(__file__).resolve().parent / "spark_rewrite_job.py"
RESULT = "GROWLER_JOB_RESULT "
TAIL_CHARS = 2000  # of the job's output kept for the run's error
OUTPUT_LINES = 5000


class SparkJobFailed(CatalogError):
    code, error_type = 500, "SparkJobFailed"


@dataclass(frozen=True)
class RewriteRequest:
    warehouse: str
    table: tuple[str, ...]  # namespace levels, then the name
    target_file_size: int


def rewrite_options(target_file_size: int) -> dict[str, str]:
    """Iceberg's bin-pack toward the target; every file with a delete file is rewritten (applied)."""
    return {
        "target-file-size-bytes": str(target_file_size),
        "min-input-files": "2",
        "delete-file-threshold": "1",
        "partial-progress.enabled": "false",  # one commit: all or nothing
    }


def command(settings: SparkSettings) -> list[str]:
    args = [settings.submit, "--master", settings.master]
    if settings.jars:
        args += ["--jars", settings.jars]
    for pair in filter(None, (item.strip() for item in settings.conf.split(","))):
        args += ["--conf", pair]
    return [*args, str(JOB_SCRIPT)]


def run_rewrite(settings: SparkSettings, request: RewriteRequest, stop: threading.Event) -> dict[str, Any]:
    """Run the job to its end and answer the procedure's result row; SparkJobFailed otherwise."""
    body = {
        "uri": settings.catalog_uri,
        "warehouse": request.warehouse,
        "table": list(request.table),
        "options": rewrite_options(request.target_file_size),
    }
    env = dict(os.environ)
    env.pop("GROWLER_SPARK_CREDENTIAL", None)
    if settings.credential:
        env["GROWLER_SPARK_CREDENTIAL"] = settings.credential
    if settings.java_home:
        env["JAVA_HOME"] = settings.java_home
    job = subprocess.Popen(  # noqa: S603 - the operator's spark-submit, arguments as a list
        [*command(settings), json.dumps(body)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,  # its own process group: killed whole (the JVM and its Python)
    )
    output: deque[str] = deque(maxlen=OUTPUT_LINES)  # Spark logs a lot: the last lines only
    reader = threading.Thread(target=lambda: output.extend(job.stdout or []), daemon=True)
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


def _tail(text: str) -> str:
    """The job's last lines, credential-free: the secret never reaches the job's arguments or conf."""
    lines = [line for line in text.splitlines() if line.strip() and " WARN " not in line and " INFO " not in line]
    return "\n".join(lines)[-TAIL_CHARS:]
