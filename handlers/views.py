"""View operations: each returns what the service answers (a ``LoadedView`` the dispatcher
renders, a JSON value, or ``no_content()``)."""

from __future__ import annotations

from app.catalog.paging import identifiers_answer
from app.composition.services import Services
from app.edge.responses import no_content
from app.rules.identifiers import parse_namespace, view_name
from app.rules.requests.catalog import RenameTableRequest
from app.rules.requests.views import CommitViewRequest, CreateViewRequest, RegisterViewRequest


def list_views(
    services: Services, prefix: str, namespace: str, pageToken: str | None = None, pageSize: int | None = None
):
    levels = parse_namespace(namespace, services.namespace_separator)
    return identifiers_answer(levels, services.views.list_names(prefix, levels, pageToken, pageSize)), 200


def create_view(services: Services, prefix: str, namespace: str, body: CreateViewRequest):
    return services.views.create_view(prefix, parse_namespace(namespace, services.namespace_separator), body)


def register_view(services: Services, prefix: str, namespace: str, body: RegisterViewRequest):
    return services.views.register_view(prefix, parse_namespace(namespace, services.namespace_separator), body)


def load_view(services: Services, prefix: str, namespace: str, view: str):
    levels = parse_namespace(namespace, services.namespace_separator)
    return services.views.load_view(prefix, levels, view_name(view))


def view_exists(services: Services, prefix: str, namespace: str, view: str):
    services.views.require_exists(prefix, parse_namespace(namespace, services.namespace_separator), view_name(view))
    return no_content()


def replace_view(services: Services, prefix: str, namespace: str, view: str, body: CommitViewRequest):
    levels = parse_namespace(namespace, services.namespace_separator)
    return services.views.replace_view(prefix, levels, view_name(view), body)


def drop_view(services: Services, prefix: str, namespace: str, view: str):
    services.views.drop_view(prefix, parse_namespace(namespace, services.namespace_separator), view_name(view))
    return no_content()


def rename_view(services: Services, prefix: str, body: RenameTableRequest):
    services.views.rename(prefix, body.source, body.destination)
    return no_content()
