"""The operation door: the catalog's reads and writes answered in front of connexion's routing and Flask.

Through the full stack, a request pays connexion's routing and parameter validation, a2wsgi's
hand-off to a thread, Flask's request context and dispatch, and connexion's response handling:
for ``GET namespaces/{ns}`` that was about 1.5 ms of a worker's CPU time around a 0.3 ms query,
and it is what limited every read but loadTable. The door reads the request with the route
table compiled from the yaml (``app.edge.operations``), calls the same handler connexion would
call - behind the same authorization wrapper, with the same arguments - in a thread of its own,
and renders the handler's result as connexion and Flask would.

It sits inside ``RequestGuardMiddleware`` (body limits, unprefixed routes mapped to the default
warehouse) and inside connexion's exception handling, so an error a handler raises is rendered
by the same handlers as on the full path (``app.edge.http``); it is inside the request-id,
observability and authentication middleware too, so every request it answers is authenticated,
logged and counted like any other. What it does not read with certainty - a body other than a
small valid JSON one of an operation it reads bodies of, an escaped
path, a repeated or undeclared parameter, a value connexion would refuse - goes to connexion
untouched (with any body it read replayed): the door never writes a validation error of its own.

Which operations it serves is ``SERVED``: the reads whose handlers take everything from their
arguments, run in a thread; the writes of namespaces, tables, views and transactions
(``WRITES``), whose small JSON body is validated in that thread with connexion's own validator for
the yaml's schema and whose handlers run in a Flask request context (they read Idempotency-Key
and the delegation header), in threads of their own so that a slow commit never queues a read;
and the ``loop_reads`` (loadTable, loadNamespaceMetadata, the listings of namespaces, tables and
views, and signRequest with its small JSON body read and validated from the yaml's schema),
answered on the event loop with the same rule, service and rendering as their handlers, or -
when that needs a thread - answered in the door's thread (the ones in ``SERVED``) or by
connexion (loadTable, signRequest).
``GROWLER_FAST_READS=false`` turns it off (the equivalence tests compare both).
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import re
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from a2wsgi.wsgi import build_environ
from flask import Flask, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.edge.http import read_body, replay, send_rendered, send_response
from app.edge.observability import ROUTING_CONTEXT
from app.edge.operations import Operation, RouteTable, Unreadable
from app.edge.responses import JSON, Rendered
from app.ground.text import path_has_control_characters

# The writes the door answers, in a request context (their handlers read Idempotency-Key and the
# delegation header) and in threads of their own: through connexion's routing and validation,
# a2wsgi and Flask, a create and an append commit paid about 1 ms more, a quarter of a create's
# CPU (W5) and of a losing commit's (W7).
WRITES = frozenset(
    {
        "createNamespace",
        "dropNamespace",
        "updateProperties",
        "createTable",
        "registerTable",
        "updateTable",
        "dropTable",
        "unregisterTable",
        "renameTable",
        "reportMetrics",
        "commitTransaction",
        "createView",
        "registerView",
        "replaceView",
        "dropView",
        "renameView",
    }
)
# The operations whose JSON body the door reads, when they declare one (``RouteTable.compile``).
BODIES = WRITES | {"signRequest"}

# The operations the door answers in a thread, with the handler connexion would call. loadTable and
# signRequest are answered on the event loop (``loop_reads``). Other writes stay with connexion and
# Flask.
SERVED = WRITES | frozenset(
    {
        "getConfig",
        "listNamespaces",
        "loadNamespaceMetadata",
        "namespaceExists",
        "listTables",
        "tableExists",
        "loadCredentials",
        "listViews",
        "loadView",
        "viewExists",
        "listFunctions",
        "loadFunction",
    }
)


InThread = Callable[..., Awaitable[Any]]  # runs a call in the door's threads, in the request's context


class LoopRead(Protocol):
    """An operation answered on the event loop (``app.edge.loop_reads``); None: connexion answers."""

    operation_id: str

    def __call__(
        self, kwargs: dict[str, Any], headers: dict[bytes, list[bytes]], in_thread: InThread
    ) -> Awaitable[Rendered | None]: ...


_RAW_ESCAPE = re.compile(rb"%(?!1[fF])")  # any percent-escape except the namespace separator
# A body the door reads itself (signRequest's) is parsed and validated on the event loop: small
# ones only. Larger bodies go to connexion, which does that work in threads (app/edge/validation.py).
MAX_BODY_BYTES = 64 * 1024
_JSON_TYPES = (b"application/json", b"application/json;charset=utf-8")  # read as UTF-8, as connexion would


class OperationDoor:
    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: RouteTable,
        handler_for: Callable[[str], Callable[..., Any] | None],
        flask_app: Flask,
        serialize: Callable[[Any], str],
        threads: int,
        loop_reads: Iterable[LoopRead] = (),
    ) -> None:
        self.app = app
        self.routes = routes
        found = {operation_id: handler_for(operation_id) for operation_id in SERVED}
        self.handlers = {operation_id: handler for operation_id, handler in found.items() if handler is not None}
        self.loop_reads = {read.operation_id: read for read in loop_reads}
        self.flask_app = flask_app
        self.serialize = serialize  # the app's Jsonifier.dumps: the bytes connexion would write
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="growler-door")
        self.writers = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="growler-door-write")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = self._read(scope) if scope["type"] == "http" else None
        if call is None:
            await self.app(scope, receive, send)
            return
        operation, kwargs, headers = call
        data = None
        if operation.body_reader is not None:
            data, whole = await read_body(receive, MAX_BODY_BYTES)
            receive = replay(data, receive)  # whatever answers next (connexion) reads the body again
            if not whole:  # connexion judges it
                await self.app(scope, receive, send)
                return
        loop_read = self.loop_reads.get(operation.operation_id)
        if loop_read is not None:
            try:
                if data is not None:
                    kwargs["body"] = operation.read_body(data)  # small: validated on the loop
            except Unreadable:
                await self.app(scope, receive, send)
                return
            _record_route(scope, operation, kwargs)
            rendered = await loop_read(kwargs, headers, self._in_thread)
            if rendered is not None:
                if operation.response_check is not None and rendered.headers.get("Content-Type") == JSON:
                    operation.response_check(rendered.status, rendered.body)
                await send_rendered(send, rendered)
                return
            if operation.operation_id not in self.handlers:  # it needs a thread: connexion's handler answers
                await self.app(scope, receive, send)
                return
        else:
            _record_route(scope, operation, kwargs)
        executor = self.writers if operation.operation_id in WRITES else self.executor
        answer = await self._in_thread(self._answer, operation, kwargs, scope, data, executor=executor)
        if answer is None:  # a body connexion must judge
            await self.app(scope, receive, send)
            return
        status, headers, body = answer
        await send_response(send, status, body, headers, content_type=None)

    async def _in_thread(self, call: Callable[..., Any], *args: Any, executor: ThreadPoolExecutor | None = None) -> Any:
        """``call(*args)`` in one of the door's threads, with the caller and the request id."""
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(executor or self.executor, context.run, call, *args)

    def _read(self, scope: Scope) -> tuple[Operation, dict[str, Any], dict[bytes, list[bytes]]] | None:
        """The operation, its handler's arguments and the headers, when the door serves this request."""
        path = scope["path"]
        found = self.routes.match(scope["method"], path)
        if found is None or not (found[0].operation_id in self.handlers or found[0].operation_id in self.loop_reads):
            return None
        if path_has_control_characters(path) or _RAW_ESCAPE.search(scope.get("raw_path") or b""):
            return None
        headers: dict[bytes, list[bytes]] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key, []).append(value)
        operation, path_values = found
        if not _body_as_expected(operation, headers):
            return None
        try:
            return operation, operation.read(path_values, scope.get("query_string", b""), headers), headers
        except Unreadable:
            return None

    def _answer(
        self, operation: Operation, kwargs: dict[str, Any], scope: Scope, data: bytes | None
    ) -> tuple[int, list, bytes] | None:
        """The handler's answer as connexion's response handling and Flask would send it.

        With a body: None unless it is valid (connexion then judges it). A write's handler runs in a
        request context made from the request, as Flask's would be.
        """
        if data is not None:
            try:
                kwargs["body"] = operation.read_body(data)
            except Unreadable:
                return None
        if operation.operation_id in WRITES:
            context = self.flask_app.request_context(build_environ(scope, io.BytesIO(data or b"")))
        else:
            context = self.flask_app.app_context()
        with context:
            result = self.handlers[operation.operation_id](**kwargs)
            response = result if isinstance(result, Response) else self._json_response(result)
            headers = [
                (name.lower().encode("latin-1"), value.encode("latin-1"))
                for name, value in response.get_wsgi_headers({}).items()
            ]
            body = response.get_data()
            if operation.response_check is not None and response.mimetype == "application/json":
                operation.response_check(response.status_code, body)
            return response.status_code, headers, b"" if scope["method"] == "HEAD" else body

    def _json_response(self, result: Any) -> Response:
        """A ``(data, status[, headers])`` result, serialised as connexion's response decorator does."""
        data, status, extra = (*result, {})[:3] if isinstance(result, tuple) else (result, 200, {})
        body = self.serialize(data) if data is not None else None
        response = Response(body, status=status, mimetype="application/json")
        for name, value in extra.items():
            response.headers[name] = value
        return response


def _body_as_expected(operation: Operation, headers: dict[bytes, list[bytes]]) -> bool:
    """No body, or - for an operation whose body the door reads - one small JSON body of a declared
    length (RequestGuardMiddleware gives a chunked body its length)."""
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


def _record_route(scope: Scope, operation: Operation, kwargs: dict[str, Any]) -> None:
    """What connexion's router would record, for the request log and metrics."""
    routing = (scope.get("extensions") or {}).get(ROUTING_CONTEXT)
    if routing is not None:
        routing["operation_id"] = operation.operation_id
    path_params: Any = scope.get("path_params")
    if path_params is not None:
        path_params.update({p.name: kwargs[p.argument] for p in operation.parameters if p.location == "path"})
