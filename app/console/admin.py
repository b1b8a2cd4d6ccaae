"""Administration: principals, roles, members, grants and warehouses, through app/management/service.py
(principals, roles and members: its part app/management/identities.py, whose methods it hands out).

Every action is the management API's method, so the same rights decide (app/management/rights.py):
a principal who may not manage gets the API's 403 as a page. A new or rotated secret is shown once,
in the answer to the POST that made it (never stored, never in a URL, never cached); destructive
actions need their form's confirmation box ticked.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, redirect, render_template, request, url_for

from app.console.common import PAGE_SIZE, authorize, management, page_arg
from app.ground.errors import BadRequest
from app.management.service import PRIVILEGES, SECURABLE_TYPES, grant_view, warehouse_view
from app.rules.identifiers import check_namespace
from app.rules.requests import parse_request
from app.rules.requests.management import (
    CreatePrincipalRequest,
    CreateRoleRequest,
    CreateWarehouseRequest,
    GrantRequest,
    SecurableRef,
    SecurableType,
)


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/admin", "admin", overview, methods=["GET"])
    bp.add_url_rule("/admin/principals", "create_principal", create_principal, methods=["POST"])
    bp.add_url_rule("/admin/principals/<name>/rotate", "rotate_principal", rotate_principal, methods=["POST"])
    bp.add_url_rule("/admin/principals/<name>/delete", "delete_principal", delete_principal, methods=["POST"])
    bp.add_url_rule("/admin/roles", "create_role", create_role, methods=["POST"])
    bp.add_url_rule("/admin/roles/<role>", "role", role_page, methods=["GET"])
    bp.add_url_rule("/admin/roles/<role>/delete", "delete_role", delete_role, methods=["POST"])
    bp.add_url_rule("/admin/roles/<role>/members", "add_member", add_member, methods=["POST"])
    bp.add_url_rule("/admin/roles/<role>/members/remove", "remove_member", remove_member, methods=["POST"])
    bp.add_url_rule("/admin/roles/<role>/grants", "grant", grant, methods=["POST"])
    bp.add_url_rule("/admin/roles/<role>/grants/revoke", "revoke", revoke, methods=["POST"])
    bp.add_url_rule("/admin/grants", "grants_on", grants_on, methods=["GET"])
    bp.add_url_rule("/admin/warehouses", "create_warehouse", create_warehouse, methods=["POST"])
    bp.add_url_rule("/admin/warehouses/<name>/delete", "delete_warehouse", delete_warehouse, methods=["POST"])


def _confirmed() -> None:
    if request.form.get("confirm") != "yes":
        raise BadRequest("Tick the confirmation box to do this")


def overview() -> str:
    for operation_id in ("listPrincipals", "listRoles", "listWarehouses"):
        authorize(operation_id, {})
    service = management()
    principals = service.list_principals(page_arg(), PAGE_SIZE)
    roles = service.list_roles("", PAGE_SIZE)
    warehouses = service.list_warehouses("", PAGE_SIZE)
    return render_template(
        "console/admin.html",
        principals=principals.items,
        principals_page=principals,
        roles=roles.items,
        warehouses=[warehouse_view(row) for row in warehouses.items],
    )


def create_principal() -> str:
    body = CreatePrincipalRequest.model_construct(
        name=request.form.get("name", ""), admin=request.form.get("admin") == "yes"
    )
    authorize("createPrincipal", {}, body)
    credential = management().create_principal(body)
    return render_template("console/secret.html", credential=credential, made="created")


def rotate_principal(name: str) -> str:
    _confirmed()
    authorize("rotatePrincipalSecret", {"principal": name})
    credential = management().rotate_principal(name)
    return render_template("console/secret.html", credential=credential, made="rotated")


def delete_principal(name: str) -> Response:
    _confirmed()
    authorize("deletePrincipal", {"principal": name})
    management().delete_principal(name)
    return redirect(url_for("console.admin"), code=303)


def create_role() -> Response:
    body = CreateRoleRequest.model_construct(name=request.form.get("name", ""))
    authorize("createRole", {}, body)
    management().create_role(body)
    return redirect(url_for("console.role", role=body.name), code=303)


def role_page(role: str) -> str:
    for operation_id in ("getRole", "listRoleMembers", "listGrantsForRole"):
        authorize(operation_id, {"role": role})
    service = management()
    details = service.get_role(role)
    members = service.list_members(role, "", PAGE_SIZE)
    grants = service.grants_of_role(role, "", PAGE_SIZE)
    return render_template(
        "console/role.html",
        role=details,
        members=members.items,
        grants=[grant_view(row) for row in grants.items],
        privileges=PRIVILEGES,
        securable_types=SECURABLE_TYPES,
    )


def delete_role(role: str) -> Response:
    _confirmed()
    authorize("deleteRole", {"role": role})
    management().delete_role(role)
    return redirect(url_for("console.admin"), code=303)


def add_member(role: str) -> Response:
    principal = request.form.get("principal", "")
    authorize("assignRole", {"role": role, "principal": principal})
    management().assign_role(role, principal)
    return redirect(url_for("console.role", role=role), code=303)


def remove_member(role: str) -> Response:
    _confirmed()
    principal = request.form.get("principal", "")
    authorize("revokeRole", {"role": role, "principal": principal})
    management().revoke_role(role, principal)
    return redirect(url_for("console.role", role=role), code=303)


def create_warehouse() -> Response:
    """A warehouse with the installation's storage settings (its own keys: the management API)."""
    body = CreateWarehouseRequest.model_construct(
        name=request.form.get("name", ""), location=request.form.get("location", "")
    )
    authorize("createWarehouse", {}, body)
    management().create_warehouse(body)
    return redirect(url_for("console.admin"), code=303)


