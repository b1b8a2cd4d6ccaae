"""Deletes the objects of tables dropped with ``purgeRequested=true``, in the background.

dropTable only records a purge job (in the same transaction that removes the table), so it
answers at once however large the table is. Every worker process runs one purger thread; jobs
are claimed with a lease (``FOR UPDATE SKIP LOCKED`` + ``not_before``), so an interrupted purge
is picked up again when the lease runs out, and two workers never purge the same table at once.
"""

from __future__ import annotations

import logging
import threading
from itertools import islice
from typing import Any

from storage.objects import ObjectStore
from storage.repository import CatalogRepository

log = logging.getLogger(__name__)

LEASE_SECONDS = 300
DELETE_BATCH = 500


class Purger:
    def __init__(
        self,
        repository: CatalogRepository,
        objects: ObjectStore,
        wake: threading.Event,
        idle_seconds: float = 10.0,
    ) -> None:
        self.repository = repository
        self.objects = objects
        self.wake = wake
        self.idle_seconds = idle_seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="growler-purger", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                while self.run_once():
                    pass
            except Exception as exc:  # noqa: BLE001 - the database may be down; try again later
                log.warning("purger idle after error: %s", type(exc).__name__)
            self.wake.wait(self.idle_seconds)
            self.wake.clear()

    def run_once(self) -> bool:
        """Purge one due job; False when there was none."""
        job = self.repository.claim_purge_job(LEASE_SECONDS)
        if job is None:
            return False
        try:
            deleted = self._purge(job)
        except Exception as exc:  # noqa: BLE001 - leave the job for the next lease
            log.warning("purge of %s failed, will retry: %s", job["location"], type(exc).__name__)
            self.repository.fail_purge_job(job["id"], f"{type(exc).__name__}: {exc}")
            return True
        self.repository.finish_purge_job(job["id"])
        log.info("purged %d objects under %s", deleted, job["location"])
        return True

    def _purge(self, job: dict[str, Any]) -> int:
        deleted = 0
        location = job["location"].rstrip("/")
        # Never delete under a location a live table or view still uses (a re-registration,
        # or a table created inside the dropped one's folder).
        if not self.repository.location_in_use(location):
            listing = iter(self.objects.list(location + "/"))
            while batch := list(islice(listing, DELETE_BATCH)):
                self.objects.delete(batch)
                deleted += len(batch)
        extra = [obj for obj in job["extra_objects"] if not obj.startswith(location + "/")]
        if extra:
            self.objects.delete(extra)
            deleted += len(extra)
        return deleted
