"""Iceberg's own REST catalog server (``RESTCatalogServer`` from the ``iceberg-open-api`` test-fixtures
jar, fetched by ``make rest-reference``) as a federated warehouse's remote: a JdbcCatalog on SQLite
in a temporary folder, in a process group of its own, on a free port. The module-scoped
``reference`` fixture (tests/integration/conftest.py) starts one per test module that asks for it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import httpx

from scripts.processes import free_port
from tests.integration.proc_support import wait_for

ICEBERG_VERSION = "1.11.0"
SERVER_CLASS = "org.apache.iceberg.rest.RESTCatalogServer"
START_TIMEOUT_S = 60  # a hang guard: the server starts in about a second
REPO = Path(__file__).resolve().parents[2]


def _libs() -> Path:
    default = REPO / ".cache" / f"bench-java-{ICEBERG_VERSION}" / "libs"
    libs = Path(os.environ.get("GROWLER_REST_REFERENCE_LIBS") or default)
    if not any(libs.glob("iceberg-open-api-*-test-fixtures.jar")) or not any(libs.glob("jetty-server-*.jar")):
        raise RuntimeError(f"no Iceberg REST reference server in {libs}: run make rest-reference")
    return libs


def _java() -> str:
    home = os.environ.get("GROWLER_RCK_JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        raise RuntimeError("no java: install a JDK 17")
    return found


class ReferenceServer:
    """RESTCatalogServer in a process group of its own, on a free port."""

    def __init__(self, root: Path, warehouse: str | None = None, catalog: dict[str, str] | None = None) -> None:
        """``warehouse``: where its tables go (a local folder under ``root`` by default);
        ``catalog``: more catalog properties (``s3.endpoint`` and the like, for S3FileIO)."""
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("CATALOG_")}
        env.update(
            CATALOG_CATALOG__IMPL="org.apache.iceberg.jdbc.JdbcCatalog",
            CATALOG_URI=f"jdbc:sqlite:file:{root / 'catalog.db'}",
            CATALOG_JDBC_SCHEMA__VERSION="V1",
            CATALOG_WAREHOUSE=warehouse or f"file:{root / 'warehouse'}",
            CATALOG_REST_PORT=str(self.port),
            REST_PORT=str(self.port),
        )
        # RESTCatalogServer reads CATALOG_<property> with "__" for "-" and "_" for "."
        env.update(
            {
                "CATALOG_" + key.replace("-", "__").replace(".", "_").upper(): value
                for key, value in (catalog or {}).items()
            }
        )
        self.log = open(root / "reference.log", "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            [_java(), "-Xmx256m", "-cp", f"{_libs()}/*", SERVER_CLASS],
            cwd=root,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        wait_for(self._ready, f"the Iceberg REST reference server on {self.url}", START_TIMEOUT_S)

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(f"the reference server exited: {(self.root / 'reference.log').read_text()[-2000:]}")
        try:
            return httpx.get(f"{self.url}/v1/config", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def get(self, path: str) -> httpx.Response:
        return httpx.get(f"{self.url}/v1/{path}", timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()
