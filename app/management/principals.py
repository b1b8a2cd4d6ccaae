"""Service principals: a client id and a secret kept only as an argon2id hash.

A secret is shown once, when it is made (creation, rotation, the generated bootstrap admin);
rotation raises the principal's generation, which every token carries, so tokens issued with
the old secret stop working (app/edge/auth/tokens.py). Deleting keeps the row, marked, so its tokens
are refused and its client id is not reused.
"""

from __future__ import annotations

import logging
import re
import secrets
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from storage.events import ChangeEvent
from storage.principals import PrincipalRepository, PrincipalRow

log = logging.getLogger(__name__)

CLIENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$")  # no ':' (Spark's credential=id:secret)
BOOTSTRAP_CLIENT_ID = "admin"
_HASHER = PasswordHasher()  # argon2id, argon2-cffi's RFC 9106 "low memory" profile
# Verifying an unknown client still costs one argon2 verification: no timing oracle for ids.
_DUMMY_HASH = _HASHER.hash(secrets.token_urlsafe(16))


class BootstrapSettings(Protocol):
    """What bootstrapping needs of the authentication settings (app.edge.auth.config.AuthSettings)."""

    bootstrap_client_id: str | None
    bootstrap_client_secret: str | None


@dataclass(frozen=True)
class Credential:
    """A client id and its secret in the clear: only ever handed to the one who asked for it."""

    client_id: str
    secret: str = ""

    def __repr__(self) -> str:
        return f"Credential(client_id={self.client_id!r}, secret=***)"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def check_client_id(client_id: str) -> str:
    if not CLIENT_ID.match(client_id):
        raise ValueError(f"invalid client id {client_id!r}: letters, digits, '.', '_', '@', '-', at most 128")
    return client_id


class PrincipalService:
    def __init__(self, repository: PrincipalRepository) -> None:
        self.repository = repository

    def create(
        self,
        client_id: str,
        *,
        is_admin: bool = False,
        trusted_engine: bool = False,
        secret: str | None = None,
        events: Sequence[ChangeEvent] = (),
    ) -> Credential | None:
        """A new principal with a new secret (or the one given); None if the client id is taken.
        ``events``: the change feed's record of it (app/events/changes.py), written with it."""
        secret = secret or new_secret()
        hashed = _HASHER.hash(secret)
        created = self.repository.create(
            check_client_id(client_id), hashed, is_admin=is_admin, trusted_engine=trusted_engine, events=events
        )
        return Credential(client_id, secret) if created else None

    def rotate(
        self, client_id: str, secret: str | None = None, *, events: Sequence[ChangeEvent] = ()
    ) -> Credential | None:
        """A new secret; every token issued before is refused from now on."""
        secret = secret or new_secret()
        generation = self.repository.rotate(client_id, _HASHER.hash(secret), events=events)
        return Credential(client_id, secret) if generation is not None else None

    def delete(self, client_id: str, *, events: Sequence[ChangeEvent] = ()) -> bool:
        return self.repository.delete(client_id, events=events)

    def live_generation(self, client_id: str) -> int | None:
        """The principal's credential generation now, or None (unknown, deleted or without a secret)."""
        row = self.repository.get(client_id) if CLIENT_ID.match(client_id) else None
        return row.generation if row is not None and not row.deleted and row.secret_hash else None

    def authenticate(self, client_id: str, secret: str) -> PrincipalRow | None:
        """The live principal whose secret this is, or None (unknown, deleted or wrong secret)."""
        row = self.repository.get(client_id) if CLIENT_ID.match(client_id) else None
        live = row is not None and not row.deleted and row.secret_hash
        try:
            _HASHER.verify(row.secret_hash if live else _DUMMY_HASH, secret)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        return row if live else None

    def bootstrap(self, settings: BootstrapSettings) -> Credential | None:
        """On a catalog without principals: the admin from the environment, or a generated one.

        Exactly one worker creates it (the repository serialises the check); a generated secret
        is printed once, on standard error, never logged. Returns what was created, if anything.
        """
        given = settings.bootstrap_client_id is not None
        client_id = check_client_id(settings.bootstrap_client_id or BOOTSTRAP_CLIENT_ID)
        secret = settings.bootstrap_client_secret or new_secret()
        if not self.repository.create(client_id, _HASHER.hash(secret), is_admin=True, only_if_none=True):
            return None
        if given:
            log.info("bootstrap admin principal %s created from GROWLER_BOOTSTRAP_CLIENT_ID", client_id)
        else:
            print(
                f"Growler bootstrap admin credential (shown once): client id {client_id!r}, secret {secret!r}",
                file=sys.stderr,
                flush=True,
            )
        return Credential(client_id, secret)
