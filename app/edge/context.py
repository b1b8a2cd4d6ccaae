"""What every handler needs from the request context: the services and parsed identifiers.

The keys under which the app factory puts each service into ``flask_app.extensions`` are defined
here, so handlers (and the idempotency decorator) never import the factory.
"""

from __future__ import annotations

from flask import Response, current_app

from app.authorization import Authorizer
from app.edge.responses import Rendered
from app.events.feed import EventFeed
from app.functions import FunctionService
from app.namespaces.service import NamespaceService
from app.rules.identifiers import parse_namespace
from app.storage_access.signing import RemoteSigner
from app.tables.plans import PlanningService
from app.tables.service import TableService
from app.views.service import ViewService

NAMESPACES = "growler.catalog"  # the key tests and tools already use
TABLES = "growler.tables"
VIEWS = "growler.views"
ENDPOINTS = "growler.endpoints"
IDEMPOTENCY = "growler.idempotency"
FUNCTIONS = "growler.functions"
PLANS = "growler.plans"
SIGNER = "growler.signer"
AUTHORIZER = "growler.authorizer"
MANAGEMENT = "growler.management"
RECYCLE_BIN = "growler.recycle-bin"
PROTECTION = "growler.protection"
CONSOLE_OIDC = "growler.console_oidc"  # True: the console signs in through the IdP too
PREVIEWS = "growler.previews"  # the console's data preview (app/tables/previews.py)
EVENTS = "growler.events"
EVENT_SINKS = "growler.event-sinks"
PUBLISHER = "growler.publisher"
MAINTENANCE = "growler.maintenance"


def namespaces() -> NamespaceService:
    return current_app.extensions[NAMESPACES]


def tables() -> TableService:
    return current_app.extensions[TABLES]


def signer() -> RemoteSigner:
    return current_app.extensions[SIGNER]


def views() -> ViewService:
    return current_app.extensions[VIEWS]


def functions() -> FunctionService:
    return current_app.extensions[FUNCTIONS]


def events() -> EventFeed:
    return current_app.extensions[EVENTS]


def plans() -> PlanningService:
    return current_app.extensions[PLANS]


def authorizer() -> Authorizer:
    return current_app.extensions[AUTHORIZER]


def advertised_endpoints() -> list[str]:
    return current_app.extensions[ENDPOINTS]


def namespace_arg(raw: str) -> tuple[str, ...]:
    return parse_namespace(raw, namespaces().settings.namespace_separator)


def respond(rendered: Rendered) -> Response:
    """A rendered answer as Flask's response (the dispatcher sends its bytes)."""
    content_type = rendered.headers.get("Content-Type")
    response = Response(rendered.body, status=rendered.status, mimetype=content_type)
    for name, value in rendered.headers.items():
        if name != "Content-Type":
            response.headers[name] = value
    return response


def no_content() -> Response:
    """204 with no body and no content type (a ("", 204) tuple would be typed as JSON)."""
    response = Response(status=204)
    del response.headers["Content-Type"]
    return response
