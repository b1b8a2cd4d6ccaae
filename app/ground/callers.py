"""Who is calling: the authenticated principal of the request being served.

Set once by the authentication middleware (app/edge/auth/middleware.py) for every request it lets
through, and read by the services that decide what the caller may do (authorization, issue 16)
and by the request log. a2wsgi copies the context into the Flask thread, like the request id.
``None`` means no authentication is configured (``GROWLER_AUTH=none``, loopback only).
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

OWN = "growler"  # a token Growler issued (a service principal of its own)
IDP = "oidc"  # a token of the configured external identity provider


@dataclass(frozen=True)
class Principal:
    """``name``: the client id (own tokens) or the IdP's principal claim; ``roles``: the IdP's
    roles claim (own principals get theirs from the catalog's role membership)."""

    name: str
    source: str
    roles: tuple[str, ...] = ()


current_principal: ContextVar[Principal | None] = ContextVar("growler_principal", default=None)
