"""Maintenance triggered after commits (issue 37), without a database round trip per commit.

The commit path (``TableCommitter.after_commit``) tells ``CommitTrigger.note`` the table's id, its
snapshot count and its new metadata's properties (those the commit has in hand; whether they set
``history.expire.*`` is maintenance's rule, read here) once a commit has landed: a counter in this
worker's memory, under a lock. When the rule says so (``app.rules.maintenance.past_commit_threshold``:
enough commits, or a long history, and ``COMMIT_TRIGGER_EVERY_S`` since the table was last made due)
the table is put on a short list. Housekeeping's next round (within its idle wait: 10 s) takes the
list, makes those tables due in PostgreSQL in one statement (``MaintenanceRows.mark_due``) and runs
them first, with the trigger ``commits``. A table configured by its ``history.expire.*`` properties
alone is made known to maintenance there (its schedule row written), so it is run as soon as a
table with an attached policy: the schedule's hourly discovery of such tables is not waited for.
A table without an enabled policy costs one look at its policies, then waits for the next threshold.

A commit past the threshold within ``COMMIT_TRIGGER_EVERY_S`` of the table's last look is not
forgotten: the table waits, and the first round after the interval makes it due, whether or not
another commit comes (a burst's last commits would otherwise wait for the schedule: hours).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from app.rules import maintenance as policy_rules

MAX_COUNTED = 10_000  # tables counted at once per worker; beyond, the counts start over


@dataclass
class _Count:
    commits: int = 0
    flagged_at: float = field(default_factory=lambda: float("-inf"))
    by_properties: bool = False  # its last commit's metadata sets history.expire.*


class CommitTrigger:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._counts: dict[int, _Count] = {}
        self._due: set[int] = set()
        self._waiting: set[int] = set()  # past the threshold, within the interval of their last look

    def note(self, entry_id: int, snapshots: int, properties: Mapping[str, str] | None = None) -> None:
        """A commit landed on the table (called by the commit path: memory only); ``properties``:
        its new metadata's, which may set ``history.expire.*`` (a snapshot-expiry policy of its own)."""
        by_properties = policy_rules.sets_expiry(properties or {})
        now = self._clock()
        with self._lock:
            count = self._counts.get(entry_id)
            if count is None:
                if len(self._counts) >= MAX_COUNTED:
                    self._counts.clear()
                    self._waiting.clear()
                count = self._counts[entry_id] = _Count()
            count.commits += 1
            count.by_properties = by_properties
            if policy_rules.past_commit_threshold(count.commits, snapshots):
                self._waiting.add(entry_id)
                self._flag_when_due(entry_id, count, now)

    def take(self) -> list[int]:
        """The tables made due since the last call (housekeeping's), the waiting ones included
        once their interval has passed."""
        now = self._clock()
        with self._lock:
            for entry_id in list(self._waiting):
                self._flag_when_due(entry_id, self._counts[entry_id], now)
            due, self._due = sorted(self._due), set()
        return due

    def by_properties(self, entry_ids: list[int]) -> list[int]:
        """Those of ``entry_ids`` whose last commit set ``history.expire.*`` (made known to
        maintenance when made due: ``MaintenanceRows.mark_due``)."""
        with self._lock:
            return [i for i in entry_ids if (count := self._counts.get(i)) is not None and count.by_properties]

    def _flag_when_due(self, entry_id: int, count: _Count, now: float) -> None:
        if now - count.flagged_at >= policy_rules.COMMIT_TRIGGER_EVERY_S:
            count.commits, count.flagged_at = 0, now
            self._waiting.discard(entry_id)
            self._due.add(entry_id)
