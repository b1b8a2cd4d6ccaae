"""A worker starts serving even when PostgreSQL is down, and gets ready once it is back.

Before serving, a worker applies the migrations and makes sure the default warehouse exists. If
PostgreSQL cannot be reached then (it is restarting while gunicorn replaces a worker, or it is
not up yet), raising would stop the worker with gunicorn's boot error, which takes the whole
gunicorn master down. Instead the worker tries for ``first_wait_s``, then serves at once and
keeps trying in a thread with growing delays; until it succeeds every request except the
liveness and metrics endpoints gets 503 + Retry-After (so ``/readyz`` keeps the worker out of a
load balancer), and ``/healthz`` says the process is alive.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from app.edge.http import raw_headers, send_response
from app.ground.errors import ServiceUnavailable

log = logging.getLogger(__name__)

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 15.0
# Served before the catalog is ready: they touch no dependency.
_ALWAYS_SERVED = frozenset({"/healthz", "/metrics"})


class Startup:
    """Runs ``steps`` in order until all succeed once, retrying with exponential backoff."""

    def __init__(self, steps: list[Callable[[], object]]) -> None:
        self.steps = steps
        self.ready = False
        self._done = 0  # steps that succeeded (each runs until it does once)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self, first_wait_s: float) -> bool:
        """Try for up to ``first_wait_s``; if not ready by then, go on trying in the background."""
        deadline = time.monotonic() + first_wait_s
        delay = FIRST_DELAY_S
        while not self._attempt():
            if time.monotonic() + delay > deadline:
                log.warning("catalog database unreachable at start-up: serving 503 until it is back")
                self._thread = threading.Thread(target=self._retry, args=(delay,), name="growler-startup", daemon=True)
                self._thread.start()
                return False
            time.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_S)
        return True

    def stop(self) -> None:
        self._stop.set()

    def _retry(self, delay: float) -> None:
        while not self._stop.wait(delay):
            if self._attempt():
                log.info("catalog database reachable: worker ready")
                return
            delay = min(delay * 2, MAX_DELAY_S)

    def _attempt(self) -> bool:
        while self._done < len(self.steps):
            try:
                self.steps[self._done]()
            except Exception as exc:  # noqa: BLE001 - any failure means "not yet"
                log.warning("start-up step failed, will retry: %s", type(exc).__name__)
                return False
            self._done += 1
        self.ready = True
        return True


class StartupGate:
    """503 + Retry-After for every request (but /healthz and /metrics) until ``Startup`` is ready."""

    def __init__(self, app: ASGIApp, *, startup: Startup) -> None:
        self.app = app
        self.startup = startup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.startup.ready or scope["type"] != "http" or scope["path"] in _ALWAYS_SERVED:
            await self.app(scope, receive, send)
            return
        error = ServiceUnavailable("The catalog is starting and its database is unavailable, retry later")
        await send_response(send, 503, json.dumps(error.body()).encode(), raw_headers(error.headers()))
