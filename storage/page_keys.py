"""The installation's page token key in PostgreSQL (SQL only; the sealing is app/ground/page_tokens.py)."""

from __future__ import annotations

from storage.db import Database


class PageKeyRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def key(self, candidate: bytes) -> bytes:
        """The stored key; ``candidate`` becomes it when there is none yet. Workers starting
        together all offer one: the first insert wins, the others' do nothing and read it."""
        with self.db.transaction() as conn:
            conn.execute("INSERT INTO page_token_key (key) VALUES (%s) ON CONFLICT DO NOTHING", (candidate,))
            row = conn.execute("SELECT key FROM page_token_key").fetchone()
        return bytes(row["key"])
