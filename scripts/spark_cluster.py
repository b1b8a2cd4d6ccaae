"""A Spark standalone cluster from PySpark's own distribution: one master and two workers
(``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), on 127.0.0.1 and free
ports, each worker 1 core and 1 GiB by default, logs and work directories under ``workdir``.

Shared by the cluster test (tests/integration/test_maintenance_cluster.py) and the maintenance
benchmark (bench/maintenance.py, ``make bench-maintenance``): both need a real ``spark://`` master
to point Growler's maintenance at, and neither may leave one behind (``down`` kills every process
group it started).
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from scripts.processes import free_port


def spark_home() -> Path:
    """PySpark's own distribution (bin/spark-class, bin/spark-submit, jars/)."""
    import pyspark

    return Path(pyspark.__file__).parent


def java17_home() -> str | None:
    """Spark 3.5 runs on Java 8/11/17: GROWLER_SPARK_JAVA_HOME, else an installed JDK 17, else JAVA_HOME."""
    explicit = os.environ.get("GROWLER_SPARK_JAVA_HOME")
    if explicit:
        return explicit
    for candidate in sorted(glob.glob("/usr/lib/jvm/java-17-openjdk*")) + sorted(glob.glob("/usr/lib/jvm/*17*")):
        if os.path.exists(os.path.join(candidate, "bin", "java")):
            return candidate
    return os.environ.get("JAVA_HOME")


def _wait(condition: Callable[[], bool], what: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(what)
        threading.Event().wait(0.2)


class SparkCluster:
    """``up()`` starts the master, then the workers, and returns once both registered; ``url`` is
    the ``spark://`` master to submit to; ``down()`` kills them all."""

    def __init__(
        self, workdir: Path, workers: int = 2, cores: int = 1, memory: str = "1g", java_home: str | None = None
    ) -> None:
        self.workdir = workdir
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.home = spark_home()
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen] = []
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1"}
        home = java_home or java17_home()
        if home:
            self.env["JAVA_HOME"] = home
        self.env["PYSPARK_PYTHON"] = sys.executable

    def _start(self, name: str, *args: str) -> Path:
        log = self.workdir / f"{name}.log"
        with log.open("w") as out:
            self.processes.append(
                subprocess.Popen(  # noqa: S603 - PySpark's own launcher
                    [str(self.home / "bin" / "spark-class"), *args],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,
                )
            )
        return log

    @property
    def master_log(self) -> Path:
        return self.workdir / "master.log"

    def up(self, timeout_s: float = 120.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        master = self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(free_port()),
        )
        _wait(
            lambda: "I have been elected leader" in master.read_text(),
            f"no Spark master: {master.read_text()[-2000:]}",
            timeout_s,
        )
        for index in range(1, self.workers + 1):
            work = self.workdir / f"worker{index}"
            work.mkdir()
            self._start(
                f"worker{index}",
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(work),
                self.url,
            )
        _wait(
            lambda: master.read_text().count("Registering worker") >= self.workers,
            "the Spark workers never registered",
            timeout_s,
        )

    def applications(self) -> list[Path]:
        """The applications that ran executors on the workers (one directory each per worker)."""
        return sorted(p for p in self.workdir.glob("worker*/app-*") if p.is_dir())

    def drivers(self) -> list[Path]:
        """The drivers the workers ran (cluster deploy mode): one work directory each."""
        return sorted(p for p in self.workdir.glob("worker*/driver-*") if p.is_dir())

    def registered_applications(self) -> int:
        """How many applications the master accepted so far (its "Registering app" log lines)."""
        return self.master_log.read_text(errors="replace").count("Registering app ")

    def down(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        self.processes.clear()
