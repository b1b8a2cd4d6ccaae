"""loadTable served in front of the framework: the catalog's hottest request, kept cheap.

A plain ``GET /v1/{prefix}/namespaces/{namespace}/tables/{table}`` is what every engine sends
before every query, usually several times. Through connexion's routing and validation, a2wsgi's
thread hand-off and Flask's dispatch it cost about 1.5 ms of a worker's CPU time, for one
indexed query and a body that is stored text; profiling showed under a fifth of that in
Growler's own code. This middleware sits just inside the request-id and observability
middleware (so logs, metrics and ``X-Request-Id`` are unchanged) and answers such a request
itself, with the same response bytes and error bodies as the handler. The row is read with
psycopg's asyncio API on the event loop: handing a 1 ms query to a thread cost more than the
query, and the threads' contention for the GIL showed as a long latency tail.

Only requests that need no validation beyond what is checked here take this path: nothing but
``snapshots=all|refs`` in the query, no body, known ``X-Iceberg-Access-Delegation`` values, a
path of plain segments. Anything else - other query parameters, percent-escapes other than the
namespace separator, HEAD - goes through connexion as before, so the yaml still decides what
is valid. ``GROWLER_FAST_READS=false`` turns the path off (the equivalence tests compare both).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from app.authorization import Authorizer
from app.edge.http import raw_headers, send_response
from app.edge.observability import ROUTING_CONTEXT
from app.edge.responses import JSON, Rendered, parse_load_table, render_table
from app.ground.errors import CatalogError
from app.ground.lru import LruCache
from app.ground.text import path_has_control_characters
from app.tables import TABLE, LoadedTable, NotModified, TableService
from storage.repository import AsyncEntryReader

log = logging.getLogger(__name__)

OPERATION_ID = "loadTable"
# A first segment naming a route is an unprefixed route (RequestGuardMiddleware), not a warehouse.
_PATH = re.compile(r"^/v1/(?!(?:namespaces|tables|views|transactions)/)([^/]+)/namespaces/([^/]+)/tables/([^/]+)$")
_RAW_ESCAPE = re.compile(rb"%(?!1[fF])")  # any percent-escape except the namespace separator
_SNAPSHOTS = {b"": None, b"snapshots=all": "all", b"snapshots=refs": "refs"}
_DELEGATION_MODES = frozenset({"vended-credentials", "remote-signing"})  # the spec's enum


@dataclass(frozen=True)
class _LoadRequest:
    """The route's segments and what of the request loadTable reads, as sent (parsed in ``_load``)."""

    prefix: str
    namespace: str
    table: str
    snapshots: str | None
    delegation: str | None
    if_none_match: str | None


