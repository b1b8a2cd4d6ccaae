"""The audit trail's query (listAuditRecords): newest first, filtered, paged (docs/audit.md).

Who may read it is the management API's row for the operation (administrators only:
app/management/operations.py), checked by the dispatcher before this runs. Pages are keyset pages
on (recorded_at, id), their tokens sealed for the query's filters (app/ground/page_tokens.py), so
a token of one query is refused by another.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from app.catalog.paging import Page, page_of
from app.ground.audit_note import ALLOWED, ERROR, REFUSED, UNAUTHENTICATED
from app.ground.errors import BadRequest
from app.ground.page_tokens import PageTokens, scope
from storage.audit import AuditQuery, AuditRows

DECISIONS = (ALLOWED, REFUSED, UNAUTHENTICATED, ERROR)
DEFAULT_PAGE_SIZE = 100
MAX_PAGE_SIZE = 1000
EXPIRY_BATCH = 10_000  # records one delete statement removes
EXPIRY_ROUND_MAX = 200_000  # records one housekeeping round removes at most (the rest: next round)
MAX_FILTER_CHARS = 1000  # a principal or an object prefix


class AuditService:
    def __init__(self, rows: AuditRows, page_tokens: PageTokens, retention_days: int, *, recording: bool) -> None:
        self.rows = rows
        self.page_tokens = page_tokens
        self.retention_days = retention_days  # housekeeping deletes what is older (app/housekeeping.py)
        self.recording = recording  # GROWLER_AUDIT_TRAIL: whether requests are recorded now (the console says)

    def expire(self) -> int:
        """Housekeeping's step: delete records past the retention, batch after batch (each its own
        short statement, so a large backlog never holds one long transaction); how many went."""
        deleted = 0
        while (gone := self.rows.delete_older_than(self.retention_days * 86_400, EXPIRY_BATCH)) > 0:
            deleted += gone
            if gone < EXPIRY_BATCH or deleted >= EXPIRY_ROUND_MAX:
                break  # the rest, if any, at the next round
        return deleted

    def list_records(  # noqa: PLR0913 - the query's filters
        self,
        since: str | None = None,
        until: str | None = None,
        principal: str | None = None,
        object_prefix: str | None = None,
        decision: str | None = None,
        page_token: str | None = None,
        page_size: int | None = None,
    ) -> Page:
        """One page of records, newest first; the token leads on to the next (older) one."""
        start, end = _instant(since, "since"), _instant(until, "until")
        if start is not None and end is not None and start > end:
            raise BadRequest("since must not be after until")
        if decision is not None and decision not in DECISIONS:
            raise BadRequest(f"decision must be one of {', '.join(DECISIONS)}")
        for name, text in (("principal", principal), ("object", object_prefix)):
            if text is not None and not 1 <= len(text) <= MAX_FILTER_CHARS:
                raise BadRequest(f"{name} must have between 1 and {MAX_FILTER_CHARS} characters")
        if page_size is not None and not 1 <= page_size <= MAX_PAGE_SIZE:
            raise BadRequest(f"pageSize must be between 1 and {MAX_PAGE_SIZE}")
        limit = page_size or DEFAULT_PAGE_SIZE
        listing = scope("listAuditRecords", since, until, principal, object_prefix, decision)
        after = None
        if page_token:
            key = self.page_tokens.open(listing, page_token)
            if not (isinstance(key, list) and len(key) == 2 and key[1].isdigit()):  # sealed by us: never
                raise BadRequest("Invalid pageToken")
            after = (datetime.fromisoformat(key[0]), int(key[1]))
        query = AuditQuery(start, end, principal, object_prefix, decision, after)
        rows = self.rows.page(query, limit + 1)
        page = page_of(
            rows, limit, lambda last: self.page_tokens.seal(listing, [last["recorded_at"].isoformat(), str(last["id"])])
        )
        return Page([record_view(row) for row in page.items], page.next_page_token)


def record_view(row: dict[str, Any]) -> dict[str, Any]:
    """A record as the management API shows it (AuditRecord in openapi/management.yaml)."""
    view: dict[str, Any] = {
        "id": row["id"],
        "recorded-at": row["recorded_at"].astimezone(UTC).isoformat().replace("+00:00", "Z"),
        "operation": row["operation"],
        "method": row["method"],
        "path": row["path"],
        "decision": row["decision"],
        "status": row["status"],
        "roles": list(row["roles"] or ()),
    }
    for key, column in (
        ("request-id", "request_id"),
        ("principal", "principal"),
        ("identity-provider", "identity_provider"),
        ("object", "object"),
        ("rule", "rule"),
        ("client", "client"),
        ("user-agent", "user_agent"),
        ("access", "access"),
    ):
        if row[column] is not None:
            view[key] = row[column]
    return view


def _instant(text: str | None, name: str) -> datetime | None:
    """An RFC 3339 time (UTC when it names no offset); 400 otherwise."""
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise BadRequest(f"{name} must be an RFC 3339 date-time, like 2026-12-07T05:00:00Z") from None
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
