"""A burst of maximal bodies against real gunicorn workers leaves /healthz answering at once.

connexion parses and validates JSON bodies in its ASGI middleware; done on the event loop, a
few commits with thousands of updates kept a worker's loop busy for many seconds, so /healthz
and gunicorn's heartbeat stalled until the worker was killed with the requests in flight.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlparse

import httpx
import pytest

from app.ground.limits import Limits
from tests.integration.bearer import BEARER
from tests.integration.conftest import start_server, stop_server

# a CPU-bound burst: never beside another session's (cpu_alone, tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_alone")

LIMITS = Limits()
BURST = 12  # concurrent requests, spread by the kernel over the two workers
HEALTHZ_BUDGET_S = 0.100


@pytest.fixture(scope="module")
def server(settings, app, tmp_path_factory):
    # As in production: response validation (a test aid, on by default in the suite) parses and
    # walks every response body on the event loop.
    running = start_server(settings, tmp_path_factory.mktemp("burst"), {"GROWLER_VALIDATE_RESPONSES": "false"})
    try:
        yield running
    finally:
        stop_server(running)


def maximal_bodies(server) -> list[tuple[str, bytes]]:
    """Bodies at and over the caps: each costs the most a request can cost."""
    tables = f"/v1/{server.warehouse}/namespaces/burst/tables"
    at_cap = [{"action": "set-properties", "updates": {f"k{i}": "v" * 20}} for i in range(LIMITS.max_updates)]
    over_cap = at_cap + [{"action": "remove-properties", "removals": ["x"]}]
    # As many properties as one object may have, each as long as it takes to reach ~8 MiB
    value = "v" * (8 * 1024 * 1024 // LIMITS.max_json_items - 40)
    properties = {f"key-{i:07d}": value for i in range(LIMITS.max_json_items)}
    wide = json.dumps({"namespace": ["wide"], "properties": properties}).encode()
    deep = b'{"namespace": ["deep"], "properties": ' + b"[" * 400_000 + b"]" * 400_000 + b"}"
    commit = json.dumps({"requirements": [], "updates": at_cap}).encode()
    too_many = json.dumps({"requirements": [], "updates": over_cap}).encode()
    return [
        (f"{tables}/t", commit),  # 5,000 updates: parsed, validated, applied and committed
        (f"{tables}/t", too_many),  # refused after parsing, before the schema is walked
        (f"/v1/{server.warehouse}/namespaces", wide),  # ~8 MiB; each sender names its own namespace
        (f"/v1/{server.warehouse}/namespaces", deep),
    ]


def test_healthz_answers_within_100ms_during_a_burst_of_maximal_bodies(server, clean_catalog):
    base = server.url
    assert httpx.post(f"{base}/v1/namespaces", json={"namespace": ["burst"]}).status_code == 200
    schema = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]}
    created = httpx.post(f"{base}/v1/namespaces/burst/tables", json={"name": "t", "schema": schema}, timeout=30)
    assert created.status_code == 200, created.text
    bodies = maximal_bodies(server)
    assert all(len(body) <= 8 * 1024 * 1024 for _, body in bodies)

    host, port = urlparse(base).hostname, urlparse(base).port
    authorization = f"Bearer {BEARER.token(base)}"  # authenticated: the bodies reach the parser
    start = threading.Barrier(BURST + 1)
    sent = threading.Semaphore(0)
    statuses: list[int] = []
    lock = threading.Lock()
    in_flight = [BURST]

    def send(path: str, body: bytes) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=120)
        try:
            start.wait()
            conn.request(
                "POST", path, body=body, headers={"content-type": "application/json", "authorization": authorization}
            )
            sent.release()  # the whole body is on the wire
            response = conn.getresponse()
            response.read()
            with lock:
                statuses.append(response.status)
        finally:
            conn.close()
            with lock:
                in_flight[0] -= 1

    def body(i: int) -> tuple[str, bytes]:
        path, data = bodies[i % len(bodies)]
        return path, data.replace(b'["wide"]', f'["wide{i:02d}"]'.encode(), 1)

    threads = [threading.Thread(target=send, args=body(i)) for i in range(BURST)]
    for thread in threads:
        thread.start()
    start.wait()
    for _ in range(BURST):  # every body sent: the workers are parsing, validating, committing
        assert sent.acquire(timeout=60)
    burst_began = time.perf_counter()
    probe = http.client.HTTPConnection(host, port, timeout=30)  # its own keep-alive connection
    latencies = []
    while True:
        with lock:
            if not in_flight[0]:
                break
        began = time.perf_counter()
        probe.request("GET", "/healthz")
        response = probe.getresponse()
        assert response.read() == b'{"status":"alive"}' and response.status == 200
        latencies.append(time.perf_counter() - began)
    burst_s = time.perf_counter() - burst_began
    for thread in threads:
        thread.join()
    probe.close()
    print(f"burst {burst_s:.1f} s, {len(latencies)} probes, slowest {sorted(latencies)[-5:]}")

    assert len(latencies) >= 20, f"the burst ended before /healthz was probed enough: {latencies}"
    # 99 in 100 probes within the budget; the rest within a few budgets. Before the fix, probes
    # waited 0.5-1.5 s here, most of them over the budget. The allowance is for the scheduler of a
    # shared 2-core test machine (5 agents, load ~6), where a thread can wait for a CPU that long.
    ranked = sorted(latencies)
    assert ranked[int(len(ranked) * 0.99) - 1] < HEALTHZ_BUDGET_S, ranked[-10:]
    assert ranked[-1] < 5 * HEALTHZ_BUDGET_S, ranked[-10:]
    assert sorted(statuses) == sorted([200 if i % len(bodies) in (0, 2) else 400 for i in range(BURST)]), statuses
    assert "WORKER TIMEOUT" not in server.log()
