"""Table maintenance: the commit trigger, the executor and the service.

The trigger is built before the catalog: the table service is handed its ``note`` as
``after_commit`` at construction; the executor gets the same trigger.
"""

from __future__ import annotations

from app.composition.storage import Foundation
from app.maintenance import MaintenanceService
from app.maintenance_runs import MaintenanceExecutor
from app.maintenance_trigger import CommitTrigger
from app.tables.service import TableService
from storage.maintenance_rows import MaintenanceRows
from storage.management_rows import ManagementRows


def build_maintenance(base: Foundation, tables: TableService, trigger: CommitTrigger) -> MaintenanceService:
    rows = MaintenanceRows(base.database)
    return MaintenanceService(
        MaintenanceExecutor(tables, rows, base.settings.maintenance_interval_s, trigger),
        rows,
        ManagementRows(base.database),
        authorizer=base.authorizer,
    )
