"""Tokens a client could never get issued (expired, wrong issuer, ...), signed with the real key."""

from __future__ import annotations

import time
import uuid
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

from app.edge.auth.state import AuthState
from storage.db import Database
from storage.principals import PrincipalRepository


class TokenForge:
    def __init__(self, database_url: str, auth_settings: Any) -> None:
        self._database = Database(database_url, max_size=1)
        self._database.open()
        self.state = AuthState(PrincipalRepository(self._database), auth_settings)
        self.state.reload(force=True)
        self._stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def claims(self, sub: str, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        generation = self.state.principals[sub].generation if sub in self.state.principals else 1
        claims = {
            "iss": "growler",
            "aud": "growler",
            "sub": sub,
            "iat": now,
            "nbf": now,
            "exp": now + 600,
            "jti": uuid.uuid4().hex,
            "gen": generation,
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def sign(self, sub: str, *, stranger_key: bool = False, **overrides: Any) -> str:
        """A token for ``sub`` with these claims, signed by the catalog's key (or a stranger's key
        under the catalog's kid)."""
        self.state.reload(force=True)
        key = self._stranger if stranger_key else self.state.keys.signing_key
        return jwt.encode(
            self.claims(sub, **overrides), key, algorithm="RS256", headers={"kid": self.state.keys.signing_kid}
        )

    def close(self) -> None:
        self._database.close()