class LoadTableFastPath:
    def __init__(
        self, app: ASGIApp, *, tables: TableService, reader: AsyncEntryReader, namespace_separator: str, threads: int
    ) -> None:
        self.app = app
        self.tables = tables
        self.authorizer: Authorizer = tables.authorizer  # the same rule and cache as the handler
        self.reader = reader
        self.separator = namespace_separator
        # Misses (unknown table, warehouse not cached yet) take the service's own path in threads.
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="growler-load")
        self.issued = IssuedETags()  # only touched on the event loop

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = _match(scope) if scope["type"] == "http" else None
        if request is None:
            await self.app(scope, receive, send)
            return
        _record_route(scope, request)
        try:
            await self._authorize(request)
            answer = await self._load(request)
        except CatalogError as exc:
            if exc.code >= 500:
                log.warning("loadTable failed: %s %s", exc.error_type, exc.message)
            rendered = Rendered(exc.code, json.dumps(exc.body()).encode(), {"Content-Type": JSON, **exc.headers()})
            await _send_rendered(send, rendered)
            return
        if answer.etag and answer.metadata_location:
            self.issued.remember(answer.etag, answer.metadata_location)
        await _send_rendered(send, render_table(answer))

    async def _authorize(self, request: _LoadRequest) -> None:
        """loadTable's rule: on the event loop for a caller whose grants are cached (no database
        round trip), else in a thread (one query, then cached)."""
        params = {"prefix": request.prefix, "namespace": request.namespace, "table": request.table}
        if self.authorizer.cached() is not None:
            self.authorizer.authorize(OPERATION_ID, params)
            return
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()  # the thread decides for this request's caller
        await loop.run_in_executor(self.executor, context.run, self.authorizer.authorize, OPERATION_ID, params)

    async def _load(self, request: _LoadRequest) -> LoadedTable | NotModified:
        """The row read on the event loop (no thread hand-off); anything unusual via the service.

        A revalidation (``If-None-Match`` with an ETag this worker issued) asks the database for
        the document only if the table has moved on; when it has not, the answer is a 304, which
        needs no document.
        """
        parsed = parse_load_table(
            request.prefix,
            request.namespace,
            request.table,
            snapshots=request.snapshots,
            delegation=request.delegation,
            if_none_match=request.if_none_match,
            separator=self.separator,
        )
        warehouse = self.tables.warehouses.cached(parsed.prefix)
        if warehouse is not None and self.reader.available():
            known = self.issued.location_of(parsed.if_none_match)
            row = await self.reader.load_entry(warehouse.id, parsed.namespace, parsed.name, unless_at=known)
            if row is not None and row.kind == TABLE:
                if row.metadata_location != known:
                    return self.tables.answer(warehouse, row, parsed)
                not_modified = self.tables.not_modified(row, parsed)
                if not_modified is not None:
                    return not_modified
                # still at that version, but the client's ETag is for another variant: read it all
        context = contextvars.copy_context()  # the caller decides what credentials it gets
        return await asyncio.get_running_loop().run_in_executor(self.executor, context.run, self.tables.load, parsed)


class IssuedETags:
    """The metadata location behind each ETag this worker recently sent (ETags are one-way hashes)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._locations: LruCache[str, str] = LruCache(capacity)

    def remember(self, etag: str, location: str) -> None:
        self._locations.put(etag, location)

    def location_of(self, if_none_match: str | None) -> str | None:
        return self._locations.get(if_none_match.strip()) if if_none_match else None


def _match(scope: Scope) -> _LoadRequest | None:
    """The request, when it is a loadTable this path may answer; None sends it to connexion."""
    if scope["method"] != "GET" or scope.get("query_string", b"") not in _SNAPSHOTS:
        return None
    match = _PATH.match(scope["path"])
    if match is None or path_has_control_characters(scope["path"]) or _RAW_ESCAPE.search(scope.get("raw_path") or b""):
        return None
    headers: dict[bytes, bytes] = {}
    for key, value in scope["headers"]:
        if key in headers or key in (b"content-length", b"transfer-encoding") and value != b"0":
            return None  # a repeated header or a body: leave the edge cases to connexion
        headers[key] = value
    delegation = headers.get(b"x-iceberg-access-delegation")
    if delegation is not None:
        delegation = delegation.decode("latin-1")
        if not {mode.strip() for mode in delegation.split(",")} <= _DELEGATION_MODES:
            return None
    if_none_match = headers.get(b"if-none-match")
    prefix, namespace, table = match.groups()
    return _LoadRequest(
        prefix,
        namespace,
        table,
        _SNAPSHOTS[scope.get("query_string", b"")],
        delegation,
        if_none_match.decode("latin-1") if if_none_match is not None else None,
    )


def _record_route(scope: Scope, request: _LoadRequest) -> None:
    """What connexion's router would record, for the request log and metrics."""
    routing = (scope.get("extensions") or {}).get(ROUTING_CONTEXT)
    if routing is not None:
        routing["operation_id"] = OPERATION_ID
    path_params: Any = scope.get("path_params")
    if path_params is not None:
        path_params.update(prefix=request.prefix, namespace=request.namespace, table=request.table)


async def _send_rendered(send: Send, rendered: Rendered) -> None:
    """A rendered answer through the edge's one ASGI writer: its Content-Type leads, when it has one."""
    headers = dict(rendered.headers)
    content_type = headers.pop("Content-Type", None)
    encoded_type = content_type.encode("latin-1") if content_type is not None else None
    await send_response(send, rendered.status, rendered.body, raw_headers(headers), encoded_type)
