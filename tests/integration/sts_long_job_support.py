"""A Spark job longer than its temporary credentials' lifetime, run beside the rest of the suite.

SeaweedFS's STS issues credentials for 900 s at least, so a job that must write past their
expiry runs for about 16 minutes: nearly the whole suite. Run after the suite it would add that
much; so the integration conftest starts it as soon as collection knows the test
(``test_sts_long_job.py``) is selected, orders that test last, and the test only waits for the
job's end and checks what it did.

The job gets a stack of its own: PostgreSQL, SeaweedFS with its IAM/STS (as ``make run`` starts
it) and a one-worker gunicorn in ``sts`` mode with the shortest lifetime (900 s). Other tests stop
the suite's PostgreSQL and S3 (dependency failures, faults), reset its catalog and reconfigure
its server; none of that may reach a job that runs through them. It is embedded even when the
suite runs against external services: the job needs an STS that issues short credentials.

Everything starts on a background thread (a few seconds of ``initdb``, SeaweedFS and gunicorn,
then the Spark JVM in a process of its own: ``sts_long_job_driver.py``), one local thread and a
512 MB heap for Spark, one insert a minute: the job competes with the suite for the CPU as
little as it can. A failure to start (no Spark jars, say: an error, as in the other Spark tests)
is raised to the test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import TEST_ACCESS_KEY, TEST_BUCKET, TEST_SECRET_KEY, TEST_SECRETS_KEY

DRIVER_SCRIPT = Path(__file__).resolve().parent / "sts_long_job_driver.py"
WAREHOUSE = "long_job"
CATALOG = "growler"
TABLE = f"{CATALOG}.long_job.events"
DURATION_S = 900  # the shortest SeaweedFS (and AWS) issue
INTERVAL_S = 60.0  # one insert a minute
MARGIN_S = 30.0  # keep writing until an insert that started this long after the first credentials expired succeeded
LINE = "3.5"  # the suite's own interpreter; the refresh is the Iceberg AWS bundle's, the same on both lines


@dataclass
class LongJobStack:
    """What the job ran against, kept until the session ends for the test to inspect."""

    root: Path
    postgres: Any
    s3: Any
    server: Any  # tests.integration.conftest.Server
    process: subprocess.Popen
    report_path: Path
    log_path: Path

    def report(self) -> dict[str, Any]:
        return json.loads(self.report_path.read_text()) if self.report_path.exists() else {}

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-20000:]


class LongStsJob:
    """The one long job of a session: ``prestart`` (idempotent) begins it in the background,
    ``stack`` waits until it is running, ``stop`` ends whatever was started.

    One thread starts the stack, keeps it and stops it: the embedded services are signalled when
    the thread that started them ends (``die_with_parent``: PR_SET_PDEATHSIG is per thread), so
    that thread lives until ``stop``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started = threading.Event()  # the stack runs, or failed to start
        self._release = threading.Event()  # the session is over: stop the stack
        self._stack: LongJobStack | None = None
        self._failure: BaseException | None = None
        self._parts: dict[str, Any] = {}  # started so far, for the teardown after a failed start

    def prestart(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._keep, name="sts-long-job", daemon=True)
                self._thread.start()

    def stack(self, timeout_s: float = 600) -> LongJobStack:
        """The running job (started now if nobody started it); what failed to start, raised."""
        self.prestart()
        if not self._started.wait(timeout_s):
            raise TimeoutError(f"the long STS job did not start within {timeout_s} s")
        if self._failure is not None:
            raise RuntimeError("the long STS job could not start") from self._failure
        assert self._stack is not None
        return self._stack

    def stop(self) -> None:
        """End the job and its stack, whatever part of it started (the session is over)."""
        with self._lock:
            thread = self._thread
        if thread is not None:
            self._release.set()
            thread.join(600)

    def _keep(self) -> None:
        try:
            self._stack = self._start()
        except BaseException as exc:  # noqa: BLE001 - raised in the test (stack())
            self._failure = exc
        finally:
            self._started.set()
            self._release.wait()
            self._teardown()

    def _start(self) -> LongJobStack:
        from app.ground.settings import S3Settings, Settings, StsSettings
        from scripts.postgres import EmbeddedPostgres
        from scripts.processes import free_port
        from scripts.seaweedfs import STS_ROLE_ARN, EmbeddedS3
        from tests.integration.conftest import start_server
        from tests.integration.spark_support import catalog_conf, line_python, spark_env, spark_jars

        jars = spark_jars(LINE)  # first: no Spark, no job (an error, as for every Spark test)
        python = line_python(LINE)
        root = self._parts["root"] = Path(tempfile.mkdtemp(prefix="growler-long-sts-"))
        postgres = self._parts["postgres"] = EmbeddedPostgres(root / "postgres", free_port(), fast=True)
        postgres.start()
        s3 = self._parts["s3"] = EmbeddedS3(root / "s3", free_port(), TEST_ACCESS_KEY, TEST_SECRET_KEY, sts=True)
        s3.start()
        s3.ensure_bucket(TEST_BUCKET)
        settings = Settings(
            database_url=postgres.url,
            warehouse=WAREHOUSE,
            warehouse_location=f"s3://{TEST_BUCKET}/{WAREHOUSE}/",
            s3=S3Settings(endpoint=s3.endpoint, access_key=TEST_ACCESS_KEY, secret_key=TEST_SECRET_KEY),
            storage_credentials_mode="sts",
            sts=StsSettings(role_arn=STS_ROLE_ARN, duration_s=DURATION_S),
            secrets_key=TEST_SECRETS_KEY,
        )
        # the workers migrate the empty database as they start (app/edge/startup.py)
        server = self._parts["server"] = start_server(settings, root, {"GROWLER_WORKERS": "1"})
        report_path, log_path = root / "report.json", root / "spark-job.log"
        config = {
            "app_name": "growler-long-sts-job",
            "jars": jars,
            "threads": 1,
            "driver_memory": "512m",
            # one table, one FileIO for the whole job (see sts_long_job_driver.py)
            "conf": catalog_conf(server.url, WAREHOUSE, CATALOG, **{"cache.expiration-interval-ms": "-1"}),
            "table": TABLE,
            "report": str(report_path),
            "interval_s": INTERVAL_S,
            "margin_s": MARGIN_S,
        }
        config_path = root / "job.json"
        config_path.write_text(json.dumps(config))
        with open(log_path, "wb") as log_file:
            process = self._parts["process"] = subprocess.Popen(
                [python, str(DRIVER_SCRIPT), str(config_path)],
                cwd=DRIVER_SCRIPT.parent,
                env=spark_env(),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return LongJobStack(root, postgres, s3, server, process, report_path, log_path)

    def _teardown(self) -> None:
        from tests.integration.conftest import stop_server

        parts, self._parts = self._parts, {}
        process = parts.get("process")
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if "server" in parts:
            stop_server(parts["server"])
        for name in ("s3", "postgres"):
            if name in parts:
                parts[name].stop()
        if "root" in parts:
            shutil.rmtree(parts["root"], ignore_errors=True)


LONG_STS_JOB = LongStsJob()