def delete_warehouse(name: str) -> Response:
    _confirmed()
    authorize("deleteWarehouse", {"warehouse": name})
    management().delete_warehouse(name)
    return redirect(url_for("console.admin"), code=303)


def _securable(source: Any) -> dict[str, Any]:
    """A securable from a form or query: type, warehouse, namespace (levels split on '.'), name."""
    body: dict[str, Any] = {"type": source.get("type", "")}
    if source.get("warehouse"):
        body["warehouse"] = source.get("warehouse")
    if source.get("namespace"):
        body["namespace"] = list(check_namespace(source.get("namespace").split(".")))
    if source.get("name"):
        body["name"] = source.get("name")
    return body


def _grant_request() -> GrantRequest:
    """The form as the API's body (BadRequest for a privilege or a type it does not know)."""
    body = {"privilege": request.form.get("privilege", ""), "securable": _securable(request.form)}
    return parse_request(GrantRequest, body)


def grant(role: str) -> Response:
    body = _grant_request()
    authorize("grantPrivilege", {"role": role}, body)
    management().grant(role, body)
    return redirect(url_for("console.role", role=role), code=303)


def revoke(role: str) -> Response:
    _confirmed()
    body = _grant_request()
    authorize("revokePrivilege", {"role": role}, body)
    management().revoke(role, body)
    return redirect(url_for("console.role", role=role), code=303)


def ancestors(securable: SecurableRef) -> list[SecurableRef]:
    """What a securable inherits grants from, outermost first: the catalog, its warehouse, every
    namespace above it (a grant on a namespace covers what is under it)."""
    if securable.type is SecurableType.CATALOG:
        return []
    found = [SecurableRef(type=SecurableType.CATALOG)]
    warehouse = securable.warehouse
    if securable.type is not SecurableType.WAREHOUSE:
        found.append(SecurableRef(type=SecurableType.WAREHOUSE, warehouse=warehouse))
    levels = securable.namespace or ()
    depth = len(levels) - 1 if securable.type is SecurableType.NAMESPACE else len(levels)
    found += [
        SecurableRef(type=SecurableType.NAMESPACE, warehouse=warehouse, namespace=levels[:i])
        for i in range(1, depth + 1)
    ]
    return found


def grants_on() -> str:
    """Who may do what on a securable: its own grants, and those it inherits (marked)."""
    securable = parse_request(SecurableRef, _securable(request.args)) if request.args.get("type") else None
    rows: list[tuple[dict[str, Any], bool]] = []
    if securable is not None:
        params = {"type": securable.type.value, "warehouse": securable.warehouse, "name": securable.name}
        authorize("listGrantsOnSecurable", params)
        service = management()
        rows = [(grant_view(row), False) for row in service.grants_on(securable, "", PAGE_SIZE).items]
        for above in ancestors(securable):
            rows += [(grant_view(row), True) for row in service.grants_on(above, "", PAGE_SIZE).items]
    return render_template("console/grants.html", securable=securable, grants=rows, securable_types=SECURABLE_TYPES)
