"""Background housekeeping, one thread per worker process.

- **Purges**: dropTable with ``purgeRequested=true`` only records a purge job (in the same
  transaction that removes the table), so it answers at once however large the table is. Jobs are
  claimed with a lease (``FOR UPDATE SKIP LOCKED`` + ``not_before``): an interrupted purge is
  picked up again when the lease runs out, and two workers never purge the same table at once.
- **Sweeping**: a metadata object is recorded as pending before it is written and settled in the
  transaction that commits it. A pending record older than any request can run names an object of
  a commit that never happened (the worker died, or its cleanup failed): it is deleted.
- **Idempotency keys** past their lifetime are forgotten, and so are **staged tables** whose
  create never committed (storage/staged.py): signing and STS stop serving their locations at
  expiry whether or not the row is gone yet. Metrics reports older than their retention go too
  (app/tables/metrics_reports.py), audit records older than ``GROWLER_AUDIT_RETENTION_DAYS``
  (app/audit/service.py), and change feed events older than ``GROWLER_EVENTS_RETENTION_S``
  (app/events/feed.py).
- **The recycle bin**: units whose retention ended are forgotten (app/recycle_bin/service.py), and the
  purge of their tables queued where it was asked at drop; a binned table's purge deletes only
  what it owns (every other entry, live or binned, is left alone) and forgets it once done.
- **Maintenance**: at most once a minute per worker, the tables whose maintenance schedule is due
  get their enabled policies queued as jobs (``app/maintenance/service.py``; once per table across
  the fleet), every round the tables this worker's commits made due (``app/maintenance/trigger.py``).
  The step only queues: the job runners of every worker of every replica run the jobs
  (``app/maintenance/jobs.py``), so a long compaction never holds up this thread's other steps.
- **Remote change feeds**: the events of federated warehouses whose remote serves the events
  endpoint, mirrored into the warehouse's stream (app/federation/mirror.py).

Every step, and every row within a step, fails on its own: a row that keeps failing is counted
(``growler_housekeeping_failures``), logged, and retried with a growing delay; the others go on.

``python -m app.housekeeping`` runs one round by hand, against the catalog of the GROWLER_* settings.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from itertools import islice
from typing import Any

from app.ground import metrics
from app.ground.locations import InvalidLocation, Location
from app.tables.metrics_reports import RETENTION_S as REPORT_RETENTION_S
from storage.events import EventRows
from storage.idempotency import IdempotencyRepository
from storage.objects import ObjectStore
from storage.repository import CatalogRepository
from storage.staged import StagedTables

log = logging.getLogger(__name__)

LEASE_SECONDS = 300
DELETE_BATCH = 500
# A commit's objects are settled within one request; gunicorn kills a request after 60 s.
PENDING_GRACE_SECONDS = 600
# A pending object or purge job that failed is retried after 1 min, 2 min, 4 min, ... at most daily.
RETRY_BASE_SECONDS = 60.0
RETRY_MAX_SECONDS = 86_400.0
# The maintenance step looks for due tables this often at most (its query reads every table row).
MAINTENANCE_EVERY_SECONDS = 60.0


class Housekeeper:
    def __init__(
        self,
        repository: CatalogRepository,
        objects: ObjectStore,
        idempotency: IdempotencyRepository,
        wake: threading.Event,
        idle_seconds: float = 10.0,
        expire_bin: Callable[[], int] | None = None,
        events_retention_s: float = 7 * 86_400,
        maintenance: Callable[[bool], int] | None = None,
        expire_audit: Callable[[], int] | None = None,
        mirror_events: Callable[[], int] | None = None,
    ) -> None:
        self.repository = repository
        self.events = EventRows(repository.db)
        self.events_retention_s = events_retention_s
        self.staged = StagedTables(repository.db)
        self.idempotency = idempotency
        self.objects = objects
        self.wake = wake
        self.idle_seconds = idle_seconds
        # the recycle bin's expiry (RecycleBinService.expire_due): forgets what outlived its
        # retention, queueing purges where they were asked; before the purges of the same round
        self.expire_bin = expire_bin or (lambda: 0)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # the maintenance schedule's due-work pass, which queues jobs (MaintenanceService.run_due;
        # None: a round by hand)
        self.maintenance = maintenance
        # the audit trail's retention (AuditService.expire: GROWLER_AUDIT_RETENTION_DAYS)
        self.expire_audit = expire_audit or (lambda: 0)
        # federated warehouses' remote change feeds mirrored into Growler's (EventMirror.run_due)
        self.mirror_events = mirror_events or (lambda: 0)
        self._maintenance_at = float("-inf")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="growler-housekeeping", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.run_round(PENDING_GRACE_SECONDS)  # never raises: each step guards itself
            self.wake.wait(self.idle_seconds)
            self.wake.clear()

    def run_round(self, pending_grace_s: float) -> dict[str, int]:
        """Every due purge, one sweep of stale pending objects, expired idempotency keys and stages.

        Each step runs on its own: one that fails (the database is down, a store refuses) is
        counted and logged, and the others still run. A step's count is -1 when it failed.
        """
        return {
            "expired-bin": self._step("expire-bin", self.expire_bin),
            "purges": self._step("purge", self._purge_due),
            "swept": self._step("sweep", lambda: self.sweep_pending(pending_grace_s)),
            "expired-keys": self._step("expire-keys", self.idempotency.delete_expired),
            "expired-stages": self._step("expire-stages", self.staged.delete_expired),
            "expired-reports": self._step(
                "expire-reports", lambda: self.repository.delete_old_metrics_reports(REPORT_RETENTION_S)
            ),
            "expired-events": self._step("expire-events", lambda: self.events.prune(self.events_retention_s)),
            "expired-audit": self._step("expire-audit", self.expire_audit),
            "maintenance-queued": self._step("maintenance", self._maintenance_due),
            "mirrored-events": self._step("mirror-events", self.mirror_events),
        }

    def _maintenance_due(self) -> int:
        """Every round: queue the jobs of the tables commits made due; once a minute also the
        schedule's full look. Returns the jobs queued."""
        if self.maintenance is None:
            return 0
        full = time.monotonic() - self._maintenance_at >= MAINTENANCE_EVERY_SECONDS
        if full:
            self._maintenance_at = time.monotonic()
        return self.maintenance(full)

    def _step(self, name: str, step: Callable[[], int]) -> int:
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - the database may be down; the next round retries
            metrics.HOUSEKEEPING_FAILURES.labels("round").inc()
            log.warning("housekeeping %s failed, will retry: %s", name, type(exc).__name__)
            return -1

    def _purge_due(self) -> int:
        purged = 0
        while self.run_once():
            purged += 1
        return purged

    def sweep_pending(self, grace_s: float) -> int:
        """Delete the objects of stale pending records, each on its own.

        A record whose object cannot be deleted is kept, with its failure counted and its next
        attempt put off (``RETRY_BASE_SECONDS`` doubling up to ``RETRY_MAX_SECONDS``), so it never
        blocks the records after it nor the rest of the round.
        """
        swept = 0
        while stale := self.repository.stale_pending(grace_s, DELETE_BATCH):
            current = self.repository.current_metadata_locations(stale)
            for location in stale:
                if location not in current:
                    parsed = _parsed([location])  # a location the model refuses was never written
                    try:
                        if parsed:
                            self.objects.delete(parsed)
                    except Exception as exc:  # noqa: BLE001 - any failure: keep the record, retry later
                        self._defer(location, exc)
                        continue
                    swept += 1
                self.repository.settle_pending([location])
        if swept:
            log.info("swept %d metadata objects of commits that never happened", swept)
        return swept

    def _defer(self, location: str, exc: Exception) -> None:
        metrics.HOUSEKEEPING_FAILURES.labels("sweep").inc()
        attempts = self.repository.defer_pending(
            location, f"{type(exc).__name__}: {exc}", RETRY_BASE_SECONDS, RETRY_MAX_SECONDS
        )
        log.warning(
            "could not sweep pending object %r (attempt %d), will retry later: %s",
            location[:300],
            attempts,
            type(exc).__name__,
        )

    def run_once(self) -> bool:
        """Purge one due job; False when there was none."""
        job = self.repository.claim_purge_job(LEASE_SECONDS)
        if job is None:
            return False
        try:
            deleted = self._purge(job)
        except Exception as exc:  # noqa: BLE001 - keep the job, retry it later (backoff)
            metrics.HOUSEKEEPING_FAILURES.labels("purge").inc()
            log.warning("purge of %s failed, will retry: %s", job["location"], type(exc).__name__)
            self.repository.fail_purge_job(
                job["id"], f"{type(exc).__name__}: {exc}", RETRY_BASE_SECONDS, RETRY_MAX_SECONDS
            )
            return True
        self.repository.finish_purge_job(job["id"])
        log.info("purged %d objects under %s", deleted, job["location"])
        return True

    def _purge(self, job: dict[str, Any]) -> int:
        """Delete what the dropped table owned, and nothing another entry could still need.

        Only objects under the table's location or its metadata directory are candidates (the
        listing of the location, and the metadata files recorded at drop time). A candidate is
        skipped when it lies at or under the location or metadata directory of any live table
        or view (in any warehouse: a re-registration, a table created inside the dropped one's
        folder), or when a live entry's metadata names it (current file, metadata log, manifest
        list). Locations are compared by segments (``app.ground.locations``), never as strings.
        """
        try:
            location = Location.parse(job["location"])
            own = [location]
            if job.get("metadata_path"):
                own.append(Location.parse(job["metadata_path"]))
        except InvalidLocation:
            log.warning("purge job %s names a location that is not valid; nothing deleted", job["id"])
            return 0
        extra = [obj for obj in _parsed(job["extra_objects"]) if not obj.is_within(location)]
        extra = [obj for obj in extra if any(obj.is_within(root) and obj != root for root in own)]
        me = job.get("bin_entry_id")  # a binned table's purge: every other entry, live or binned, stays
        live_roots = self.repository.entries_overlapping(own, exclude_id=me)
        protected_roots = []
        for entry in live_roots:
            protected_roots += _parsed([entry.location])
            protected_roots += [meta.parent for meta in _parsed([entry.metadata_location])]
            protected_roots += _parsed([entry.data_path] if entry.data_path else [])
        referenced: set[Location] = set()
        for root in own:
            referenced |= self.repository.references_under(root, exclude_id=me)

        def deletable(obj: Location) -> bool:
            return obj not in referenced and not any(obj.overlaps(root) for root in protected_roots)

        deleted = 0
        if not any(location.is_within(root) for root in protected_roots):
            listing = (obj for obj in self.objects.list(location) if deletable(obj))
            while batch := list(islice(listing, DELETE_BATCH)):
                self.objects.delete(batch)
                deleted += len(batch)
        extra = [obj for obj in extra if deletable(obj)]
        if extra:
            self.objects.delete(extra)
            deleted += len(extra)
        return deleted


