"""The keys that sign Growler's own tokens: made here, kept in PostgreSQL, shared by every worker.

A key pair is RSA 2048 (RS256: the cheapest signature to verify, which every request does); the
private half is stored encrypted (PKCS#8 with ``GROWLER_TOKEN_KEY_PASSWORD``, cryptography's
best available scheme), so reading the database is not enough to mint tokens. Rotation
(``python -m scripts.principals rotate-key``) adds a key that signs from then on; the previous
ones keep verifying until the tokens they signed have expired.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from storage.principals import KeyRow

ALGORITHM = "RS256"


def new_key(password: str) -> KeyRow:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    private_pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(password.encode()),
    )
    return KeyRow(secrets.token_hex(8), ALGORITHM, public_pem.decode(), private_pem, retired=False)


@dataclass(frozen=True)
class KeyRing:
    """The keys of one moment: the signing key (if this worker may sign) and all verifying ones."""

    signing_kid: str | None
    signing_key: Any
    verifying: dict[str, Any]  # kid -> public key object

    @classmethod
    def empty(cls) -> KeyRing:
        return cls(None, None, {})

    @classmethod
    def load(cls, rows: list[KeyRow], password: str | None, previous: KeyRing | None = None) -> KeyRing:
        """Keys from their rows; a private key is decrypted once (reused from ``previous``)."""
        verifying = {row.kid: serialization.load_pem_public_key(row.public_pem.encode()) for row in rows}
        signer = next((row for row in rows if not row.retired), None)
        if signer is None or password is None:
            return cls(None, None, verifying)
        if previous is not None and previous.signing_kid == signer.kid:
            return cls(signer.kid, previous.signing_key, verifying)
        private = serialization.load_pem_private_key(signer.private_pem, password.encode())
        return cls(signer.kid, private, verifying)
