"""SecretBox: a warehouse's storage keys sealed with GROWLER_SECRETS_KEY, and nothing else opens them."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from app.ground.secrets import SecretBox
from app.ground.settings import Settings


def test_sealed_values_open_only_with_the_same_key():
    key = Fernet.generate_key().decode()
    box = SecretBox(key)
    sealed = box.seal({"access-key-id": "AKIA", "secret-access-key": "very-secret"})
    assert b"very-secret" not in sealed and b"AKIA" not in sealed
    assert box.open(sealed) == {"access-key-id": "AKIA", "secret-access-key": "very-secret"}
    assert SecretBox(key).open(sealed)["secret-access-key"] == "very-secret"  # another worker, same key
    with pytest.raises(ValueError, match="cannot be decrypted"):
        SecretBox(Fernet.generate_key().decode()).open(sealed)
    assert key not in repr(box)


def test_a_malformed_key_is_refused_at_start_up():
    with pytest.raises(ValueError, match="GROWLER_SECRETS_KEY must be a Fernet key"):
        Settings.from_env(
            {
                "GROWLER_DATABASE_URL": "postgresql://x",
                "GROWLER_S3_ENDPOINT": "http://s3",
                "GROWLER_SECRETS_KEY": "short",
            }
        )
    settings = Settings.from_env(
        {
            "GROWLER_DATABASE_URL": "postgresql://x",
            "GROWLER_S3_ENDPOINT": "http://s3",
            "GROWLER_SECRETS_KEY": Fernet.generate_key().decode(),
        }
    )
    assert settings.secrets_key is not None and settings.secrets_key not in repr(settings)
