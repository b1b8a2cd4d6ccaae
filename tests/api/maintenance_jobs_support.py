"""Helpers for maintenance runs as jobs (issue 49): a run asked for answers 202 and its URL; the
tests follow it there until it is finished, as a client does."""

from __future__ import annotations

import threading
import time
from typing import Any

FINISHED = ("succeeded", "failed", "skipped", "cancelled")


def queue_run(client: Any, runs_url: str, body: dict[str, Any]) -> str:
    """Ask for a run; answers the run's URL (Location)."""
    response = client.post(runs_url, json=body)
    assert response.status_code == 202, response.text
    assert response.json()["status"] == "queued", response.text
    location = response.headers["Location"]
    assert location.endswith(f"/runs/{response.json()['id']}"), location
    return location


def wait_finished(client: Any, location: str, timeout_s: float = 60.0) -> dict[str, Any]:
    """The run once it is finished (a job runner in the app claims it within its poll)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get(location)
        assert response.status_code == 200, response.text
        run = response.json()
        if run["status"] in FINISHED:
            return run
        assert time.monotonic() < deadline, f"the run never finished: {run}"
        threading.Event().wait(0.05)


def finished_run(client: Any, runs_url: str, body: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
    return wait_finished(client, queue_run(client, runs_url, body), timeout_s)
