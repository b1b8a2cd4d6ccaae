"""A worker over its memory limit hands over to a warm successor: no request refused, none waits
for a worker to start (app/edge/recycling.py; issue 40).

The server runs with ``GROWLER_MAX_WORKER_RSS_MB=1``: both workers are above it as soon as they
look, so each hands over to a successor - the recycle is forced, not waited for. The successors
are above it too from the start, which tells them the limit is below what a worker needs: they
say so and stay (one round of replacements, never a loop). Meanwhile clients send requests
without a pause. What the log shows
follows from the order the guard keeps (each step waits for the previous one in another
process), so the assertions hold whatever the scheduler does:

- a leaving worker asks for its successor before the master boots it;
- the successor has built and warmed its app (uvicorn's "Application startup complete", logged
  after the lifespan's warm-up) before the leaving worker hands over;
- the leaving worker shuts down only after it handed over;
- the master starts exactly one worker per hand-over (no replacement of its own on top), and ends
  with the configured two.
"""

from __future__ import annotations

import re
import threading

import httpx

from tests.integration.conftest import start_server, stop_server
from tests.integration.proc_support import children, wait_for

CLIENTS = 4
HAND_OVERS = 2

_LINE = re.compile(r"^\[[^\]]*\] \[(\d+)\] \[\w+\] (.*)$")
_WARMED = re.compile(r" app\.edge\.factory: (worker warmed up in \d+ ms \(pid (\d+);.*)$")


def events(log: str) -> list[tuple[int, str]]:
    """(pid, message) of gunicorn's and uvicorn's lines and the app's warm-up line, in the order
    they were written."""
    found = []
    for line in log.splitlines():
        match, warmed = _LINE.match(line), _WARMED.search(line)
        if match:
            found.append((int(match.group(1)), match.group(2)))
        elif warmed:
            found.append((int(warmed.group(2)), warmed.group(1)))
    return found


def test_a_worker_over_its_memory_limit_hands_over_without_refusing_or_stalling(settings, app, tmp_path):
    server = start_server(settings, tmp_path, {"GROWLER_WORKERS": "2", "GROWLER_MAX_WORKER_RSS_MB": "1"})
    stop = threading.Event()
    statuses: list[int] = []
    failures: list[str] = []

    def client() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            while not stop.is_set():
                try:
                    statuses.append(http.get("/v1/config").status_code)
                except httpx.HTTPError as exc:  # a refused or reset connection
                    failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client) for _ in range(CLIENTS)]
    try:
        for thread in threads:
            thread.start()
        wait_for(lambda: server.log().count("Worker exiting") == HAND_OVERS, "both workers to hand over and exit", 120)
        wait_for(lambda: len(children(server.process.pid)) == 2, "the master to run two workers again", 30)
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
        log = server.log()
        stop_server(server)

    assert failures == []
    assert statuses and set(statuses) == {200}, sorted(set(statuses))

    lines = events(log)
    booted = [pid for _, message in lines for pid in re.findall(r"Booting worker with pid: (\d+)", message)]
    asked = [pid for pid, message in lines if "above GROWLER_MAX_WORKER_RSS_MB" in message]
    handed = [(index, pid) for index, (pid, message) in enumerate(lines) if "handing over" in message]
    assert len(handed) == len(asked) == HAND_OVERS
    assert sum("will not be replaced" in message for _, message in lines) == HAND_OVERS  # the successors
    for index, leaving in handed:
        asked_at = next(i for i, (pid, m) in enumerate(lines) if pid == leaving and "above GROWLER_MAX" in m)
        # a successor booted after the worker asked for it, and was warm before it handed over
        successors = {
            int(pid)
            for _, message in lines[asked_at:index]
            for pid in re.findall(r"Booting worker with pid: (\d+)", message)
        }
        warm = {pid for pid, message in lines[asked_at:index] if message == "Application startup complete."}
        assert successors & warm, f"worker {leaving} handed over before a successor was warm"
        warmed_up = {pid for pid, message in lines[asked_at:index] if message.startswith("worker warmed up")}
        assert successors & warm & warmed_up  # the app's own warm-up (its pools filled) ran in it first
        shut = next(i for i, (pid, m) in enumerate(lines) if pid == leaving and m == "Shutting down")
        assert shut > index  # it stopped only after its successor served
    # one worker started per hand-over asked for (plus the first two), none in their place
    assert len(booted) == 2 + HAND_OVERS
