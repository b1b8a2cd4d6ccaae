"""``JavaTarget``: Iceberg's own REST catalog server, the reference the issue compares with.

``org.apache.iceberg.rest.RESTCatalogServer`` (iceberg-open-api's test-fixtures, the server Iceberg's
REST Compatibility Kit runs against) on Jetty 12, with a ``JdbcCatalog`` on SQLite (a file in the
run's directory, not ``:memory:``) and ``S3FileIO`` writing metadata files to an embedded SeaweedFS S3
like Growler's. No authentication (the server has none); compare with ``BENCH_AUTH=none`` Growler.

Its jars come from Maven Central (bench/java/pom.xml, resolved by ``make bench-java`` into
``.cache/bench-java-<version>/libs``; ``BENCH_JAVA_LIBS`` names another directory). The server takes
its catalog properties from ``CATALOG_*`` variables (RCKUtils.environmentCatalogConfig: ``__`` is a
``-``, ``_`` a ``.``), its port from ``rest.port``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.processes import cpu_seconds, process_memory, spawn_logged
from bench.targets import LOCALHOST, REPO, Target, http_json
from scripts.processes import free_port, stop_process_group
from scripts.run import DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY
from scripts.seaweedfs import EmbeddedS3

ICEBERG_VERSION = "1.11.0"
BUCKET = "java-warehouse"
SERVER_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"


def libs_dir() -> Path:
    return Path(os.environ.get("BENCH_JAVA_LIBS") or REPO / ".cache" / f"bench-java-{ICEBERG_VERSION}" / "libs")


def java_bin() -> str:
    """JDK 17 as the Makefile prefers for Spark and the RCK, else whatever ``java`` is on the PATH."""
    home = os.environ.get("BENCH_JAVA_HOME") or next(iter(sorted(Path("/usr/lib/jvm").glob("java-17-openjdk*"))), None)
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise RuntimeError("no java: install a JDK 17 (make bench-java does)")
    return found


def catalog_env(port: int, database: Path, s3_endpoint: str) -> dict[str, str]:
    """The server's catalog properties as RCKUtils reads them (``CATALOG_`` + name, ``__`` -> ``-``,
    ``_`` -> ``.``)."""
    return {
        "CATALOG_REST_PORT": str(port),
        "CATALOG_CATALOG__IMPL": "org.apache.iceberg.jdbc.JdbcCatalog",
        "CATALOG_URI": f"jdbc:sqlite:file:{database}",
        "CATALOG_JDBC_SCHEMA__VERSION": "V1",
        "CATALOG_WAREHOUSE": f"s3://{BUCKET}/",
        "CATALOG_IO__IMPL": "org.apache.iceberg.aws.s3.S3FileIO",
        "CATALOG_S3_ENDPOINT": s3_endpoint,
        "CATALOG_S3_PATH__STYLE__ACCESS": "true",
        "CATALOG_S3_ACCESS__KEY__ID": DEV_S3_ACCESS_KEY,
        "CATALOG_S3_SECRET__ACCESS__KEY": DEV_S3_SECRET_KEY,
        "CATALOG_CLIENT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }


class JavaTarget(Target):
    name = "java"
    label = f"Iceberg REST reference (Java {ICEBERG_VERSION}, JDBC on SQLite)"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.server: subprocess.Popen | None = None

    def api(self, path: str = "") -> str:
        # the reference names no prefix in /v1/config: its routes are /v1/namespaces/...
        return f"{self.base_url}/v1/{self.prefix + '/' if self.prefix else ''}{path}"

    def start(self) -> None:
        libs = libs_dir()
        if not any(libs.glob("iceberg-open-api-*-test-fixtures.jar")):
            raise RuntimeError(f"no Iceberg REST reference jars in {libs}: run make bench-java")
        self.s3 = EmbeddedS3(self.root / "s3", free_port(), DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY)
        self.s3.start()
        self.s3.ensure_bucket(BUCKET)
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")}
        env.update(catalog_env(port, self.root / "catalog.db", self.s3.endpoint))
        argv = [java_bin(), "-Xmx1g", "-cp", f"{libs}/*", SERVER_CLASS]
        self.server = spawn_logged(argv, self.root, env, self.root)
        self.base_url = f"http://{LOCALHOST}:{port}"
        deadline = time.monotonic() + 120
        while True:
            if self.server.poll() is not None:
                raise RuntimeError(f"the Java reference exited during start-up; see {self.root / 'gunicorn.log'}")
            try:
                status, _, config = http_json("GET", f"{self.base_url}/v1/config", timeout=2)
                if status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Java reference did not answer on {self.base_url}")
            time.sleep(0.3)
        self.config = config or {}
        self.prefix = ((config or {}).get("overrides") or {}).get("prefix") or ""
        self.headers = {}

    def stop(self) -> None:
        if self.server is not None:
            stop_process_group(self.server, [(signal.SIGTERM, 20.0)])
            self.server = None
        if self.s3 is not None:
            self.s3.stop()

    def cpu_seconds(self) -> dict[str, float]:
        return {
            "jvm": cpu_seconds(self.server.pid if self.server else None, with_children=False),
            "s3": cpu_seconds(self.s3.pid if self.s3 else None, with_children=False),
        }

    def memory(self) -> dict[str, Any]:
        return {"jvm": process_memory(self.server.pid)} if self.server else {}

    def versions(self) -> dict[str, str]:
        out = subprocess.run([java_bin(), "-version"], capture_output=True, text=True, check=False)
        return {"iceberg": ICEBERG_VERSION, "java": (out.stderr or out.stdout).splitlines()[0] if out else ""}

    def settings(self) -> dict[str, Any]:
        return {
            "process": f"{SERVER_CLASS} (Jetty 12) + SeaweedFS S3",
            "catalog": "JdbcCatalog on a SQLite file, S3FileIO",
            "auth": "none (the reference has none)",
            "jvm": "-Xmx1g, JDK defaults otherwise",
        }
