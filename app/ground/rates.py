"""Rates: token buckets, the one mechanism for "at most so many a second" (metrics reports, failed
token requests). Per worker; the clock is injectable, so tests run on a frozen one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from app.ground.lru import LruCache

KEYS = 10_000  # buckets kept per worker (least recently used ones are forgotten: they were full)


class TokenBuckets:
    """A token bucket per key (``rate`` a second, up to ``burst``), least recently used ones forgotten."""

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self._clock = rate, burst, clock
        self._buckets: LruCache[str, tuple[float, float]] = LruCache(KEYS)
        self._lock = threading.Lock()

    def wait(self, key: str) -> float:
        """0 when ``key`` has a token now (none is taken); else the seconds until it will."""
        now = self._clock()
        with self._lock:
            tokens, then = self._buckets.get(key) or (self.burst, now)
        tokens = min(self.burst, tokens + (now - then) * self.rate)
        return 0.0 if tokens >= 1 else (1 - tokens) / self.rate

    def take(self, key: str) -> float:
        """0 when a token was taken; else the seconds until one will be there."""
        now = self._clock()
        with self._lock:
            tokens, then = self._buckets.get(key) or (self.burst, now)
            tokens = min(self.burst, tokens + (now - then) * self.rate)
            if tokens >= 1:
                self._buckets.put(key, (tokens - 1, now))
                return 0.0
            self._buckets.put(key, (tokens, now))
            return (1 - tokens) / self.rate

    def give_back(self, key: str) -> None:
        """Return a token taken for something that turned out not to count (up to the burst)."""
        now = self._clock()
        with self._lock:
            tokens, then = self._buckets.get(key) or (self.burst, now)
            self._buckets.put(key, (min(self.burst, tokens + (now - then) * self.rate + 1), now))
