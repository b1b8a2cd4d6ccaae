"""One remote Iceberg REST catalog, as a federated warehouse reaches it: its routes (the prefix and
namespace separator its ``GET /v1/config`` gives), Growler's credential toward it, and requests
to it through a shared urllib3 pool, under its circuit breaker and its timeout.

urllib3 (already installed: minio's HTTP client) rather than a new dependency: a thread-safe
connection pool per host, separate connect and read timeouts, no retries unless asked, and a
body read with a bound. Requests run in the dispatcher's threads, as every handler does.

What never leaves here: the credential toward the remote (a static bearer token, or an OAuth2
client secret and the access tokens it earns). It is set on the outgoing request only; the
caller's own ``Authorization`` header is never forwarded, and nothing the remote sends back is
read for headers beyond the content type and ETag.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote, urlencode

import urllib3
from urllib3.exceptions import HTTPError as Urllib3Error

from app.federation.breaker import CircuitBreaker
from app.ground.errors import BadGateway, ServiceUnavailable

MAX_ANSWER_BYTES = 64 * 1024 * 1024  # a remote answer larger than this is refused (502), never buffered
CONFIG_TTL_S = 300.0  # the remote's prefix and separator, asked again after this long
TOKEN_MARGIN_S = 30.0  # an OAuth2 token is renewed this long before it expires
DEFAULT_TOKEN_LIFETIME_S = 3600.0  # when the token endpoint names no expires_in
JSON = "application/json"


@dataclass(frozen=True)
class RemoteSettings:
    """A federated warehouse's remote, as stored (migration 0029) with its secret opened."""

    uri: str  # without a trailing slash; routes are <uri>/v1/...
    warehouse: str
    auth: str = "none"  # none | bearer | oauth2
    client_id: str | None = None
    token_endpoint: str | None = None
    scope: str | None = None
    read_only: bool = False
    timeout_s: float = 10.0
    cache_ttl_s: float = 0.0  # how long a kept loadTable answer is served without asking (app/federation/cache.py)
    breaker_failures: int = 5  # the circuit breaker's threshold and cool-down (app/federation/breaker.py)
    breaker_cooldown_s: float = 30.0
    secret: str | None = field(default=None, repr=False)  # the bearer token or the client secret


@dataclass(frozen=True)
class Answer:
    """A remote answer: its status, its JSON (None: no body), the raw body and the headers kept."""

    status: int
    data: Any
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Route:
    prefix: str  # the remote's prefix ("" for none), decoded
    separator: str  # the remote's namespace separator as it is sent, URL-encoded (e.g. "%1F" or "%2E")


