"""The dispatcher: every operation of both yamls, run through the same ordered stages.

    route -> read -> authorize -> call -> render

- **route**: the route table compiled from ``openapi/catalog.yaml`` and ``openapi/management.yaml``
  (``app.edge.operations``); what no operation matches (unknown paths, wrong methods, the probes,
  /metrics) goes on to connexion's app and Flask, which answer 404, 405 or their own routes.
- **read**: the parameters and the JSON body, validated against the yaml. The compiled reader
  does it for what it reads with certainty (nearly every request, with connexion's coercion and
  validators compiled once); anything else is read by connexion's own validation and argument
  parsing (``app.edge.contract``), whose problems are the API's 400 and 415 bodies.
- **authorize**: the operation's row of ``RULES`` (``app.authorization``), once, before anything
  runs: a catalog operation's privileges, or the management API's right (``app.management.rights``).
- **call**: the handler connexion's naming finds for the operationId (``handlers/``, behind the
  idempotency replay where the operation takes an ``Idempotency-Key``), in a thread - reads and
  writes in separate pools, so that a slow commit never queues a read - or, for the operations
  of ``app.edge.loop_reads``, on the event loop when that needs no I/O but one asyncio query
  (otherwise the same handler in a thread, without a second authorization).
- **render**: the handler returns a value - a ``Rendered`` (status, bytes, headers) or a JSON
  answer, ``(data, status[, headers])`` - that the dispatcher sends as it is or serialises with
  the app's Jsonifier (``app.edge.responses.render_result``); no framework response is built.
  A handler that needs more of the request than its parameters (a header the yaml does not
  pass, the raw body) names an ``http`` parameter and gets the ``HttpRequest``; one that names
  ``services`` gets the one ``Services`` (app/composition/services.py) the dispatcher was built
  with. No Flask request or app context is built. Errors are raised to the exception handling
  around it (``app.edge.http``).

Adding an operation: declare it in a yaml, write its handler (``handlers/``, named after the
operationId) and its row (``OPERATIONS``, or ``MANAGEMENT_OPERATIONS``); the dispatcher serves it (docs/design.md).
"""

from __future__ import annotations

import asyncio
import contextvars
import re
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from app.authorization import Authorizer, ManagementGate
from app.composition.services import Services
from app.edge.contract import ContractReader
from app.edge.http import raw_headers, read_body, replay, send_rendered, send_response
from app.edge.observability import ROUTING_CONTEXT
from app.edge.operations import Operation, RouteTable, Unreadable
from app.edge.responses import JSON, HttpRequest, Rendered, render_result, takes
from app.federation.operations import SERVED_BY_GROWLER
from app.ground.errors import UnsupportedOperation

InThread = Callable[..., Awaitable[Any]]  # runs a call in the dispatcher's threads, in the request's context


class LoopRead(Protocol):
    """An operation answered on the event loop (``app.edge.loop_reads``); None: in a thread."""

    operation_id: str

    def __call__(
        self, kwargs: dict[str, Any], headers: dict[bytes, list[bytes]], in_thread: InThread
    ) -> Awaitable[Rendered | None]: ...


_RAW_ESCAPE = re.compile(rb"%(?!1[fF])")  # any percent-escape except the namespace separator
# A body the compiled reader reads: small JSON ones (validated in the handler's thread, or on the
# loop for a loop read). Larger ones are read by connexion's validation, in its threads.
MAX_BODY_BYTES = 64 * 1024
_JSON_TYPES = (b"application/json", b"application/json;charset=utf-8")  # read as UTF-8, as connexion would
_UNREAD = object()  # the thread found the body beyond the compiled reader: connexion's reading decides


