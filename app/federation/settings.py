"""A federated warehouse's settings as the management API takes and shows them: checked, the
credential toward the remote sealed (Fernet, GROWLER_SECRETS_KEY, as a warehouse's storage keys:
app/ground/secrets.py), and never shown back - only whether one is stored.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from app.ground.errors import BadRequest
from app.ground.secrets import SecretBox
from app.rules.requests.management import FederationAuth, FederationSettings
from storage.warehouses import KEEP

DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_BREAKER_FAILURES = 5
DEFAULT_BREAKER_COOLDOWN_MS = 30_000


def check_uri(uri: str, what: str) -> str:
    """An http(s) URL with a host and no user info, query or fragment: credentials have fields of
    their own, and the URI is shown to administrators."""
    parsed = urlparse(uri)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise BadRequest(f"{what} must be an http(s) URL with a host")
    if "@" in parsed.netloc or parsed.query or parsed.fragment or parsed.params:
        raise BadRequest(f"{what} must carry no user info, query or fragment")
    return uri.rstrip("/")


def federation_settings(given: FederationSettings, box: SecretBox | None) -> tuple[dict[str, Any], bytes | None]:
    """The stored (non-secret) settings and the sealed credential (None: no secret)."""
    auth = given.auth or FederationAuth(type="none")
    token = auth.token.get_secret_value() if auth.token is not None else None
    client_secret = auth.client_secret.get_secret_value() if auth.client_secret is not None else None
    stored_auth: dict[str, Any] = {"type": auth.type}
    secret: str | None = None
    if auth.type == "none":
        if token or client_secret or auth.client_id or auth.token_endpoint or auth.scope:
            raise BadRequest("federation auth none takes no token, client id, client secret, token endpoint or scope")
    elif auth.type == "bearer":
        if not token:
            raise BadRequest("federation auth bearer needs a token")
        if client_secret or auth.client_id or auth.token_endpoint or auth.scope:
            raise BadRequest("federation auth bearer takes a token only")
        secret = token
    else:  # oauth2: client credentials
        if not (auth.client_id and client_secret):
            raise BadRequest("federation auth oauth2 needs client-id and client-secret")
        if token:
            raise BadRequest("federation auth oauth2 takes no static token")
        stored_auth["client-id"] = auth.client_id
        if auth.token_endpoint is not None:
            stored_auth["token-endpoint"] = check_uri(auth.token_endpoint, "federation token-endpoint")
        if auth.scope is not None:
            stored_auth["scope"] = auth.scope
        secret = client_secret
    sealed = None
    if secret is not None:
        if box is None:
            raise BadRequest("A remote credential cannot be stored: the server has no GROWLER_SECRETS_KEY")
        sealed = box.seal({"secret": secret})
    stored = {
        "uri": check_uri(given.uri, "federation uri"),
        "warehouse": given.warehouse,
        "auth": stored_auth,
        "read-only": bool(given.read_only),
        "timeout-ms": given.timeout_ms or DEFAULT_TIMEOUT_MS,
        "cache-ttl-ms": given.cache_ttl_ms or 0,
        "breaker-failures": given.breaker_failures or DEFAULT_BREAKER_FAILURES,
        "breaker-cooldown-ms": given.breaker_cooldown_ms or DEFAULT_BREAKER_COOLDOWN_MS,
    }
    return stored, sealed


def updated_federation(
    current: dict[str, Any], given: FederationSettings, box: SecretBox | None
) -> tuple[dict[str, Any], object]:
    """An update's settings: ``given`` replaces the current ones; without ``auth`` the current
    authentication and its sealed credential are kept (``KEEP``), so rotating nothing needs no secret."""
    if given.auth is not None:
        return federation_settings(given, box)
    stored, _ = federation_settings(given, box)
    stored["auth"] = current.get("auth") or {"type": "none"}
    return stored, KEEP


def federation_view(stored: dict[str, Any], sealed: bytes | None) -> dict[str, Any]:
    """What the management API shows: the settings, and whether a credential is stored (never it)."""
    auth = {k: v for k, v in (stored.get("auth") or {"type": "none"}).items() if k != "secret"}
    return {
        "uri": stored["uri"],
        "warehouse": stored["warehouse"],
        "auth": {**auth, "has-secret": sealed is not None},
        "read-only": bool(stored.get("read-only")),
        "timeout-ms": int(stored.get("timeout-ms") or DEFAULT_TIMEOUT_MS),
        "cache-ttl-ms": int(stored.get("cache-ttl-ms") or 0),
        "breaker-failures": int(stored.get("breaker-failures") or DEFAULT_BREAKER_FAILURES),
        "breaker-cooldown-ms": int(stored.get("breaker-cooldown-ms") or DEFAULT_BREAKER_COOLDOWN_MS),
    }
