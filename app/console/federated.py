"""Browsing a federated warehouse in the console (issue 50, docs/federation.md): its namespaces,
tables and views as its remote Iceberg REST catalog answers them.

Each page runs the API's row of the operation it reads (the same RULES as a client's request) and
then ``FederationService.read``, which forwards the read as the API does: Growler's credential
toward the remote, the listings filtered by the caller's grants, the remote's refusals passed on
with their status and message. Growler holds no rows of a federated warehouse, so what its own
rows give a native table's page - the data preview (Growler's storage keys), the change events'
timeline of the table, its maintenance and read restrictions - is not offered here.
"""

from __future__ import annotations

import json
from typing import Any

from app.catalog.paging import Page
from app.console.common import authorizer, ns_param, page_arg, size_arg
from app.edge.context import services
from app.federation.service import FederationService

NAMESPACES = "/v1/{prefix}/namespaces"
NAMESPACE = "/v1/{prefix}/namespaces/{namespace}"
LISTINGS = {"table": ("listTables", NAMESPACE + "/tables"), "view": ("listViews", NAMESPACE + "/views")}
LOADS = {"table": ("loadTable", NAMESPACE + "/tables/{table}"), "view": ("loadView", NAMESPACE + "/views/{view}")}


def federation(warehouse: str) -> FederationService | None:
    """The federation service when ``warehouse`` is a federated one (None: Growler's own rows)."""
    service = services().federation
    return service if service.remote_of(warehouse) is not None else None


def _authorize(operation_id: str, params: dict[str, str]) -> None:
    authorizer().authorize(operation_id, params)


def namespaces(service: FederationService, warehouse: str, parent: tuple[str, ...], token: str) -> Page:
    """A page of the namespaces under ``parent`` (top-level when empty) the caller may see."""
    _authorize("listNamespaces", {"prefix": warehouse})
    answer = service.read(
        warehouse,
        "listNamespaces",
        NAMESPACES,
        {},
        parent=ns_param(parent) if parent else "",
        pageToken=token,
        pageSize=str(size_arg()),
    )
    return Page([tuple(levels) for levels in answer.get("namespaces") or []], answer.get("next-page-token"))


def namespace_properties(service: FederationService, warehouse: str, levels: tuple[str, ...]) -> dict[str, str]:
    params = {"prefix": warehouse, "namespace": ns_param(levels)}
    _authorize("loadNamespaceMetadata", params)
    answer = service.read(warehouse, "loadNamespaceMetadata", NAMESPACE, {"namespace": ns_param(levels)})
    return answer.get("properties") or {}


def names(service: FederationService, warehouse: str, levels: tuple[str, ...], kind: str, token: str) -> Page:
    """A page of the namespace's tables or views (``kind``) the caller may read, by name."""
    operation_id, path = LISTINGS[kind]
    _authorize(operation_id, {"prefix": warehouse, "namespace": ns_param(levels)})
    answer = service.read(
        warehouse, operation_id, path, {"namespace": ns_param(levels)}, pageToken=token, pageSize=str(size_arg())
    )
    return Page([item["name"] for item in answer.get("identifiers") or []], answer.get("next-page-token"))


def load(service: FederationService, warehouse: str, levels: tuple[str, ...], kind: str, name: str) -> dict[str, Any]:
    """The table's or view's load answer: ``metadata-location`` and ``metadata`` (a dict)."""
    operation_id, path = LOADS[kind]
    params = {"prefix": warehouse, "namespace": ns_param(levels), kind: name}
    _authorize(operation_id, params)
    answer = service.read(warehouse, operation_id, path, {"namespace": ns_param(levels), kind: name})
    metadata = answer.get("metadata")
    if isinstance(metadata, str):  # (the spec's answer is an object; a text is parsed, never shown raw)
        metadata = json.loads(metadata)
    return {"metadata-location": answer.get("metadata-location"), "metadata": metadata or {}}


def page_token(which: str, kind: str) -> str:
    """The page token of the listing the request pages through (the others start at their first)."""
    return page_arg() if which == kind else ""