class Dispatcher:
    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: RouteTable,
        handlers: dict[str, Callable[..., Any] | None],
        contract: ContractReader,
        authorizer: Authorizer,
        gate: ManagementGate,
        services: Services,
        serialize: Callable[[Any], str],
        threads: int,
        loop_reads: Iterable[LoopRead] = (),
    ) -> None:
        self.app = app
        self.routes = routes
        self.handlers = handlers
        self.contract = contract  # connexion's reading, for what the compiled reader leaves
        self.authorizer = authorizer
        self.gate = gate  # the management API's rights: its operations' rows call them
        self.wants_http = frozenset(op for op, handler in handlers.items() if takes(handler, "http"))
        self.wants_services = frozenset(op for op, handler in handlers.items() if takes(handler, "services"))
        self.loop_reads = {read.operation_id: read for read in loop_reads}
        self.contract_found = False
        self.services = services  # handed to every handler that names a ``services`` parameter
        self.serialize = serialize  # the app's Jsonifier.dumps: the bytes connexion would write
        self.readers = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="growler-read")
        self.writers = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="growler-write")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = self.routes.match(scope["method"], scope["path"]) if scope["type"] == "http" else None
        if found is None:  # no operation: 404, 405, or a route of the Flask app
            await self.app(scope, receive, send)
            return
        operation, path_values = found
        _record_route(scope, operation, path_values)
        headers: dict[bytes, list[bytes]] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key, []).append(value)
        kwargs, data, pending = await self._read(operation, path_values, scope, receive, headers)
        # a body connexion's reader read is still JSON: typed in a thread (never on the loop)
        untyped = not pending and kwargs.get("body") is not None
        head_of_get = scope["method"] != operation.method
        loop_read = None if head_of_get else self.loop_reads.get(operation.operation_id)
        if loop_read is not None and not self._native(operation, path_values):
            loop_read = None  # a federated (or not yet cached) warehouse: answered in a thread
        authorize = True
        if loop_read is not None:
            if pending:  # a loop read's body is small: read on the loop
                try:
                    kwargs["body"] = operation.read_body(data or b"")
                except Unreadable:
                    kwargs, data = await self._contract_read(
                        operation, scope, replay(data or b"", receive), path_values
                    )
                    untyped = kwargs.get("body") is not None
                pending = False
            if untyped:
                await self._in_thread(self._type_body, operation, kwargs)
                untyped = False
            await self._authorize(operation, kwargs)
            authorize = False
            rendered = await loop_read(kwargs, headers, self._in_thread)
            if rendered is not None:
                if operation.response_check is not None and rendered.headers.get("Content-Type") == JSON:
                    operation.response_check(rendered.status, rendered.body)
                await send_rendered(send, rendered)
                return
        executor = self.readers if operation.method in ("GET", "HEAD") else self.writers
        call = (self._answer, operation, kwargs, scope, data, pending, authorize, untyped, path_values)
        answer = await self._in_thread(*call, executor=executor)
        if answer is _UNREAD:  # a body the compiled reader does not take: connexion reads it, then the call
            kwargs, data = await self._contract_read(operation, scope, replay(data or b"", receive), path_values)
            answer = await self._in_thread(
                self._answer, operation, kwargs, scope, data, False, authorize, True, path_values, executor=executor
            )
        rendered, length = answer
        headers_out = dict(rendered.headers)
        content_type = headers_out.pop("Content-Type", None)
        raw = raw_headers(headers_out)
        if content_type is not None:  # as send_response, but HEAD's length is the GET body's
            raw = [(b"content-type", content_type.encode("latin-1")), (b"content-length", length), *raw]
        await send_response(send, rendered.status, rendered.body, raw, content_type=None)

    # -- read -----------------------------------------------------------------------------

    async def _read(
        self,
        operation: Operation,
        path_values: list[str],
        scope: Scope,
        receive: Receive,
        headers: dict[bytes, list[bytes]],
    ) -> tuple[dict[str, Any], bytes | None, bool]:
        """The handler's arguments, the body's bytes and whether they are still to be read (a small
        JSON body, read in the handler's thread): by the compiled reader when it reads them with
        certainty, else by connexion's."""
        if not _RAW_ESCAPE.search(scope.get("raw_path") or b"") and _body_as_expected(operation, headers):
            try:
                kwargs = operation.read(path_values, scope.get("query_string", b""), headers)
            except Unreadable:
                pass
            else:
                if operation.body_reader is None:
                    return kwargs, None, False
                data, whole = await read_body(receive, MAX_BODY_BYTES)
                if whole:
                    return kwargs, data, True
                return (*await self._contract_read(operation, scope, replay(data, receive), path_values), False)
        return (*await self._contract_read(operation, scope, receive, path_values), False)

    async def _contract_read(
        self, operation: Operation, scope: Scope, receive: Receive, path_values: list[str]
    ) -> tuple[dict[str, Any], bytes]:
        if not self.contract_found:
            self.contract.find_operations(self.app)  # built by now: connexion builds its stack at once
            self.contract_found = True
        return await self.contract.read(
            operation, scope, receive, path_values, self.handlers.get(operation.operation_id)
        )

    @staticmethod
    def _type_body(operation: Operation, kwargs: dict[str, Any]) -> None:
        """The JSON body connexion's reader read, as the handler's model (``Operation.typed``):
        in a thread, as the compiled reader's is, a large commit's parse being no work for the loop."""
        if "body" in kwargs:
            kwargs["body"] = operation.typed(kwargs["body"])

    # -- authorize ------------------------------------------------------------------------

    async def _authorize(self, operation: Operation, kwargs: dict[str, Any]) -> None:
        """On the loop when the caller's grants are cached, else (one query, then cached) in a thread."""
        # a table read through views (referenced-by) reads the views' definers: not on the loop
        if self.authorizer.cached() is not None and "referencedby" not in kwargs:
            self.authorizer.authorize(operation.operation_id, kwargs, kwargs.get("body"), self.gate)
        else:
            await self._in_thread(
                self.authorizer.authorize, operation.operation_id, kwargs, kwargs.get("body"), self.gate
            )

    # -- call and render ------------------------------------------------------------------

    async def _in_thread(self, call: Callable[..., Any], *args: Any, executor: ThreadPoolExecutor | None = None) -> Any:
        """``call(*args)`` in one of the dispatcher's threads, with the caller and the request id."""
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(executor or self.readers, context.run, call, *args)

    def _answer(  # noqa: PLR0913 - the request's parts, handed to a thread
        self,
        operation: Operation,
        kwargs: dict[str, Any],
        scope: Scope,
        data: bytes | None,
        pending: bool,
        authorize: bool,
        untyped: bool,
        path_values: list[str],
    ) -> Any:
        """Read the body (``pending``: the compiled reader's) or type it (``untyped``: connexion's
        reader's), authorize, call the handler and render its answer (``render_result``): the
        ``Rendered`` to send (no body for HEAD) and its Content-Length; ``_UNREAD`` for a body the
        compiled reader does not take."""
        if pending:
            try:
                kwargs["body"] = operation.read_body(data)
            except Unreadable:
                return _UNREAD
        elif untyped:
            self._type_body(operation, kwargs)
        handler = self.handlers.get(operation.operation_id)
        if handler is None:
            raise UnsupportedOperation(f"Operation {operation.operation_id} is not supported by this catalog")
        if authorize:
            self.authorizer.authorize(operation.operation_id, kwargs, kwargs.get("body"), self.gate)
        if "prefix" in operation.names:  # on a warehouse: a federated one's remote answers instead
            forwarded = self._federated(operation, path_values, scope, data)
            if forwarded is not None:
                return forwarded
        if operation.operation_id in self.wants_http:
            kwargs["http"] = _http_request(scope, data)
        if operation.operation_id in self.wants_services:
            kwargs["services"] = self.services
        result = handler(**kwargs)
        rendered = render_result(result, self.serialize)
        if operation.response_check is not None and rendered.headers.get("Content-Type") == JSON:
            operation.response_check(rendered.status, rendered.body)
        length = str(len(rendered.body)).encode()
        if scope["method"] == "HEAD":
            rendered = Rendered(rendered.status, b"", rendered.headers)
        return rendered, length

    # -- federated warehouses -------------------------------------------------------------------

    def _native(self, operation: Operation, path_values: list[str]) -> bool:
        """Whether a loop read may serve it: no warehouse in its path, or one the directory's cache
        knows is native (no I/O; app/federation/service.py)."""
        if "prefix" not in operation.names:
            return True
        prefix = path_values[operation.names.index("prefix")]
        return self.services.federation.known_native(prefix)

    def _federated(
        self, operation: Operation, path_values: list[str], scope: Scope, data: bytes | None
    ) -> tuple[Rendered, bytes] | None:
        """The answer of a federated warehouse's remote (authorized already, as every operation is);
        None for a native warehouse: its handler runs."""
        values = dict(zip(operation.names, path_values, strict=True))
        federation = self.services.federation
        if operation.operation_id in SERVED_BY_GROWLER:  # its change feed: Growler's record of the warehouse
            return None
        remote = federation.remote_of(values["prefix"])
        if remote is None:
            return None
        headers: dict[bytes, list[bytes]] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key, []).append(value)
        answer = federation.forward(
            remote,
            operation.operation_id,
            scope["method"],
            operation.spec_path,
            values,
            scope.get("query_string", b""),
            headers,
            data,
        )
        length = str(len(answer.body)).encode()
        body = b"" if scope["method"] == "HEAD" else answer.body
        return Rendered(answer.status, body, answer.headers), length


