"""The ASGI middleware that authenticates every request before anything else runs.

Placed inside the request-id and observability middleware (a 401 is logged and counted like any
answer) and in front of the dispatcher and connexion, so no route - the dispatcher's
included - runs for an unauthenticated request. /healthz, /readyz and /metrics stay open (probes
and the scraper carry no token; metrics stays off the public front, deploy/nginx.conf), and so
does /favicon.ico (a browser asks for it without credentials; app/console/__init__.py). The
token endpoint is served here too (app/edge/auth/endpoint.py), and the console's paths (/ui/) are
authenticated by their session cookie instead of a bearer token (app/edge/auth/console.py).

The principal's name (never the token) is put where the request log line picks it up.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from app.edge.auth.console import ConsoleGate, ConsoleOidc, is_console
from app.edge.auth.endpoint import PATH as TOKEN_PATH
from app.edge.auth.endpoint import TokenEndpoint
from app.edge.auth.metrics import AUTH_FAILURES
from app.edge.auth.tokens import AuthFailure, TokenVerifier
from app.edge.http import raw_headers, send_response
from app.ground.audit_note import UNAUTHENTICATED, audit_note, note_decision
from app.ground.callers import current_principal
from app.ground.errors import CatalogError, error_body
from app.ground.events import PRINCIPAL

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/favicon.ico"})


class AuthMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        *,
        verifier: TokenVerifier | None,
        endpoint: TokenEndpoint | None,
        console_oidc: ConsoleOidc | None = None,
    ) -> None:
        self.app = app
        self.verifier = verifier  # None: GROWLER_AUTH=none
        self.endpoint = endpoint
        self.console = ConsoleGate(verifier, endpoint, console_oidc)  # /ui/: a session cookie instead (console.py)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if scope["path"] == TOKEN_PATH and self.endpoint is not None:
            await self.endpoint(scope, receive, send)
            return
        if is_console(scope["path"]):
            await self.console(scope, receive, send, self.app)
            return
        if self.verifier is None:
            await self.app(scope, receive, send)
            return
        try:
            principal = await self.verifier.verify(_bearer_token(scope))
        except AuthFailure as exc:
            AUTH_FAILURES.labels(exc.reason).inc()
            note_decision(UNAUTHENTICATED, f"authentication failed: {exc.reason}")  # never the token
            await _unauthorized(send, exc)
            return
        except CatalogError as exc:  # a principal or key not seen yet, and the database is down: 503
            await send_response(send, exc.code, json.dumps(exc.body()).encode(), raw_headers(exc.headers()))
            return
        extensions = scope.get("extensions")
        if extensions is not None:
            extensions[PRINCIPAL] = principal.name
        token = current_principal.set(principal)
        note = audit_note.get()
        if note is not None:
            note.principal = principal
        try:
            await self.app(scope, receive, send)
        finally:
            current_principal.reset(token)


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
    challenge = b"Bearer" if failure.reason == "missing" else b'Bearer error="invalid_token"'
    body = error_body(failure.message, "NotAuthorizedException", 401)
    await send_response(send, 401, json.dumps(body).encode(), [(b"www-authenticate", challenge)])
