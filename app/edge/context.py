"""What every handler needs: the services (one typed object) and parsed identifiers.

The composition root (app/composition) builds ``Services`` once and keeps it in the Flask app;
handlers, the idempotency decorator and the console reach it through ``services()``, never
through the factory. What a handler answers is rendered by the dispatcher (app/edge/responses.py).
"""

from __future__ import annotations

from flask import current_app

from app.composition.services import SERVICES, Services
from app.rules.identifiers import parse_namespace

__all__ = ["Services", "namespace_arg", "services"]


def services() -> Services:
    return current_app.extensions[SERVICES]


def namespace_arg(raw: str) -> tuple[str, ...]:
    return parse_namespace(raw, services().namespaces.settings.namespace_separator)
