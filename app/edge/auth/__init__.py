"""Authentication (issue 15): principals, Growler's own tokens, an external IdP's tokens.

``Authentication`` wires the parts for the app factory; ``AuthMiddleware`` is the one place a
request is authenticated. See app/edge/auth/config.py for the modes.
"""

from __future__ import annotations

from collections.abc import Callable

from app.edge.auth.config import AuthSettings
from app.edge.auth.console import ConsoleOidc
from app.edge.auth.endpoint import TokenEndpoint
from app.edge.auth.middleware import PRINCIPAL, AuthMiddleware
from app.edge.auth.oidc import OidcProvider
from app.edge.auth.state import AuthState
from app.edge.auth.tokens import TokenIssuer, TokenVerifier
from app.management.principals import PrincipalService
from storage.db import Database
from storage.principals import PrincipalRepository

__all__ = ["PRINCIPAL", "AuthMiddleware", "AuthSettings", "Authentication"]


class Authentication:
    def __init__(
        self, settings: AuthSettings, database: Database, listeners: tuple[Callable[[], None], ...] = ()
    ) -> None:
        self.settings = settings
        repository = PrincipalRepository(database)
        self.principals = PrincipalService(repository)
        self.state = AuthState(repository, settings, listeners)  # caches a management change drops
        oidc = OidcProvider(settings) if settings.enabled and settings.oidc_issuer else None
        self.console_oidc = (
            ConsoleOidc(
                oidc, settings.console_oidc_client_id, settings.console_oidc_client_secret, settings.console_oidc_scope
            )
            if oidc is not None and settings.console_oidc_client_id
            else None
        )
        self.verifier = TokenVerifier(settings, self.state, oidc) if settings.enabled else None
        self.issuer = TokenIssuer(settings, self.state)
        self.endpoint = (
            TokenEndpoint(self.principals, self.issuer, self.verifier)
            if settings.issues_tokens and self.verifier is not None
            else None
        )

    def start(self) -> None:
        """A start-up step (retried while PostgreSQL is down): keys, bootstrap admin, polling."""
        if not self.settings.enabled:
            return
        self.state.start()
        if self.settings.issues_tokens:
            self.principals.bootstrap(self.settings)

    def stop(self) -> None:
        self.state.stop()

    def middleware_options(self) -> dict[str, object]:
        return {"verifier": self.verifier, "endpoint": self.endpoint, "console_oidc": self.console_oidc}
