"""The audit middleware: every authenticated request and every refusal gets its record, committed
before the response starts (docs/audit.md).

Placed outside authentication (so a 401 is recorded) and inside the request id and the startup
gate. It gives the request an ``AuditNote`` (app/ground/audit_note.py) that authentication,
authorization and storage access fill in; when the response starts, it builds the record from the
note, the route the dispatcher matched (operation and path parameters, as the request log reads
them) and the status, and awaits its commit (app/audit/writer.py) before the start goes out.
If the record cannot be committed the client gets 503 with Retry-After instead: nothing is served
unrecorded.

What is not recorded here: the probes and /metrics (unauthenticated by design), the token
endpoint (its failures are counted, growler_auth_failures) and the console's pages (a session
of its own; docs/audit.md says what is left for later).

Nothing secret: the record holds names, the path (never the query string), the client's address
and its user agent - no other header, no body, no token.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.audit.writer import AuditUnavailable, AuditWriter
from app.edge.auth.console import is_console
from app.edge.auth.endpoint import PATH as TOKEN_PATH
from app.edge.auth.middleware import OPEN_PATHS
from app.edge.http import raw_headers, send_response
from app.edge.observability import ROUTING_CONTEXT
from app.ground.audit_note import ALLOWED, ERROR, REFUSED, UNAUTHENTICATED, AuditNote, audit_note
from app.ground.events import request_id_var
from app.rules.identifiers import UNIT_SEPARATOR, decoded_separator
from storage.audit import AuditRecord

MAX_TEXT = 1000  # a path or a user agent is cut to this many characters


class AuditMiddleware:
    def __init__(self, app: ASGIApp, *, writer: AuditWriter | None, namespace_separator: str = "%1F") -> None:
        self.app = app
        self.writer = writer  # None: no audit trail (scripts' apps only; the server always has one)
        self.separator = decoded_separator(namespace_separator)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.writer is None or not audited(scope["path"]):
            await self.app(scope, receive, send)
            return
        writer = self.writer
        note = AuditNote()
        token = audit_note.set(note)
        replaced = False  # the record failed: our 503 went out instead, the rest is dropped
        written = False  # the record went to the writer (else the request ends without one)
        writer.begin()

        async def send_recorded(message: Message) -> None:
            nonlocal replaced, written
            if replaced:
                return
            if message["type"] == "http.response.start":
                written = True
                try:
                    await writer.write(self.record(scope, note, message["status"]))
                except AuditUnavailable as exc:
                    replaced = True
                    await send_response(send, exc.code, json.dumps(exc.body()).encode(), raw_headers(exc.headers()))
                    return
            await send(message)

        try:
            await self.app(scope, receive, send_recorded)
        finally:
            audit_note.reset(token)
            if not written:
                writer.abandon()

    def record(self, scope: Scope, note: AuditNote, status: int) -> AuditRecord:
        """The request's record: what the note learnt, the route and the status."""
        routing = (scope.get("extensions") or {}).get(ROUTING_CONTEXT) or {}
        params: dict[str, Any] = scope.get("path_params") or {}
        principal = note.principal
        # the status has the last word on a refusal (an operation may refuse after authorization allowed)
        decision = _decision_of(status) if status in (401, 403) else note.decision or _decision_of(status)
        client = scope.get("client")
        return AuditRecord(
            recorded_at=datetime.now(UTC),
            request_id=request_id_var.get(),
            principal=principal.name if principal is not None else None,
            identity_provider=principal.source if principal is not None else None,
            roles=principal.roles if principal is not None else (),
            operation=routing.get("operation_id") or "unmatched",
            method=scope["method"],
            path=scope["path"][:MAX_TEXT],
            object=self.object_of(params),
            decision=decision,
            rule=note.rule,
            status=status,
            client=client[0] if client else None,
            user_agent=(_header(scope, b"user-agent") or "")[:MAX_TEXT] or None,
            access=tuple(note.access),
        )

    def object_of(self, params: dict[str, Any]) -> str | None:
        """``warehouse:a.b.t`` (what the path names, as authorization describes securables), or
        the management object the path names (``principal alice``, ``role r``)."""
        warehouse = params.get("prefix") or params.get("warehouse")
        namespace = params.get("namespace")
        name = params.get("table") or params.get("view") or params.get("function")
        if warehouse is not None:
            path = []
            if namespace is not None:
                raw = str(namespace).replace(self.separator, UNIT_SEPARATOR)
                path = raw.split(UNIT_SEPARATOR)
            if name is not None:
                path.append(str(name))
            return f"{warehouse}:{'.'.join(path)}" if path else str(warehouse)
        for kind in ("principal", "role", "sink"):
            if params.get(kind) is not None:
                return f"{kind} {params[kind]}"
        return None


def audited(path: str) -> bool:
    """Every path but the probes, /metrics, the token endpoint and the console's."""
    return path not in OPEN_PATHS and path != TOKEN_PATH and not is_console(path)


def _decision_of(status: int) -> str:
    if status == 401:
        return UNAUTHENTICATED
    if status == 403:
        return REFUSED
    return ALLOWED if status < 400 else ERROR


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None
