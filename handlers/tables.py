"""Table operations."""

from __future__ import annotations

from app.catalog.paging import identifiers_answer
from app.edge.context import namespace_arg, services
from app.edge.responses import (
    HttpRequest,
    Rendered,
    no_content,
    parse_load_table,
    render_table,
    render_unregistered,
    table_name,
)
from app.rules.requests.catalog import RenameTableRequest
from app.rules.requests.tables import (
    CommitTableRequest,
    CreateTableRequest,
    RegisterTableRequest,
    RemoteSignRequest,
    ReportMetricsRequest,
)
from app.storage_access.delegation import Delegation
from app.tables.service import LoadedTable

_name = table_name


def _vend(http: HttpRequest) -> Delegation:
    return Delegation.parse(http.header("X-Iceberg-Access-Delegation"))


def _table_response(loaded: LoadedTable) -> Rendered:
    return render_table(loaded)


def list_tables(prefix: str, namespace: str, pageToken: str | None = None, pageSize: int | None = None):
    levels = namespace_arg(namespace)
    return identifiers_answer(levels, services().tables.list_names(prefix, levels, pageToken, pageSize)), 200


def create_table(prefix: str, namespace: str, body: CreateTableRequest, http: HttpRequest):
    return _table_response(services().tables.create_table(prefix, namespace_arg(namespace), body, _vend(http)))


def register_table(prefix: str, namespace: str, body: RegisterTableRequest, http: HttpRequest):
    return _table_response(services().tables.register_table(prefix, namespace_arg(namespace), body, _vend(http)))


def load_table(prefix: str, namespace: str, table: str, http: HttpRequest, snapshots: str | None = None):
    parsed = parse_load_table(
        prefix,
        namespace,
        table,
        snapshots=snapshots,
        delegation=http.header("X-Iceberg-Access-Delegation"),
        if_none_match=http.header("If-None-Match"),
        separator=services().namespaces.settings.namespace_separator,
    )
    return render_table(services().tables.load(parsed))


def table_exists(prefix: str, namespace: str, table: str):
    services().tables.require_exists(prefix, namespace_arg(namespace), _name(table))
    return no_content()


def update_table(prefix: str, namespace: str, table: str, body: CommitTableRequest):
    return _table_response(services().tables.commit_table(prefix, namespace_arg(namespace), _name(table), body))


def drop_table(prefix: str, namespace: str, table: str, purgeRequested: bool = False):
    services().tables.drop_table(prefix, namespace_arg(namespace), _name(table), purge=bool(purgeRequested))
    return no_content()


def unregister_table(prefix: str, namespace: str, table: str):
    unregistered = services().tables.unregister_table(prefix, namespace_arg(namespace), _name(table))
    return render_unregistered(unregistered)


def rename_table(prefix: str, body: RenameTableRequest):
    services().tables.rename(prefix, body.source, body.destination)
    return no_content()


def load_credentials(prefix: str, namespace: str, table: str, planId: str | None = None):
    if planId is not None:  # credentials for reading a scan plan's files
        credentials = services().plans.credentials(prefix, namespace_arg(namespace), _name(table), planId)
    else:
        credentials = services().tables.load_credentials(prefix, namespace_arg(namespace), _name(table))
    return {"storage-credentials": credentials}, 200


def report_metrics(prefix: str, namespace: str, table: str, body: ReportMetricsRequest):
    services().tables.report_metrics(prefix, namespace_arg(namespace), _name(table), body)
    return no_content()


def sign_request(prefix: str, namespace: str, table: str, body: RemoteSignRequest):
    """signRequest: the S3 request signed, or 403 with nothing signed (``app.storage_access.signing``)."""
    signed = services().signer.sign(prefix, namespace_arg(namespace), _name(table), body)
    cache_control = "private" if signed.cacheable else "no-cache"
    return signed.body(), 200, {"Cache-Control": cache_control}
