"""Authentication settings, read once from the environment (documented in docs/security.md, "Authentication").

Kept apart from ``app/settings.py`` so that authentication is wired in one place. Modes
(``GROWLER_AUTH``):

- ``oauth2`` (the default): every route but /healthz,
  /readyz and /metrics needs a bearer token, either one Growler issued (``POST /v1/oauth/tokens``,
  unless ``GROWLER_OWN_TOKENS=false``) or, with ``GROWLER_OIDC_ISSUER`` set, one from that
  identity provider - both at once when both are configured.
- ``none``: no authentication at all, only when asked for and only on a loopback
  ``GROWLER_BIND`` (refused on any other address, so that a catalog reachable from the network
  never runs open; note that a reverse proxy on the same host makes loopback reachable, so
  ``none`` is for a developer's laptop). Secure by default: nothing set means ``oauth2``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.ground.settings import env_float, env_int

MODES = ("oauth2", "none")
DEFAULT_BIND = "127.0.0.1:8181"  # gunicorn.conf.py's default


def is_loopback_bind(bind: str) -> bool:
    """True when every address of a gunicorn bind string (``host:port[,...]``) is local only."""
    for part in bind.split(","):
        part = part.strip()
        if part.startswith("unix:"):
            continue  # a socket file: reachable by local processes only
        host = part.rpartition(":")[0] if ":" in part else part
        host = host.strip("[]").lower()
        if not (host == "localhost" or host == "::1" or host.startswith("127.")):
            return False
    return bool(bind.strip())


@dataclass(frozen=True)
class AuthSettings:
    mode: str = "oauth2"
    bind: str = DEFAULT_BIND
    own_tokens: bool = True
    issuer: str = "growler"
    audience: str = "growler"
    token_ttl_s: int = 3600
    key_password: str | None = field(default=None, repr=False)
    bootstrap_client_id: str | None = None
    bootstrap_client_secret: str | None = field(default=None, repr=False)
    oidc_issuer: str | None = None
    oidc_audience: str | None = None
    oidc_principal_claim: str = "sub"
    oidc_roles_claim: str | None = None
    # An unknown kid re-fetches the IdP's keys, at most this often (a stream of forged kids
    # must not turn into a stream of requests to the IdP).
    oidc_jwks_min_refresh_s: float = 5.0
    clock_skew_s: int = 30
    # The console's sign-in through the IdP (authorization code + PKCE): the IdP's client for it
    # (public, or confidential with its secret); unset: the console signs in with client secrets.
    console_oidc_client_id: str | None = None
    console_oidc_client_secret: str | None = field(default=None, repr=False)
    console_oidc_scope: str = "openid"
    # How often a worker checks the auth version row (principals rotated/deleted, keys rotated).
    poll_s: float = 0.5

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AuthSettings:
        env = os.environ if env is None else env
        bind = env.get("GROWLER_BIND") or DEFAULT_BIND
        settings = cls(
            mode=(env.get("GROWLER_AUTH") or "oauth2").strip().lower(),
            bind=bind,
            own_tokens=(env.get("GROWLER_OWN_TOKENS") or "true").strip().lower() in {"1", "true", "yes", "on"},
            issuer=env.get("GROWLER_TOKEN_ISSUER") or "growler",
            audience=env.get("GROWLER_TOKEN_AUDIENCE") or "growler",
            token_ttl_s=env_int(env, "GROWLER_TOKEN_TTL_S", 3600),
            key_password=env.get("GROWLER_TOKEN_KEY_PASSWORD") or None,
            bootstrap_client_id=env.get("GROWLER_BOOTSTRAP_CLIENT_ID") or None,
            bootstrap_client_secret=env.get("GROWLER_BOOTSTRAP_CLIENT_SECRET") or None,
            oidc_issuer=(env.get("GROWLER_OIDC_ISSUER") or "").rstrip("/") or None,
            oidc_audience=env.get("GROWLER_OIDC_AUDIENCE") or None,
            oidc_principal_claim=env.get("GROWLER_OIDC_PRINCIPAL_CLAIM") or "sub",
            oidc_roles_claim=env.get("GROWLER_OIDC_ROLES_CLAIM") or None,
            oidc_jwks_min_refresh_s=env_float(env, "GROWLER_OIDC_JWKS_MIN_REFRESH_S", 5.0),
            clock_skew_s=env_int(env, "GROWLER_AUTH_CLOCK_SKEW_S", 30),
            console_oidc_client_id=env.get("GROWLER_CONSOLE_OIDC_CLIENT_ID") or None,
            console_oidc_client_secret=env.get("GROWLER_CONSOLE_OIDC_CLIENT_SECRET") or None,
            console_oidc_scope=env.get("GROWLER_CONSOLE_OIDC_SCOPE") or "openid",
        )
        settings.check()
        return settings

    @property
    def enabled(self) -> bool:
        return self.mode != "none"

    @property
    def issues_tokens(self) -> bool:
        return self.enabled and self.own_tokens

    def check(self) -> None:
        """Refuse, at start-up, settings that would leave the catalog open or unable to work."""
        if self.mode not in MODES:
            raise ValueError(f"GROWLER_AUTH must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.enabled:
            if not is_loopback_bind(self.bind):
                raise ValueError(
                    f"GROWLER_AUTH=none is only allowed on a loopback address; GROWLER_BIND is {self.bind!r}"
                )
            return
        if not self.own_tokens and not self.oidc_issuer:
            raise ValueError("GROWLER_OWN_TOKENS=false needs GROWLER_OIDC_ISSUER: no token could be accepted")
        if self.own_tokens and not self.key_password:
            raise ValueError(
                "GROWLER_TOKEN_KEY_PASSWORD is required to issue tokens (it encrypts the signing keys in the"
                " database; every worker and replica needs the same one)"
            )
        if not 1 <= self.token_ttl_s <= 86_400:
            raise ValueError("GROWLER_TOKEN_TTL_S must be between 1 and 86400 seconds")
        if self.oidc_issuer and not self.oidc_audience:
            raise ValueError("GROWLER_OIDC_AUDIENCE is required with GROWLER_OIDC_ISSUER")
        if (self.bootstrap_client_id is None) != (self.bootstrap_client_secret is None):
            raise ValueError("GROWLER_BOOTSTRAP_CLIENT_ID and GROWLER_BOOTSTRAP_CLIENT_SECRET go together")
        if self.console_oidc_client_id and not self.oidc_issuer:
            raise ValueError("GROWLER_CONSOLE_OIDC_CLIENT_ID needs GROWLER_OIDC_ISSUER")
        if not 0 <= self.clock_skew_s <= 300:
            raise ValueError("GROWLER_AUTH_CLOCK_SKEW_S must be between 0 and 300")
