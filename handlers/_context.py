"""What every handler needs from the request context: the service and parsed identifiers."""

from __future__ import annotations

from flask import current_app

from app.catalog import CatalogService
from app.identifiers import parse_namespace


def catalog() -> CatalogService:
    return current_app.extensions["growler.catalog"]


def advertised_endpoints() -> list[str]:
    return current_app.extensions["growler.endpoints"]


def namespace_arg(raw: str) -> tuple[str, ...]:
    return parse_namespace(raw, catalog().settings.namespace_separator)


NO_CONTENT = ("", 204)
