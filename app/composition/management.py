"""The management API's service and the housekeeper (handed every step it runs at construction)."""

from __future__ import annotations

from app.audit.service import AuditService
from app.composition.catalog import Catalog
from app.composition.storage import Foundation
from app.housekeeping import Housekeeper
from app.maintenance.service import MaintenanceService
from app.management.identities import Identities
from app.management.service import ManagementService
from app.restrictions.service import RestrictionService
from app.table_moves.copying import TableCopy
from app.table_moves.service import TableMoveService
from storage.audit import AuditRows
from storage.management_rows import ManagementRows
from storage.restriction_rows import RestrictionRows
from storage.table_moves import TableMoveRows


def build_management(base: Foundation) -> ManagementService:
    """The management API's service, composed of its principals' and roles' part (``Identities``)
    built first on the same rows, rights and page tokens."""
    rows = ManagementRows(base.database)
    identities = Identities(base.settings, rows, base.auth.principals, rights=base.rights, page_tokens=base.page_tokens)
    return ManagementService(
        base.settings,
        rows,
        identities,
        base.warehouses,
        rights=base.rights,
        page_tokens=base.page_tokens,
    )


def build_restrictions(base: Foundation) -> RestrictionService:
    """Read restrictions' management; the decisions read them with the grants (app/authorization.py)."""
    return RestrictionService(
        RestrictionRows(base.database),
        base.repository,
        base.warehouses,
        rights=base.rights,
    )


def build_table_moves(base: Foundation, catalog: Catalog) -> TableMoveService:
    """Moving tables home: the federation's remote load and drop, the tables' register."""
    return TableMoveService(
        TableMoveRows(base.database),
        catalog.federation,
        catalog.tables,
        base.warehouses,
        TableCopy(base.warehouses),
        catalog.namespaces,
        rights=base.rights,
    )


def build_audit(base: Foundation) -> AuditService:
    """The audit trail's query; the factory builds its writer on the same rows (app/edge/audit.py)."""
    settings = base.settings
    return AuditService(
        AuditRows(base.database), base.page_tokens, settings.audit_retention_days, recording=settings.audit_trail
    )


def build_housekeeper(
    base: Foundation, catalog: Catalog, maintenance: MaintenanceService, audit: AuditService
) -> Housekeeper:
    return Housekeeper(
        base.repository,
        base.objects,
        catalog.idempotency_keys,
        catalog.tables.purge_requested,
        expire_bin=catalog.recycle_bin.expire_due,
        events_retention_s=base.settings.events_retention_s,
        maintenance=maintenance.run_due,  # the executor's schedule (app/maintenance/service.py)
        expire_audit=audit.expire,
        mirror_events=catalog.event_mirror.run_due,  # the remotes' change feeds (app/federation/mirror.py)
    )
