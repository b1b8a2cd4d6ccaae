"""Namespace operations."""

from __future__ import annotations

from app.catalog.paging import namespaces_answer
from app.composition.services import Services
from app.edge.responses import no_content
from app.rules.identifiers import check_namespace, decoded_separator, parse_namespace
from app.rules.requests.catalog import CreateNamespaceRequest
from app.rules.requests.namespaces import UpdateNamespacePropertiesRequest


def list_namespaces(
    services: Services,
    prefix: str,
    parent: str | None = None,
    pageToken: str | None = None,
    pageSize: int | None = None,
):  # noqa: N803
    parent_levels = parse_namespace(parent, services.namespace_separator) if parent is not None else None
    return namespaces_answer(services.namespaces.list_namespaces(prefix, parent_levels, pageToken, pageSize)), 200


def create_namespace(services: Services, prefix: str, body: CreateNamespaceRequest):
    separator = decoded_separator(services.namespaces.settings.namespace_separator)
    namespace = check_namespace(list(body.namespace), separator)
    return services.namespaces.create_namespace(prefix, namespace, body.properties), 200


def load_namespace_metadata(services: Services, prefix: str, namespace: str):
    return services.namespaces.load_namespace(prefix, parse_namespace(namespace, services.namespace_separator)), 200


def namespace_exists(services: Services, prefix: str, namespace: str):
    services.namespaces.require_namespace(prefix, parse_namespace(namespace, services.namespace_separator))
    return no_content()


def drop_namespace(services: Services, prefix: str, namespace: str):
    services.namespaces.drop_namespace(prefix, parse_namespace(namespace, services.namespace_separator))
    return no_content()


def update_properties(services: Services, prefix: str, namespace: str, body: UpdateNamespacePropertiesRequest):
    return services.namespaces.update_namespace_properties(
        prefix, parse_namespace(namespace, services.namespace_separator), body
    ), 200
