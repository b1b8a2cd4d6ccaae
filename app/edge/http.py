"""ASGI middleware and error handlers: the HTTP edges every request passes through.

- ``with_request_id``: each request's ``X-Request-Id`` (the caller's, if sane), which the
  observability middleware (outermost of ours) puts in the scope and echoes on every response,
  error responses included.
- ``RequestGuardMiddleware`` (inside connexion's exception handling, before routing) refuses
  oversized bodies and paths no router agrees on (control characters, a doubled leading slash)
  and maps the unprefixed routes (``/v1/namespaces/...``) to the default warehouse.
- The error handlers turn every failure - ours, connexion's validation problems, unknown
  routes, wrong methods, unexpected exceptions - into the Iceberg error body.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import uuid
from typing import TYPE_CHECKING, Any

from connexion.exceptions import ProblemException
from connexion.lifecycle import ConnexionRequest, ConnexionResponse
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.ground.audit_note import REFUSED, note_decision
from app.ground.errors import (
    BadRequest,
    CatalogError,
    NotFound,
    PayloadTooLarge,
    RequestTimeout,
    error_body,
    error_type_for_status,
)
from app.ground.text import path_has_control_characters

if TYPE_CHECKING:
    from app.edge.responses import Rendered

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = b"x-request-id"
_SANE_REQUEST_ID = re.compile(rb"^[A-Za-z0-9._:-]{1,128}$")
# Routes of the spec that live under /v1/{prefix}/; served for the default warehouse without it.
_EMPTY_NAMESPACE = re.compile(r"^/v1/[^/]+/namespaces//(tables|views)/([^/]+)$")
_UNPREFIXED = re.compile(r"^/v1/(namespaces|tables|views|transactions)(/.*)?$")


JSON_TYPE = b"application/json"


def raw_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """Header names lower-cased and both sides latin-1 encoded, as ASGI carries them."""
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]


async def send_response(
    send: Send,
    status: int,
    body: bytes,
    headers: list[tuple[bytes, bytes]] | None = None,
    content_type: bytes | None = JSON_TYPE,
) -> None:
    """A whole response as the two ASGI messages, for the lanes that answer without connexion.

    The one place that writes ``http.response.start``: content type and length first (both left out
    when there is no content type, as for a 304), then the caller's headers in their order.
    """
    raw = list(headers or ())
    if content_type is not None:
        raw = [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *raw]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body already read, whole, then whatever else the client sends."""
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def read_body(receive: Receive, limit: int) -> tuple[bytes, bool]:
    """The request body as far as it was read, and whether that is all of it within ``limit``."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks), False
        if not message.get("more_body"):
            return b"".join(chunks), True


async def send_rendered(send: Send, rendered: Rendered) -> None:
    """A rendered answer through ``send_response``: its Content-Type leads, when it has one."""
    headers = dict(rendered.headers)
    content_type = headers.pop("Content-Type", None)
    encoded_type = content_type.encode("latin-1") if content_type is not None else None
    await send_response(send, rendered.status, rendered.body, raw_headers(headers), encoded_type)


def request_id_of(headers: Any) -> str:
    return headers.get("x-request-id", "-") if headers is not None else "-"


def with_request_id(headers: list[tuple[bytes, bytes]]) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """The request's headers with one ``X-Request-Id`` (last), and that id: the caller's first one
    if it is sane, else a new one. (Its own middleware once; one layer less per request.)"""
    kept = []
    given = None
    for key, value in headers:
        if key == REQUEST_ID_HEADER:
            given = given or value
        else:
            kept.append((key, value))
    request_id = given if given and _SANE_REQUEST_ID.match(given) else uuid.uuid4().hex.encode()
    kept.append((REQUEST_ID_HEADER, request_id))
    return kept, request_id


class LivenessMiddleware:
    """``GET /healthz`` answered on the event loop, without connexion, Flask or a thread.

    Liveness must not depend on how busy the worker is: through Flask it waited for one of the
    threads that run the handlers, which a burst of large commits can occupy for seconds.
    Placed inside the observability middleware, so it is logged and counted like any request.
    """

    BODY = b'{"status":"alive"}'

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/healthz" or scope["method"] != "GET":
            await self.app(scope, receive, send)
            return
        await send_response(send, 200, self.BODY)


class RequestGuardMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        max_body_bytes: int,
        default_prefix: str,
        large_body_bytes: int = 256 * 1024,
        large_bodies_at_once: int = 1,
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.default_prefix = default_prefix
        self.large = _LargeBodyLane(large_body_bytes, large_bodies_at_once)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = first_length = content_type = None
        chunked = False
        for key, value in scope["headers"]:  # once over the headers: every request passes here
            if key == b"content-length":
                length = value  # the last one: the body type's check
                first_length = first_length or value  # the first: the large bodies' lane
                self._check_declared_length(value)
            elif key == b"content-type":
                content_type = value
            elif key == b"transfer-encoding":
                chunked = True
        chunked = chunked and length is None
        _check_body_type(scope, length, content_type, chunked)
        if path_has_control_characters(scope["path"]):
            # connexion's router does not match such paths while Flask's does: refuse them here
            raise BadRequest("Control characters are not allowed in the request path")
        if scope["path"].startswith("//"):
            raise NotFound(empty_leading_segment(scope["method"], scope["path"]))
        scope = self._with_default_prefix(scope)
        receive = self._limited(receive)
        if chunked:
            scope, receive = await self._buffered(scope, receive)
            first_length = scope["headers"][-1][1]
        if not self.large.applies(first_length):
            await self.app(scope, receive, send)
            return
        async with self.large.turn():
            await self.app(scope, receive, send)

    async def _buffered(self, scope: Scope, receive: Receive) -> tuple[Scope, Receive]:
        """Read a chunked body whole (within the limit) and give it a Content-Length.

        connexion treats a request without Content-Length as having no body at all, so a
        streamed request would fail validation; buffering is bounded by ``max_body_bytes``.
        """
        body = await whole_body(receive)
        headers = [(k, v) for k, v in scope["headers"] if k != b"transfer-encoding"]
        headers.append((b"content-length", str(len(body)).encode()))
        return dict(scope, headers=headers), replay(body, receive)

    def _check_declared_length(self, value: bytes) -> None:
        try:
            length = int(value)
        except ValueError:
            length = -1
        if length < 0 or length > self.max_body_bytes:
            raise PayloadTooLarge(f"Request body larger than {self.max_body_bytes} bytes")

    def _limited(self, receive: Receive) -> Receive:
        """Count streamed (chunked) bodies too: Content-Length is not always there.

        A disconnect before the body's end - the client left, or the protocol's body deadline
        answered 408 and closed (app/edge/protocol.py) - ends the request with ``RequestTimeout``
        rather than handing anyone a part of a body as if it were all of it.
        """
        seen = 0
        whole = False

        async def limited_receive() -> Message:
            nonlocal seen, whole
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body_bytes:
                    raise PayloadTooLarge(f"Request body larger than {self.max_body_bytes} bytes")
                whole = not message.get("more_body", False)
            elif message["type"] == "http.disconnect" and not whole:
                raise RequestTimeout("The request body did not arrive in full")
            return message

        return limited_receive

    def _with_default_prefix(self, scope: Scope) -> Scope:
        match = _UNPREFIXED.match(scope["path"])
        if not match:
            return scope
        path = f"/v1/{self.default_prefix}/{match.group(1)}{match.group(2) or ''}"
        raw = scope.get("raw_path")
        if raw is not None:
            raw = raw.replace(b"/v1/", f"/v1/{self.default_prefix}/".encode(), 1)
        return dict(scope, path=path, raw_path=raw)


def empty_leading_segment(method: str, path: str) -> str:
    """The 404's message for a path that starts with an empty segment (``//v1/config``).

    Such a path is no route, as a path with an empty segment anywhere else is (the factory turns
    werkzeug's slash merging off): the API's routers would not agree on what it names.
    werkzeug strips leading slashes before it matches (so Flask took ``//v1/config`` for
    ``/v1/config``) while the dispatcher's route table, connexion's router and the
    authentication middleware's open and console paths compare the path as sent; the request
    reached one of connexion's Flask views without connexion's operation context, a 500. Collapsing
    the slashes instead would make one path answer under two names, and every layer (the request
    log's path, the open paths, a proxy's location rules in front) would have to collapse alike;
    refusing is the one answer they all agree on. The usual cause is a client's base URI with a
    trailing slash, which the message names.
    """
    return (
        f"No route for {method} {path}: the path starts with an empty segment (a doubled slash); "
        "remove the trailing slash from the catalog URI"
    )


class _LargeBodyLane:
    """Requests with large bodies take turns within a worker (``large_bodies_at_once`` at a time).

    Parsing, validating and applying a body of megabytes is CPU work in this process: the GIL
    is shared with the event loop, so every such request running at once adds to how long the
    loop waits for it, and a burst of them delayed ``/healthz`` and gunicorn's heartbeat by
    seconds. One at a time, the loop competes with one busy thread; the others wait on the loop
    without costing anything, and their memory is not taken all at once either. Small requests -
    nearly all of them - never wait here.
    """

    def __init__(self, threshold: int, at_once: int) -> None:
        self.threshold = threshold
        self.at_once = at_once
        self._semaphores: dict[int, asyncio.Semaphore] = {}  # per event loop (tests run several)

    def applies(self, length: bytes | None) -> bool:
        """Whether a body of this Content-Length (the first one sent) takes the lane."""
        return length is not None and length.isdigit() and int(length) > self.threshold

    def turn(self) -> asyncio.Semaphore:
        loop = id(asyncio.get_running_loop())
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            if len(self._semaphores) > 64:
                self._semaphores.clear()
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.at_once)
        return semaphore


# The OAuth2 token endpoint takes a form and answers OAuth2's own errors (app/edge/auth/endpoint.py).
_FORM_PATHS = frozenset({"/v1/oauth/tokens"})


def _check_body_type(scope: Scope, length: bytes | None, content_type: bytes | None, chunked: bool) -> None:
    """A body must say what it is: without a Content-Type (or with an empty one) connexion hands the
    raw bytes to the handler unvalidated, which then fails (it was a 500 for most body operations).
    Refused here, 400 with the Iceberg error body, before anything runs. ``length`` and
    ``content_type``: the last of each header sent."""
    if scope["path"] in _FORM_PATHS:
        return
    has_body = chunked or (length is not None and length.strip() not in (b"", b"0"))
    if has_body and not (content_type or b"").strip():
        raise BadRequest("A request body needs a Content-Type header: application/json")


# -- error handlers (connexion signature: (ConnexionRequest, Exception) -> ConnexionResponse) --


def _response(status: int, message: str, error_type: str, headers: dict[str, str] | None = None) -> ConnexionResponse:
    return ConnexionResponse(
        status_code=status,
        mimetype="application/json",
        content_type="application/json",
        body=json.dumps(error_body(message, error_type, status)),
        headers=headers or {},
    )


def handle_catalog_error(request: ConnexionRequest, exc: CatalogError) -> ConnexionResponse:
    if exc.code == 403:  # a refusal the operation itself made (signing's scope, a protected table)
        note_decision(REFUSED, exc.message)
    if exc.code >= 500:
        log.warning("request %s failed: %s %s", request_id_of(request.headers), exc.error_type, exc.message)
    return _response(exc.code, exc.message, exc.error_type, exc.headers())


def handle_problem(request: ConnexionRequest, exc: ProblemException) -> ConnexionResponse:
    """connexion's own problems: request validation (400), unsupported media type (415), ..."""
    message = exc.detail or exc.title or "Invalid request"
    return _response(exc.status, str(message), error_type_for_status(exc.status))


def handle_http_exception(request: ConnexionRequest, exc: HTTPException) -> ConnexionResponse:
    """Unknown routes and wrong methods surface as starlette/werkzeug HTTP exceptions."""
    status = exc.status_code
    missing = _EMPTY_NAMESPACE.match(request.url.path) if status == 404 else None
    if missing:
        # ".../namespaces//tables/x": the Java client probes this for metadata tables (db.history)
        kind = "Table" if missing.group(1) == "tables" else "View"
        return _response(404, f"{kind} does not exist: {missing.group(2)}", f"NoSuch{kind}Exception")
    if status == 404:
        message = f"No route for {request.method} {request.url.path}"
    elif status == 405:
        message = f"Method {request.method} is not allowed on {request.url.path}"
    else:
        message = str(exc.detail)
    return _response(status, message, error_type_for_status(status), dict(exc.headers or {}))


def handle_undecodable_body(request: ConnexionRequest, exc: UnicodeDecodeError) -> ConnexionResponse:
    """connexion decodes JSON bodies as UTF-8 and lets the error escape."""
    return _response(400, "The request body is not valid UTF-8", "BadRequestException")


def handle_unexpected(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    request_id = request_id_of(request.headers)
    log.error("request %s: unexpected %s", request_id, type(exc).__name__, exc_info=exc)
    return _response(500, f"Internal server error (request id {request_id})", "InternalServerError")


async def whole_body(receive: Receive) -> bytes:
    """The request's body messages joined, up to the first that says no more follows."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)
