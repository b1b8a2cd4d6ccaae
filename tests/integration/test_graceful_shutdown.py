"""Graceful shutdown and reload: no request in flight is lost.

- SIGTERM to gunicorn while a commit is in flight: the commit completes (200, pointer swapped,
  file written) and gunicorn then exits 0. The commit is held for real, not by a test knob in the
  server: Growler talks to S3 through a loopback TCP proxy that holds the metadata PUT until the
  workers are seen shutting down, then lets it through.
- SIGHUP (reload) while clients hammer Growler through nginx: workers are replaced and no request
  is answered 502 (or fails in any other way).

No sleep stands in for synchronisation: every step waits for what it needs (a held PUT, a log
line, a socket accepted or closed by a worker, seen in /proc).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import threading
from collections import Counter
from collections.abc import Iterator

import httpx
import psycopg
import pytest

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.api.tables_support import create_request
from tests.conftest import TEST_BUCKET
from tests.integration.bearer import BEARER
from tests.integration.conftest import start_server, stop_server
from tests.integration.holding_proxy import HoldingProxy
from tests.integration.nginx_support import start_nginx, stop_nginx
from tests.integration.proc_support import accepted_inode, children, listening_inode, socket_inodes, wait_for

WAIT_S = 60.0


@pytest.fixture
def slow_s3(services) -> Iterator[HoldingProxy]:
    proxy = HoldingProxy(services.s3_endpoint, held=b"PUT ")
    try:
        yield proxy
    finally:
        proxy.close()


def set_property(client: httpx.Client, url: str, key: str, value: str) -> httpx.Response:
    return client.post(
        url, json={"requirements": [], "updates": [{"action": "set-properties", "updates": {key: value}}]}
    )


def test_sigterm_lets_an_inflight_commit_finish(settings, app, services, slow_s3, tmp_path, clean_catalog):
    # Its own warehouse (the default warehouse row records the S3 endpoint, which is the proxy here).
    own = dataclasses.replace(
        settings,
        warehouse="graceful",
        warehouse_location=f"s3://{TEST_BUCKET}/graceful",
        s3=dataclasses.replace(settings.s3, endpoint=slow_s3.endpoint),
    )
    server = start_server(own, tmp_path)
    try:
        url = f"{server.url}/v1/graceful/namespaces/ops/tables/jobs"
        with httpx.Client(timeout=60) as client:
            assert client.post(f"{server.url}/v1/graceful/namespaces", json={"namespace": ["ops"]}).status_code == 200
            created = client.post(f"{server.url}/v1/graceful/namespaces/ops/tables", json=create_request("jobs"))
            assert created.status_code == 200, created.text
        before = created.json()["metadata-location"]

        slow_s3.holding = True
        result: dict[str, httpx.Response] = {}

        def commit() -> None:
            with httpx.Client(timeout=60) as client:
                result["response"] = set_property(client, url, "state", "committed-during-sigterm")

        committer = threading.Thread(target=commit)
        committer.start()
        assert slow_s3.request_held.wait(WAIT_S), "the commit never reached S3"
        port = int(server.url.rsplit(":", 1)[1])
        listener, workers = listening_inode(port, server.process.pid), children(server.process.pid)
        assert workers
        os.kill(server.process.pid, signal.SIGTERM)  # the master: it stops the workers gracefully
        # the commit is still held: let it go only once every worker has stopped accepting
        wait_for(lambda: "Handling signal: term" in server.log(), what="gunicorn handling SIGTERM")
        wait_for(lambda: all(listener not in socket_inodes(pid) for pid in workers), what="workers to stop accepting")
        assert committer.is_alive() and "response" not in result
        slow_s3.release.set()

        committer.join(WAIT_S)
        response = result["response"]
        assert response.status_code == 200, response.text
        after = response.json()["metadata-location"]
        assert after != before
        assert response.json()["metadata"]["properties"]["state"] == "committed-during-sigterm"

        assert server.process.wait(timeout=40) == 0
        # committed for real: the pointer was swapped and the file is there
        with psycopg.connect(services.database_url) as conn:
            current = conn.execute("SELECT metadata_location FROM catalog_entry WHERE name = 'jobs'").fetchone()[0]
        assert current == after
        slow_s3.holding = False
        assert S3ObjectStore(settings.s3).exists(Location.parse(after))
        log = server.log()
        commit_lines = [json.loads(line) for line in log.splitlines() if '"event":"commit"' in line]
        assert any(c["new_metadata_location"] == after and c["outcome"] == "committed" for c in commit_lines)
        # it really was in flight during SIGTERM: committed after the master handled the signal
        lines = log.splitlines()
        signalled = next(i for i, line in enumerate(lines) if "Handling signal: term" in line)
        committed = next(i for i, line in enumerate(lines) if '"event":"commit"' in line and after in line)
        assert signalled < committed
        assert "Traceback" not in log
    finally:
        stop_server(server)


def test_a_stopping_worker_serves_connections_it_has_accepted(settings, app, tmp_path):
    """The 502 race, widened: a connection accepted just before SIGTERM, request sent just after.

    Plain uvicorn closes such a connection without reading it (nginx would answer 502); the
    worker in gunicorn.conf.py waits for its request and serves it.
    """
    server = start_server(settings, tmp_path, {"GROWLER_WORKERS": "1"})
    try:
        port = int(server.url.rsplit(":", 1)[1])
        listener = listening_inode(port, server.process.pid)
        [worker] = children(server.process.pid)
        with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
            client_port = conn.getsockname()[1]
            wait_for(lambda: accepted_inode(port, client_port) is not None, what="the kernel's connection")
            accepted = accepted_inode(port, client_port)
            wait_for(lambda: accepted in socket_inodes(worker), what="the worker to accept the connection")
            os.kill(server.process.pid, signal.SIGTERM)
            wait_for(lambda: listener not in socket_inodes(worker), what="the worker to stop accepting")
            assert accepted in socket_inodes(worker)  # shutting down, the connection still open
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: growler\r\n\r\n")
            answer = conn.recv(4096)
        assert answer.startswith(b"HTTP/1.1 200 OK"), answer
        assert server.process.wait(timeout=40) == 0
    finally:
        stop_server(server)


def test_sighup_reload_under_load_through_nginx(settings, app, tmp_path, clean_catalog):
    server = start_server(settings, tmp_path)
    proxy = start_nginx(server.url.removeprefix("http://"), tmp_path)
    BEARER.register(proxy.url)
    statuses: Counter[str] = Counter()
    failures: list[str] = []
    stop = threading.Event()
    prefix = f"{proxy.url}/v1/{settings.warehouse}"

    def load(worker: int) -> None:
        with httpx.Client(timeout=60) as client:
            namespace = f"load{worker}"
            client.post(f"{prefix}/namespaces", json={"namespace": [namespace]})
            client.post(f"{prefix}/namespaces/{namespace}/tables", json=create_request("t"))
            i = 0
            while not stop.is_set() and i < 5000:
                i += 1
                try:
                    if i % 3 == 0:
                        response = set_property(client, f"{prefix}/namespaces/{namespace}/tables/t", "i", str(i))
                    elif i % 3 == 1:
                        response = client.post(f"{prefix}/namespaces", json={"namespace": [namespace, f"n{i}"]})
                    else:
                        response = client.get(f"{prefix}/namespaces/{namespace}/tables/t")
                    statuses[str(response.status_code)] += 1
                    if response.status_code >= 300:
                        failures.append(
                            f"{response.request.method} {response.request.url}: "
                            f"{response.status_code} {response.text[:200]}"
                        )
                except httpx.HTTPError as exc:
                    statuses[type(exc).__name__] += 1
                    failures.append(f"{type(exc).__name__}: {exc}")

    def worker_pids() -> set[int]:
        lines = [json.loads(line) for line in server.log().splitlines() if '"event":"request"' in line]
        return {line["pid"] for line in lines if line.get("path", "").startswith(f"/v1/{settings.warehouse}/")}

    def answer_count() -> int:
        return sum(statuses.values())

    def keep_loading(requests: int) -> None:
        """Until the clients got ``requests`` more answers (the load goes on meanwhile)."""
        target = answer_count() + requests
        wait_for(lambda: answer_count() >= target or failures, what=f"{requests} more answers")

    threads = [threading.Thread(target=load, args=(n,)) for n in range(4)]
    try:
        for thread in threads:
            thread.start()
        keep_loading(50)
        wait_for(lambda: worker_pids(), what="requests in the log")
        old_workers = worker_pids()
        for _ in range(2):
            os.kill(server.process.pid, signal.SIGHUP)
            # requests served by workers of the new generation, then more load on them
            wait_for(lambda seen=old_workers: worker_pids() - seen, what="a new worker serving requests after SIGHUP")
            keep_loading(50)
            old_workers |= worker_pids() - old_workers
        keep_loading(50)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        stop_nginx(proxy)
        stop_server(server)

    assert sum(statuses.values()) > 100, statuses
    assert not failures, f"{statuses}\n" + "\n".join(failures[:20])
    assert set(statuses) == {"200"}, statuses
    # nginx's own view: every request it proxied got an answer, none a 502
    answered = Counter(json.loads(line)["status"] for line in proxy.access_log().splitlines())
    assert set(answered) == {200}, answered
