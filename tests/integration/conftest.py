"""A real gunicorn serving Growler (ASGI worker), for real clients to talk to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from storage.objects import S3ObjectStore
from tests.conftest import TEST_CREDENTIAL, auth_env_for_tests
from tests.integration.bearer import BEARER, BearerForTestServers
from tests.integration.rest_reference_support import ReferenceServer

REPO = Path(__file__).resolve().parents[2]
# A hang guard for a server's start, not a speed: two workers took over 60 s to boot on a machine
# at load 25 (a busy CI host is not much better).
START_TIMEOUT_S = 180


@pytest.fixture(scope="session", autouse=True)
def _bearer_for_test_servers() -> Iterator[BearerForTestServers]:
    BEARER.install()
    try:
        yield BEARER
    finally:
        BEARER.uninstall()


@dataclass
class Server:
    url: str
    warehouse: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def server_env(settings, bind: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GROWLER_BIND=bind,
        GROWLER_DATABASE_URL=settings.database_url,
        GROWLER_WAREHOUSE=settings.warehouse,
        GROWLER_WAREHOUSE_LOCATION=settings.warehouse_location,
        GROWLER_S3_ENDPOINT=settings.s3.endpoint or "",
        GROWLER_S3_ACCESS_KEY=settings.s3.access_key or "",
        GROWLER_S3_SECRET_KEY=settings.s3.secret_key or "",
        GROWLER_S3_REGION=settings.s3.region,
        GROWLER_STORAGE_CREDENTIALS_MODE=settings.storage_credentials_mode,
        GROWLER_STS_ROLE_ARN=settings.sts.role_arn,
        GROWLER_STS_ENDPOINT=settings.sts.endpoint or "",
        GROWLER_STS_DURATION_S=str(settings.sts.duration_s),
        GROWLER_SECRETS_KEY=settings.secrets_key or "",  # warehouses made through the management API
        GROWLER_WORKERS=os.environ.get("GROWLER_TEST_WORKERS", "2"),
        GROWLER_VALIDATE_RESPONSES="true",
        # authentication on, the test admin bootstrapped (tests' HTTP calls: BearerForTestServers)
        **auth_env_for_tests(),
    )
    return env


def start_server(
    settings, tmp_dir: Path, extra_env: dict[str, str] | None = None, bearer: bool = True, port: int | None = None
) -> Server:
    """gunicorn serving Growler; ``bearer``: the tests' httpx calls to it carry the admin's token
    (``BearerForTestServers``); False for tests of what an anonymous caller gets; ``port``: a
    given one (an instance restarted where the proxy expects it), else a free one."""
    from scripts.processes import free_port

    port = port or free_port()
    log_path = tmp_dir / f"gunicorn-{port}.log"
    env = server_env(settings, f"127.0.0.1:{port}")
    env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_dir / f"metrics-{port}")
    env.update(extra_env or {})
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(REPO / "gunicorn.conf.py")],
            cwd=REPO,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Server(f"http://127.0.0.1:{port}", settings.warehouse, process, log_path)
    if bearer:
        BEARER.register(server.url)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {process.returncode}:\n{server.log()}")
        try:
            if httpx.get(f"{server.url}/readyz", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop_server(server)
    raise RuntimeError(f"gunicorn did not become ready:\n{server.log()}")


def stop_server(server: Server) -> None:
    if server.process.poll() is None:
        os.killpg(server.process.pid, signal.SIGTERM)
        try:
            server.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.process.pid, signal.SIGKILL)
            server.process.wait()


@pytest.fixture(scope="session")
def server(settings, app, tmp_path_factory) -> Iterator[Server]:
    # `app` first: it migrates the database, so the workers start against a ready schema
    running = start_server(settings, tmp_path_factory.mktemp("gunicorn"))
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Iterator[ReferenceServer]:
    """Iceberg's own REST catalog server, a federated warehouse's remote: one per test module."""
    running = ReferenceServer(tmp_path_factory.mktemp("rest-reference"))
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def objects(settings) -> S3ObjectStore:
    """The suite's object store, to list what a client wrote (the Spark and PyIceberg table tests)."""
    return S3ObjectStore(settings.s3)


@pytest.fixture
def browser(tmp_path) -> Iterator[object]:
    """A headless Chromium session of its own (tests/integration/browser_support.py)."""
    from tests.integration.browser_support import chromium_session

    with chromium_session(tmp_path / "chromium-profile") as session:
        yield session


@pytest.fixture
def pyiceberg_io_on_one_thread(monkeypatch) -> Iterator[None]:
    """PyIceberg's I/O on one worker thread at a time, for a race in the client, not in Growler.

    PyIceberg 0.12 hands every thread the same cached ``S3FileSystem`` and, on a thread's first
    use, unregisters its signer from that shared client and registers it again (``_s3`` in
    ``pyiceberg/io/fsspec.py``). A request another thread sends in between goes out unsigned, and
    S3 answers AccessDenied (seen as rare failures of appends and reads; a request log of the
    signer showed the refused PUT was never sent to it). With one worker thread (``max-workers``,
    PYICEBERG_MAX_WORKERS) the main thread waits while the worker does I/O, so no request is in
    flight when a thread registers the signer. Upstream: apache/iceberg-python issue 3896 (and
    pull request 3783). Growler's defaults do not meet it: PyIceberg asks for vended credentials,
    which it uses with its PyArrow FileIO, no signer involved.
    """
    from pyiceberg.utils.concurrent import ExecutorFactory

    monkeypatch.setenv("PYICEBERG_MAX_WORKERS", "1")
    monkeypatch.setattr(ExecutorFactory, "_instance", None)
    yield
    if ExecutorFactory._instance is not None:
        ExecutorFactory._instance.shutdown(wait=True)


