"""Bearer tokens: Growler's own (issued here, RS256 JWTs) and an identity provider's (OIDC).

A token Growler issues names its principal (``sub``) and the principal's credential generation
(``gen``); it is valid while the signature, issuer, audience and expiry hold and the principal
is neither deleted nor rotated since (app/edge/auth/state.py). A token from the IdP is checked with
the IdP's published keys (app/edge/auth/oidc.py), issuer, audience, ``exp`` and ``nbf``.

Verifying a signature costs tens of microseconds; a verified token is kept (by its text) until
it expires, so a client's repeated requests cost a dictionary lookup and the state check.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from dataclasses import dataclass
from typing import Any

import jwt

from app.edge.auth.config import AuthSettings
from app.edge.auth.keys import ALGORITHM
from app.edge.auth.oidc import OidcProvider, claim
from app.edge.auth.state import AuthState
from app.ground.callers import IDP, OWN, Principal
from app.ground.lru import LruCache

ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
_IDP_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]

# Reasons a token is refused: the label of the 401 counter, and a message without the token.
MESSAGES = {
    "missing": "Authentication required: no bearer token",
    "malformed": "Not authorized: the bearer token is malformed",
    "expired": "Not authorized: the token has expired",
    "not_yet_valid": "Not authorized: the token is not valid yet",
    "signature": "Not authorized: the token signature is invalid",
    "unknown_key": "Not authorized: the token is signed with an unknown key",
    "issuer": "Not authorized: the token has the wrong issuer",
    "audience": "Not authorized: the token has the wrong audience",
    "revoked": "Not authorized: the token was revoked (principal deleted or credentials rotated)",
    "no_principal": "Not authorized: the token names no principal",
}


class AuthFailure(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(MESSAGES[reason])
        self.reason = reason
        self.message = MESSAGES[reason]


@dataclass(frozen=True)
class _Verified:
    principal: Principal
    expires_at: float  # the token's exp, plus the clock skew allowed for the IdP's tokens
    generation: int | None  # own tokens: the principal's generation when issued


class TokenIssuer:
    def __init__(self, settings: AuthSettings, state: AuthState) -> None:
        self.settings = settings
        self.state = state

    def issue(self, client_id: str, generation: int, scope: str | None = None) -> tuple[str, int]:
        """A signed token for the principal and its ``expires_in``; the newest key signs."""
        keys = self.state.keys
        if keys.signing_key is None:
            raise RuntimeError("no signing key loaded")
        now = int(time.time())
        ttl = self.settings.token_ttl_s
        claims: dict[str, Any] = {
            "iss": self.settings.issuer,
            "aud": self.settings.audience,
            "sub": client_id,
            "iat": now,
            "nbf": now,
            "exp": now + ttl,
            "jti": secrets.token_hex(12),
            "gen": generation,
        }
        if scope:
            claims["scope"] = scope
        token = jwt.encode(claims, keys.signing_key, algorithm=ALGORITHM, headers={"kid": keys.signing_kid})
        return token, ttl


class TokenVerifier:
    def __init__(self, settings: AuthSettings, state: AuthState, oidc: OidcProvider | None) -> None:
        self.settings = settings
        self.state = state
        self.oidc = oidc
        self._verified: LruCache[str, _Verified] = LruCache(20_000)

    async def verify(self, token: str, *, own_only: bool = False) -> Principal:
        """The principal of a valid token, or ``AuthFailure`` with the reason."""
        verified = self._verified.get(token)
        if verified is None:
            verified = await self._verify_signature(token, own_only)
            self._verified.put(token, verified)
        elif own_only and verified.principal.source != OWN:
            raise AuthFailure("unknown_key")
        if time.time() > verified.expires_at:
            raise AuthFailure("expired")
        if verified.generation is not None:
            await self._check_principal(verified.principal.name, verified.generation)
        return verified.principal

    def generation_of(self, client_id: str) -> int | None:
        state = self.state.principals.get(client_id)
        return None if state is None or state.deleted else state.generation

    async def _check_principal(self, client_id: str, generation: int) -> None:
        state = self.state.principals.get(client_id)
        if state is None or state.generation < generation:  # created or rotated a moment ago
            await asyncio.to_thread(self.state.reload_when_due)
            state = self.state.principals.get(client_id)
        if state is None or state.deleted or state.generation != generation:
            raise AuthFailure("revoked")

    async def _verify_signature(self, token: str, own_only: bool) -> _Verified:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.DecodeError:
            raise AuthFailure("malformed") from None
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise AuthFailure("malformed" if self.oidc is None else "unknown_key")
        if self.settings.issues_tokens:
            key = self.state.keys.verifying.get(kid)
            if key is None and self.oidc is None:
                await asyncio.to_thread(self.state.reload_if_due)  # a key added a moment ago
                key = self.state.keys.verifying.get(kid)
            if key is not None:
                return self._own(token, key)
        if self.oidc is None or own_only:
            raise AuthFailure("unknown_key")
        key = self.oidc.cached_key(kid)
        if key is None:
            key = await asyncio.to_thread(self.oidc.key, kid)
        if key is None:
            raise AuthFailure("unknown_key")
        return self._idp(token, key)

    def _own(self, token: str, key: Any) -> _Verified:
        claims = _decode(
            token, key, [ALGORITHM], self.settings.issuer, self.settings.audience, 0, ["sub", "exp", "gen"]
        )
        generation = claims["gen"]
        if not isinstance(claims["sub"], str) or not isinstance(generation, int):
            raise AuthFailure("malformed")
        return _Verified(Principal(claims["sub"], OWN), float(claims["exp"]), generation)

    def _idp(self, token: str, key: Any) -> _Verified:
        assert self.oidc is not None
        claims = _decode(
            token, key, _IDP_ALGORITHMS, self.oidc.issuer, self.oidc.audience, self.settings.clock_skew_s, ["exp"]
        )
        name = claim(claims, self.settings.oidc_principal_claim)
        if not isinstance(name, str) or not name:
            raise AuthFailure("no_principal")
        roles = claim(claims, self.settings.oidc_roles_claim) if self.settings.oidc_roles_claim else None
        roles = tuple(str(role) for role in roles) if isinstance(roles, list) else ()
        return _Verified(Principal(name, IDP, roles), float(claims["exp"]) + self.settings.clock_skew_s, None)


def _decode(
    token: str, key: Any, algorithms: list[str], issuer: str, audience: str | None, leeway: int, required: list[str]
) -> dict[str, Any]:
    """PyJWT's checks (signature, iss, aud, exp, nbf, iat), its errors mapped to reasons."""
    try:
        return jwt.decode(
            token,
            key,
            algorithms=algorithms,
            issuer=issuer,
            audience=audience,
            leeway=leeway,
            options={"require": required, "verify_aud": audience is not None},
        )
    except jwt.ExpiredSignatureError:
        raise AuthFailure("expired") from None
    except jwt.ImmatureSignatureError:
        raise AuthFailure("not_yet_valid") from None
    except jwt.InvalidAudienceError:
        raise AuthFailure("audience") from None
    except jwt.InvalidIssuerError:
        raise AuthFailure("issuer") from None
    except (jwt.InvalidSignatureError, jwt.InvalidAlgorithmError):
        raise AuthFailure("signature") from None
    except jwt.PyJWTError:
        raise AuthFailure("malformed") from None
