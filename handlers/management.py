"""The management API (openapi/management.yaml, under /management/v1): thin handlers.

Each parses its arguments, calls one ``ManagementService`` method (app/management/service.py, which
checks the caller and audits the change; principals', roles' and members' methods are its part
``Identities``'s, app/management/identities.py, handed out as its own) - or one of
``RecycleBinService`` (app/recycle_bin/service.py) or ``ProtectionService``
(app/protection/service.py) - and renders the answer.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from app.catalog.paging import Page
from app.composition.services import Services
from app.edge.responses import HttpRequest, no_content
from app.event_sinks.service import dead_letter_view, sink_view
from app.management.principals import Credential
from app.management.service import grant_view, warehouse_view
from app.protection.service import mark_view
from app.recycle_bin.service import unit_view
from app.rules.contract.management import (
    MoveNamespaceRequest,
    MoveTableRequest,
    ReadRestrictionPolicy,
    ReadRestrictionTarget,
    TableMoveSource,
    TrustedEngineRequest,
)
from app.rules.identifiers import parse_namespace
from app.rules.requests.management import (
    AttachPolicyRequest,
    CreateEventSinkRequest,
    CreatePrincipalRequest,
    CreateRoleRequest,
    CreateWarehouseRequest,
    DetachPolicyRequest,
    GrantRequest,
    RunReport,
    RunRequest,
    SecurableRef,
    UndropRequest,
    UpdateWarehouseRequest,
)


def _listing(key: str, page: Page, render: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {key: [render(item) for item in page.items] if render else list(page.items)}
    if page.next_page_token:
        body["next-page-token"] = page.next_page_token
    return body


def _credential(credential: Credential) -> dict[str, str]:
    return {"client-id": credential.client_id, "client-secret": credential.secret}


# -- principals ----------------------------------------------------------------------------


def list_principals(services: Services, pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("principals", services.management.list_principals(pageToken, pageSize)), 200


def create_principal(services: Services, body: CreatePrincipalRequest):
    return _credential(services.management.create_principal(body)), 201


def get_principal(services: Services, principal: str):
    return services.management.get_principal(principal), 200


def delete_principal(services: Services, principal: str):
    services.management.delete_principal(principal)
    return no_content()


def rotate_principal_secret(services: Services, principal: str):
    return _credential(services.management.rotate_principal(principal)), 200


# -- roles ---------------------------------------------------------------------------------


def list_roles(services: Services, pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("roles", services.management.list_roles(pageToken, pageSize)), 200


def create_role(services: Services, body: CreateRoleRequest):
    return services.management.create_role(body), 201


def get_role(services: Services, role: str):
    return services.management.get_role(role), 200


def delete_role(services: Services, role: str):
    services.management.delete_role(role)
    return no_content()


def list_role_members(services: Services, role: str, pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("members", services.management.list_members(role, pageToken, pageSize)), 200


def assign_role(services: Services, role: str, principal: str):
    services.management.assign_role(role, principal)
    return no_content()


def revoke_role(services: Services, role: str, principal: str):
    services.management.revoke_role(role, principal)
    return no_content()


# -- grants --------------------------------------------------------------------------------


def list_grants_for_role(services: Services, role: str, pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("grants", services.management.grants_of_role(role, pageToken, pageSize), grant_view), 200


def grant_privilege(services: Services, role: str, body: GrantRequest):
    return grant_view(services.management.grant(role, body)), 201


def revoke_privilege(services: Services, role: str, body: GrantRequest):
    services.management.revoke(role, body)
    return no_content()


def list_grants_on_securable(
    services: Services,
    type: str,  # noqa: A002 - the query parameter's name
    warehouse: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
    pageToken: str | None = None,  # noqa: N803
    pageSize: int | None = None,  # noqa: N803
):
    securable = _queried(services, type, warehouse, namespace, name)
    return _listing("grants", services.management.grants_on(securable, pageToken, pageSize), grant_view), 200


def _queried(
    services: Services, kind: str, warehouse: str | None, namespace: str | None, name: str | None
) -> SecurableRef:
    """A securable named by a listing's query (its type checked by the yaml's enum)."""
    levels = parse_namespace(namespace, services.namespace_separator) if namespace is not None else None
    return SecurableRef(type=kind, warehouse=warehouse, namespace=levels, name=name)


# -- warehouses ----------------------------------------------------------------------------


def list_warehouses(services: Services, pageToken: str | None = None, pageSize: int | None = None):  # noqa: N803
    return _listing("warehouses", services.management.list_warehouses(pageToken, pageSize), warehouse_view), 200


def create_warehouse(services: Services, body: CreateWarehouseRequest):
    return warehouse_view(services.management.create_warehouse(body)), 201


def get_warehouse(services: Services, warehouse: str):
    return warehouse_view(services.management.get_warehouse(warehouse)), 200


def update_warehouse(services: Services, warehouse: str, body: UpdateWarehouseRequest):
    return warehouse_view(services.management.update_warehouse(warehouse, body)), 200


def delete_warehouse(services: Services, warehouse: str):
    services.management.delete_warehouse(warehouse)
    return no_content()


# -- recycle bin and protection (issue 35) -------------------------------------------------


def list_bin(
    services: Services,
    warehouse: str,
    namespace: str | None = None,
    pageToken: str | None = None,
    pageSize: int | None = None,
):  # noqa: N803
    levels = parse_namespace(namespace, services.namespace_separator) if namespace is not None else None
    return _listing("units", services.recycle_bin.list_units(warehouse, levels, pageToken, pageSize), unit_view), 200


def undrop_bin_unit(services: Services, warehouse: str, unit: int, body: UndropRequest | None = None):
    return unit_view(services.recycle_bin.undrop(warehouse, unit, body or UndropRequest())), 200


def purge_bin_unit(services: Services, warehouse: str, unit: int):
    services.recycle_bin.purge_now(warehouse, unit)
    return no_content()


def drop_namespace_recursive(
    services: Services, warehouse: str, namespace: str, recursive: bool, purgeRequested: bool = False
):  # noqa: N803
    dropped = services.recycle_bin.drop_namespace(
        warehouse, parse_namespace(namespace, services.namespace_separator), recursive, bool(purgeRequested)
    )
    return (unit_view(dropped), 200) if dropped is not None else no_content()


def list_protections(services: Services, warehouse: str):
    return {"marks": [mark_view(mark) for mark in services.protection.marks(warehouse)]}, 200


def protect_securable(services: Services, warehouse: str, body: SecurableRef):
    services.protection.protect(warehouse, body)
    return no_content()


def unprotect_securable(services: Services, warehouse: str, body: SecurableRef):
    services.protection.unprotect(warehouse, body)
    return no_content()


# -- read restrictions (issue 51) ------------------------------------------------------------


def list_read_restrictions(services: Services, warehouse: str):
    return {"restrictions": services.restrictions.list(warehouse)}, 200


def set_read_restriction(services: Services, warehouse: str, body: ReadRestrictionPolicy):
    return services.restrictions.set(warehouse, body), 200


def remove_read_restriction(services: Services, warehouse: str, body: ReadRestrictionTarget):
    services.restrictions.remove(warehouse, body)
    return no_content()


def set_principal_trusted_engine(services: Services, principal: str, body: TrustedEngineRequest):
    return services.management.set_trusted_engine(principal, body.trusted_engine), 200


def set_role_trusted_engine(services: Services, role: str, body: TrustedEngineRequest):
    return services.management.set_role_trusted_engine(role, body.trusted_engine), 200


# -- moving tables home from federated warehouses (issue 50) ---------------------------------


def list_table_moves(services: Services, warehouse: str):
    return {"moves": services.table_moves.list(warehouse)}, 200


def move_table_home(services: Services, warehouse: str, body: MoveTableRequest):
    return services.table_moves.move(warehouse, body), 200


def move_namespace_home(services: Services, warehouse: str, body: MoveNamespaceRequest):
    return {"moves": services.table_moves.move_namespace(warehouse, body)}, 200


def undo_table_move(services: Services, warehouse: str, body: TableMoveSource):
    services.table_moves.undo(warehouse, body)
    return no_content()


# -- the change feed's push sinks ----------------------------------------------------------


def list_event_sinks(services: Services):
    return {"event-sinks": [sink_view(row) for row in services.event_sinks.list()]}, 200


def create_event_sink(services: Services, body: CreateEventSinkRequest):
    return sink_view(services.event_sinks.create(body)), 201


def delete_event_sink(services: Services, sink: str):
    services.event_sinks.delete(sink)
    return no_content()


def list_dead_letters(services: Services, sink: str):
    return {"dead-letters": [dead_letter_view(row) for row in services.event_sinks.dead_letters(sink)]}, 200


def replay_dead_letters(services: Services, sink: str):
    services.event_sinks.replay(sink)
    return no_content()


# -- maintenance (issue 37; app/maintenance/service.py) ---------------------------------------------


def list_maintenance_policies(
    services: Services,
    type: str,  # noqa: A002 - the query parameter's name
    warehouse: str | None = None,
    namespace: str | None = None,
    name: str | None = None,
):
    return {"policies": services.maintenance.attached(_queried(services, type, warehouse, namespace, name))}, 200


def attach_maintenance_policy(services: Services, body: AttachPolicyRequest):
    return services.maintenance.attach(body), 200


def detach_maintenance_policy(services: Services, body: DetachPolicyRequest):
    services.maintenance.detach(body)
    return no_content()


def get_effective_maintenance_policies(services: Services, warehouse: str, namespace: str, table: str):
    return {
        "policies": services.maintenance.effective(
            warehouse, parse_namespace(namespace, services.namespace_separator), table
        )
    }, 200


def list_maintenance_runs(services: Services, warehouse: str, namespace: str, table: str, limit: int | None = None):
    return {
        "runs": services.maintenance.runs(
            warehouse, parse_namespace(namespace, services.namespace_separator), table, limit
        )
    }, 200


def run_maintenance(
    services: Services, warehouse: str, namespace: str, table: str, body: RunRequest, http: HttpRequest
):
    run = services.maintenance.run(warehouse, parse_namespace(namespace, services.namespace_separator), table, body)
    location = quote(f"{http.path.rstrip('/')}/{run['id']}")  # a namespace's %1F stays encoded
    return run, 202, {"Location": location}


def get_maintenance_run(services: Services, warehouse: str, namespace: str, table: str, run: int):
    return services.maintenance.get_run(
        warehouse, parse_namespace(namespace, services.namespace_separator), table, run
    ), 200


def cancel_maintenance_run(services: Services, warehouse: str, namespace: str, table: str, run: int):
    return services.maintenance.cancel_run(
        warehouse, parse_namespace(namespace, services.namespace_separator), table, run
    ), 200


def report_maintenance_run(
    services: Services, warehouse: str, namespace: str, table: str, run: int, body: RunReport, http: HttpRequest
):
    levels = parse_namespace(namespace, services.namespace_separator)
    token = http.header("X-Growler-Run-Token") or ""
    return services.maintenance.report_run(warehouse, levels, table, run, token, body), 200


def get_table_health(services: Services, warehouse: str, namespace: str, table: str):
    return services.maintenance.health(warehouse, parse_namespace(namespace, services.namespace_separator), table), 200


# -- the audit trail (app/audit/service.py) -------------------------------------------------


def list_audit_records(  # noqa: PLR0913 - the query's filters
    services: Services,
    since: str | None = None,
    until: str | None = None,
    principal: str | None = None,
    object: str | None = None,  # noqa: A002 - the query parameter's name
    decision: str | None = None,
    pageToken: str | None = None,  # noqa: N803
    pageSize: int | None = None,  # noqa: N803
):
    page = services.audit.list_records(since, until, principal, object, decision, pageToken, pageSize)
    return _listing("records", page), 200
