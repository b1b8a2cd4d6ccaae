"""``Services``: everything a handler, the console or a tool reaches, typed, in one object.

The composition root builds it once; the dispatcher hands it to every handler as its
``services`` argument, and the console, the probes and tools find it under one key of the Flask
app's ``extensions`` (``services_of``, ``app.edge.context.services()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.audit.service import AuditService
from app.authorization import Authorizer
from app.event_sinks.service import EventSinks
from app.events.feed import EventFeed
from app.federation.service import FederationService
from app.functions import FunctionService
from app.idempotency import IdempotencyService
from app.maintenance.service import MaintenanceService
from app.management.service import ManagementService
from app.namespaces.service import NamespaceService
from app.planning.service import PlanningService
from app.previews.service import PreviewService
from app.protection.service import ProtectionService
from app.publisher.service import Publisher
from app.recycle_bin.service import RecycleBinService
from app.restrictions.service import RestrictionService
from app.storage_access.signing import RemoteSigner
from app.table_moves.service import TableMoveService
from app.tables.service import TableService
from app.views.service import ViewService

SERVICES = "growler.services"  # the one key of flask_app.extensions


@dataclass(frozen=True)
class Services:
    """One field per capability, each the one public service class of its app/ package (the field
    names the package, ``signer`` excepted: app/storage_access; the flat modules app/functions.py,
    app/idempotency.py; tests/unit/test_layers_services.py holds one service class a package)."""

    namespaces: NamespaceService  # namespaces, config, the warehouse directory
    tables: TableService
    views: ViewService
    functions: FunctionService
    planning: PlanningService  # scan planning
    signer: RemoteSigner  # remote signing (app/storage_access)
    idempotency: IdempotencyService
    recycle_bin: RecycleBinService
    protection: ProtectionService  # protection marks
    management: ManagementService
    maintenance: MaintenanceService
    events: EventFeed  # the change feed
    event_sinks: EventSinks
    publisher: Publisher  # push delivery (a loop, started and stopped with the worker)
    previews: PreviewService  # the console's data preview
    federation: FederationService  # federated warehouses: the dispatcher's call stage forwards to their remotes
    audit: AuditService  # the audit trail's query (its writer is the edge's: app/edge/audit.py)
    table_moves: TableMoveService  # moving tables home from federated warehouses
    restrictions: RestrictionService  # read restrictions and trusted engines (their decisions: the authorizer's)
    authorizer: Authorizer
    endpoints: list[str]  # what getConfig advertises
    console_oidc: bool  # True: the console signs in through the IdP too
    namespace_separator: str  # the advertised one (URL-encoded): handlers parse path namespaces with it


def services_of(flask_app: Any) -> Services:
    """The services of a Flask app the composition root built."""
    return flask_app.extensions[SERVICES]
