"""Principals, signing keys and the auth version counter in PostgreSQL (SQL only).

The rules (hashing, tokens, caching) live in ``app/edge/auth/``. Every change to a principal or a key
bumps ``auth_state.version`` in the same transaction, so a worker that polls that one row learns
of it and reloads (app/edge/auth/state.py).
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass

from storage.db import Connection, Database
from storage.events import ChangeEvent, record_events

# pg_advisory_xact_lock key: "one bootstrap / first signing key at a time" across workers.
_AUTH_LOCK_ID = 0x6772_6F77_6175_7468
_BUMP = "UPDATE auth_state SET version = version + 1"


@dataclass(frozen=True)
class PrincipalRow:
    client_id: str
    secret_hash: str
    generation: int
    is_admin: bool
    deleted: bool
    trusted_engine: bool = False  # applies read restrictions itself (migration 0031)


@dataclass(frozen=True)
class PrincipalState:
    """What verifying a token needs to know of its principal."""

    generation: int
    deleted: bool


@dataclass(frozen=True)
class KeyRow:
    kid: str
    algorithm: str
    public_pem: str
    private_pem: bytes
    retired: bool


class PrincipalRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def version(self) -> int:
        with self.db.connection() as conn:
            row = conn.execute("SELECT version FROM auth_state").fetchone()
        return int(row["version"]) if row else 0

    def get(self, client_id: str) -> PrincipalRow | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT client_id, secret_hash, generation, is_admin, deleted_at IS NOT NULL AS deleted,"
                " trusted_engine FROM principal WHERE client_id = %s",
                (client_id,),
            ).fetchone()
        return PrincipalRow(**row) if row else None

    def states(self) -> dict[str, PrincipalState]:
        """Every principal's generation and whether it was deleted (a small table)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT client_id, generation, deleted_at IS NOT NULL AS deleted FROM principal"
            ).fetchall()
        return {row["client_id"]: PrincipalState(row["generation"], row["deleted"]) for row in rows}

    def list(self) -> list[PrincipalRow]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT client_id, secret_hash, generation, is_admin, deleted_at IS NOT NULL AS deleted,"
                " trusted_engine FROM principal ORDER BY client_id"
            ).fetchall()
        return [PrincipalRow(**row) for row in rows]

    def create(
        self,
        client_id: str,
        secret_hash: str,
        *,
        is_admin: bool = False,
        trusted_engine: bool = False,
        only_if_none: bool = False,
        events: Sequence[ChangeEvent] = (),
    ) -> bool:
        """A new principal, with the change feed's ``events``; False when the client id is taken
        (or, with ``only_if_none``, when any principal exists: the bootstrap admin is made once,
        by one worker)."""
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_AUTH_LOCK_ID,))
            if only_if_none and conn.execute("SELECT 1 FROM principal LIMIT 1").fetchone():
                return False
            created = conn.execute(
                "INSERT INTO principal (client_id, secret_hash, is_admin, trusted_engine) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (client_id) DO NOTHING RETURNING id",
                (client_id, secret_hash, is_admin, trusted_engine),
            ).fetchone()
            if created:
                conn.execute(_BUMP)
                record_events(conn, events)
        return created is not None

    def set_trusted_engine(self, client_id: str, trusted: bool, *, events: Sequence[ChangeEvent] = ()) -> bool:
        """Mark a live principal as a trusted engine (or not), with ``events``; False when there is
        no such principal. Bumps the version: cached decisions carry the flag."""
        with self.db.transaction() as conn:
            changed = conn.execute(
                "UPDATE principal SET trusted_engine = %s WHERE client_id = %s AND deleted_at IS NULL RETURNING id",
                (trusted, client_id),
            ).fetchone()
            if changed:
                conn.execute(_BUMP)
                record_events(conn, events)
        return changed is not None

    def rotate(self, client_id: str, secret_hash: str, *, events: Sequence[ChangeEvent] = ()) -> int | None:
        """A new secret and the next generation, with ``events``; None when there is no such (live)
        principal."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE principal SET secret_hash = %s, generation = generation + 1, rotated_at = now()"
                " WHERE client_id = %s AND deleted_at IS NULL RETURNING generation",
                (secret_hash, client_id),
            ).fetchone()
            if row:
                conn.execute(_BUMP)
                record_events(conn, events)
        return row["generation"] if row else None

    def delete(self, client_id: str, *, events: Sequence[ChangeEvent] = ()) -> bool:
        """Delete a principal (its id is never handed out again), with ``events``."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE principal SET deleted_at = now(), secret_hash = '' WHERE client_id = %s"
                " AND deleted_at IS NULL RETURNING id",
                (client_id,),
            ).fetchone()
            if row:  # its memberships go with it (add_member locks the row, so none slips in after)
                conn.execute("DELETE FROM role_member WHERE principal = %s", (client_id,))
                conn.execute(_BUMP)
                record_events(conn, events)
        return row is not None

    # -- signing keys --------------------------------------------------------------------------

    def signing_keys(self) -> list[KeyRow]:
        """Keys that still verify, the signing one (newest not retired) first."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT kid, algorithm, public_pem, private_pem, retired_at IS NOT NULL AS retired FROM signing_key"
                " WHERE verify_until IS NULL OR verify_until > now()"
                " ORDER BY retired_at IS NOT NULL, created_at DESC, kid"
            ).fetchall()
        return [KeyRow(**{**row, "private_pem": bytes(row["private_pem"])}) for row in rows]

    def add_signing_key(self, key: KeyRow, *, retire_after_s: int, only_if_none: bool = False) -> bool:
        """Store a key that signs from now on; the keys signing before it retire and verify for
        ``retire_after_s`` more (the longest a token they signed lives). With ``only_if_none``,
        nothing happens when a signing key exists already (first start of several workers)."""
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_AUTH_LOCK_ID,))
            if only_if_none and conn.execute("SELECT 1 FROM signing_key WHERE retired_at IS NULL").fetchone():
                return False
            _retire(conn, retire_after_s)
            conn.execute(
                "INSERT INTO signing_key (kid, algorithm, public_pem, private_pem) VALUES (%s, %s, %s, %s)",
                (key.kid, key.algorithm, key.public_pem, key.private_pem),
            )
            conn.execute("DELETE FROM signing_key WHERE verify_until < now()")
            conn.execute(_BUMP)
        return True


def _retire(conn: Connection, retire_after_s: int) -> None:
    until = datetime.timedelta(seconds=retire_after_s)
    conn.execute(
        "UPDATE signing_key SET retired_at = now(), verify_until = now() + %s WHERE retired_at IS NULL", (until,)
    )
