"""The console's session: a cookie instead of a bearer header, authenticated in the same place.

The console (app/console/, served by Flask under ``/ui/``) is used from a browser, which cannot
send a bearer token with a link. A principal signs in with its client id and secret; the
secret is checked by the token endpoint's own machinery (``TokenEndpoint.authenticate``: the
same guessing bounds, argon2 off the loop) and the session cookie holds an access token Growler
issued for it, verified on every request like a bearer token (expiry, signature, revocation by
rotation or deletion). So the console and the API share one authentication and the console's
pages run as the principal, under the same authorizer.

With an identity provider configured for it (``GROWLER_CONSOLE_OIDC_CLIENT_ID``), the console also
signs in through the IdP: the authorization code flow with PKCE (S256), its state, verifier and
target kept in a short-lived HttpOnly cookie (``OIDC_COOKIE``) between the redirect to the IdP and
the way back; the code is exchanged at the IdP's token endpoint and the IdP's access token, once
verified like a bearer token (issuer, audience, signature, expiry), is the session cookie.

The cookie is ``HttpOnly`` (no script reads it), ``SameSite=Lax`` (not sent with cross-site
posts), scoped to ``/ui``, and ``Secure`` when the request came over TLS (the scheme, or a
proxy's ``X-Forwarded-Proto: https``). Forms carry a CSRF token (app/console/csrf.py); the
sign-in form, before any session, a double-submit token (``CSRF_COOKIE``), checked here.

Every console path but the sign-in page and the static assets needs a session: without one the
answer is a redirect to the sign-in page (closed by construction: a new page needs no code here).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, quote, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

from app.edge.auth.endpoint import OAuthError, TokenEndpoint, read_form
from app.edge.auth.metrics import AUTH_FAILURES
from app.edge.auth.oidc import OidcProvider
from app.edge.auth.tokens import AuthFailure, TokenVerifier
from app.edge.http import raw_headers, send_response
from app.ground.callers import current_principal
from app.ground.errors import CatalogError
from app.ground.events import PRINCIPAL

PREFIX = "/ui"
SIGN_IN = "/ui/sign-in"
OIDC_START = "/ui/oidc/start"
OIDC_CALLBACK = "/ui/oidc/callback"
OIDC_COOKIE = "growler_oidc"
OIDC_COOKIE_AGE_S = 600  # the time a user has to sign in at the IdP
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
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in target) or "/." in target.split("?")[0]:
        return PREFIX + "/"  # no control characters, no dot segments
    return target


async def redirect(send: Send, location: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = b""
    raw = [(b"location", location.encode("latin-1")), (b"cache-control", b"no-store"), *(headers or [])]
    await send_response(send, 303, body, raw, content_type=b"text/plain; charset=utf-8")


@dataclass(frozen=True)
class ConsoleOidc:
    """The IdP client the console signs users in with (authorization code + PKCE)."""

    provider: OidcProvider
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    scope: str = "openid"


class ConsoleGate:
    """Authenticates console requests by their session cookie; answers the sign-in form's POST
    and the IdP sign-in's two steps."""

    def __init__(
        self, verifier: TokenVerifier | None, endpoint: TokenEndpoint | None, oidc: ConsoleOidc | None = None
    ) -> None:
        self.verifier = verifier  # None: GROWLER_AUTH=none (no principal, nothing to sign in to)
        self.endpoint = endpoint  # None: Growler issues no tokens (no client-secret sign-in)
        self.oidc = oidc  # None: no sign-in through the IdP

    async def __call__(self, scope: Scope, receive: Receive, send: Send, app: ASGIApp) -> None:
        path = scope["path"]
        if self.verifier is None or path.startswith(STATIC):
            await app(scope, receive, send)
            return
        if path in (OIDC_START, OIDC_CALLBACK) and self.oidc is not None:
            await (self.oidc_start if path == OIDC_START else self.oidc_callback)(scope, send)
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
            principal = await self.verifier.verify(token, own_only=self.oidc is None)
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

    async def oidc_start(self, scope: Scope, send: Send) -> None:
        """Off to the IdP: a fresh state and PKCE verifier in the cookie, the challenge in the URL."""
        assert self.oidc is not None
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        try:
            endpoint = str((await asyncio.to_thread(self.oidc.provider.discovery))["authorization_endpoint"])
        except Exception:  # noqa: BLE001 - the IdP is unreachable: say so on the sign-in page
            await redirect(send, f"{SIGN_IN}?error=idp")
            return
        params = {
            "response_type": "code",
            "client_id": self.oidc.client_id,
            "redirect_uri": _origin(scope) + OIDC_CALLBACK,
            "scope": self.oidc.scope,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        kept = base64.urlsafe_b64encode(json.dumps([state, verifier, safe_next(query.get("next"))]).encode()).decode()
        separator = "&" if "?" in endpoint else "?"
        await redirect(
            send,
            f"{endpoint}{separator}{urlencode(params)}",
            [cookie_header(OIDC_COOKIE, kept, scope, OIDC_COOKIE_AGE_S)],
        )

    async def oidc_callback(self, scope: Scope, send: Send) -> None:
        """Back from the IdP: the state checked, the code exchanged (with the verifier), the
        access token verified, the session cookie set."""
        assert self.oidc is not None and self.verifier is not None
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        try:
            state, verifier, target = json.loads(base64.urlsafe_b64decode(cookies(scope).get(OIDC_COOKIE, "")))
        except (ValueError, TypeError):
            state = verifier = target = ""
        if not state or not hmac.compare_digest(str(state), query.get("state", "")) or not query.get("code"):
            await redirect(send, f"{SIGN_IN}?error=expired")
            return
        form = {
            "grant_type": "authorization_code",
            "code": query["code"],
            "redirect_uri": _origin(scope) + OIDC_CALLBACK,
            "client_id": self.oidc.client_id,
            "code_verifier": str(verifier),
        }
        if self.oidc.client_secret:
            form["client_secret"] = self.oidc.client_secret
        clear = cookie_header(OIDC_COOKIE, "", scope, 0)
        try:
            answer = await asyncio.to_thread(self.oidc.provider.exchange_code, form)
            token = answer["access_token"]
            await self.verifier.verify(token)
        except (ValueError, OSError, AuthFailure):
            AUTH_FAILURES.labels("console_oidc").inc()
            await redirect(send, f"{SIGN_IN}?error=failed", [clear])
            return
        max_age = answer.get("expires_in") if isinstance(answer.get("expires_in"), int) else 300
        await redirect(send, safe_next(str(target)), [cookie_header(SESSION_COOKIE, token, scope, max_age), clear])


def _origin(scope: Scope) -> str:
    """This console's origin as the browser sees it (the redirect URI registered at the IdP)."""
    host = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
    return f"{'https' if over_tls(scope) else 'http'}://{host}"
