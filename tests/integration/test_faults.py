"""A frozen or restarted PostgreSQL or S3 under commits: bounded 503s, recovery, nothing acknowledged lost.

SIGSTOP freezes a dependency the way a hung host or a stuck disk does: its kernel still accepts
connections and acknowledges what is sent, so only Growler's own deadlines (GROWLER_DB_TIMEOUT_S,
GROWLER_S3_TIMEOUT_S) can end a request. Each scenario runs committers against a real gunicorn
server, applies the fault while they run, and checks that every answer came within a bound, was
200 or a retryable failure, that /readyz said 503 meanwhile and /healthz stayed alive, that the
same server recovers once the dependency is back, and that every commit answered 200 is in the
final metadata.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.api.tables_support import create_request
from tests.fault_support import frozen, process_tree
from tests.integration.conftest import REPO, Server, start_server, stop_server

pytestmark = pytest.mark.slow  # waits on restarts or builds: make test runs it in the slow part

TIMEOUT_S = 2  # GROWLER_DB_TIMEOUT_S, GROWLER_S3_TIMEOUT_S and GROWLER_DB_POOL_TIMEOUT_S of the server
# A refused request may wait for a few bounded steps (a pool check, a connect, the check of a
# commit's outcome): each is at most TIMEOUT_S. Without the deadlines a frozen dependency hangs
# a request forever (the client's own timeout, below, would fire instead).
ANSWER_WITHIN_S = 6 * TIMEOUT_S
CLIENT_TIMEOUT_S = 60.0
COMMITTERS = 3
RETRYABLE = {503: "ServiceUnavailableException", 500: "CommitStateUnknownException"}


@dataclass
class Answer:
    table: str
    key: str
    status: int
    error_type: str | None
    retry_after: str | None
    seconds: float


@dataclass
class Committers:
    server: Server
    tables: list[str]
    answers: list[Answer] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)

    def url(self, table: str) -> str:
        return f"{self.server.url}/v1/{self.server.warehouse}/namespaces/faults/tables/{table}"

    def start(self) -> None:
        for table in self.tables:
            thread = threading.Thread(target=self._commit_loop, args=(table,), daemon=True)
            thread.start()
            self.threads.append(thread)

    def _commit_loop(self, table: str) -> None:
        with httpx.Client(timeout=CLIENT_TIMEOUT_S) as http:
            while not self.stop.is_set():
                key = "k" + uuid.uuid4().hex[:12]
                body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {key: "1"}}]}
                started = time.monotonic()
                try:
                    response = http.post(self.url(table), json=body)
                    status, headers = response.status_code, response.headers
                    error_type = response.json().get("error", {}).get("type") if status != 200 else None
                except httpx.TimeoutException:
                    status, headers, error_type = 0, {}, "client timeout"
                answer = Answer(table, key, status, error_type, headers.get("retry-after"), time.monotonic() - started)
                with self.lock:
                    self.answers.append(answer)
                if status != 200:
                    self.stop.wait(0.2)  # as a client backing off

    def count(self, predicate) -> int:
        with self.lock:
            return sum(1 for answer in self.answers if predicate(answer))

    def finish(self) -> list[Answer]:
        self.stop.set()
        for thread in self.threads:
            thread.join(CLIENT_TIMEOUT_S + 5)
        assert not any(thread.is_alive() for thread in self.threads)
        return list(self.answers)


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def timed_get(url: str) -> tuple[int, float]:
    started = time.monotonic()
    try:
        status = httpx.get(url, timeout=CLIENT_TIMEOUT_S).status_code
    except httpx.TransportError:  # a timeout, or nothing listening yet
        status = 0
    return status, time.monotonic() - started


@pytest.fixture(scope="module")
def fault_server(settings, app, tmp_path_factory) -> Iterator[Server]:
    timeouts = {
        name: str(TIMEOUT_S) for name in ("GROWLER_DB_TIMEOUT_S", "GROWLER_S3_TIMEOUT_S", "GROWLER_DB_POOL_TIMEOUT_S")
    }
    running = start_server(settings, tmp_path_factory.mktemp("faults"), timeouts)
    try:
        yield running
    finally:
        stop_server(running)


@pytest.mark.parametrize("dependency", ["postgres", "s3"])
@pytest.mark.parametrize("fault", ["freeze", "restart"])
def test_fault_during_commits(fault_server: Server, services, dependency: str, fault: str):
    service = services.postgres if dependency == "postgres" else services.s3
    if service is None:
        pytest.skip(f"external {dependency}: the test cannot freeze or restart it")
    base = f"{fault_server.url}/v1/{fault_server.warehouse}"
    httpx.post(f"{base}/namespaces", json={"namespace": ["faults"]})
    tables = [f"{dependency}_{fault}_{n}_{uuid.uuid4().hex[:6]}" for n in range(COMMITTERS)]
    for table in tables:
        assert httpx.post(f"{base}/namespaces/faults/tables", json=create_request(table)).status_code == 200

    committers = Committers(fault_server, tables)
    committers.start()
    try:
        wait_for(lambda: committers.count(lambda a: a.status == 200) >= 2 * COMMITTERS, 60, "commits before")
        before_fault = len(committers.answers)
        if fault == "freeze":
            with frozen(service):
                # every committer gets at least one refusal while the dependency is frozen
                wait_for(
                    lambda: all(committers.count(lambda a, t=t: a.table == t and a.status != 200) >= 1 for t in tables),
                    4 * ANSWER_WITHIN_S,
                    "refusals while frozen",
                )
                ready, ready_s = timed_get(f"{fault_server.url}/readyz")
                alive, alive_s = timed_get(f"{fault_server.url}/healthz")
                assert ready == 503 and ready_s < ANSWER_WITHIN_S, (ready, ready_s)
                # alive: answered before any of the server's deadlines could have fired, so it
                # waited on no frozen dependency (a bound in the server's deadlines, not the machine's speed)
                assert alive == 200 and alive_s < TIMEOUT_S, (alive, alive_s)
                # loadTable (read on the event loop by the asyncio pool) needs only PostgreSQL
                load, load_s = timed_get(f"{base}/namespaces/faults/tables/{tables[0]}")
                assert load == (503 if dependency == "postgres" else 200) and load_s < ANSWER_WITHIN_S, (load, load_s)
        else:
            service.restart()
        # recovery, without restarting Growler: every committer succeeds again
        after_fault = len(committers.answers)
        wait_for(
            lambda: all(
                committers.count(lambda a, t=t: a.table == t and a.status == 200)
                >= 1 + sum(1 for a in committers.answers[:after_fault] if a.table == t and a.status == 200)
                for t in tables
            ),
            60,
            "commits after the fault",
        )
    finally:
        answers = committers.finish()

    during = answers[before_fault:]
    print(
        f"{dependency} {fault}: {len(answers)} answers,",
        sorted({(a.status, a.error_type) for a in during}, key=str),
        f"slowest {max(a.seconds for a in during):.2f} s",
    )  # shown with -s
    slow = [a for a in during if a.seconds > ANSWER_WITHIN_S]
    assert not slow, f"answers slower than {ANSWER_WITHIN_S} s: {slow}"
    for answer in answers:
        assert answer.status == 200 or RETRYABLE.get(answer.status) == answer.error_type, answer
        if answer.status == 503:
            assert answer.retry_after is not None and int(answer.retry_after) > 0, answer
    if fault == "freeze":
        assert any(a.status != 200 for a in during)
    assert httpx.get(f"{fault_server.url}/readyz", timeout=10).status_code == 200

    # no acknowledged commit lost; loadTable reads through the asyncio pool, which the committers
    # never used: it recovers by itself too (a pooled connection the restart dropped is replaced)
    loads: dict[str, httpx.Response] = {}
    wait_for(
        lambda: all(
            (loads.__setitem__(t, httpx.get(f"{base}/namespaces/faults/tables/{t}")) or loads[t].status_code == 200)
            for t in tables
        ),
        ANSWER_WITHIN_S,
        "loadTable after the fault",
    )
    for table in tables:
        properties = loads[table].json()["metadata"]["properties"]
        acknowledged = {a.key for a in answers if a.table == table and a.status == 200}
        assert acknowledged <= set(properties), acknowledged - set(properties)


def test_workers_restarted_while_postgres_is_down_keep_gunicorn_up(settings, app, services, tmp_path):
    """The issue's dead ``make run``: PostgreSQL restarting while gunicorn replaces its workers."""
    if services.postgres is None:
        pytest.skip("external PostgreSQL: the test cannot stop it")
    server = start_server(settings, tmp_path, {"GROWLER_WORKERS": "2", "GROWLER_DB_TIMEOUT_S": str(TIMEOUT_S)})
    try:
        workers = set(process_tree(server.process.pid)) - {server.process.pid}
        services.postgres.stop()
        try:
            for pid in workers:  # as max_requests or a crash would: gunicorn boots new ones
                os.kill(pid, signal.SIGKILL)
            wait_for(
                lambda: len(set(process_tree(server.process.pid)) - {server.process.pid} - workers) >= 2,
                60,
                "replacement workers",
            )
            # the new workers serve: alive, not ready, and 503 + Retry-After rather than a hang
            wait_for(lambda: timed_get(f"{server.url}/healthz")[0] == 200, 60, "healthz from a new worker")
            assert server.process.poll() is None, server.log()
            ready, ready_s = timed_get(f"{server.url}/readyz")
            assert ready == 503 and ready_s < ANSWER_WITHIN_S
            response = httpx.get(f"{server.url}/v1/{server.warehouse}/namespaces", timeout=CLIENT_TIMEOUT_S)
            assert response.status_code == 503 and int(response.headers["retry-after"]) > 0
            assert response.json()["error"]["type"] == "ServiceUnavailableException"
        finally:
            services.postgres.start()
        # back without restarting gunicorn: every worker gets ready (the readiness of each is
        # asked several times, since connections spread over the workers)
        wait_for(
            lambda: all(httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200 for _ in range(6)),
            60,
            "ready again",
        )
        assert httpx.get(f"{server.url}/v1/{server.warehouse}/namespaces", timeout=10).status_code == 200
        assert server.process.poll() is None
    finally:
        stop_server(server)


