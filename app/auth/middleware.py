"""The ASGI middleware that authenticates every request before anything else runs.

Placed inside the request-id and observability middleware (a 401 is logged and counted like any
answer) and in front of the loadTable fast path and connexion, so no route - the fast path
included - runs for an unauthenticated request. /healthz, /readyz and /metrics stay open (probes
and the scraper carry no token; metrics stays off the public front, deploy/nginx.conf). The
token endpoint is served here too (app/auth/endpoint.py).

The principal's name (never the token) is put where the request log line picks it up.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth.endpoint import PATH as TOKEN_PATH
from app.auth.endpoint import TokenEndpoint
from app.auth.metrics import AUTH_FAILURES
from app.auth.tokens import AuthFailure, TokenVerifier
from app.errors import error_body
from app.observability import PRINCIPAL

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


class AuthMiddleware:
    def __init__(self, app: ASGIApp, *, verifier: TokenVerifier | None, endpoint: TokenEndpoint | None) -> None:
        self.app = app
        self.verifier = verifier  # None: GROWLER_AUTH=none
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if scope["path"] == TOKEN_PATH and self.endpoint is not None:
            await self.endpoint(scope, receive, send)
            return
        if self.verifier is None:
            await self.app(scope, receive, send)
            return
        try:
            principal = await self.verifier.verify(_bearer_token(scope))
        except AuthFailure as exc:
            AUTH_FAILURES.labels(exc.reason).inc()
            await _unauthorized(send, exc)
            return
        extensions = scope.get("extensions")
        if extensions is not None:
            extensions[PRINCIPAL] = principal.name
        await self.app(scope, receive, send)


def _bearer_token(scope: Scope) -> str:
    values = [v for k, v in scope["headers"] if k == b"authorization"]
    if not values:
        raise AuthFailure("missing")
    if len(values) > 1:
        raise AuthFailure("malformed")
    scheme, _, token = values[0].decode("latin-1").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise AuthFailure("malformed" if scheme.lower() == "bearer" else "missing")
    return token


async def _unauthorized(send: Send, failure: AuthFailure) -> None:
    body = json.dumps(error_body(failure.message, "NotAuthorizedException", 401)).encode()
    challenge = b"Bearer" if failure.reason == "missing" else b'Bearer error="invalid_token"'
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", challenge),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})
