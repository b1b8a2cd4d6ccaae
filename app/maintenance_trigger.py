"""Maintenance triggered after commits (issue 37), without a database round trip per commit.

The commit path (``TableService.after_commit``) tells ``CommitTrigger.note`` the table's id and its
snapshot count once a commit has landed: a counter in this worker's memory, under a lock. When the
rule says so (``app.rules.maintenance.due_after_commits``: enough commits, or a long history) the
table is put on a short list. Housekeeping's next round (within its idle wait: 10 s) takes the
list, makes those tables due in PostgreSQL in one statement (``MaintenanceRows.mark_due``) and runs
them first, with the trigger ``commits``. A table without an enabled policy costs one look at its
policies, then waits for the next threshold.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from app.rules import maintenance as policy_rules

MAX_COUNTED = 10_000  # tables counted at once per worker; beyond, the counts start over


@dataclass
class _Count:
    commits: int = 0
    flagged_at: float = field(default_factory=lambda: float("-inf"))


class CommitTrigger:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[int, _Count] = {}
        self._due: set[int] = set()

    def note(self, entry_id: int, snapshots: int) -> None:
        """A commit landed on the table (called by the commit path: memory only)."""
        now = time.monotonic()
        with self._lock:
            count = self._counts.get(entry_id)
            if count is None:
                if len(self._counts) >= MAX_COUNTED:
                    self._counts.clear()
                count = self._counts[entry_id] = _Count()
            count.commits += 1
            if policy_rules.due_after_commits(count.commits, snapshots, now - count.flagged_at):
                count.commits, count.flagged_at = 0, now
                self._due.add(entry_id)

    def take(self) -> list[int]:
        """The tables made due since the last call (housekeeping's)."""
        with self._lock:
            due, self._due = sorted(self._due), set()
        return due
