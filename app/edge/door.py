"""The operation door: the catalog's reads answered in front of connexion's routing and Flask.

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
logged and counted like any other. What it does not read with certainty - a body, an escaped
path, a repeated or undeclared parameter, a value connexion would refuse - goes to connexion
untouched: the door never writes a validation error of its own.

Which operations it serves is ``SERVED``: the reads whose handlers take everything from their
arguments. ``GROWLER_FAST_READS=false`` turns it off (the equivalence tests compare both).
"""

from __future__ import annotations

import asyncio
import contextvars
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from flask import Flask, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.edge.http import send_response
from app.edge.observability import ROUTING_CONTEXT
from app.edge.operations import Operation, RouteTable, Unreadable
from app.ground.text import path_has_control_characters

# The reads the door answers. loadTable and signRequest have their own lanes on the event loop
# (app/edge/fast_path.py, app/edge/sign_fast_path.py); operations that take a body or an
# Idempotency-Key, and handlers that read request headers, stay with connexion and Flask.
SERVED = frozenset(
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
_RAW_ESCAPE = re.compile(rb"%(?!1[fF])")  # any percent-escape except the namespace separator
_BODY_HEADERS = (b"content-length", b"transfer-encoding")


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
    ) -> None:
        self.app = app
        self.routes = routes
        found = {operation_id: handler_for(operation_id) for operation_id in SERVED}
        self.handlers = {operation_id: handler for operation_id, handler in found.items() if handler is not None}
        self.flask_app = flask_app
        self.serialize = serialize  # the app's Jsonifier.dumps: the bytes connexion would write
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="growler-door")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = self._read(scope) if scope["type"] == "http" else None
        if call is None:
            await self.app(scope, receive, send)
            return
        operation, kwargs = call
        _record_route(scope, operation, kwargs)
        context = contextvars.copy_context()  # the caller and the request id, into the thread
        loop = asyncio.get_running_loop()
        status, headers, body = await loop.run_in_executor(
            self.executor, context.run, self._answer, operation, kwargs, scope["method"] == "HEAD"
        )
        await send_response(send, status, body, headers, content_type=None)

    def _read(self, scope: Scope) -> tuple[Operation, dict[str, Any]] | None:
        """The operation and its handler's arguments, when the door serves this request."""
        path = scope["path"]
        found = self.routes.match(scope["method"], path)
        if found is None or found[0].operation_id not in self.handlers:
            return None
        if path_has_control_characters(path) or _RAW_ESCAPE.search(scope.get("raw_path") or b""):
            return None
        headers: dict[bytes, list[bytes]] = {}
        for key, value in scope["headers"]:
            if key in _BODY_HEADERS and value != b"0":
                return None  # a body: connexion reads and judges it
            headers.setdefault(key, []).append(value)
        operation, path_values = found
        try:
            return operation, operation.read(path_values, scope.get("query_string", b""), headers)
        except Unreadable:
            return None

    def _answer(self, operation: Operation, kwargs: dict[str, Any], head: bool) -> tuple[int, list, bytes]:
        """The handler's answer as connexion's response handling and Flask would send it."""
        with self.flask_app.app_context():
            result = self.handlers[operation.operation_id](**kwargs)
            response = result if isinstance(result, Response) else self._json_response(result)
            headers = [
                (name.lower().encode("latin-1"), value.encode("latin-1"))
                for name, value in response.get_wsgi_headers({}).items()
            ]
            return response.status_code, headers, b"" if head else response.get_data()

    def _json_response(self, result: Any) -> Response:
        """A ``(data, status[, headers])`` result, serialised as connexion's response decorator does."""
        data, status, extra = (*result, {})[:3] if isinstance(result, tuple) else (result, 200, {})
        body = self.serialize(data) if data is not None else None
        response = Response(body, status=status, mimetype="application/json")
        for name, value in extra.items():
            response.headers[name] = value
        return response


def _record_route(scope: Scope, operation: Operation, kwargs: dict[str, Any]) -> None:
    """What connexion's router would record, for the request log and metrics."""
    routing = (scope.get("extensions") or {}).get(ROUTING_CONTEXT)
    if routing is not None:
        routing["operation_id"] = operation.operation_id
    path_params: Any = scope.get("path_params")
    if path_params is not None:
        path_params.update({p.name: kwargs[p.argument] for p in operation.parameters if p.location == "path"})