def _parsed(texts: list[str]) -> list[Location]:
    """The locations the model accepts; the others are logged and left alone."""
    parsed = []
    for text in texts:
        try:
            parsed.append(Location.parse(text))
        except InvalidLocation:
            log.warning("leaving an object whose location is not valid: %r", str(text)[:200])
    return parsed


def main() -> None:
    """One housekeeping round against the configured catalog."""
    import argparse
    import json

    from app.ground.settings import Settings
    from app.namespaces.warehouses import WarehouseDirectory
    from storage.build import object_store, open_database

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--grace-seconds",
        type=float,
        default=PENDING_GRACE_SECONDS,
        help="age after which a pending object is an orphan (0 only when no commit is running)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    settings = Settings.from_env()
    database, repository = open_database(settings)
    objects = object_store(settings, WarehouseDirectory(repository, settings))  # each warehouse's own storage
    # the recycle bin's expiry runs in the workers' housekeeping (it plans purges with the tables'
    # service, which a server builds): a round by hand runs the bin's queued purges, not its expiry
    housekeeper = Housekeeper(repository, objects, IdempotencyRepository(database), threading.Event())
    try:
        print(json.dumps(housekeeper.run_round(args.grace_seconds)))
    finally:
        database.close()


if __name__ == "__main__":
    main()
