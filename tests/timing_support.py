"""How a test times work without depending on the machine's speed (issue 46).

A time limit in a test is a ratio between two measurements taken the same way in the same run,
never absolute seconds: a machine 2-4x slower, or another process taking the CPU, scales both
sides alike, so only a change in how the work grows can fail it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def cpu_s(work: Callable[[], Any], runs: int = 3) -> float:
    """The least CPU time of this process over ``runs`` calls of ``work``: CPU time does not count
    another process's, and the minimum skips a run that a context switch or a collection fell into."""
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        work()
        best = min(best, time.process_time() - started)
    return best
