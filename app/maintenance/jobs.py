"""Maintenance runs as jobs (issue 49): a run asked for by hand is queued, and answered 202 at once.

Every worker of every replica runs a ``JobRunner``: a thread that claims the oldest queued job that
fits the limits on concurrent runs (overall and per warehouse, counted under one advisory lock in
``storage/maintenance_jobs.py``) and whose table no runner holds, and runs it under the table's
lease (``app/maintenance/lease.py``): the lease's renewal is the job's heartbeat. So the request
holds no connection or worker while a compaction runs; each table's run happens once across the
fleet; queued work spreads over whichever runners are free; and a job survives the instance that
queued it - any runner claims it. A runner that died mid-job stops renewing: once its lease ran
out, the next claim of the table (or housekeeping's sweep) puts the job back in the queue, at most
three attempts, then fails it (``storage.maintenance_rows.ABANDON_SET``). A rerun is safe: every
policy type plans again from the table as it is, and commits with its base asserted.

A cancel marks a queued job cancelled, or asks a running one to stop: the executor checks it at
each commit point (before a commit, between rewritten file groups, before each batch of deletes;
every few seconds while a Spark job runs, killing the job) and records the run 'cancelled', the
commit it had not made not made.

Settings (environment): ``GROWLER_MAINTENANCE_MAX_RUNS`` (overall, default 4),
``GROWLER_MAINTENANCE_MAX_RUNS_PER_WAREHOUSE`` (default 2), ``GROWLER_MAINTENANCE_JOB_POLL_S``
(how often an idle runner looks at the queue, default 2).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from app.maintenance.lease import ABANDONED, new_holder
from app.maintenance.runs import MaintenanceExecutor
from storage.maintenance_jobs import Limits, MaintenanceJobs

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobSettings:
    limits: Limits
    poll_s: float

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> JobSettings:
        total = _positive(env, "GROWLER_MAINTENANCE_MAX_RUNS", 4)
        per_warehouse = _positive(env, "GROWLER_MAINTENANCE_MAX_RUNS_PER_WAREHOUSE", 2)
        poll_s = float(env.get("GROWLER_MAINTENANCE_JOB_POLL_S", "") or 2.0)
        if not 0.05 <= poll_s <= 300:
            raise ValueError("GROWLER_MAINTENANCE_JOB_POLL_S must be between 0.05 and 300")
        return cls(Limits(total, min(per_warehouse, total)), poll_s)


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    text = env.get(name, "").strip()
    value = int(text) if text else default
    if not 1 <= value <= 1000:
        raise ValueError(f"{name} must be between 1 and 1000")
    return value


class JobRunner:
    """One thread per worker that claims queued jobs and runs them, one at a time."""

    def __init__(self, executor: MaintenanceExecutor, jobs: MaintenanceJobs, settings: JobSettings) -> None:
        self.executor = executor
        self.jobs = jobs
        self.settings = settings
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="maintenance-jobs", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop claiming; a job in progress finishes (or is taken over once its lease runs out)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def wake(self) -> None:
        """A job was queued in this worker: look at the queue now rather than at the next poll."""
        self._wake.set()

    def run_once(self) -> bool:
        """Claim one job and run it to its end; False when none could be claimed."""
        holder = new_holder()
        job = self.jobs.claim(holder, self.executor.lease_s, self.settings.limits, ABANDONED)
        if job is None:
            return False
        log.info("maintenance job %s: %s of table %s", job.run_id, job.policy_type, job.table.entry_id)
        self.executor.run_job(job, holder, self.jobs)
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                if self.run_once():
                    continue
            except Exception as exc:  # noqa: BLE001 - the database away: the next poll tries again
                log.warning("maintenance job runner: %s", type(exc).__name__)
            self._wake.wait(self.settings.poll_s)
            self._wake.clear()