class RemoteCatalog:
    def __init__(self, name: str, settings: RemoteSettings, http: urllib3.PoolManager, breaker: CircuitBreaker):
        self.name = name  # Growler's warehouse: what messages name
        self.settings = settings
        self.http = http
        self.breaker = breaker
        self._route: tuple[float, Route] | None = None
        self._token: tuple[float, str] | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteCatalog({self.name!r}, {self.settings.uri!r})"

    # -- requests ---------------------------------------------------------------------------

    def send(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes | None) -> Answer:
        """``method`` on ``<uri>/v1/<remote prefix>/<path>?<query>``, ``path`` and ``query`` already
        encoded for the remote (``route``). A 401 of an OAuth2 remote earns one new token and one retry."""
        route = self.route()
        parts = ["v1", *([quote(route.prefix, safe="/")] if route.prefix else []), path]
        url = f"{self.settings.uri}/{'/'.join(parts)}"
        if query:
            url += "?" + query
        answer = self._authorized(method, url, headers, body)
        if answer.status == 401 and self.settings.auth == "oauth2":
            with self._lock:
                self._token = None
            answer = self._authorized(method, url, headers, body)
        if answer.status == 401:
            raise BadGateway(f"The remote catalog of warehouse {self.name} refused Growler's credential (401)")
        return answer

    def route(self) -> Route:
        """The remote prefix and separator, from its ``GET /v1/config?warehouse=`` (cached)."""
        cached = self._route
        if cached is not None and time.monotonic() - cached[0] < CONFIG_TTL_S:
            return cached[1]
        query = urlencode({"warehouse": self.settings.warehouse}, quote_via=quote)
        answer = self._authorized("GET", f"{self.settings.uri}/v1/config?{query}", {}, None)
        if answer.status != 200 or not isinstance(answer.data, dict):
            self.breaker.failed()
            raise BadGateway(
                f"The remote catalog of warehouse {self.name} answered its configuration with {answer.status}"
                f"{_error_message(answer.data)}"
            )
        config: dict[str, Any] = {}
        for key in ("defaults", "overrides"):  # overrides win
            section = answer.data.get(key)
            if isinstance(section, dict):
                config.update(section)
        prefix = config.get("prefix") or ""
        separator = str(config.get("namespace-separator") or "%1F")
        if not isinstance(prefix, str) or not unquote(separator):
            raise BadGateway(f"The remote catalog of warehouse {self.name} answered a configuration without a prefix")
        route = Route(prefix, separator)
        self._route = (time.monotonic(), route)
        return route

    def _authorized(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Answer:
        token = self._bearer()
        sent = dict(headers)
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        return self._call(method, url, sent, body)

    def _call(self, method: str, url: str, headers: dict[str, str], body: bytes | None) -> Answer:
        """One request under the breaker: 503 with Retry-After while it is open or when the remote
        cannot be reached in time, 502 when it answers something that is not JSON."""
        left = self.breaker.refusal()
        if left is not None:
            raise ServiceUnavailable(
                f"The remote catalog of warehouse {self.name} failed repeatedly; not asked again for {left} s",
                retry_after=left,
            )
        timeout = urllib3.Timeout(connect=self.settings.timeout_s, read=self.settings.timeout_s)
        try:
            response = self.http.request(
                method, url, body=body, headers=headers, timeout=timeout, retries=False, preload_content=False
            )
            try:
                raw = response.read(MAX_ANSWER_BYTES + 1)
            finally:
                response.release_conn()
        except (Urllib3Error, OSError) as exc:
            self.breaker.failed()
            raise ServiceUnavailable(
                f"The remote catalog of warehouse {self.name} cannot be reached ({type(exc).__name__})",
                retry_after=max(1, round(self.breaker.cooldown_s)) if self.breaker.is_open else 5,
            ) from None
        if len(raw) > MAX_ANSWER_BYTES:
            self.breaker.failed()
            raise BadGateway(f"The remote catalog of warehouse {self.name} answered more than {MAX_ANSWER_BYTES} bytes")
        data: Any = None
        if raw and method != "HEAD":
            try:
                data = json.loads(raw)
            except ValueError:
                self.breaker.failed()
                raise BadGateway(
                    f"The remote catalog of warehouse {self.name} answered {response.status} with a body that is"
                    " not JSON"
                ) from None
        if response.status >= 500:
            self.breaker.failed()
        else:
            self.breaker.succeeded()
        kept = {name: response.headers[name] for name in ("ETag", "Retry-After") if name in response.headers}
        return Answer(response.status, data, raw, kept)

    # -- Growler's credential toward the remote ------------------------------------------------

    def own_credentials(self) -> frozenset[str]:
        """Growler's secrets toward this remote (the static token or client secret, the current
        OAuth2 token): no answer passed to a client may carry one of them."""
        token = self._token
        return frozenset(value for value in (self.settings.secret, token[1] if token else None) if value)

    def _bearer(self) -> str | None:
        auth = self.settings.auth
        if auth == "bearer":
            return self.settings.secret
        if auth != "oauth2":
            return None
        with self._lock:
            if self._token is not None and time.monotonic() < self._token[0]:
                return self._token[1]
        endpoint = self.settings.token_endpoint or f"{self.settings.uri}/v1/oauth/tokens"
        form = {
            "grant_type": "client_credentials",
            "client_id": self.settings.client_id or "",
            "client_secret": self.settings.secret or "",
            "scope": self.settings.scope or "catalog",
        }
        answer = self._call(
            "POST", endpoint, {"Content-Type": "application/x-www-form-urlencoded"}, urlencode(form).encode()
        )
        data = answer.data if isinstance(answer.data, dict) else {}
        token = data.get("access_token")
        if answer.status != 200 or not isinstance(token, str) or not token:
            raise BadGateway(
                f"The token endpoint of warehouse {self.name}'s remote catalog refused Growler's client credentials"
                f" ({answer.status})"
            )
        lifetime = data.get("expires_in")
        seconds = float(lifetime) if isinstance(lifetime, int | float) and lifetime > 0 else DEFAULT_TOKEN_LIFETIME_S
        with self._lock:
            self._token = (time.monotonic() + max(1.0, seconds - min(TOKEN_MARGIN_S, seconds / 10)), token)
        return token


def _error_message(data: Any) -> str:
    error = data.get("error") if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return f": {message}" if isinstance(message, str) else ""
