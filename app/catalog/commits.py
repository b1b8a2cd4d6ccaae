"""The commit loop of tables and views, once: write the new metadata file, swap the pointer, retry
after a lost race, tell the outcome after a broken connection, clean up.

A service composes these parts; nothing here calls back into it:

- ``MetadataFiles`` writes metadata objects (recorded as pending, durably, before they are
  written) while the database step that makes them current runs, and deletes the ones no commit
  points to;
- ``CommitLoop.publish`` writes the next versions of one or more entries and compare-and-sets
  their pointers in one transaction; it answers False, the files gone, when a concurrent commit
  won. After a broken connection it asks the database whether the swap took effect;
- ``CommitLoop.run`` repeats an attempt (read, check the requirements, apply, publish) until
  one wins, with jittered backoff, a bounded number of times.

The service's attempt is the part that differs: how the next metadata is prepared from the row.
"""

from __future__ import annotations

import contextvars
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from app.ground.errors import AlreadyExists, CommitFailed, CommitStateUnknown, ServiceUnavailable
from app.ground.locations import InvalidLocation, Location
from app.rules.metadata_files import encode_metadata
from storage.entries import CommitOutcomeUnknown, MetadataSwap
from storage.events import ChangeEvent
from storage.objects import ObjectStore
from storage.placement import Claim
from storage.repository import CatalogRepository
from storage.rows import EntryRow

log = logging.getLogger(__name__)

# Bounded server-side retries of a commit whose requirements still hold after a lost race.
MAX_COMMIT_ATTEMPTS = 12
# Threads per service writing metadata files while their commits run (see MetadataFiles.commit_with).
WRITER_THREADS = 8
T = TypeVar("T")


def backoff(attempt: int) -> None:
    """Full jitter, capped: concurrent losers spread out instead of colliding again."""
    time.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))


class CommitLanes:
    """Commits to one table from threads of this worker take turns.

    They would all prepare and write a metadata file, and all but one would lose the
    compare-and-set and delete theirs. Taking turns, the next one starts from the version the
    previous one wrote: it either applies cleanly or fails its requirements at once, without
    writing. Commits from other workers still race through the compare-and-set, which is what
    makes them safe; this only saves the work a lost race would waste. Locks are striped: two
    tables sharing a stripe only wait for each other.
    """

    def __init__(self, stripes: int = 64) -> None:
        self._locks = [threading.Lock() for _ in range(stripes)]

    def lane(self, key: tuple[Any, ...]) -> threading.Lock:
        return self._locks[hash(key) % len(self._locks)]


class MetadataFiles:
    """Metadata objects written all or none, and deleted when no commit points to them."""

    def __init__(self, repository: CatalogRepository, objects: ObjectStore) -> None:
        self.repository = repository
        self.objects = objects
        # Threads start on first use (after the fork): one per commit writing at the same time.
        self._writers = ThreadPoolExecutor(max_workers=WRITER_THREADS, thread_name_prefix="metadata-write")

    def commit_with(self, files: list[tuple[str, str]], commit: Callable[[Callable[[], None]], bool]) -> bool:
        """Write the files while ``commit`` runs the database step that makes them current.

        The files are recorded as pending (durably) first; then they are written in a thread
        while ``commit`` sends its statements. ``commit`` gets ``written``, which waits for the
        files (raising the write's error), and must call it before it commits: nothing points to
        a file that is not there. The write and the database's work overlap instead of adding
        up - at 4,000 snapshots a 1.4 MB PUT and a 1.4 MB row are a dozen milliseconds each.

        Answers what ``commit`` answered (whether it committed). When it did not - it answered
        False, or raised - the files are deleted once the write has ended, never during it; the
        write's own error wins over the step's, as it did when the write came first. Only
        CommitStateUnknown keeps them: the catalog may point to them now. Cleaning up waits until
        ``commit`` has returned its connection to the pool.
        """
        locations = [location for location, _ in files]
        parsed = [Location.parse(location, "metadata file location") for location in locations]
        self.repository.record_pending(locations)
        written: list[str] = []
        writing = self._writers.submit(contextvars.copy_context().run, self._write_all, files, parsed, written)
        try:
            committed = commit(writing.result)
        except CommitStateUnknown:
            raise
        except BaseException:
            self._clean_up(files, written, writing.exception())  # waits for the write to end
            raise
        if not committed:
            self._clean_up(files, written, writing.exception())
        return committed

    def _write_all(self, files: list[tuple[str, str]], parsed: list[Location], written: list[str]) -> None:
        for (location, text), target in zip(files, parsed, strict=True):
            self.objects.write_new(target, encode_metadata(text, location))
            written.append(location)

    def _clean_up(self, files: list[tuple[str, str]], written: list[str], failure: BaseException | None) -> None:
        """Delete what this request wrote, and raise the write's error if it failed.

        The file whose write failed goes too - its outcome is unknown, but the (fresh, uuid) name
        is ours - unless the store said the name was already taken (someone else's object).
        """
        if failure is None:
            self.forget([location for location, _ in files])
            return
        unwritten = [location for location, _ in files if location not in written]
        failed = unwritten[:1] if not isinstance(failure, AlreadyExists) else []
        self.repository.settle_pending([location for location in unwritten if location not in failed])
        self.forget([*written, *failed])
        raise failure

    def forget(self, locations: list[str]) -> None:
        """Best-effort cleanup of files no commit points to; what fails here the sweeper reclaims."""
        if not locations:
            return
        try:
            parsed = []
            for location in locations:
                try:
                    parsed.append(Location.parse(location, "metadata file location"))
                except InvalidLocation:
                    log.warning("not deleting an object whose location is not valid: %r", location[:200])
            if parsed:
                self.objects.delete(parsed)
            self.repository.settle_pending(locations)
        except Exception as exc:  # noqa: BLE001 - cleanup must not turn a result into an error
            log.warning("could not delete %d unreferenced metadata files: %s", len(locations), type(exc).__name__)


