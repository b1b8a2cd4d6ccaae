"""Signing in and out, and browsing: warehouses, the namespace tree, a namespace's tables and views."""

from __future__ import annotations

from flask import Blueprint, Response, redirect, render_template, request, url_for

from app.console import federated
from app.console.common import namespaces, ns_arg, ns_param, page_arg, size_arg, tables, views
from app.edge.auth.console import OIDC_START, PREFIX, SESSION_COOKIE, SIGN_IN, safe_next
from app.edge.context import services
from app.rules.privileges import Kind

SIGN_IN_ERRORS = {
    "failed": "Sign-in failed: check the client id and secret.",
    "expired": "The sign-in form expired: please try again.",
    "slow_down": "Too many failed sign-ins: wait a moment and try again.",
    "form": "The sign-in form could not be read.",
    "idp": "The identity provider cannot be reached: try again later.",
}


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/sign-in", "sign_in", sign_in, methods=["GET"])
    bp.add_url_rule("/sign-out", "sign_out", sign_out, methods=["POST"])
    bp.add_url_rule("/", "home", home, methods=["GET"])
    bp.add_url_rule("/w/<warehouse>", "warehouse", warehouse, methods=["GET"])
    bp.add_url_rule("/w/<warehouse>/namespace", "namespace", namespace, methods=["GET"])


def sign_in() -> str:
    error = SIGN_IN_ERRORS.get(request.args.get("error", ""))
    own_tokens = "POST /v1/oauth/tokens" in services().endpoints
    return render_template(
        "console/sign_in.html",
        next=safe_next(request.args.get("next")),
        error=error,
        own_tokens=own_tokens,
        idp=services().console_oidc,
        idp_start=OIDC_START,
        action=SIGN_IN,
    )


def sign_out() -> Response:
    response = redirect(url_for("console.sign_in"), code=303)
    response.delete_cookie(SESSION_COOKIE, path=PREFIX, httponly=True, samesite="Lax")
    return response


def home() -> str:
    return render_template("console/home.html", warehouses=namespaces().visible_warehouses())


def warehouse(warehouse: str) -> str:
    token = page_arg()
    remote = federated.federation(warehouse)
    if remote is not None:  # its remote's namespaces (app/console/federated.py)
        page = federated.namespaces(remote, warehouse, (), token)
    else:
        namespaces().authorizer.authorize("listNamespaces", {"prefix": warehouse})
        page = namespaces().list_namespaces(warehouse, None, token, size_arg())
    return render_template("console/warehouse.html", warehouse=warehouse, namespaces=page.items, page=page)


def namespace(warehouse: str) -> str:
    levels = ns_arg()
    remote = federated.federation(warehouse)
    if remote is not None:
        return _federated_namespace(remote, warehouse, levels)
    service = namespaces()
    # The API's rules: the namespace's metadata, its children, tables and views all need SEE on it
    # (a namespace the caller cannot see is the API's 404).
    service.authorizer.authorize("loadNamespaceMetadata", {"prefix": warehouse, "namespace": ns_param(levels)})
    metadata = service.load_namespace(warehouse, levels)
    query = (request.args.get("q") or "").strip()
    which = request.args.get("list", "")
    children = service.list_namespaces(warehouse, levels, page_arg() if which == "namespace" else "", size_arg())
    listed = {}
    for kind, entries in ((Kind.TABLE, tables().entries), (Kind.VIEW, views().entries)):
        token = page_arg() if which == kind.value else ""
        if query:
            listed[kind.value] = entries.search_names(warehouse, levels, query, token, size_arg())
        else:
            listed[kind.value] = entries.list_names(warehouse, levels, token, size_arg())
    return render_template(
        "console/namespace.html",
        warehouse=warehouse,
        levels=levels,
        properties=metadata.get("properties") or {},
        children=children,
        tables=listed["table"],
        views=listed["view"],
        query=query,
    )


def _federated_namespace(remote: federated.FederationService, warehouse: str, levels: tuple[str, ...]) -> str:
    """A federated warehouse's namespace, as its remote lists it (no search by name: the spec has none)."""
    which = request.args.get("list", "")
    properties = federated.namespace_properties(remote, warehouse, levels)
    return render_template(
        "console/namespace.html",
        warehouse=warehouse,
        levels=levels,
        properties=properties,
        children=federated.namespaces(remote, warehouse, levels, federated.page_token(which, "namespace")),
        tables=federated.names(remote, warehouse, levels, "table", federated.page_token(which, "table")),
        views=federated.names(remote, warehouse, levels, "view", federated.page_token(which, "view")),
        query="",
        federated=True,
    )
