"""Request metrics and structured (JSON) logs: one line per request, one per committed table.

``ObservabilityMiddleware`` sits just inside ``RequestIdMiddleware``, outside connexion's
exception handling and routing, so it sees every request - unknown routes, validation errors and
crashes included - with its final status. The operationId comes from connexion's routing: its
``RoutingMiddleware`` writes ``{"operation_id": ...}`` into ``scope["extensions"]["connexion_routing"]``
and the path parameters into ``scope["path_params"]`` of a shallow copy of the scope; this
middleware puts its own (empty) dicts under those keys first, so the router fills them in place
and they can be read here once the response is done.

Nothing secret is logged: no headers, no query strings, no bodies.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
import sys
import time
from contextvars import ContextVar
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.ground import metrics
from app.ground.errors import CatalogError, CommitFailed, CommitStateUnknown
from app.identifiers import UNIT_SEPARATOR, decoded_separator

REQUEST_LOGGER = "growler.request"
COMMIT_LOGGER = "growler.commit"
ROUTING_CONTEXT = "connexion_routing"  # connexion.middleware.abstract.ROUTING_CONTEXT
_UNROUTED = {"/healthz": "healthz", "/readyz": "readyz", "/metrics": "metrics"}

# The request id of the request being served; a2wsgi copies the context into the Flask thread.
request_id_var: ContextVar[str | None] = ContextVar("growler_request_id", default=None)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, msg, the record's ``fields``, exc."""

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        doc: dict[str, Any] = {
            "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, ensure_ascii=False, separators=(",", ":"))


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time (pytest swaps it per test)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_event_logs() -> None:
    """The request and commit loggers: JSON lines on stderr, whatever the root logger does."""
    for name in (REQUEST_LOGGER, COMMIT_LOGGER):
        logger = logging.getLogger(name)
        if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
            handler = _StderrHandler()
            handler.setFormatter(JsonFormatter())
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


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
        scope = dict(scope, extensions=extensions, path_params=path_params)
        request_id = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"x-request-id"), None)
        token = request_id_var.set(request_id)
        status: int | None = None

        async def send_and_watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
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
            self._log(scope, request_id, operation, status, seconds, path_params)
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
    ) -> None:
        warehouse = params.get("prefix")
        if warehouse is None and scope.get("query_string"):
            warehouse = (parse_qs(scope["query_string"].decode("latin-1")).get("warehouse") or [None])[0]
        client = scope.get("client")
        fields = {
            "event": "request",
            "request_id": request_id,
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
        self.log.info("request", extra={"fields": {k: v for k, v in fields.items() if v is not None}})

    def _namespace(self, raw: str | None) -> str | None:
        if raw is None:
            return None
        if self.separator != UNIT_SEPARATOR:
            raw = raw.replace(self.separator, UNIT_SEPARATOR)
        return ".".join(raw.split(UNIT_SEPARATOR))


class CommitRecorder:
    """Counts and logs one commit (a table or a multi-table transaction) once its outcome is known.

    ``with CommitRecorder(...) as recorder:`` around the retry loop; the commit path sets
    ``retries`` and, on success, ``locations`` (old, new metadata location per table).
    """

    def __init__(self, warehouse: str, tables: list[str]) -> None:
        self.warehouse = warehouse
        self.tables = tables
        self.kind = "transaction" if len(tables) > 1 else "table"
        self.retries = 0
        self.locations: list[tuple[str | None, str | None]] = []

    def retried(self) -> None:
        self.retries += 1
        metrics.COMMIT_RETRIES.labels(self.kind).inc()

    def __enter__(self) -> CommitRecorder:
        return self

    def __exit__(self, _type: Any, exc: BaseException | None, _tb: Any) -> None:
        outcome = _outcome(exc)
        metrics.COMMITS.labels(self.kind, outcome).inc()
        log = logging.getLogger(COMMIT_LOGGER)
        for i, table in enumerate(self.tables):
            old, new = self.locations[i] if i < len(self.locations) else (None, None)
            fields = {
                "event": "commit",
                "request_id": request_id_var.get(),
                "kind": self.kind,
                "outcome": outcome,
                "warehouse": self.warehouse,
                "table": table,
                "old_metadata_location": old,
                "new_metadata_location": new,
                "retries": self.retries,
            }
            if exc is not None:
                fields["error"] = exc.error_type if isinstance(exc, CatalogError) else type(exc).__name__
            log.log(logging.INFO if exc is None else logging.WARNING, "commit", extra={"fields": fields})


def _outcome(exc: BaseException | None) -> str:
    if exc is None:
        return "committed"
    if isinstance(exc, CommitFailed):
        return "conflict"
    if isinstance(exc, CommitStateUnknown):
        return "unknown"
    if isinstance(exc, CatalogError) and exc.code < 500:
        return "rejected"
    return "failed"
