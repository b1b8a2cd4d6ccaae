"""loadTable answers of federated warehouses kept by a worker and validated before they are used
again (issue 50, "Caching, honestly"; docs/federation.md "Caching").

A worker keeps the remote's last answer for each table it loaded (bounded: ``KEPT_BYTES`` in all,
the least recently used dropped first, answers up to ``MAX_KEPT_BYTES`` each) and uses it in one of
two ways:

- **Validated** (every warehouse): the next load of the table sends the remote the answer's
  ``ETag`` as ``If-None-Match``; a ``304`` means the kept answer is the remote's current one, and
  the remote sent no metadata. A remote that gave no ETag is asked in full, as before.
- **Within the warehouse's ``cache-ttl-ms``** (0 by default: never): the kept answer is served
  without asking the remote, if the catalog's record of the table's version
  (storage/federated_versions.py, which every write through Growler moves in the transaction of
  its change event, on any worker, before the writer's client hears of it) still names the kept
  answer's metadata location. So no answer is older than a commit made through Growler; a change
  made on the remote behind Growler's back is seen once the TTL has passed.

Never kept: an answer carrying storage credentials (they expire, and a 304 says nothing of them).
A load with the client's own ``If-None-Match`` is the remote's to answer (its 304 is passed on).
What is kept is the remote's answer as checked (app/federation/answers.py), the same for every
caller: a caller's read restrictions are applied to it afterwards (app/federation/restricted.py).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.federation.remote import Answer

KEPT_BYTES = 32 * 1024 * 1024  # the answers a worker keeps, in all (their bodies; the parsed JSON about as much)
MAX_KEPT_BYTES = 1024 * 1024  # a larger answer is not kept
# Config keys of a load answer that look like a credential: the answer is not kept.
_SECRET_WORDS = ("secret", "token", "session", "sas", "access-key", "key-id", "password", "credential")

Key = tuple[int, tuple[str, ...], str]  # warehouse id, namespace, table


@dataclass(frozen=True)
class Kept:
    variant: tuple[str, str]  # the query and the access delegation the answer was asked with
    answer: Answer
    confirmed_at: float  # when the remote last gave or confirmed it (monotonic)

    @property
    def etag(self) -> str | None:
        return self.answer.headers.get("ETag")

    @property
    def metadata_location(self) -> str | None:
        data = self.answer.data
        location = data.get("metadata-location") if isinstance(data, dict) else None
        return location if isinstance(location, str) else None


def keepable(answer: Answer) -> bool:
    """A 200 loadTable answer without storage credentials, small enough to keep."""
    data = answer.data
    if answer.status != 200 or not isinstance(data, dict) or len(answer.body) > MAX_KEPT_BYTES:
        return False
    if data.get("storage-credentials"):
        return False
    config = data.get("config")
    if isinstance(config, dict) and any(word in str(key).lower() for key in config for word in _SECRET_WORDS):
        return False
    return isinstance(data.get("metadata-location"), str)


class LoadedTables:
    """A worker's kept loadTable answers: one per table (the last variant asked), least recently
    used dropped first once their bodies pass ``budget`` bytes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, budget: int = KEPT_BYTES) -> None:
        self._kept: OrderedDict[Key, Kept] = OrderedDict()
        self._bytes = 0
        self._budget = budget
        self._clock = clock
        self._lock = threading.Lock()

    def kept(self, key: Key, variant: tuple[str, str]) -> Kept | None:
        with self._lock:
            found = self._kept.get(key)
            if found is None or found.variant != variant:
                return None
            self._kept.move_to_end(key)
            return found

    def fresh(self, kept: Kept, ttl_s: float) -> bool:
        return ttl_s > 0 and self._clock() - kept.confirmed_at < ttl_s

    def keep(self, key: Key, variant: tuple[str, str], answer: Answer) -> None:
        """The remote's full answer: kept if it may be (``keepable``), else the table's is dropped."""
        if keepable(answer):
            self._put(key, Kept(variant, answer, self._clock()))
        else:
            self.forget(key)

    def confirmed(self, key: Key, kept: Kept) -> None:
        """The remote answered 304 to the kept answer's ETag: it is current as of now."""
        self._put(key, Kept(kept.variant, kept.answer, self._clock()))

    def forget(self, key: Key) -> None:
        with self._lock:
            gone = self._kept.pop(key, None)
            if gone is not None:
                self._bytes -= len(gone.answer.body)

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def _put(self, key: Key, kept: Kept) -> None:
        with self._lock:
            gone = self._kept.pop(key, None)
            if gone is not None:
                self._bytes -= len(gone.answer.body)
            self._kept[key] = kept
            self._bytes += len(kept.answer.body)
            while self._bytes > self._budget and self._kept:
                _, oldest = self._kept.popitem(last=False)
                self._bytes -= len(oldest.answer.body)


def loaded_key(warehouse_id: int, namespace: tuple[str, ...], table: str) -> Key:
    return (warehouse_id, namespace, table)


def variant_of(query: str, headers: dict[str, Any]) -> tuple[str, str]:
    return (query, str(headers.get("x-iceberg-access-delegation") or ""))
