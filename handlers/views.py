"""View operations."""

from __future__ import annotations

from app.catalog.paging import identifiers_answer
from app.edge.context import namespace_arg, services
from app.edge.responses import Rendered, no_content, render_view, view_name
from app.rules.requests.catalog import RenameTableRequest
from app.rules.requests.views import CommitViewRequest, CreateViewRequest, RegisterViewRequest
from app.views.service import LoadedView

_name = view_name


def _view_response(loaded: LoadedView) -> Rendered:
    return render_view(loaded)


def list_views(prefix: str, namespace: str, pageToken: str | None = None, pageSize: int | None = None):
    levels = namespace_arg(namespace)
    return identifiers_answer(levels, services().views.list_names(prefix, levels, pageToken, pageSize)), 200


def create_view(prefix: str, namespace: str, body: CreateViewRequest):
    return _view_response(services().views.create_view(prefix, namespace_arg(namespace), body))


def register_view(prefix: str, namespace: str, body: RegisterViewRequest):
    return _view_response(services().views.register_view(prefix, namespace_arg(namespace), body))


def load_view(prefix: str, namespace: str, view: str):
    return _view_response(services().views.load_view(prefix, namespace_arg(namespace), _name(view)))


def view_exists(prefix: str, namespace: str, view: str):
    services().views.require_exists(prefix, namespace_arg(namespace), _name(view))
    return no_content()


def replace_view(prefix: str, namespace: str, view: str, body: CommitViewRequest):
    return _view_response(services().views.replace_view(prefix, namespace_arg(namespace), _name(view), body))


def drop_view(prefix: str, namespace: str, view: str):
    services().views.drop_view(prefix, namespace_arg(namespace), _name(view))
    return no_content()


def rename_view(prefix: str, body: RenameTableRequest):
    services().views.rename(prefix, body.source, body.destination)
    return no_content()
