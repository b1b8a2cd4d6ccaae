"""The management API (openapi/management.yaml, under /management/v1): thin handlers.

Each parses its arguments, calls one ``ManagementService`` method (app/management/service.py, which
checks the caller and audits the change) - or one of ``RecycleBinService`` (app/recycle_bin/service.py) or
``ProtectionService`` (app/recycle_bin/protection.py) - and renders the answer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from app.catalog.paging import Page
from app.edge.context import namespace_arg, services
from app.edge.responses import HttpRequest, no_content
from app.events.sinks import EventSinks, dead_letter_view, sink_view
from app.maintenance.service import MaintenanceService
from app.management.principals import Credential
from app.management.service import ManagementService, grant_view, warehouse_view
from app.recycle_bin.protection import ProtectionService, mark_view
from app.recycle_bin.service import RecycleBinService, unit_view
from app.rules.requests.management import (
    AttachPolicyRequest,
    CreateEventSinkRequest,
    CreatePrincipalRequest,
    CreateRoleRequest,
    CreateWarehouseRequest,
    DetachPolicyRequest,
    GrantRequest,
    RunRequest,
    SecurableRef,
    UndropRequest,
    UpdateWarehouseRequest,
)


def service() -> ManagementService:
    return services().management


def recycle_bin() -> RecycleBinService:
    return services().recycle_bin


def protection() -> ProtectionService:
    return services().protection


def _listing(key: str, page: Page, render: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {key: [render(item) for item in page.items] if render else list(page.items)}
    if page.next_page_token:
        body["next-page-token"] = page.next_page_token
    return body


def _credential(credential: Credential) -> dict[str, str]:
    return {"client-id": credential.client_id, "client-secret": credential.secret}


# -- principals ----------------------------------------------------------------------------


def list_principals(pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("principals", service().list_principals(pageToken, pageSize)), 200


def create_principal(body: CreatePrincipalRequest):
    return _credential(service().create_principal(body)), 201


def get_principal(principal: str):
    return service().get_principal(principal), 200


def delete_principal(principal: str):
    service().delete_principal(principal)
    return no_content()


def rotate_principal_secret(principal: str):
    return _credential(service().rotate_principal(principal)), 200


# -- roles ---------------------------------------------------------------------------------


def list_roles(pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("roles", service().list_roles(pageToken, pageSize)), 200


def create_role(body: CreateRoleRequest):
    return service().create_role(body), 201


def get_role(role: str):
    return service().get_role(role), 200


def delete_role(role: str):
    service().delete_role(role)
    return no_content()


def list_role_members(role: str, pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("members", service().list_members(role, pageToken, pageSize)), 200


def assign_role(role: str, principal: str):
    service().assign_role(role, principal)
    return no_content()


def revoke_role(role: str, principal: str):
    service().revoke_role(role, principal)
    return no_content()


# -- grants --------------------------------------------------------------------------------


def list_grants_for_role(role: str, pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("grants", service().grants_of_role(role, pageToken, pageSize), grant_view), 200


def grant_privilege(role: str, body: GrantRequest):
    return grant_view(service().grant(role, body)), 201


def revoke_privilege(role: str, body: GrantRequest):
    service().revoke(role, body)
    return no_content()


def list_grants_on_securable(
    type: str,  # noqa: A002 - the query parameter's name
    warehouse: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
    pageToken: str | None = None,  # noqa: N803
    pageSize: int | None = None,  # noqa: N803
):
    securable = _queried(type, warehouse, namespace, name)
    return _listing("grants", service().grants_on(securable, pageToken, pageSize), grant_view), 200


def _queried(kind: str, warehouse: str | None, namespace: str | None, name: str | None) -> SecurableRef:
    """A securable named by a listing's query (its type checked by the yaml's enum)."""
    levels = namespace_arg(namespace) if namespace is not None else None
    return SecurableRef(type=kind, warehouse=warehouse, namespace=levels, name=name)


# -- warehouses ----------------------------------------------------------------------------


def list_warehouses(pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("warehouses", service().list_warehouses(pageToken, pageSize), warehouse_view), 200


def create_warehouse(body: CreateWarehouseRequest):
    return warehouse_view(service().create_warehouse(body)), 201


def get_warehouse(warehouse: str):
    return warehouse_view(service().get_warehouse(warehouse)), 200


def update_warehouse(warehouse: str, body: UpdateWarehouseRequest):
    return warehouse_view(service().update_warehouse(warehouse, body)), 200


def delete_warehouse(warehouse: str):
    service().delete_warehouse(warehouse)
    return no_content()


# -- recycle bin and protection (issue 35) -------------------------------------------------


def list_bin(warehouse: str, namespace: str | None = None, pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    levels = namespace_arg(namespace) if namespace is not None else None
    return _listing("units", recycle_bin().list_units(warehouse, levels, pageToken, pageSize), unit_view), 200


def undrop_bin_unit(warehouse: str, unit: int, body: UndropRequest | None = None):
    return unit_view(recycle_bin().undrop(warehouse, unit, body or UndropRequest())), 200


def purge_bin_unit(warehouse: str, unit: int):
    recycle_bin().purge_now(warehouse, unit)
    return no_content()


def drop_namespace_recursive(warehouse: str, namespace: str, recursive: bool, purgeRequested: bool = False):  # noqa: N803
    dropped = recycle_bin().drop_namespace(warehouse, namespace_arg(namespace), recursive, bool(purgeRequested))
    return (unit_view(dropped), 200) if dropped is not None else no_content()


def list_protections(warehouse: str):
    return {"marks": [mark_view(mark) for mark in protection().marks(warehouse)]}, 200


def protect_securable(warehouse: str, body: SecurableRef):
    protection().protect(warehouse, body)
    return no_content()


def unprotect_securable(warehouse: str, body: SecurableRef):
    protection().unprotect(warehouse, body)
    return no_content()


# -- the change feed's push sinks ----------------------------------------------------------


def sinks() -> EventSinks:
    return services().event_sinks


def list_event_sinks():
    return {"event-sinks": [sink_view(row) for row in sinks().list()]}, 200


def create_event_sink(body: CreateEventSinkRequest):
    return sink_view(sinks().create(body)), 201


def delete_event_sink(sink: str):
    sinks().delete(sink)
    return no_content()


def list_dead_letters(sink: str):
    return {"dead-letters": [dead_letter_view(row) for row in sinks().dead_letters(sink)]}, 200


def replay_dead_letters(sink: str):
    sinks().replay(sink)
    return no_content()


# -- maintenance (issue 37; app/maintenance/service.py) ---------------------------------------------


def maintenance() -> MaintenanceService:
    return services().maintenance


def list_maintenance_policies(
    type: str,  # noqa: A002 - the query parameter's name
    warehouse: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
):
    return {"policies": maintenance().attached(_queried(type, warehouse, namespace, name))}, 200


def attach_maintenance_policy(body: AttachPolicyRequest):
    return maintenance().attach(body), 200


def detach_maintenance_policy(body: DetachPolicyRequest):
    maintenance().detach(body)
    return no_content()


def get_effective_maintenance_policies(warehouse: str, namespace: str, table: str):
    return {"policies": maintenance().effective(warehouse, namespace_arg(namespace), table)}, 200


def list_maintenance_runs(warehouse: str, namespace: str, table: str, limit: int | None = None):
    return {"runs": maintenance().runs(warehouse, namespace_arg(namespace), table, limit)}, 200


def run_maintenance(warehouse: str, namespace: str, table: str, body: RunRequest, http: HttpRequest):
    run = maintenance().run(warehouse, namespace_arg(namespace), table, body)
    location = quote(f"{http.path.rstrip('/')}/{run['id']}")  # a namespace's %1F stays encoded
    return run, 202, {"Location": location}


def get_maintenance_run(warehouse: str, namespace: str, table: str, run: int):
    return maintenance().get_run(warehouse, namespace_arg(namespace), table, run), 200


def cancel_maintenance_run(warehouse: str, namespace: str, table: str, run: int):
    return maintenance().cancel_run(warehouse, namespace_arg(namespace), table, run), 200


def get_table_health(warehouse: str, namespace: str, table: str):
    return maintenance().health(warehouse, namespace_arg(namespace), table), 200
