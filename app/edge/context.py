"""What every handler needs: the services (one typed object) and parsed identifiers.

The composition root (app/composition) builds ``Services`` once and keeps it in the Flask app;
handlers, the idempotency decorator and the console reach it through ``services()``, never
through the factory.
"""

from __future__ import annotations

from flask import Response, current_app

from app.composition.services import SERVICES, Services
from app.edge.responses import Rendered
from app.rules.identifiers import parse_namespace

__all__ = ["Services", "namespace_arg", "no_content", "respond", "services"]


def services() -> Services:
    return current_app.extensions[SERVICES]


def namespace_arg(raw: str) -> tuple[str, ...]:
    return parse_namespace(raw, services().namespaces.settings.namespace_separator)


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
