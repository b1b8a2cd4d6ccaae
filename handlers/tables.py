"""Table operations.

A handler returns what the service answers - a table (``LoadedTable``, ``NotModified``), a JSON
value with its status, or ``no_content()`` - and the dispatcher renders it
(``app.edge.responses.render_result``); the services come as the ``services`` argument.
"""

from __future__ import annotations

from app.catalog.paging import identifiers_answer
from app.composition.services import Services
from app.edge.responses import HttpRequest, no_content, parse_load_table, render_unregistered
from app.rules.identifiers import parse_namespace, table_name
from app.rules.requests.catalog import RenameTableRequest
from app.rules.requests.tables import (
    CommitTableRequest,
    CreateTableRequest,
    RegisterTableRequest,
    RemoteSignRequest,
    ReportMetricsRequest,
)
from app.storage_access.delegation import Delegation


def _vend(http: HttpRequest) -> Delegation:
    return Delegation.parse(http.header("X-Iceberg-Access-Delegation"))


def list_tables(
    services: Services, prefix: str, namespace: str, pageToken: str | None = None, pageSize: int | None = None
):
    levels = parse_namespace(namespace, services.namespace_separator)
    return identifiers_answer(levels, services.tables.list_names(prefix, levels, pageToken, pageSize)), 200


def create_table(services: Services, prefix: str, namespace: str, body: CreateTableRequest, http: HttpRequest):
    levels = parse_namespace(namespace, services.namespace_separator)
    return services.tables.create_table(prefix, levels, body, _vend(http))


def register_table(services: Services, prefix: str, namespace: str, body: RegisterTableRequest, http: HttpRequest):
    levels = parse_namespace(namespace, services.namespace_separator)
    return services.tables.register_table(prefix, levels, body, _vend(http))


def load_table(
    services: Services,
    prefix: str,
    namespace: str,
    table: str,
    http: HttpRequest,
    snapshots: str | None = None,
    referencedby: str | None = None,  # referenced-by, as connexion names it
):
    parsed = parse_load_table(
        prefix,
        namespace,
        table,
        referenced_by=referencedby,
        snapshots=snapshots,
        delegation=http.header("X-Iceberg-Access-Delegation"),
        if_none_match=http.header("If-None-Match"),
        separator=services.namespace_separator,
    )
    return services.tables.load(parsed)


def table_exists(services: Services, prefix: str, namespace: str, table: str):
    services.tables.require_exists(prefix, parse_namespace(namespace, services.namespace_separator), table_name(table))
    return no_content()


def update_table(services: Services, prefix: str, namespace: str, table: str, body: CommitTableRequest):
    levels = parse_namespace(namespace, services.namespace_separator)
    return services.tables.commit_table(prefix, levels, table_name(table), body)


def drop_table(services: Services, prefix: str, namespace: str, table: str, purgeRequested: bool = False):
    levels = parse_namespace(namespace, services.namespace_separator)
    services.tables.drop_table(prefix, levels, table_name(table), purge=bool(purgeRequested))
    return no_content()


def unregister_table(services: Services, prefix: str, namespace: str, table: str):
    levels = parse_namespace(namespace, services.namespace_separator)
    return render_unregistered(services.tables.unregister_table(prefix, levels, table_name(table)))


def rename_table(services: Services, prefix: str, body: RenameTableRequest):
    services.tables.rename(prefix, body.source, body.destination)
    return no_content()


def load_credentials(
    services: Services,
    prefix: str,
    namespace: str,
    table: str,
    planId: str | None = None,  # noqa: N803
    referencedby: str | None = None,  # referenced-by, as connexion names it
):
    levels = parse_namespace(namespace, services.namespace_separator)
    if planId is not None:  # credentials for reading a scan plan's files
        credentials = services.planning.credentials(prefix, levels, table_name(table), planId)
    else:
        credentials = services.tables.load_credentials(prefix, levels, table_name(table), referencedby)
    return {"storage-credentials": credentials}, 200


def report_metrics(services: Services, prefix: str, namespace: str, table: str, body: ReportMetricsRequest):
    levels = parse_namespace(namespace, services.namespace_separator)
    services.tables.report_metrics(prefix, levels, table_name(table), body)
    return no_content()


def sign_request(services: Services, prefix: str, namespace: str, table: str, body: RemoteSignRequest):
    """signRequest: the S3 request signed, or 403 with nothing signed (``app.storage_access.signing``)."""
    levels = parse_namespace(namespace, services.namespace_separator)
    signed = services.signer.sign(prefix, levels, table_name(table), body)
    cache_control = "private" if signed.cacheable else "no-cache"
    return signed.body(), 200, {"Cache-Control": cache_control}
