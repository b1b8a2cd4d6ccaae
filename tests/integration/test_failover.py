"""A database failover under a stream of commits: nothing acknowledged is lost, Growler recovers alone.

PostgreSQL runs as a primary with a synchronous standby (tests/integration/failover_support.py);
Growler (one gunicorn master, one worker) connects with a multi-host URL
(``host=primary,standby target_session_attrs=read-write``). Writers commit without pause; the
primary is killed, and the standby promoted a moment later. In the gap every request is answered
503 with Retry-After, or CommitStateUnknown for a commit whose outcome could not be read; after
the promotion commits succeed again on the same gunicorn and workers; and every commit that was
acknowledged is in the promoted database.
"""

from __future__ import annotations

import tempfile
import threading
import time
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest

from tests.api.tables_support import create_request
from tests.integration.conftest import start_server, stop_server
from tests.integration.failover_support import remove, start_replicated

pytestmark = pytest.mark.slow  # waits on restarts or builds: make test runs it in the slow part

WRITERS = 2
ACKS_BEFORE_KILL = 6
GAP_S = 1.0  # how long the catalog has no writable database (a failover manager's reaction time)
ACKS_AFTER_PROMOTION = 6


def test_failover_to_a_synchronous_standby_loses_no_acknowledged_commit(settings, tmp_path):
    root = Path(tempfile.mkdtemp(prefix="growler-failover-"))
    database = start_replicated(root)
    server = None
    try:
        # one worker: both of its pools (threads' and event loop's) must find the new primary
        server = start_server(settings, tmp_path, {"GROWLER_DATABASE_URL": database.url, "GROWLER_WORKERS": "1"})
        prefix = f"{server.url}/v1/{server.warehouse}"
        namespace = f"failover_{uuid.uuid4().hex[:8]}"
        assert httpx.post(f"{prefix}/namespaces", json={"namespace": [namespace]}).status_code == 200
        assert httpx.post(f"{prefix}/namespaces/{namespace}/tables", json=create_request("t")).status_code == 200
        url = f"{prefix}/namespaces/{namespace}/tables/t"
        booted = server.log().count("Booting worker")

        acknowledged: list[str] = []
        promoted_at: list[int] = []  # len(acknowledged) when the standby was promoted
        gap: list[tuple[int, str]] = []  # (status, error type) of the refusals
        unexpected: list[str] = []
        stop = threading.Event()

        def write(writer: int) -> None:
            with httpx.Client(timeout=30) as client:
                n = 0
                while not stop.is_set():
                    key = f"w{writer}-{n}"
                    n += 1
                    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {key: "1"}}]}
                    try:
                        answer = client.post(url, json=body)
                    except httpx.HTTPError as exc:
                        unexpected.append(f"{key}: {type(exc).__name__}")
                        continue
                    if answer.status_code == 200:
                        acknowledged.append(key)
                        continue
                    kind = answer.json().get("error", {}).get("type", "")
                    if answer.status_code == 503 and answer.headers.get("Retry-After"):
                        gap.append((503, kind))
                    elif kind == "CommitStateUnknownException":
                        gap.append((answer.status_code, kind))
                    else:
                        unexpected.append(f"{key}: {answer.status_code} {answer.text[:200]}")
                    time.sleep(0.05)  # as a client backs off

        def until(condition, timeout_s: float) -> bool:
            deadline = time.monotonic() + timeout_s
            while not condition():
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
            return True

        threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
        for thread in threads:
            thread.start()
        try:
            assert until(lambda: len(acknowledged) >= ACKS_BEFORE_KILL, 60)
            database.kill_primary()
            assert until(lambda: len(gap) > 0, 30), "no request saw the primary gone"
            time.sleep(GAP_S)
            database.promote_standby()
            promoted_at.append(len(acknowledged))
            # recovered by itself: commits succeed again, on the same processes
            assert until(lambda: len(acknowledged) >= promoted_at[0] + ACKS_AFTER_PROMOTION, 60), server.log()[-3000:]
        finally:
            stop.set()
            for thread in threads:
                thread.join(60)
        assert not unexpected, unexpected[:10]
        assert server.process.poll() is None
        assert server.log().count("Booting worker") == booted  # no worker was replaced
        # every acknowledged commit is in the promoted database, and Growler serves it: this first
        # read goes through the event loop's pool, whose connections all died with the primary
        loaded = httpx.get(url, timeout=30)
        assert loaded.status_code == 200, loaded.text
        properties = loaded.json()["metadata"]["properties"]
        missing = [key for key in acknowledged if key not in properties]
        assert not missing, missing
        with psycopg.connect(database.standby.url, autocommit=True) as conn:
            assert not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
    finally:
        if server is not None:
            stop_server(server)
        database.stop()
        remove(root)
