"""Table maintenance: the commit trigger, the executor, the job runner and the service.

The trigger is built before the catalog: the table service is handed its ``note`` as
``after_commit`` at construction; the executor gets the same trigger. Every run - asked for by
hand, or queued by housekeeping's due-work pass - is a job in PostgreSQL
(storage/maintenance_jobs.py) that this worker's runner - or any replica's - claims; the service
wakes this worker's runner when it queues one.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.composition.storage import Foundation
from app.maintenance.jobs import JobRunner, JobSettings
from app.maintenance.runs import MaintenanceExecutor
from app.maintenance.service import MaintenanceService
from app.maintenance.trigger import CommitTrigger
from app.tables.service import TableService
from storage.maintenance_jobs import MaintenanceJobs
from storage.maintenance_rows import MaintenanceRows


@dataclass(frozen=True)
class Maintenance:
    service: MaintenanceService
    runner: JobRunner  # started and stopped with the worker's other background threads


def build_maintenance(base: Foundation, tables: TableService, trigger: CommitTrigger) -> Maintenance:
    rows = MaintenanceRows(base.database)
    executor = MaintenanceExecutor(tables, rows, base.settings.maintenance_interval_s, trigger)
    jobs = MaintenanceJobs(base.database)
    job_settings = JobSettings.from_env()
    runner = JobRunner(executor, jobs, job_settings)
    service = MaintenanceService(
        executor,
        rows,
        rights=base.rights,
        jobs=jobs,
        wake=runner.wake,
    )
    return Maintenance(service, runner)
