"""32 clients guessing secrets at once against real gunicorn workers: bounded memory, and a
legitimate client still gets its token.

First the guessers all come from 127.0.0.1: after the address's burst of failures they are
answered 429 before any secret is verified, and while they last at most two argon2 verifications
run at once per worker. The legitimate client connects from 127.0.0.2 (loopback too).

Then 32 guessers come from 32 addresses (``X-Forwarded-For``, trusted from loopback as the shipped
``GROWLER_TRUSTED_PROXIES`` default is), so no address bucket stops them, half at unknown client
ids and half at the legitimate client's own id (whose failure bucket they empty), against one
worker: its memory stays within ``VERIFICATIONS_AT_ONCE`` argon2id verifications (64 MiB each)
plus 48 MiB, every guess is answered 401 or 429, and the legitimate client, whose secret this
worker verified before, gets each of its tokens while its id's bucket is empty - guessers at its
id answered 429 before and after - which only ``ProvenSecrets`` answers (no argon2, no bucket, no
queue: a request through them would be a 429 too).

Nothing here depends on the machine's speed (another build may share it): every wait is for a
count of answers, bounded by the number of guesses sent or by the guessers' request timeouts
(hang guards), never for a count within a fixed time, and no answer is timed.
"""

from __future__ import annotations

import math
import threading
import time
import uuid

import httpx
import pytest

from app.edge.auth.endpoint import PER_ADDRESS, VERIFICATIONS_AT_ONCE
from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET
from tests.integration.conftest import start_server, stop_server
from tests.integration.proc_support import children

# a CPU-bound burst: never beside another session's (cpu_alone, tests/conftest.py)
pytestmark = pytest.mark.usefixtures("cpu_alone")

GUESSERS = 32
GUESSES = 40  # each: 1,280 in all, well under a worker's max_requests
UNDER_WAY = 300  # guesses answered before the legitimate client asks
REQUEST_TIMEOUT_S = 120  # a hang guard per request, not a speed the test expects
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


def test_guessers_leave_memory_bounded_and_a_good_client_gets_its_token(server):
    workers = sorted(children(server.process.pid))
    assert len(workers) >= 2
    before = {pid: rss_kb(pid) for pid in workers}
    statuses: list[int] = []
    under_way = threading.Event()

    def guess() -> None:
        with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
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
    started = time.monotonic()
    for thread in threads:
        thread.start()
    try:
        # the guessing in full swing: UNDER_WAY answers, however long they take (the guessers end
        # by themselves after GUESSES each, so this cannot wait forever)
        while not under_way.wait(1) and any(thread.is_alive() for thread in threads):
            pass
        assert under_way.is_set(), f"the guessers stopped after {len(statuses)} answers"
        transport = httpx.HTTPTransport(local_address="127.0.0.2")
        with httpx.Client(transport=transport, timeout=REQUEST_TIMEOUT_S) as good:
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
    elapsed_s = time.monotonic() - started
    assert response.status_code == 200, response.text
    assert len(statuses) == GUESSERS * GUESSES
    assert set(statuses) <= {401, 429}
    # Slowed down before verifying: each worker's address bucket lets through at most its burst plus
    # its refill over the whole guessing, however long that took; every other guess is a 429. A
    # bound, not a count within a time: a slow machine, whose guesses come slower than the refill,
    # simply sees fewer 429s (none, if slower still), and a missing limiter fails it on any machine.
    rate, burst = PER_ADDRESS
    verified = statuses.count(401)
    allowed = len(workers) * (burst + math.ceil(elapsed_s * rate))
    assert verified <= allowed, f"{verified} guesses verified in {elapsed_s:.0f} s; the buckets allow {allowed}"
    for pid in workers:
        assert rss_kb(pid) - before[pid] < RSS_GROWTH_BOUND_KB, f"worker {pid} grew by {rss_kb(pid) - before[pid]} kB"


ARGON2_MIB = 64  # argon2-cffi's RFC 9106 low-memory profile (app/management/principals.py)
# The stated bound for distributed guessers: the verifications at once, plus 48 MiB for 32
# connections, buffers and the allocator's slack.
MEMORY_BOUND_MIB = VERIFICATIONS_AT_ONCE * ARGON2_MIB + 48


