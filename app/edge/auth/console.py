"""The console's session: a cookie instead of a bearer header, authenticated in the same place.

The console (app/console/, served by Flask under ``/ui/``) is used from a browser, which cannot
send a bearer token with a link. A principal signs in with its client id and secret; the
secret is checked by the token endpoint's own machinery (``TokenEndpoint.authenticate``: the
same guessing bounds, argon2 off the loop) and the session cookie holds an access token Growler
issued for it, verified on every request like a bearer token (expiry, signature, revocation by
rotation or deletion). So the console and the API share one authentication and the console's
pages run as the principal, under the same authorizer.

The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Lax`` (not sent with cross-site
posts), scoped to ``/ui``, and ``Secure`` when the request came over TLS (the scheme, or a
proxy's ``X-Forwarded-Proto: https``). Forms carry a CSRF token (app/console/csrf.py); the
sign-in form, before any session, a double-submit token (``CSRF_COOKIE``), checked here.

Every console path but the sign-in page and the static assets needs a session: without one the
answer is a redirect to the sign-in page (closed by construction: a new page needs no code here).
"""

from __future__ import annotations

import hmac
import json
from urllib.parse import quote, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from app.edge.auth.endpoint import OAuthError, TokenEndpoint, read_form
from app.edge.auth.metrics import AUTH_FAILURES
from app.edge.auth.tokens import AuthFailure, TokenVerifier
from app.edge.http import raw_headers, send_response
from app.ground.callers import current_principal
from app.ground.errors import CatalogError
from app.ground.events import PRINCIPAL

PREFIX = "/ui"
SIGN_IN = "/ui/sign-in"
STATIC = "/ui/static/"
SESSION_COOKIE = "growler_session"
CSRF_COOKIE = "growler_csrf"  # the sign-in form's double-submit token (no session yet)
CSRF_FIELD = "csrf"
MAX_COOKIE_BYTES = 8192


def is_console(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def cookies(scope: Scope) -> dict[str, str]:
    """The request's cookies (the first of a name wins); malformed pairs are skipped."""
    found: dict[str, str] = {}
    for name, value in scope["headers"]:
        if name != b"cookie" or len(value) > MAX_COOKIE_BYTES:
            continue
        for pair in value.decode("latin-1").split(";"):
            key, sep, text = pair.strip().partition("=")
            if sep and key not in found:
                found[key] = text.strip()
    return found


def over_tls(scope: Scope) -> bool:
    forwarded = next((v for k, v in scope["headers"] if k == b"x-forwarded-proto"), b"")
    return scope.get("scheme") == "https" or forwarded.split(b",")[0].strip().lower() == b"https"


def cookie_header(name: str, value: str, scope: Scope, max_age: int) -> tuple[bytes, bytes]:
    secure = "; Secure" if over_tls(scope) else ""
    text = f"{name}={value}; Path={PREFIX}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}"
    return b"set-cookie", text.encode("latin-1")


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a console path of this site only (no open redirect)."""
    if not target or not target.startswith(PREFIX + "/") or target.startswith("//") or "\\" in target:
        return PREFIX + "/"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        return PREFIX + "/"
    return target


async def redirect(send: Send, location: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = b""
    raw = [(b"location", location.encode("latin-1")), (b"cache-control", b"no-store"), *(headers or [])]
    await send_response(send, 303, body, raw, content_type=b"text/plain; charset=utf-8")


class ConsoleGate:
    """Authenticates console requests by their session cookie; answers the sign-in form's POST."""

    def __init__(self, verifier: TokenVerifier | None, endpoint: TokenEndpoint | None) -> None:
        self.verifier = verifier  # None: GROWLER_AUTH=none (no principal, nothing to sign in to)
        self.endpoint = endpoint  # None: Growler issues no tokens (no client-secret sign-in)

    async def __call__(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        path = scope["path"]
        if self.verifier is None or path.startswith(STATIC):
            await app(scope, receive, send)
            return
        if path == SIGN_IN:
            if scope["method"] == "POST":
                await self.sign_in(scope, receive, send)
            else:
                await app(scope, receive, send)
            return
        token = cookies(scope).get(SESSION_COOKIE)
        try:
            if not token:
                raise AuthFailure("missing")
            principal = await self.verifier.verify(token, own_only=True)
        except AuthFailure as exc:
            if exc.reason != "missing":
                AUTH_FAILURES.labels(exc.reason).inc()
            query = scope.get("query_string", b"").decode("latin-1")
            back = path + (f"?{query}" if query else "") if scope["method"] == "GET" else PREFIX + "/"
            await redirect(send, f"{SIGN_IN}?{urlencode({'next': back})}")
            return
        except CatalogError as exc:  # the database is down: 503, as for a bearer token
            await send_response(send, exc.code, json.dumps(exc.body()).encode(), raw_headers(exc.headers()))
            return
        extensions = scope.get("extensions")
        if extensions is not None:
            extensions[PRINCIPAL] = principal.name
        reset = current_principal.set(principal)
        try:
            await app(scope, receive, send)
        finally:
            current_principal.reset(reset)

    async def sign_in(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The sign-in form's POST: CSRF, then the client's secret, then the session cookie."""
        try:
            form = await read_form(scope, receive)
        except OAuthError:
            await redirect(send, f"{SIGN_IN}?error=form")
            return
        target = safe_next(form.get("next"))
        again = f"{SIGN_IN}?{urlencode({'next': target, 'error': 'failed'})}"
        expected = cookies(scope).get(CSRF_COOKIE, "")
        if not expected or not hmac.compare_digest(expected, form.get(CSRF_FIELD, "")):
            await redirect(send, f"{SIGN_IN}?{urlencode({'next': target, 'error': 'expired'})}")
            return
        client_id, secret = form.get("client_id", ""), form.get("client_secret", "")
        if self.endpoint is None or not client_id or not secret:
            await redirect(send, again)
            return
        address = (scope.get("client") or ("",))[0]
        try:
            name, generation = await self.endpoint.authenticate(client_id, secret, address)
        except OAuthError as exc:
            AUTH_FAILURES.labels("console_sign_in").inc()
            error = "slow_down" if exc.error == "slow_down" else "failed"
            await redirect(send, f"{SIGN_IN}?{urlencode({'next': target, 'error': error})}")
            return
        token, ttl = self.endpoint.issuer.issue(name, generation, "console")
        headers = [cookie_header(SESSION_COOKIE, token, scope, ttl), cookie_header(CSRF_COOKIE, "", scope, 0)]
        await redirect(send, quote(target, safe="/?=&%:;,+-._~"), headers)
