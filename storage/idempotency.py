"""Idempotency-Key records in PostgreSQL (SQL only; the rules live in app/idempotency.py).

A key belongs to the principal that sent it (``principal``: '' without authentication).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from storage.db import Database


@dataclass(frozen=True)
class KeyRecord:
    operation: str
    fingerprint: str
    state: str
    status: int | None
    headers: dict[str, str] | None
    body: bytes | None


class IdempotencyRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def claim(
        self, key: str, operation: str, fingerprint: str, lifetime_s: int, lease_s: int, principal: str = ""
    ) -> bool:
        """Take the key: True when this request is to run.

        A key is taken when it is new, when it expired, or when the request that took it stopped
        reporting for longer than ``lease_s`` (its worker died mid-request).
        """
        with self.db.connection() as conn:
            row = conn.execute(
                "INSERT INTO idempotency_key (key, principal, operation, fingerprint, state, expires_at)"
                " VALUES (%(key)s, %(who)s, %(op)s, %(fp)s, 'running', now() + make_interval(secs => %(life)s))"
                " ON CONFLICT (key, principal) DO UPDATE SET operation = EXCLUDED.operation,"
                "  fingerprint = EXCLUDED.fingerprint, state = 'running', status = NULL, headers = NULL,"
                "  body = NULL, claimed_at = now(), expires_at = EXCLUDED.expires_at"
                " WHERE idempotency_key.expires_at < now()"
                "  OR (idempotency_key.state = 'running'"
                "      AND idempotency_key.claimed_at < now() - make_interval(secs => %(lease)s))"
                " RETURNING key",
                {
                    "key": key,
                    "who": principal,
                    "op": operation,
                    "fp": fingerprint,
                    "life": lifetime_s,
                    "lease": lease_s,
                },
            ).fetchone()
        return row is not None

    def get(self, key: str, principal: str = "") -> KeyRecord | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT operation, fingerprint, state, status, headers, body FROM idempotency_key"
                " WHERE key = %s AND principal = %s AND expires_at >= now()",
                (key, principal),
            ).fetchone()
        return KeyRecord(**row) if row else None

    def complete(self, key: str, status: int, headers: dict[str, Any], body: bytes, principal: str = "") -> None:
        with self.db.connection() as conn:
            conn.execute(
                "UPDATE idempotency_key SET state = 'done', status = %s, headers = %s, body = %s"
                " WHERE key = %s AND principal = %s AND state = 'running'",
                (status, Jsonb(headers), body, key, principal),
            )

    def release(self, key: str, principal: str = "") -> None:
        """Forget a key whose request failed in a way worth retrying (5xx)."""
        with self.db.connection() as conn:
            conn.execute(
                "DELETE FROM idempotency_key WHERE key = %s AND principal = %s AND state = 'running'", (key, principal)
            )

    def delete_expired(self) -> int:
        with self.db.connection() as conn:
            return conn.execute("DELETE FROM idempotency_key WHERE expires_at < now()").rowcount
