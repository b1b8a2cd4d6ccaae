"""Secrets Growler must keep and use again (a warehouse's own storage keys), encrypted at rest.

Fernet (AES-128-CBC + HMAC-SHA256, from ``cryptography``) with the key in ``GROWLER_SECRETS_KEY``:
PostgreSQL and its backups only ever hold ciphertext, and the key never leaves the environment.
A wrong key (rotated away, or another installation's) fails loudly instead of yielding garbage.
"""

from __future__ import annotations

import json

from cryptography.fernet import Fernet, InvalidToken

KEY_VARIABLE = "GROWLER_SECRETS_KEY"


class SecretBox:
    def __init__(self, key: str) -> None:
        try:
            self._fernet = Fernet(key.encode() if isinstance(key, str) else key)
        except (ValueError, TypeError) as exc:
            raise ValueError(
                f"{KEY_VARIABLE} must be a Fernet key (32 url-safe base64-encoded bytes), e.g. from "
                "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
            ) from exc

    def __repr__(self) -> str:
        return "SecretBox(***)"

    def seal(self, values: dict[str, str]) -> bytes:
        return self._fernet.encrypt(json.dumps(values, sort_keys=True).encode())

    def open(self, sealed: bytes) -> dict[str, str]:
        """The values; ValueError when they were sealed with another key."""
        try:
            return json.loads(self._fernet.decrypt(sealed))
        except InvalidToken as exc:
            raise ValueError(f"stored secret cannot be decrypted with this {KEY_VARIABLE}") from exc
