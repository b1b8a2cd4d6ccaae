"""Request metrics and the request log line (JSON): one line per request.

The loggers, the request id variable and the commit lines are defined in ``app.ground.events``.

``ObservabilityMiddleware`` gives each request its ``X-Request-Id`` (``app.edge.http.with_request_id``)
and echoes it on the response; it sits outside connexion's
exception handling and routing, so it sees every request - unknown routes, validation errors and
crashes included - with its final status. The operationId comes from connexion's routing: its
``RoutingMiddleware`` writes ``{"operation_id": ...}`` into ``scope["extensions"]["connexion_routing"]``
and the path parameters into ``scope["path_params"]`` of a shallow copy of the scope; this
middleware puts its own (empty) dicts under those keys first, so the router fills them in place
and they can be read here once the response is done.

Nothing secret is logged: no headers, no query strings, no bodies.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.edge.http import REQUEST_ID_HEADER, with_request_id
from app.ground import metrics
from app.ground.events import PRINCIPAL, REQUEST_LOGGER, request_id_var
from app.rules.identifiers import UNIT_SEPARATOR, decoded_separator

ROUTING_CONTEXT = "connexion_routing"  # connexion.middleware.abstract.ROUTING_CONTEXT
_UNROUTED = {"/healthz": "healthz", "/readyz": "readyz", "/metrics": "metrics"}


class ObservabilityMiddleware:
    def __init__(self, app: ASGIApp, *, namespace_separator: str = "%1F") -> None:
        self.app = app
        self.separator = decoded_separator(namespace_separator)
        self.log = logging.getLogger(REQUEST_LOGGER)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        routing: dict[str, Any] = {}
        path_params: dict[str, Any] = {}
        extensions = {**(scope.get("extensions") or {}), ROUTING_CONTEXT: routing}
        headers, raw_id = with_request_id(scope["headers"])
        scope = dict(scope, headers=headers, extensions=extensions, path_params=path_params)
        request_id = raw_id.decode("latin-1")
        token = request_id_var.set(request_id)
        status: int | None = None

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", ()), (REQUEST_ID_HEADER, raw_id)]}
            await send(message)

        metrics.REQUESTS_IN_PROGRESS.inc()
        try:
            await self.app(scope, receive, send_and_watch)
        finally:
            metrics.REQUESTS_IN_PROGRESS.dec()
            seconds = time.perf_counter() - start
            status = status or 500  # nothing sent: the server's error middleware answers 500
            operation = routing.get("operation_id") or _UNROUTED.get(scope["path"], "unmatched")
            metrics.observe_request(operation, status, seconds)
            self._log(scope, request_id, operation, status, seconds, path_params, extensions.get(PRINCIPAL))
            metrics.refresh_pool()
            request_id_var.reset(token)

    def _log(
        self,
        scope: Scope,
        request_id: str | None,
        operation: str,
        status: int,
        seconds: float,
        params: dict[str, Any],
        principal: str | None = None,
    ) -> None:
        warehouse = params.get("prefix")
        if warehouse is None and scope.get("query_string"):
            warehouse = (parse_qs(scope["query_string"].decode("latin-1")).get("warehouse") or [None])[0]
        client = scope.get("client")
        fields = {
            "event": "request",
            "request_id": request_id,
            "principal": principal,
            "method": scope["method"],
            "path": scope["path"],
            "operation": operation,
            "warehouse": warehouse,
            "namespace": self._namespace(params.get("namespace")),
            "table": params.get("table"),
            "view": params.get("view"),
            "status": status,
            "duration_ms": round(seconds * 1000, 2),
            "client": client[0] if client else None,
            "pid": os.getpid(),
        }
        if self.log.isEnabledFor(logging.INFO):
            # A record made here, not Logger.info: that first walks the stack for the file and
            # line of the call (findCaller), which the JSON line does not carry - on every request.
            extra = {"fields": {k: v for k, v in fields.items() if v is not None}}
            self.log.handle(
                self.log.makeRecord(self.log.name, logging.INFO, __file__, 0, "request", (), None, extra=extra)
            )

    def _namespace(self, raw: str | None) -> str | None:
        if raw is None:
            return None
        if self.separator != UNIT_SEPARATOR:
            raw = raw.replace(self.separator, UNIT_SEPARATOR)
        return ".".join(raw.split(UNIT_SEPARATOR))
