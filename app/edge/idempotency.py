"""Wraps the handler of every operation that declares an ``Idempotency-Key`` header.

The edge decides what makes a request "the same" (method, path, query, body and the headers in
``OUTCOME_HEADERS``) and what of an answer may be kept: vended credentials are stripped before
the answer is stored and vended anew when it is replayed (``app.storage_access.delegation``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from app.composition.services import Services
from app.edge.responses import HttpRequest, Rendered, render_result, takes
from app.ground.callers import current_principal
from app.idempotency import IdempotencyService, StoredResponse, fingerprint, owner, parse_key
from app.rules.identifiers import parse_namespace
from app.storage_access.delegation import attach_credentials, strip_credentials

KEPT_HEADERS = ("Content-Type", "ETag")
# Request headers whose value changes the answer. Delegation decides whether credentials are
# vended; it is compared as the set of mechanisms the client asked for.
OUTCOME_HEADERS = ("X-Iceberg-Access-Delegation",)
# Kept with a stored answer whose credentials were stripped: where to vend them on replay.
# Internal only: never sent to a client.
VENDED_FOR = "X-Growler-Vended-For"


def idempotent(operation_id: str, handler: Callable[..., Any], serialize: Callable[[Any], str]) -> Callable[..., Any]:
    """``handler`` behind the replay; it takes the request (``http``) for the key and the
    fingerprint and the services (``services``) for the stored answers, and passes them on to a
    handler that takes them too."""
    passes_http = takes(handler, "http")
    passes_services = takes(handler, "services")

    @functools.wraps(handler)
    def with_idempotency_key(*args: Any, http: HttpRequest, services: Services, **kwargs: Any) -> Any:
        if passes_http:
            kwargs["http"] = http
        if passes_services:
            kwargs["services"] = services
        raw_key = http.header("Idempotency-Key")
        if not raw_key:
            return handler(*args, **kwargs)

        def run() -> tuple[StoredResponse, StoredResponse]:
            rendered = render_result(handler(*args, **kwargs), serialize)
            headers = {name: rendered.headers[name] for name in KEPT_HEADERS if name in rendered.headers}
            sent = StoredResponse(rendered.status, headers, rendered.body)
            return sent, _without_credentials(sent)

        service: IdempotencyService = services.idempotency
        principal = owner(current_principal.get())  # keys are per principal
        stored, replayed = service.run_once(
            parse_key(raw_key), operation_id, _request_fingerprint(http), run, principal
        )
        if replayed:
            stored = _with_fresh_credentials(services, stored, kwargs)
        headers = dict(stored.headers)
        if replayed:
            headers["Idempotent-Replayed"] = "true"
        return Rendered(stored.status, stored.body, headers)

    return with_idempotency_key


def _identifier(kwargs: dict[str, Any], settings: Any) -> tuple[tuple[str, ...], str] | None:
    """The table an operation's answer is about: the path's, or the one a create names (its
    typed body's ``name``: CreateTableRequest, RegisterTableRequest)."""
    name = kwargs.get("table") or getattr(kwargs.get("body"), "name", None)
    if not isinstance(name, str) or "namespace" not in kwargs:
        return None
    return parse_namespace(str(kwargs["namespace"]), settings.namespace_separator), name


def _request_fingerprint(http: HttpRequest) -> str:
    headers = {}
    for name in OUTCOME_HEADERS:
        values = http.header_values(name)
        if values:
            parts = {part.strip().lower() for value in values for part in value.split(",")}
            headers[name.lower()] = ",".join(sorted(parts - {""}))
    return fingerprint(http.method, http.path, http.query_pairs(), headers, http.body)


def _without_credentials(sent: StoredResponse) -> StoredResponse:
    """The answer to keep: ``sent`` itself unless its body holds vended credentials."""
    if b'"storage-credentials"' not in sent.body:
        return sent
    body = json.loads(sent.body)
    location = strip_credentials(body) if isinstance(body, dict) else None
    if location is None:
        return sent
    compact = json.dumps(body, separators=(",", ":")).encode()
    return StoredResponse(sent.status, {**sent.headers, VENDED_FOR: location}, compact)


def _with_fresh_credentials(services: Services, kept: StoredResponse, kwargs: dict[str, Any]) -> StoredResponse:
    """A replay of an answer whose credentials were stripped gets them vended anew, for this caller
    (writable only if it may write the table, as the first answer was)."""
    headers = dict(kept.headers)
    location = headers.pop(VENDED_FOR, None)
    prefix = kwargs.get("prefix")
    if location is None or prefix is None:
        return StoredResponse(kept.status, headers, kept.body)
    body = json.loads(kept.body)
    tables = services.tables
    attach_credentials(body, tables.access.vend_for(prefix, location, _identifier(kwargs, tables.settings)))
    return StoredResponse(kept.status, headers, json.dumps(body, separators=(",", ":")).encode())
