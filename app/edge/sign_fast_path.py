"""signRequest served in front of the framework: one call per S3 request a job makes.

Through connexion's validation, a2wsgi's thread hand-off and Flask, a signature cost several
milliseconds of a worker; the signing itself (``app.signing``: parse, check, SigV4) costs a
fraction of one. This middleware sits just inside authentication (and the request-id and
observability middleware, so logs, metrics and ``X-Request-Id`` are unchanged) and answers a
plain ``POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign`` itself: on the event
loop when the table's grant is cached (no I/O at all), else in a thread (one query). Anything
it is not sure about - another content type, a body that is not a well-formed RemoteSignRequest,
escapes in the path, a large or chunked body - goes to connexion with its body replayed, so the
yaml still decides what is valid and the answer is the same either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.edge.http import raw_headers, send_response
from app.edge.observability import ROUTING_CONTEXT
from app.ground.errors import CatalogError
from app.rules.identifiers import check_name, parse_namespace
from app.signing import RecheckNeeded, RemoteSigner

log = logging.getLogger(__name__)

OPERATION_ID = "signRequest"
_PATH = re.compile(r"^/v1/(?!(?:namespaces|tables|views|transactions)/)([^/]+)/namespaces/([^/]+)/tables/([^/]+)/sign$")
_RAW_ESCAPE = re.compile(rb"%(?!1[fF])")
_CONTROL = re.compile(r"[\x00-\x1e\x7f]")
_METHODS = frozenset({"PUT", "GET", "HEAD", "POST", "DELETE", "PATCH", "OPTIONS"})  # the yaml's enum
_FIELDS = frozenset({"region", "uri", "method", "headers", "properties", "body", "provider"})
MAX_FAST_BODY_BYTES = 1024 * 1024
_ENCODER = json.JSONEncoder(separators=(",", ":"))  # built once: json.dumps with options builds one per call


class SignRequestFastPath:
    def __init__(self, app: ASGIApp, *, signer: RemoteSigner, namespace_separator: str, threads: int) -> None:
        self.app = app
        self.signer = signer
        self.separator = namespace_separator
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="growler-sign")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _match(scope)
        if match is None:
            await self.app(scope, receive, send)
            return
        body, complete = await _read(receive)
        request = _parse(body) if complete else None
        if request is None:
            await self.app(scope, _replay(body, receive), send)
            return
        prefix, namespace, table = match.groups()
        _record_route(scope, prefix, namespace, table)
        try:
            levels = parse_namespace(namespace, self.separator)
            name = check_name(table, "table name")
            authorizer = self.signer.tables.authorizer
            params = {"prefix": prefix, "namespace": namespace, "table": table}

            def authorized_sign(recheck: bool = True) -> Any:  # the same check as connexion's handler
                authorizer.authorize(OPERATION_ID, params)  # (app/authorization.py)
                return self.signer.sign(prefix, levels, name, request, recheck)

            signed = None
            if self.signer.is_cached(prefix, levels, name) and authorizer.cached() is not None:
                with contextlib.suppress(RecheckNeeded):  # the thread reads the table's row
                    signed = authorized_sign(recheck=False)
            if signed is None:  # the thread runs in this request's context: it is the same caller
                loop = asyncio.get_running_loop()
                signed = await loop.run_in_executor(self.executor, contextvars.copy_context().run, authorized_sign)
        except CatalogError as exc:
            if exc.code >= 500:
                log.warning("signRequest failed: %s %s", exc.error_type, exc.message)
            await send_response(send, exc.code, json.dumps(exc.body()).encode(), raw_headers(exc.headers()))
            return
        cache_control = "private" if signed.cacheable else "no-cache"
        body = _ENCODER.encode(signed.body()).encode()
        await send_response(send, 200, body, raw_headers({"cache-control": cache_control}))


def _match(scope: Scope) -> re.Match | None:
    if scope["type"] != "http" or scope["method"] != "POST" or scope.get("query_string"):
        return None
    match = _PATH.match(scope["path"])
    if match is None or _CONTROL.search(scope["path"]) or _RAW_ESCAPE.search(scope.get("raw_path") or b""):
        return None
    seen: set[bytes] = set()
    length = None
    for key, value in scope["headers"]:
        if key in seen:
            return None  # a repeated header: leave the edge cases to connexion
        seen.add(key)
        if key == b"content-type" and value.split(b";")[0].strip().lower() != b"application/json":
            return None
        if key == b"content-length":
            length = value
        if key == b"transfer-encoding":
            return None
    if length is None or not length.isdigit() or int(length) > MAX_FAST_BODY_BYTES:
        return None
    return match


async def _read(receive: Receive) -> tuple[bytes, bool]:
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_FAST_BODY_BYTES:
            return b"".join(chunks), False
        if not message.get("more_body"):
            return b"".join(chunks), True


def _replay(body: bytes, receive: Receive) -> Receive:
    """The body already read, then whatever else the client sends."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _parse(body: bytes) -> dict[str, Any] | None:
    """The RemoteSignRequest when it is plainly valid against the yaml; None leaves it to connexion."""
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if not isinstance(request, dict) or not request.keys() <= _FIELDS:
        return None
    if not all(isinstance(request.get(field), str) for field in ("region", "uri", "method")):
        return None
    if request["method"] not in _METHODS:
        return None
    headers = request.get("headers")
    if not isinstance(headers, dict) or not all(
        isinstance(values, list) and all(isinstance(value, str) for value in values) for values in headers.values()
    ):
        return None
    properties = request.get("properties", {})
    if not isinstance(properties, dict) or not all(isinstance(value, str) for value in properties.values()):
        return None
    if not all(isinstance(request.get(field, ""), str) for field in ("body", "provider")):
        return None
    return request


def _record_route(scope: Scope, prefix: str, namespace: str, table: str) -> None:
    routing = (scope.get("extensions") or {}).get(ROUTING_CONTEXT)
    if routing is not None:
        routing["operation_id"] = OPERATION_ID
    path_params: Any = scope.get("path_params")
    if path_params is not None:
        path_params.update(prefix=prefix, namespace=namespace, table=table)
