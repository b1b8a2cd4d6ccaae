"""The audit trail's rows in PostgreSQL (SQL only; migration 0030, docs/audit.md).

Written in batches - one statement and one commit for every record a worker's group commit holds
(app/audit/writer.py) - read newest first by the management API, and deleted past their
retention by housekeeping, oldest first and a batch at a time, so that a large backlog never
holds one long transaction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage.db import AsyncDatabase, Database

# One row per record, from one JSON parameter (an array of arrays, one per record, in the columns'
# order): one statement and one parameter whatever the batch's size, parsed once (jsonb). (Parallel arrays through
# unnest cost psycopg an adaptation per column and element; one JSON text is encoded in C.)
INSERT = (
    "INSERT INTO audit_record (recorded_at, request_id, principal, identity_provider, roles, operation,"
    " method, path, object, decision, rule, status, client, user_agent, access)"
    " SELECT (e->>0)::timestamptz, e->>1, e->>2, e->>3, coalesce(string_to_array(e->>4, chr(31)), '{}'),"
    " e->>5, e->>6, e->>7, e->>8, e->>9, e->>10, (e->>11)::int, e->>12, e->>13, nullif(e->14, 'null')"
    " FROM jsonb_array_elements(%s::jsonb) AS e"
)
_ENCODER = json.JSONEncoder(separators=(",", ":"))  # ASCII out: any text is escaped, never lost
COLUMNS = (
    "id, recorded_at, request_id, principal, identity_provider, roles, operation, method, path, object,"
    " decision, rule, status, client, user_agent, access"
)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One decision, as written: names only (docs/audit.md "What is recorded")."""

    recorded_at: datetime
    request_id: str | None
    principal: str | None
    identity_provider: str | None
    roles: tuple[str, ...]
    operation: str
    method: str
    path: str
    object: str | None
    decision: str
    rule: str | None
    status: int
    client: str | None
    user_agent: str | None
    access: tuple[dict[str, Any], ...] = ()


def insert_params(records: Sequence[AuditRecord]) -> tuple[str]:
    """``INSERT``'s one parameter: the records as JSON, every text made storable (``_text``) -
    checked once on the encoded batch (JSON escapes a NUL and every surrogate), field by field
    only in the rare batch that needs it."""
    encoded = _ENCODER.encode([_row(r, _as_is) for r in records])
    if _UNSTORABLE.search(encoded):
        encoded = _ENCODER.encode([_row(r, _text) for r in records])
    return (encoded,)


def _row(r: AuditRecord, text: Callable[[str | None], str | None]) -> tuple[Any, ...]:
    return (
        r.recorded_at.isoformat(),
        text(r.request_id),
        text(r.principal),
        text(r.identity_provider),
        text("\x1f".join(r.roles)) if r.roles else None,
        text(r.operation),
        text(r.method),
        text(r.path),
        text(r.object),
        text(r.decision),
        text(r.rule),
        r.status,
        text(r.client),
        text(r.user_agent),
        (_json(list(r.access)) if text is _text else list(r.access)) if r.access else None,
    )


def _as_is(value: str | None) -> str | None:
    return value


# What the ASCII JSON of a text PostgreSQL refuses holds: a NUL's escape, or a surrogate's (a pair,
# a character beyond the BMP, is stored all right, but it is rare enough to take the slow path too).
_UNSTORABLE = re.compile(r"\\u(0000|d[89a-f])")


def _text(value: str | None) -> str | None:
    """A text PostgreSQL stores: a NUL (a path may carry ``%00``) or a lone surrogate would fail the
    statement - and with it every record of the batch, whose requests would all get 503."""
    if value is None or (value.isascii() and "\x00" not in value):
        return value
    return value.replace("\x00", "\ufffd").encode("utf-8", "backslashreplace").decode("utf-8")


def _json(value: Any) -> Any:
    """``_text`` through a JSON value (jsonb refuses ``\\u0000`` too)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, list):
        return [_json(item) for item in value]
    if isinstance(value, dict):
        return {str(_text(str(key))): _json(item) for key, item in value.items()}
    return value


@dataclass(frozen=True)
class AuditQuery:
    """A page's filters; ``after``: the (recorded_at, id) the previous page ended at."""

    since: datetime | None = None
    until: datetime | None = None
    principal: str | None = None
    object_prefix: str | None = None
    decision: str | None = None
    after: tuple[datetime, int] | None = None


class AuditRows:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, records: Sequence[AuditRecord]) -> None:
        """The records, committed when this returns (one statement, autocommit)."""
        with self.db.connection() as conn:
            conn.execute(INSERT, insert_params(records))

    @staticmethod
    async def insert_async(database: AsyncDatabase, records: Sequence[AuditRecord]) -> None:
        """The same on the event loop's pool: committed when this returns."""
        await database.execute(INSERT, insert_params(records))

    def page(self, query: AuditQuery, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` records matching ``query``, newest first."""
        where, params = [], []
        if query.since is not None:
            where.append("recorded_at >= %s")
            params.append(query.since)
        if query.until is not None:
            where.append("recorded_at < %s")
            params.append(query.until)
        if query.principal is not None:
            where.append("principal = %s")
            params.append(query.principal)
        if query.object_prefix is not None:
            where.append("object LIKE %s")
            params.append(_like_prefix(query.object_prefix))
        if query.decision is not None:
            where.append("decision = %s")
            params.append(query.decision)
        if query.after is not None:
            where.append("(recorded_at, id) < (%s, %s)")
            params.extend(query.after)
        sql = f"SELECT {COLUMNS} FROM audit_record"  # noqa: S608 - fixed column and filter texts only
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY recorded_at DESC, id DESC LIMIT %s"
        with self.db.connection() as conn:
            rows = conn.execute(sql, [*params, limit]).fetchall()
        return [dict(row) for row in rows]

    def delete_older_than(self, retention_s: float, limit: int = 10_000) -> int:
        """Forget one batch of records older than the retention, oldest first (by the time index)."""
        with self.db.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM audit_record WHERE id IN (SELECT id FROM audit_record"
                " WHERE recorded_at < now() - make_interval(secs => %s) ORDER BY recorded_at LIMIT %s)",
                (retention_s, limit),
            )
        return cursor.rowcount


def _like_prefix(prefix: str) -> str:
    """A LIKE pattern matching texts that start with ``prefix`` (its wildcards escaped)."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