def _http_request(scope: Scope, data: bytes | None) -> HttpRequest:
    headers: dict[bytes, list[bytes]] = {}
    for key, value in scope["headers"]:
        headers.setdefault(key, []).append(value)
    return HttpRequest(scope["method"], scope["path"], scope.get("query_string", b""), headers, data or b"")


def _body_as_expected(operation: Operation, headers: dict[bytes, list[bytes]]) -> bool:
    """No body, or - for an operation that takes one - one small JSON body of a declared length
    (RequestGuardMiddleware gives a chunked body its length)."""
    if b"transfer-encoding" in headers:
        return False
    length = headers.get(b"content-length")
    if operation.body_reader is None:
        return length is None or length == [b"0"]
    content_type = headers.get(b"content-type")
    return (
        length is not None
        and len(length) == 1
        and length[0].isdigit()
        and int(length[0]) <= MAX_BODY_BYTES
        and content_type is not None
        and len(content_type) == 1
        and content_type[0].replace(b" ", b"").lower() in _JSON_TYPES
    )


def _record_route(scope: Scope, operation: Operation, path_values: list[str]) -> None:
    """What connexion's router recorded, for the request log and metrics."""
    routing = (scope.get("extensions") or {}).get(ROUTING_CONTEXT)
    if routing is not None:
        routing["operation_id"] = operation.operation_id
    path_params: Any = scope.get("path_params")
    if path_params is not None:
        path_params.update(zip(operation.names, path_values, strict=True))
