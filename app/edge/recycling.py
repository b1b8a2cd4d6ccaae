"""Replacing a worker whose memory grew, without a moment of lost capacity (issue 40).

Gunicorn's own recycling (``max_requests``) replaces a worker after a number of requests: the
worker stops accepting, drains and exits, and only then does the master fork its successor, which
imports and builds the app (about 1.5 s of CPU) before it serves. Under load every worker reaches
the count at about the same time, so for a second or two nobody accepted at all: p99 of 1-3 s
with requests that waited for a worker. And the count measured nothing: a worker's memory stays
flat over long mixed runs (docs/operations.md, "Worker recycling"), so a count bounded no leak.

So the shipped guard watches what recycling is for, the worker's resident memory
(``GROWLER_MAX_WORKER_RSS_MB``), and hands over in this order:

1. the worker above the limit marks itself leaving (``AcceptShares``) and asks the master for one
   more worker (SIGTTIN, gunicorn's "one more worker"); it goes on accepting and serving;
2. the successor imports, builds and warms the app, then enters the accept rotation;
3. once as many workers that are not leaving are in rotation as the master runs besides the
   leaving ones (its count, shared with the workers, follows TTIN/TTOU; a worker asking for a
   successor counts it at once), the leaving worker stops accepting, closes its connections after
   their responses and exits (``GrowlerServer``); the master's ``child_exit`` (gunicorn.conf.py)
   takes the extra worker back off its count, so no other worker is started or stopped.

Capacity never drops below the configured number of workers; for the successor's start-up there
is one worker more. Several workers crossing the limit together each wait for a successor of
their own (the condition counts workers not leaving). A successor already above the limit when it
first looks (a limit below what a fresh worker needs) says so and never hands over: one round of
replacements, never a loop of them.

Nothing here imports the app: gunicorn's master loads it with its configuration.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("uvicorn.error")

_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def resident_mb() -> float:
    """This process's resident memory (RSS), in MB: one small read of /proc."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE_MB


class MemoryGuard:
    """Decides, on each tick of the worker's server loop, whether the worker hands over now.

    ``wanted`` is how many workers must serve once the leaving ones are gone (the master's count
    less the workers leaving: ``AcceptShares.wanted``); ``serving_others`` counts the workers in
    rotation other than this one that are not leaving; ``mark_leaving`` tells the master (through
    shared memory) that this worker's exit is a hand-over; ``ask_successor`` asks the master for
    one more worker. Without them (a worker with no accept slot, or outside gunicorn), a worker
    above the limit simply exits, as gunicorn's recycling does.
    """

    def __init__(
        self,
        limit_mb: int,
        wanted: Callable[[], int],
        *,
        serving_others: Callable[[], int] | None,
        mark_leaving: Callable[[], None] | None,
        ask_successor: Callable[[], None],
        successor: bool = False,
        check_every_s: float = 1.0,
        measure: Callable[[], float] = resident_mb,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit_mb = limit_mb
        self.successor = successor
        self.wanted = wanted
        self.serving_others = serving_others
        self.mark_leaving = mark_leaving
        self.ask_successor = ask_successor
        self.check_every_s = check_every_s
        self.measure = measure
        self.clock = clock
        self.leaving = False
        self._next_check = 0.0
        self._first = True

    def hand_over_now(self) -> bool:
        """True once this worker should stop accepting and exit (its successor serves)."""
        if self.limit_mb <= 0:
            return False
        if self.leaving:
            if self.serving_others is None or self.serving_others() >= self.wanted():
                log.info("Successor accepting: handing over (pid %d)", os.getpid())
                return True
            return False
        now = self.clock()
        if now < self._next_check:
            return False
        self._next_check = now + self.check_every_s
        rss, first = self.measure(), self._first
        self._first = False
        if rss <= self.limit_mb:
            return False
        if first and self.successor:
            log.warning(
                "GROWLER_MAX_WORKER_RSS_MB=%d is below a fresh worker's memory (%.0f MB): this worker will "
                "not be replaced (pid %d)",
                self.limit_mb,
                rss,
                os.getpid(),
            )
            self.limit_mb = 0
            return False
        self.leaving = True
        log.info(
            "Worker memory %.0f MB above GROWLER_MAX_WORKER_RSS_MB=%d: starting a successor (pid %d)",
            rss,
            self.limit_mb,
            os.getpid(),
        )
        if self.serving_others is None or self.mark_leaving is None:
            return True  # nobody to wait for: exit, and the master replaces this worker afterwards
        self.mark_leaving()
        self.ask_successor()
        return False


def ask_master_for_one_more() -> None:
    """SIGTTIN to gunicorn's master: it forks one more worker at once."""
    os.kill(os.getppid(), signal.SIGTTIN)


def hand_over_finished(server: object, worker: object) -> None:
    """In the master, when a worker has exited (gunicorn.conf.py's ``child_exit``): a worker that
    left by hand-over takes back the extra worker it asked for, so none is started in its place.
    Only down to the configured count (a reload meanwhile resets the count to it)."""
    shares, slot = getattr(worker, "accept_shares", None), getattr(worker, "accept_slot", None)
    if shares is None or slot is None or not shares.is_leaving(slot):
        return
    shares.stay(slot)
    if server.num_workers > server.cfg.workers:
        server.num_workers -= 1
