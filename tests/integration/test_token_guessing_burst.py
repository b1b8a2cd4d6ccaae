"""32 clients guessing secrets at once against real gunicorn workers: bounded memory, and a
legitimate client from another address still gets its token.

The guessers all come from 127.0.0.1: after the address's burst of failures they are answered 429
before any secret is verified, and while they last at most two argon2 verifications run at once
per worker. The legitimate client connects from 127.0.0.2 (loopback too).
"""

from __future__ import annotations

import threading
import uuid

import httpx
import pytest

from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET
from tests.integration.conftest import start_server, stop_server
from tests.integration.proc_support import children

GUESSERS = 32
GUESSES = 40  # each: 1,280 in all, well under a worker's max_requests
UNDER_WAY = 300  # guesses answered before the legitimate client asks
RSS_GROWTH_BOUND_KB = 150 * 1024  # per worker, the guessing's whole effect


@pytest.fixture(scope="module")
def server(settings, app, tmp_path_factory):
    running = start_server(settings, tmp_path_factory.mktemp("guessing"), bearer=False)
    try:
        yield running
    finally:
        stop_server(running)


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_guessers_leave_memory_bounded_and_a_good_token_fast(server):
    workers = sorted(children(server.process.pid))
    assert len(workers) >= 2
    before = {pid: rss_kb(pid) for pid in workers}
    statuses: list[int] = []
    under_way = threading.Event()

    def guess() -> None:
        with httpx.Client(timeout=30) as client:
            for _ in range(GUESSES):
                data = {
                    "grant_type": "client_credentials",
                    "client_id": f"x-{uuid.uuid4().hex[:8]}",
                    "client_secret": uuid.uuid4().hex,
                }
                statuses.append(client.post(f"{server.url}/v1/oauth/tokens", data=data).status_code)
                if len(statuses) >= UNDER_WAY:
                    under_way.set()

    threads = [threading.Thread(target=guess) for _ in range(GUESSERS)]
    for thread in threads:
        thread.start()
    try:
        assert under_way.wait(60)  # the guessing is in full swing
        with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=30) as good:
            response = good.post(
                f"{server.url}/v1/oauth/tokens",
                data={
                    "grant_type": "client_credentials",
                    "client_id": TEST_CLIENT_ID,
                    "client_secret": TEST_CLIENT_SECRET,
                },
            )
    finally:
        for thread in threads:
            thread.join()
    assert response.status_code == 200, response.text
    assert len(statuses) == GUESSERS * GUESSES
    assert set(statuses) <= {401, 429} and 429 in statuses  # refused, then slowed down before verifying
    for pid in workers:
        assert rss_kb(pid) - before[pid] < RSS_GROWTH_BOUND_KB, f"worker {pid} grew by {rss_kb(pid) - before[pid]} kB"
