"""``POST /v1/oauth/tokens``: Growler's own token endpoint (OAuth2, RFC 6749 and RFC 8693).

What Spark/the Java client and PyIceberg call by default (``uri`` + ``v1/oauth/tokens``):

- ``grant_type=client_credentials``, the client authenticated with ``client_id`` and
  ``client_secret`` in the form (client_secret_post) or with HTTP Basic; ``scope`` is accepted
  whatever it says (engines send ``catalog``, ``PRINCIPAL_ROLE:ALL``, ...) and echoed;
- ``grant_type=urn:ietf:params:oauth:grant-type:token-exchange`` with a valid token Growler
  issued as ``subject_token``: a fresh token for the same principal, which is how clients
  refresh before expiry.

Served in front of connexion (like the dispatcher): the answers and errors are
RFC 6749's (``{"error": "invalid_client", "error_description": ...}``), not the Iceberg error
body, and HTTP Basic requests carry no ``client_id`` in the form, which the yaml's schema wants.

Guessing secrets is bounded (``SecretGuessing``): every client authentication takes a token
from the client id's bucket and from the calling address's before its secret is verified, and a
success gives them back, so only failures use them up; while either bucket is empty the request
is answered 429 ``slow_down`` with ``Retry-After`` and nothing is verified. (Taking before
verifying keeps a crowd of concurrent guesses to the burst: none of them waits for another's
verdict to be counted.) A secret is verified (argon2: memory and CPU by design) by at most
``VERIFICATIONS_AT_ONCE`` requests at a time per worker, so guessers cannot exhaust its memory.

A client that already proved its secret on this worker does not queue behind guessers
(``ProvenSecrets``): the worker keeps, per client id, a keyed hash of the last secret that
verified and the principal's generation then; the same secret is accepted without argon2, buckets
or queue while the principal's generation in PostgreSQL (one indexed read) is still that one. A
rotation or deletion changes it, and the old secret is verified (and refused) the slow way.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, unquote

from starlette.types import Receive, Scope, Send

from app.edge.auth.metrics import TOKEN_REQUESTS
from app.edge.auth.tokens import ACCESS_TOKEN_TYPE, AuthFailure, TokenIssuer, TokenVerifier
from app.edge.http import raw_headers, send_response
from app.ground.errors import CatalogError
from app.ground.lru import LruCache
from app.ground.rates import TokenBuckets
from app.management.principals import PrincipalService

PATH = "/v1/oauth/tokens"
CLIENT_CREDENTIALS = "client_credentials"
_NO_STORE = [(b"cache-control", b"no-store"), (b"pragma", b"no-cache")]
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
SUBJECT_TOKEN_TYPES = frozenset({ACCESS_TOKEN_TYPE, "urn:ietf:params:oauth:token-type:jwt"})
MAX_FORM_BYTES = 64 * 1024


class OAuthError(Exception):
    def __init__(
        self, error: str, description: str, status: int = 400, basic: bool = False, retry_after: float = 0.0
    ) -> None:
        super().__init__(description)
        self.error = error
        self.description = description
        self.status = status
        self.basic = basic  # answer invalid_client with WWW-Authenticate: Basic (RFC 6749 5.2)
        self.retry_after = retry_after


# Failed client authentications allowed: per client id 10 at once, then one every 6 s; per
# calling address 20 at once, then two a second. Only failures count (a success gives back). The
# address's burst is also the most verifications one address can have queued on a worker: what a
# client from another address may wait behind.
PER_CLIENT = (1 / 6, 10.0)
PER_ADDRESS = (2.0, 20.0)
VERIFICATIONS_AT_ONCE = 2  # per worker
PROVEN_SECRETS = 10_000  # client ids per worker (about 200 bytes each)


class SecretGuessing:
    """The failure buckets of client ids and addresses, and the bound on verifications at once."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clients = TokenBuckets(*PER_CLIENT, clock=clock)
        self.addresses = TokenBuckets(*PER_ADDRESS, clock=clock)
        self._verifying: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}

    def admit(self, client_id: str, address: str) -> None:
        """Take a failure's worth from both buckets, or 429 (nothing taken) while either is empty."""
        wait = max(self.clients.wait(client_id), self.addresses.wait(address))
        if wait:
            raise OAuthError("slow_down", "Too many failed authentications: retry later", 429, retry_after=wait)
        self.clients.take(client_id)
        self.addresses.take(address)

    def succeeded(self, client_id: str, address: str) -> None:
        self.clients.give_back(client_id)
        self.addresses.give_back(address)

    def verifying(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        semaphore = self._verifying.get(loop)
        if semaphore is None:
            if len(self._verifying) > 64:
                self._verifying.clear()
            semaphore = self._verifying[loop] = asyncio.Semaphore(VERIFICATIONS_AT_ONCE)
        return semaphore


class ProvenSecrets:
    """Per worker: client id -> (keyed SHA-256 of the secret that last verified, its generation).

    The key is random per process, so what is kept is useless outside it (and is no argon2 hash
    to attack offline); only a secret that verified is ever kept, so guesses never enter.
    """

    def __init__(self) -> None:
        self._key = os.urandom(32)
        self._proven: LruCache[str, tuple[bytes, int]] = LruCache(PROVEN_SECRETS)

    def _digest(self, client_id: str, secret: str) -> bytes:
        return hmac.digest(self._key, f"{client_id}\0{secret}".encode(), hashlib.sha256)

    def generation(self, client_id: str, secret: str) -> int | None:
        """The generation at which this very secret verified here, or None (never, or another)."""
        found = self._proven.get(client_id)
        if found is None or not hmac.compare_digest(found[0], self._digest(client_id, secret)):
            return None
        return found[1]

    def remember(self, client_id: str, secret: str, generation: int) -> None:
        self._proven.put(client_id, (self._digest(client_id, secret), generation))


class TokenEndpoint:
    def __init__(
        self,
        principals: PrincipalService,
        issuer: TokenIssuer,
        verifier: TokenVerifier,
        guessing: SecretGuessing | None = None,
    ) -> None:
        self.principals = principals
        self.issuer = issuer
        self.verifier = verifier
        self.guessing = guessing or SecretGuessing()
        self.proven = ProvenSecrets()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        grant = "unknown"
        try:
            if scope["method"] != "POST":
                raise OAuthError("invalid_request", "The token endpoint only accepts POST", 405)
            form = await read_form(scope, receive)
            grant = form.get("grant_type") or "missing"
            body = await self._grant(scope, form)
        except CatalogError as exc:  # the database is unreachable (503): nothing was decided
            TOKEN_REQUESTS.labels(_grant_label(grant), "unavailable").inc()
            error = "temporarily_unavailable" if exc.code == 503 else "server_error"
            body = {"error": error, "error_description": exc.message}
            await _send_json(send, exc.code, body, raw_headers(exc.headers()))
            return
        except OAuthError as exc:
            TOKEN_REQUESTS.labels(_grant_label(grant), exc.error).inc()
            headers = [(b"www-authenticate", b'Basic realm="growler"')] if exc.basic else []
            if exc.status == 405:
                headers.append((b"allow", b"POST"))
            if exc.retry_after:
                headers.append((b"retry-after", str(max(1, math.ceil(exc.retry_after))).encode()))
            await _send_json(send, exc.status, {"error": exc.error, "error_description": exc.description}, headers)
            return
        TOKEN_REQUESTS.labels(_grant_label(grant), "issued").inc()
        await _send_json(send, 200, body, [])

    async def _grant(self, scope: Scope, form: dict[str, str]) -> dict[str, Any]:
        grant = form.get("grant_type")
        if not grant:
            raise OAuthError("invalid_request", "Missing grant_type")
        if grant == CLIENT_CREDENTIALS:
            return await self._client_credentials(scope, form)
        if grant == TOKEN_EXCHANGE:
            return await self._exchange(form)
        raise OAuthError("unsupported_grant_type", f"Unsupported grant_type {grant[:100]!r}")

    async def _client_credentials(self, scope: Scope, form: dict[str, str]) -> dict[str, Any]:
        basic = _basic_credentials(scope)
        posted = (form.get("client_id"), form.get("client_secret"))
        if basic is not None:
            if posted[1] is not None and posted != basic or posted[0] not in (None, basic[0]):
                raise OAuthError("invalid_request", "Client credentials given twice, and different")
            client_id, secret = basic
        elif posted[0] and posted[1] is not None:
            client_id, secret = posted[0], posted[1]
        else:
            raise OAuthError("invalid_client", "Client authentication required (client_id and client_secret)", 401)
        # RFC 6749 form-encodes Basic credentials; PyIceberg sends them as they are: try both
        decoded = _form_decoded(basic) if basic is not None and _form_decoded(basic) != basic else None
        address = (scope.get("client") or ("",))[0]
        name, generation = await self.authenticate(client_id, secret, address, decoded, basic=basic is not None)
        return self._answer(name, generation, form.get("scope"))

    async def authenticate(
        self,
        client_id: str,
        secret: str,
        address: str,
        alternative: tuple[str, str] | None = None,
        *,
        basic: bool = False,
    ) -> tuple[str, int]:
        """(client id, generation) of the principal whose secret this is, or ``OAuthError``: the
        guessing bounds, the proven-secret shortcut and argon2 off the loop. The token endpoint
        and the console's sign-in (app/edge/auth/console.py) authenticate clients only here."""
        proven = self.proven.generation(client_id, secret)
        # Still the principal's generation? Read from PostgreSQL (one indexed row, no argon2): the
        # generation this worker polls may be half a second behind a rotation or deletion made
        # anywhere, and the old secret must not buy a token even then. Wrong secrets never get here.
        if proven is not None and await asyncio.to_thread(self.principals.live_generation, client_id) == proven:
            return client_id, proven
        self.guessing.admit(client_id, address)
        async with self.guessing.verifying():
            principal = await asyncio.to_thread(self.principals.authenticate, client_id, secret)
            as_sent = principal is not None
            if principal is None and alternative is not None:
                principal = await asyncio.to_thread(self.principals.authenticate, *alternative)
        if principal is None:
            raise OAuthError("invalid_client", "Client authentication failed", 401, basic=basic)
        self.guessing.succeeded(client_id, address)
        if as_sent:
            self.proven.remember(client_id, secret, principal.generation)
        return principal.client_id, principal.generation

    async def _exchange(self, form: dict[str, str]) -> dict[str, Any]:
        subject, subject_type = form.get("subject_token"), form.get("subject_token_type")
        if not subject or not subject_type:
            raise OAuthError("invalid_request", "Token exchange needs subject_token and subject_token_type")
        if subject_type not in SUBJECT_TOKEN_TYPES:
            raise OAuthError("invalid_request", f"Unsupported subject_token_type {subject_type[:100]!r}")
        try:
            principal = await self.verifier.verify(subject, own_only=True)
        except AuthFailure as exc:
            raise OAuthError("invalid_grant", f"The subject token cannot be exchanged: {exc.reason}") from None
        generation = self.verifier.generation_of(principal.name)
        if generation is None:
            raise OAuthError("invalid_grant", "The subject token cannot be exchanged: revoked")
        body = self._answer(principal.name, generation, form.get("scope"))
        body["issued_token_type"] = ACCESS_TOKEN_TYPE
        return body

    def _answer(self, client_id: str, generation: int, scope: str | None) -> dict[str, Any]:
        token, expires_in = self.issuer.issue(client_id, generation, scope)
        body: dict[str, Any] = {
            "access_token": token,
            "token_type": "bearer",
            "expires_in": expires_in,
            "issued_token_type": ACCESS_TOKEN_TYPE,
        }
        if scope:
            body["scope"] = scope
        return body


def _grant_label(grant: str) -> str:
    return {CLIENT_CREDENTIALS: "client_credentials", TOKEN_EXCHANGE: "token_exchange", "missing": "missing"}.get(
        grant, "other"
    )


async def read_form(scope: Scope, receive: Receive) -> dict[str, str]:
    content_type = next((v for k, v in scope["headers"] if k == b"content-type"), b"").decode("latin-1")
    if content_type.split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        raise OAuthError("invalid_request", "The body must be application/x-www-form-urlencoded")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client left (or was cut off) mid-body
            raise OAuthError("invalid_request", "The body did not arrive in full")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            raise OAuthError("invalid_request", f"The body is larger than {MAX_FORM_BYTES} bytes")
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    try:
        pairs = parse_qsl(b"".join(chunks).decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise OAuthError("invalid_request", "The body is not a valid form") from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            raise OAuthError("invalid_request", f"Parameter {name[:50]!r} given more than once")
        form[name] = value
    return form


def _basic_credentials(scope: Scope) -> tuple[str, str] | None:
    """(client_id, secret) from ``Authorization: Basic``, as sent (see ``_form_decoded``)."""
    header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
    if header is None or not header[:6].lower() == b"basic ":
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise OAuthError("invalid_client", "Malformed Basic credentials", 401, basic=True) from None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise OAuthError("invalid_client", "Malformed Basic credentials", 401, basic=True)
    return client_id, secret


def _form_decoded(pair: tuple[str, str]) -> tuple[str, str]:
    return unquote(pair[0].replace("+", " ")), unquote(pair[1].replace("+", " "))


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
    """RFC 6749 section 5.1: token responses (and their errors) must not be cached."""
    await send_response(send, status, json.dumps(body).encode(), [*_NO_STORE, *headers])
