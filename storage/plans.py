"""Scan plans and their pages of tasks in PostgreSQL (SQL only; the rules are in app/planning/service.py).

Every read filters out expired plans, so an expired plan is unknown at once; the rows themselves
are deleted a few at a time whenever a plan is created.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from storage.db import Database

# Expired plans deleted per new plan: keeps the table small without one long statement.
SWEEP_BATCH = 50


@dataclass(frozen=True)
class PlanRow:
    id: str
    entry_id: int
    status: str
    pages: int
    error: dict[str, Any] | None
    stale: bool  # submitted, but its worker stopped reporting progress


class PlanRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(self, plan_id: str, entry_id: int, status: str, lifetime_s: int, pages: list[str] | None = None) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "DELETE FROM scan_plan WHERE id IN (SELECT id FROM scan_plan WHERE expires_at < now() LIMIT %s)",
                (SWEEP_BATCH,),
            )
            conn.execute(
                "INSERT INTO scan_plan (id, entry_id, status, pages, expires_at)"
                " VALUES (%s, %s, %s, %s, now() + make_interval(secs => %s))",
                (plan_id, entry_id, status, len(pages or []), lifetime_s),
            )
            self._insert_pages(conn, plan_id, pages or [])

    @staticmethod
    def _insert_pages(conn: Any, plan_id: str, pages: list[str]) -> None:
        if pages:
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO scan_plan_page (plan_id, page, body) VALUES (%s, %s, %s)",
                    [(plan_id, index, body) for index, body in enumerate(pages)],
                )

    def complete(self, plan_id: str, pages: list[str]) -> bool:
        """Store the tasks of a submitted plan; False when it was cancelled (or expired) meanwhile."""
        with self.db.transaction() as conn:
            updated = conn.execute(
                "UPDATE scan_plan SET status = 'completed', pages = %s, heartbeat_at = now()"
                " WHERE id = %s AND status = 'submitted' AND expires_at > now() RETURNING id",
                (len(pages), plan_id),
            ).fetchone()
            if updated is None:
                return False
            self._insert_pages(conn, plan_id, pages)
            return True

    def fail(self, plan_id: str, error: dict[str, Any], stale_only_s: float | None = None) -> bool:
        """Mark a submitted plan failed (only if its heartbeat is older than ``stale_only_s``, if given)."""
        condition = "" if stale_only_s is None else " AND heartbeat_at < now() - make_interval(secs => %(stale)s)"
        with self.db.connection() as conn:
            updated = conn.execute(
                "UPDATE scan_plan SET status = 'failed', error = %(error)s::jsonb"
                " WHERE id = %(id)s AND status = 'submitted'" + condition + " RETURNING id",
                {"id": plan_id, "error": json.dumps(error), "stale": stale_only_s},
            ).fetchone()
        return updated is not None

    def heartbeat(self, plan_ids: list[str]) -> dict[str, str]:
        """Note progress on plans; their statuses (a plan gone or expired is left out)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "UPDATE scan_plan SET heartbeat_at = now()"
                " WHERE id = ANY(%s::uuid[]) AND expires_at > now() RETURNING id::text AS id, status",
                (plan_ids,),
            ).fetchall()
        return {row["id"]: row["status"] for row in rows}

    def load(self, plan_id: str, stale_after_s: float) -> PlanRow | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT id::text AS id, entry_id, status, pages, error,"
                " (status = 'submitted' AND heartbeat_at < now() - make_interval(secs => %s)) AS stale"
                " FROM scan_plan WHERE id = %s AND expires_at > now()",
                (stale_after_s, plan_id),
            ).fetchone()
        return PlanRow(**row) if row else None

    def page(self, plan_id: str, entry_id: int, page: int) -> str | None:
        """A page of a completed, unexpired plan of this entry."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT p.body FROM scan_plan s JOIN scan_plan_page p ON p.plan_id = s.id"
                " WHERE s.id = %s AND s.entry_id = %s AND s.status = 'completed' AND s.expires_at > now()"
                " AND p.page = %s",
                (plan_id, entry_id, page),
            ).fetchone()
        return row["body"] if row else None

    def cancel(self, plan_id: str, entry_id: int) -> bool:
        """Cancel a plan of this entry and forget its tasks; False when there is no such plan."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE scan_plan SET status = CASE WHEN status IN ('submitted', 'completed')"
                " THEN 'cancelled' ELSE status END"
                " WHERE id = %s AND entry_id = %s AND expires_at > now() RETURNING id",
                (plan_id, entry_id),
            ).fetchone()
            if row is None:
                return False
            conn.execute("DELETE FROM scan_plan_page WHERE plan_id = %s", (plan_id,))
            return True
