"""An external OpenID Connect identity provider whose access tokens Growler accepts.

From ``GROWLER_OIDC_ISSUER`` the discovery document (``/.well-known/openid-configuration``) gives
the JWKS address; the keys are fetched once and kept. A token signed with a ``kid`` not among
them (the IdP rotated its keys) makes Growler fetch the keys again - at most once per
``GROWLER_OIDC_JWKS_MIN_REFRESH_S``, so forged kids cannot make it hammer the IdP. Fetching runs
in a thread, never on the event loop.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import jwt

from app.edge.auth.config import AuthSettings
from app.edge.auth.metrics import JWKS_FETCHES

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 5.0
MAX_DOCUMENT_BYTES = 1024 * 1024


def claim(claims: dict[str, Any], path: str | None) -> Any:
    """A claim by name, or by a dotted path into nested objects (Keycloak's ``realm_access.roles``)."""
    if not path:
        return None
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _fetch_json(url: str) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310 - configured URL
        document = json.loads(response.read(MAX_DOCUMENT_BYTES))
    if not isinstance(document, dict):
        raise ValueError(f"{url} did not answer a JSON object")
    return document


class OidcProvider:
    def __init__(self, settings: AuthSettings) -> None:
        assert settings.oidc_issuer is not None
        self.issuer = settings.oidc_issuer
        self.audience = settings.oidc_audience
        self.min_refresh_s = settings.oidc_jwks_min_refresh_s
        self._keys: dict[str, Any] = {}
        self._jwks_uri: str | None = None
        self._discovery: dict[str, Any] | None = None
        self._fetched_at = float("-inf")
        self._lock = threading.Lock()

    def cached_key(self, kid: str) -> Any | None:
        return self._keys.get(kid)

    def key(self, kid: str) -> Any | None:
        """The key with this kid, fetching the IdP's keys again if it is unknown (rate-limited)."""
        with self._lock:
            if kid in self._keys:
                return self._keys[kid]
            if time.monotonic() - self._fetched_at < self.min_refresh_s:
                return None
            self._fetched_at = time.monotonic()
            try:
                self._keys = self._fetch_keys()
                JWKS_FETCHES.labels("ok").inc()
            except Exception as exc:  # noqa: BLE001 - the IdP is down or answers nonsense: keep the old keys
                JWKS_FETCHES.labels("error").inc()
                log.warning("cannot fetch the identity provider's keys from %s: %s", self.issuer, exc)
            return self._keys.get(kid)

    def discovery(self) -> dict[str, Any]:
        """The IdP's discovery document (fetched once; blocking: call it from a thread)."""
        if self._discovery is None:
            discovery = _fetch_json(f"{self.issuer}/.well-known/openid-configuration")
            if discovery.get("issuer", "").rstrip("/") != self.issuer:
                raise ValueError(f"the discovery document names issuer {discovery.get('issuer')!r}")
            self._discovery = discovery
        return self._discovery

    def exchange_code(self, form: dict[str, str]) -> dict[str, Any]:
        """The authorization code grant at the IdP's token endpoint (the console's sign-in;
        blocking: call it from a thread). The IdP's answer, or ``ValueError``."""
        body = urllib.parse.urlencode(form).encode()
        request = urllib.request.Request(
            str(self.discovery()["token_endpoint"]),
            data=body,
            headers={"Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"},
        )
        try:
            with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT_S) as response:  # noqa: S310 - configured URL
                answer = json.loads(response.read(MAX_DOCUMENT_BYTES))
        except urllib.error.HTTPError as exc:
            raise ValueError(f"the identity provider refused the code ({exc.code})") from None
        if not isinstance(answer, dict) or not isinstance(answer.get("access_token"), str):
            raise ValueError("the identity provider answered no access token")
        return answer

    def _fetch_keys(self) -> dict[str, Any]:
        if self._jwks_uri is None:
            self._jwks_uri = str(self.discovery()["jwks_uri"])
        keys = {}
        for entry in _fetch_json(self._jwks_uri).get("keys", []):
            if entry.get("use", "sig") != "sig" or not entry.get("kid"):
                continue
            try:
                keys[entry["kid"]] = jwt.PyJWK.from_dict(entry).key
            except jwt.PyJWTError:
                continue  # a key type PyJWT does not support (or that it cannot parse)
        log.info("fetched %d signing keys of the identity provider %s", len(keys), self.issuer)
        return keys
