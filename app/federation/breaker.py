"""A circuit breaker per remote catalog: a dead remote answers 503 at once instead of holding a
worker thread for a timeout on every request.

After ``threshold`` consecutive failures (a refused or timed-out connection, an answer that is
not the spec's shape, a 5xx) the breaker opens for ``cooldown_s``: every call is refused at once
with the seconds left (the Retry-After). When the cool-down ends one call is let through (half
open); its success closes the breaker, its failure opens it again for another cool-down. Only
counts and a clock: thread-safe, and the clock is a parameter so a test decides time.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable


class CircuitBreaker:
    def __init__(self, threshold: int = 5, cooldown_s: float = 30.0, clock: Callable[[], float] = time.monotonic):
        if threshold < 1 or cooldown_s <= 0:
            raise ValueError("a breaker needs a threshold of at least 1 and a positive cool-down")
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._failures = 0
        self._open_until: float | None = None
        self._trial = False  # half open: one call is on its way
        self._lock = threading.Lock()

    def refusal(self) -> int | None:
        """Seconds until a call may be tried again (the Retry-After), or None: go ahead. In the
        half-open state the first caller goes ahead and the others wait for its outcome."""
        with self._lock:
            if self._open_until is None:
                return None
            left = self._open_until - self._clock()
            if left > 0:
                return max(1, math.ceil(left))
            if self._trial:
                return 1
            self._trial = True
            return None

    def succeeded(self) -> None:
        with self._lock:
            self._failures = 0
            self._open_until = None
            self._trial = False

    def failed(self) -> None:
        with self._lock:
            self._failures += 1
            self._trial = False
            if self._failures >= self.threshold:
                self._open_until = self._clock() + self.cooldown_s

    @property
    def is_open(self) -> bool:
        with self._lock:
            return self._open_until is not None and self._open_until > self._clock()