@pytest.fixture(scope="session", params=["3.5", "4.1"], ids=lambda line: f"spark{line}")
def spark(request, server):
    """The line's shared Spark driver (``DRIVERS``) with catalog ``growler`` pointing at ``server``.

    Session-scoped and parametrised by line: pytest runs all tests of one line, then the other's.
    """
    from tests.integration.spark_support import CATALOG, DRIVERS, add_catalog

    session = DRIVERS.get(request.param)
    add_catalog(session, CATALOG, server.url, server.warehouse, credential=TEST_CREDENTIAL)
    return session


@pytest.fixture
def second_spark(spark):
    """Another driver of ``spark``'s line (its own JVM, REST client and table cache), shared too."""
    from tests.integration.spark_support import DRIVERS

    return DRIVERS.get(spark.line, "second")


@pytest.fixture
def long_sts_job():
    """The long STS job (sts_long_job_support), running since collection ended (started now if not)."""
    from tests.integration.sts_long_job_support import LONG_STS_JOB

    return LONG_STS_JOB.stack()


def _runs_long_sts_job(item: pytest.Item) -> bool:
    return "long_sts_job" in getattr(item, "fixturenames", ())


def _spark_drivers(item: pytest.Item) -> set[tuple[str, str]]:
    """The shared drivers an item uses: its ``spark`` or ``line`` parameter's, and a second one."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    lines = {params[key] for key in ("spark", "line") if key in params}
    roles = ("main", "second") if "second_spark" in item.fixturenames else ("main",)
    return {(line, role) for line in lines for role in roles}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The Spark scenarios that take ``access`` (tests/integration/spark_sql/) run in the default
    mode on both lines, and in the two other modes (signing, static keys) on Spark 3.5 - and MERGE
    there only merge-on-read v2: each mode once where it reaches storage differently, within the
    suite's time. The other combinations are deselected, not skipped: nothing is hidden."""
    kept, dropped = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        other_mode = params.get("access", "sts") != "sts"
        merge = (params.get("mode"), params.get("format_version"))
        if other_mode and (params.get("spark") != "3.5" or merge not in ((None, None), ("merge-on-read", 2))):
            dropped.append(item)
        else:
            kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
    # The long STS job's test last: the job started when collection ended and ran beside the rest.
    items.sort(key=_runs_long_sts_job)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start what the collected tests will need and is slow to start, in the background, now:
    the long STS job (some 16 minutes: sts_long_job_support), the Spark drivers (about ten
    seconds each), Keycloak (tens of seconds on first start) and the Kafka broker (some seconds)
    run or boot while the tests before theirs run."""
    from tests.integration.kafka_support import KAFKA
    from tests.integration.keycloak_support import KEYCLOAK
    from tests.integration.spark_support import DRIVERS
    from tests.integration.sts_long_job_support import LONG_STS_JOB

    if session.config.option.collectonly:
        return  # nothing runs
    if any(_runs_long_sts_job(item) for item in session.items):
        LONG_STS_JOB.prestart()
    for line, role in sorted(set().union(*(_spark_drivers(item) for item in session.items))):
        DRIVERS.prestart(line, role)
    if any("keycloak" in item.fixturenames for item in session.items):
        KEYCLOAK.prestart()
    if any("kafka_broker" in item.fixturenames for item in session.items):
        KAFKA.prestart()


def pytest_sessionfinish(session: pytest.Session) -> None:
    from tests.integration.kafka_support import KAFKA
    from tests.integration.keycloak_support import KEYCLOAK
    from tests.integration.spark_support import DRIVERS
    from tests.integration.sts_long_job_support import LONG_STS_JOB

    DRIVERS.stop_all()
    KEYCLOAK.stop()
    KAFKA.stop()
    LONG_STS_JOB.stop()


@pytest.fixture(scope="session")
def hard_policy_warehouse(server, settings) -> str:
    """A warehouse with the hard deletion policy (a drop removes the entry at once: Growler before
    issue 35), for the tests of what a hard drop does; made through the management API."""
    from storage.objects import S3ObjectStore

    bucket = "growler-hard-policy"
    S3ObjectStore(settings.s3).ensure_bucket(bucket)
    body = {"name": "hard_policy", "location": f"s3://{bucket}/wh/", "deletion-policy": {"mode": "hard"}}
    response = httpx.post(f"{server.url}/management/v1/warehouses", json=body, timeout=30)
    assert response.status_code in (201, 409), response.text  # 409: made already in this session
    return "hard_policy"
