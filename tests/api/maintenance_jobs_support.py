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


def only_this_apps_runner(service: Any) -> None:
    """Stop the job runners of every other app this test session built on the same database.

    Every app starts a runner (as every worker of every replica does), and tests that build an app
    of their own (a setting changed, a second client) leave theirs polling. Any runner may claim a
    job - that is the design - but the barriers and hooks these tests install are in one app's
    executor, so a job claimed by another app's runner would pass them by. The runner of a thread
    is the object whose ``_loop`` it runs; this app's is the one its service wakes.
    """
    own = service.wake.__self__
    for thread in threading.enumerate():
        runner = getattr(getattr(thread, "_target", None), "__self__", None)
        if thread.name == "maintenance-jobs" and runner is not None and runner is not own:
            runner.stop()
