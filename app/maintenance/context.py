"""The run going on in a thread, as the maintenance executor's guards see it (issue 49).

A run's lease (``app/maintenance/lease.py``: checked before each commit and delete), and for a
job its control (``RunControl``: a cancel stops it at its next commit point; its progress is
recorded) and its policy type (a revoked policy stops it). Context variables, so a hook called
mid-run (a test's barrier) and the Spark job's watcher thread (``contextvars.copy_context``) see
the same run.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from app.maintenance.lease import TableLease

# The lease of the run going on in this thread (checked before each commit and delete).
RUN_LEASE: ContextVar[TableLease | None] = ContextVar("maintenance_lease", default=None)


def current_lease() -> TableLease | None:
    """The lease of the run going on in this thread (what a hook called mid-run can look at)."""
    return RUN_LEASE.get()


class RunControl(Protocol):
    """What a job's runner gives the executor: whether the job was asked to stop, and where its
    progress goes (``storage.maintenance_jobs.MaintenanceJobs`` with the run's id)."""

    def cancel_requested(self, run_id: int) -> bool: ...

    def progress(self, run_id: int, progress: dict[str, Any]) -> None: ...

    # a cluster-mode Spark job's report channel (app/maintenance/spark.py ``JobReports``)
    def issue_report_token(self, run_id: int, token_hash: bytes) -> None: ...

    def job_result(self, run_id: int) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class RunContext:
    run_id: int
    policy_type: str
    control: RunControl | None


# The run going on in this thread: its policy type (a revoked policy stops it) and, for a job,
# its control (a cancel stops it; its progress is recorded).
CURRENT_RUN: ContextVar[RunContext | None] = ContextVar("maintenance_run", default=None)


class RunCancelled(Exception):
    """A cancel asked the run to stop: it stops at its next commit point, the commit not made."""
