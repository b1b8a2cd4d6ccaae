"""What every console view shares: the services, the caller, names in URLs, the error page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Blueprint, current_app, render_template, request, url_for
from werkzeug.exceptions import HTTPException

from app.authorization import Authorizer
from app.console import csrf
from app.edge.context import services
from app.ground.callers import current_principal
from app.ground.errors import BadRequest, CatalogError
from app.ground.text import UNIT_SEPARATOR
from app.management.service import ManagementService
from app.namespaces.service import NamespaceService
from app.rules.identifiers import check_name, check_namespace
from app.tables.service import TableService
from app.views.service import ViewService

# Parts built elsewhere (issue 38, item 5): (field of ``Services``, endpoint, label). The entry
# shows when the endpoint exists.
NAV_EXTENSIONS: list[tuple[str, str, str]] = [
    ("recycle_bin", "console.recycle_bin", "Recycle bin"),
    ("events", "console.events", "Events"),
    ("maintenance", "console.maintenance", "Maintenance"),
]
# Sections other parts add to a table's page (the change events timeline, health and maintenance
# runs, protection marks): (field of ``Services``, template, heading). A section shows when its
# loader (``SECTION_LOADERS``, filled by the part's module: app/console/extras.py) gives data the
# caller may read; its template gets ``data``.
TABLE_SECTIONS: list[tuple[str, str, str]] = [
    ("events", "console/table_events.html", "Change events"),
    ("maintenance", "console/table_maintenance.html", "Health and maintenance"),
]
SECTION_LOADERS: dict[str, Callable[[Any, Any], Any]] = {}
PAGE_SIZE = 100


def namespaces() -> NamespaceService:
    return services().namespaces


def tables() -> TableService:
    return services().tables


def views() -> ViewService:
    return services().views


def management() -> ManagementService:
    return services().management


def authorizer() -> Authorizer:
    return services().authorizer


def authorize(operation_id: str, params: dict[str, Any], body: Any = None) -> None:
    """A management operation's row of the one table (app/management/operations.py), checked as
    the dispatcher checks it for the API: the console calls the same services after it."""
    authorizer().authorize(operation_id, params, body, management().rights)


def is_admin() -> bool:
    return authorizer().grants().admin


def ns_param(levels: tuple[str, ...] | list[str]) -> str:
    """A namespace as the console's ``ns`` query parameter: its levels joined by 0x1F."""
    return UNIT_SEPARATOR.join(levels)


def ns_arg(name: str = "ns") -> tuple[str, ...]:
    raw = request.args.get(name)
    if not raw:
        raise BadRequest("Missing namespace")
    return check_namespace(raw.split(UNIT_SEPARATOR))


def name_arg(name: str = "name") -> str:
    return check_name(request.args.get(name) or "", name)


def size_arg() -> int:
    """Items per page of a listing: ``size`` (1 to ``PAGE_SIZE``), by default ``PAGE_SIZE``."""
    raw = request.args.get("size") or str(PAGE_SIZE)
    if not raw.isdigit() or not 1 <= int(raw) <= PAGE_SIZE:
        raise BadRequest(f"size must be between 1 and {PAGE_SIZE}")
    return int(raw)


def page_arg() -> str:
    """The page token of a listing (the empty string starts paging)."""
    return request.args.get("page") or ""


def install_context(blueprint: Blueprint) -> None:
    @blueprint.app_template_filter("ns")
    def _ns(levels: Any) -> str:
        return ns_param(levels)

    @blueprint.context_processor
    def _context() -> dict[str, Any]:
        principal = current_principal.get()
        return {
            "principal": principal.name if principal is not None else None,
            "csrf_token": csrf.token,
            "nav_extensions": [
                (endpoint, label) for _key, endpoint, label in NAV_EXTENSIONS if endpoint in current_app.view_functions
            ],
            "show_admin": _safe_is_admin(),
            "page_url": _page_url,
        }

    @blueprint.errorhandler(CatalogError)
    def _catalog_error(exc: CatalogError) -> tuple[str, int]:
        return render_template("console/error.html", code=exc.code, message=exc.message), exc.code

    @blueprint.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> tuple[str, int]:
        code = exc.code or 500
        return render_template("console/error.html", code=code, message=exc.description), code


def _page_url(token: str, which: str) -> str:
    """This page with the next page of one of its listings (the others start over)."""
    args = request.args.to_dict()
    args.update(page=token, list=which)
    return url_for(str(request.endpoint), **(request.view_args or {}), **args)


def _safe_is_admin() -> bool:
    try:
        return is_admin()
    except CatalogError:
        return False