@dataclass(frozen=True)
class NewVersion:
    """One entry's next metadata: the row it was read from, where the new file goes, its text,
    and the entry's (table's or view's) location after the commit."""

    row: EntryRow
    location: str
    text: str
    entry_location: str
    placed: Claim | None = None  # what it newly owns when it moves (Entries.moved)
    data_path: str | None = None  # a table's data path after the commit (app/rules/table/files.py)
    refused_when_protected: str | None = None  # the action a protection mark refuses (MetadataSwap's)


class CommitLoop:
    """Publish new versions by compare-and-set; run attempts until one wins.

    ``logged_files`` lists the metadata files a stored document names as its predecessors
    (a table's ``metadata-log``); with it, the outcome of a swap whose connection broke can be
    told even when the pointer has moved on since. Views have no such log: their outcome is
    then unknown (CommitStateUnknown), and the client must not clean up.
    """

    def __init__(
        self,
        repository: CatalogRepository,
        files: MetadataFiles,
        *,
        kind: str,
        logged_files: Callable[[EntryRow], list[str]] | None = None,
    ) -> None:
        self.repository = repository
        self.files = files
        self.kind = kind
        self.logged_files = logged_files

    def run(self, attempt: Callable[[], T | None], what: str, on_retry: Callable[[], None] = lambda: None) -> T:
        """Run optimistic attempts until one wins the compare-and-set (None = lost the race)."""
        for number in range(MAX_COMMIT_ATTEMPTS):
            outcome = attempt()
            if outcome is not None:
                return outcome
            on_retry()
            backoff(number)  # then re-read, re-check the requirements, re-apply
        raise CommitFailed(f"Commit to {what} lost {MAX_COMMIT_ATTEMPTS} races with concurrent writers; retry")

    def publish(self, versions: list[NewVersion], events: Sequence[ChangeEvent]) -> bool:
        """Write the new files and swap every pointer in one transaction, with the change's events.

        False, with the new files deleted (and no event), when a concurrent commit won the
        compare-and-set.
        """
        swaps = [
            MetadataSwap(
                v.row.id,
                v.row.metadata_location,
                v.location,
                v.text,
                v.entry_location,
                v.placed,
                new_data_path=v.data_path,
                refused_when_protected=v.refused_when_protected,
            )
            for v in versions
        ]
        files = [(version.location, version.text) for version in versions]
        return self.files.commit_with(files, lambda written: self._swap(swaps, written, events))

    def _swap(self, swaps: list[MetadataSwap], written: Callable[[], None], events: Sequence[ChangeEvent]) -> bool:
        try:
            return self.repository.swap_metadata(swaps, before_commit=written, events=events)
        except CommitOutcomeUnknown:
            return self._outcome_after_failure(swaps)

    def _outcome_after_failure(self, swaps: list[MetadataSwap]) -> bool:
        """The connection broke after the swap was sent: look whether it took effect.

        The swaps are one transaction, so the first one tells for all. Only when the database
        cannot be asked either is the outcome unknown to us - and then the client must not
        clean up, which is what CommitStateUnknown tells it.
        """
        swap = swaps[0]
        try:
            current = self.repository.current_metadata_location(swap.entry_id)
            if current in (swap.new_location, swap.expected_location):
                return current == swap.new_location
            if self.logged_files is None:
                row = None
            else:
                row = self.repository.load_entry_by_id(swap.entry_id)
        except ServiceUnavailable as exc:
            raise CommitStateUnknown(
                "The catalog database failed while the commit was being applied; its outcome is unknown"
            ) from exc
        if self.logged_files is None:
            if current is None:
                return False
            raise CommitStateUnknown(
                f"The {self.kind} changed while the commit was being applied; its outcome is unknown"
            )
        return row is not None and swap.new_location in self.logged_files(row)