@pytest.fixture(scope="module")
def one_worker(settings, app, tmp_path_factory):
    server = start_server(settings, tmp_path_factory.mktemp("token-flood"), {"GROWLER_WORKERS": "1"})
    try:
        yield server
    finally:
        stop_server(server)


def _rss_mib(pid: int) -> float:
    return rss_kb(pid) / 1024


def _token(url: str, client_id: str, secret: str, address: str = "10.9.0.1") -> httpx.Response:
    data = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
    return httpx.post(
        f"{url}/v1/oauth/tokens", data=data, headers={"X-Forwarded-For": address}, timeout=REQUEST_TIMEOUT_S
    )


ENOUGH_ANSWERS = 20_000  # far past what emptying a bucket of 10 takes: the waits below end by count


def test_guessers_leave_memory_bounded_and_a_known_client_unhindered(one_worker, principals_api):
    url = one_worker.url
    client_id, secret = principals_api
    assert _token(url, client_id, secret).status_code == 200  # this worker verifies it once
    (worker,) = children(one_worker.process.pid)
    baseline = _rss_mib(worker)

    stop = threading.Event()
    answers: list[int] = []
    at_its_id: list[int] = []  # the answers to the guessers at the legitimate client's id
    peak = [baseline]

    def guess(index: int) -> None:
        target = client_id if index % 2 else f"nobody-{uuid.uuid4().hex[:8]}"
        headers = {"X-Forwarded-For": f"10.8.0.{index + 1}"}
        with httpx.Client(timeout=REQUEST_TIMEOUT_S, headers=headers) as http:
            while not stop.is_set():
                data = {"grant_type": "client_credentials", "client_id": target, "client_secret": uuid.uuid4().hex}
                status = http.post(f"{url}/v1/oauth/tokens", data=data).status_code
                answers.append(status)
                if target == client_id:
                    at_its_id.append(status)

    def sample() -> None:
        while not stop.wait(0.05):
            peak[0] = max(peak[0], _rss_mib(worker))

    def until(condition) -> None:
        """Wait for a count of answers: the guessers' own pace, whatever the machine's speed (ended
        by ENOUGH_ANSWERS, or by the guessers stopping: their requests time out, a hang guard)."""
        guessers = threads[:GUESSERS]
        while not condition() and len(answers) < ENOUGH_ANSWERS and any(t.is_alive() for t in guessers):
            stop.wait(0.05)

    threads = [threading.Thread(target=guess, args=(i,)) for i in range(GUESSERS)]
    threads.append(threading.Thread(target=sample))
    for thread in threads:
        thread.start()
    try:
        # the flood is on and the legitimate client's id bucket is empty: its guessers get 429
        until(lambda: 429 in at_its_id)
        assert 429 in at_its_id, f"its id's bucket never ran out: {len(answers)} answers"
        tokens = [_token(url, client_id, secret) for _ in range(5)]
        asked = len(at_its_id)
        until(lambda: 429 in at_its_id[asked:])  # ... and still empty after the last token
        assert 429 in at_its_id[asked:], "its id's bucket refilled while the tokens were asked for"
        flooded = len(answers)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=2 * REQUEST_TIMEOUT_S)
    # through the buckets, each of these would have been a 429 like its guessers' answers: the
    # proven secret was accepted without them (nor argon2's queue, which comes after the bucket)
    for response in tokens:
        assert response.status_code == 200, response.text
    assert set(answers) <= {401, 429}, sorted(set(answers))
    assert 401 in answers and flooded >= GUESSERS
    assert peak[0] - baseline < MEMORY_BOUND_MIB, (baseline, peak[0])


@pytest.fixture(scope="module")
def principals_api(one_worker):
    """A principal made through the management API (the test servers' calls carry the admin's token)."""
    name = f"flooded-{uuid.uuid4().hex[:8]}"
    created = httpx.post(f"{one_worker.url}/management/v1/principals", json={"name": name}, timeout=30)
    assert created.status_code == 201, created.text
    return name, created.json()["client-secret"]
