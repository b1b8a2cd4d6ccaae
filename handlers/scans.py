"""Server-side scan planning: planTableScan, fetchPlanningResult, fetchScanTasks, cancelPlanning."""

from __future__ import annotations

from typing import Any

from app.composition.services import Services
from app.edge.responses import HttpRequest, no_content
from app.ground.errors import BadRequest
from app.rules.identifiers import parse_namespace, table_name
from app.rules.requests.scans import FetchScanTasksRequest, PlanTableScanRequest
from app.storage_access.delegation import wants_vended_credentials


def _vend(http: HttpRequest) -> bool:
    return wants_vended_credentials(http.header("X-Iceberg-Access-Delegation"))


def _plan_id(kwargs: dict[str, Any]) -> str:
    """The ``{plan-id}`` path parameter (connexion passes it under a sanitised name)."""
    for key in ("plan_id", "planid", "plan-id"):
        if key in kwargs:
            return str(kwargs[key])
    return ""


def plan_table_scan(
    services: Services,
    prefix: str,
    namespace: str,
    table: str,
    http: HttpRequest,
    body: PlanTableScanRequest | None = None,
    **_: Any,
):
    request = body if body is not None else PlanTableScanRequest()
    return services.planning.plan(
        prefix, parse_namespace(namespace, services.namespace_separator), table_name(table), request, _vend(http)
    ), 200


def fetch_planning_result(
    services: Services, prefix: str, namespace: str, table: str, http: HttpRequest, **kwargs: Any
):
    return services.planning.fetch(
        prefix,
        parse_namespace(namespace, services.namespace_separator),
        table_name(table),
        _plan_id(kwargs),
        _vend(http),
    ), 200


def fetch_scan_tasks(
    services: Services, prefix: str, namespace: str, table: str, body: FetchScanTasksRequest | None = None, **_: Any
):
    if body is None:
        raise BadRequest("fetchScanTasks needs a plan-task")
    return services.planning.tasks(
        prefix, parse_namespace(namespace, services.namespace_separator), table_name(table), body.plan_task
    ), 200


def cancel_planning(services: Services, prefix: str, namespace: str, table: str, **kwargs: Any):
    services.planning.cancel(
        prefix, parse_namespace(namespace, services.namespace_separator), table_name(table), _plan_id(kwargs)
    )
    return no_content()