def test_make_run_survives_postgres_dying_while_a_worker_restarts(tmp_path):
    """``make run`` (scripts/run.py) restarts its embedded PostgreSQL; gunicorn rides it out."""
    from scripts.processes import free_port

    # Not under pytest's basetemp: PostgreSQL runs as ``postgres`` and needs to traverse its
    # ancestors, which any pytest session starting meanwhile resets to 0700 (see
    # test_embedded_services.service_root).
    data_dir = tempfile.TemporaryDirectory(prefix="growler-make-run-")

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROWLER_")}
    env.update(
        GROWLER_DATA_DIR=data_dir.name,
        GROWLER_BIND=f"127.0.0.1:{port}",
        GROWLER_WORKERS="1",
        GROWLER_EMBEDDED_PG_PORT=str(free_port()),
        GROWLER_EMBEDDED_S3_PORT=str(free_port()),
        GROWLER_DB_TIMEOUT_S=str(TIMEOUT_S),
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log_file:
        run = subprocess.Popen(
            [sys.executable, "-m", "scripts.run"],
            cwd=REPO,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: run.poll() is None and timed_get(f"{url}/readyz")[0] == 200, 120, "make run ready")
        masters = [pid for pid in process_tree(run.pid) if "-m gunicorn" in _name(pid)]
        gunicorn = min(masters)  # the master; its workers are its children
        workers = set(process_tree(gunicorn)) - {gunicorn}
        assert workers
        postmaster = int((Path(data_dir.name) / "postgres" / "postmaster.pid").read_text().split()[0])
        os.kill(postmaster, signal.SIGQUIT)  # immediate shutdown, as a crash
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        restarted = "embedded PostgreSQL restarted"
        wait_for(
            lambda: run.poll() is not None or restarted in log_path.read_text(errors="replace"),
            120,
            "PostgreSQL restarted",
        )
        wait_for(lambda: run.poll() is not None or timed_get(f"{url}/readyz")[0] == 200, 120, "ready again")
        assert run.poll() is None, log_path.read_text(errors="replace")
        # make run serves with authentication on, the admin credential in a file it names
        credential = Path(data_dir.name) / "credential"
        assert str(credential) in log_path.read_text(errors="replace")
        client_id, _, secret = credential.read_text().strip().partition(":")
        token = httpx.post(
            f"{url}/v1/oauth/tokens",
            timeout=30,
            data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
        ).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        assert httpx.post(f"{url}/v1/namespaces", json={"namespace": ["after"]}, timeout=10).status_code == 401
        response = httpx.post(f"{url}/v1/namespaces", json={"namespace": ["after"]}, headers=headers, timeout=10)
        assert response.status_code == 200
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGTERM)
            run.wait(90)
        data_dir.cleanup()
    assert run.returncode == 0


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""
