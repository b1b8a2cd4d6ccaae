"""Maintenance runs as jobs in PostgreSQL (SQL only; issue 49, migrations 0025 and 0026).

A run asked for by hand (``enqueue``) and a due table's scheduled runs (``enqueue_due``) are rows
'queued' here; job runners in every worker of every replica claim them (``claim``), run them under
the table's lease (``storage.maintenance_rows``) and record their progress; a cancel marks a queued
job 'cancelled' or asks a running one to stop. The rules (when a job may start, what a run does)
live in ``app/maintenance/jobs.py``, ``app/maintenance/service.py`` and ``app/maintenance/runs.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from storage.db import Database
from storage.maintenance_rows import ABANDON_SET, MAX_ATTEMPTS, RUN_COLUMNS, RunRow, TableRef

# One claim at a time across the fleet: the limits are counted and the job taken in one
# transaction under this advisory lock, so two runners never both see the last free slot.
CLAIM_LOCK = 0x4D41494E  # "MAIN"


@dataclass(frozen=True)
class Limits:
    """How many runs may go on at once: overall (the fleet) and per warehouse."""

    total: int
    per_warehouse: int


@dataclass(frozen=True)
class ClaimedJob:
    run_id: int
    table: TableRef
    policy_type: str
    dry_run: bool
    trigger: str  # 'request' (asked for by hand), 'schedule' or 'commits' (queued by the due-work pass)


@dataclass(frozen=True)
class ReportAnswer:
    """What a job's report found: the run (this table's?), the token (the one issued?), its state."""

    found: bool
    token_holds: bool
    running: bool
    cancel_requested: bool


class MaintenanceJobs:
    def __init__(self, db: Database) -> None:
        self.db = db

    def enqueue(
        self, table: TableRef, policy_type: str, dry_run: bool, requested_by: str | None, max_queued: int
    ) -> RunRow | None:
        """Queue a job; None when the table already has ``max_queued`` jobs waiting (or is gone)."""
        with self.db.transaction() as conn:
            # serialise the count and the insert per table (two requests never both see room)
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (CLAIM_LOCK, table.entry_id % 2**31))
            row = conn.execute(
                "INSERT INTO maintenance_run (entry_id, policy_type, trigger, dry_run, status, queued_at,"
                " requested_by, warehouse_id)"
                " SELECT e.id, %(type)s, 'request', %(dry)s, 'queued', now(), %(by)s, n.warehouse_id"
                " FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id WHERE e.id = %(entry)s"
                " AND (SELECT count(*) FROM maintenance_run q WHERE q.entry_id = e.id AND q.status = 'queued')"
                " < %(max)s"
                f" RETURNING {RUN_COLUMNS}",
                {"entry": table.entry_id, "type": policy_type, "dry": dry_run, "by": requested_by, "max": max_queued},
            ).fetchone()
        return RunRow(**row) if row is not None else None

    def enqueue_due(self, table: TableRef, policy_types: list[str], trigger: str, next_due_s: float) -> list[RunRow]:
        """Queue the due table's scheduled runs, one job per policy type, and put its schedule
        ``next_due_s`` on - once per table however many passes (workers, replicas) saw it due.

        One statement. It first takes the table's turn: its schedule row moved on only while it is
        still due, under that row's lock, so of two passes racing the second finds it not due any
        more and queues nothing. A type with a queued or running job of its own (scheduled, or a
        request that is no dry run) gets no second one; the partial unique index of migration 0026
        (one scheduled job per table and type at a time) makes a duplicate a conflict that does
        nothing, whatever path it came by. Returns the jobs queued (none: not due any more, or
        every type already has its job)."""
        with self.db.transaction() as conn:
            rows = conn.execute(
                "WITH turn AS ("
                " INSERT INTO maintenance_lease (entry_id, next_due_at)"
                " SELECT e.id, now() + make_interval(secs => %(next)s) FROM catalog_entry e WHERE e.id = %(entry)s"
                " ON CONFLICT (entry_id) DO UPDATE SET next_due_at = EXCLUDED.next_due_at"
                " WHERE maintenance_lease.next_due_at <= now() RETURNING entry_id)"
                " INSERT INTO maintenance_run"
                " (entry_id, policy_type, trigger, dry_run, status, queued_at, warehouse_id)"
                " SELECT e.id, t.policy_type, %(trigger)s, false, 'queued', now(), n.warehouse_id"
                " FROM turn JOIN catalog_entry e ON e.id = turn.entry_id JOIN namespace n ON n.id = e.namespace_id"
                " CROSS JOIN unnest(%(types)s::text[]) AS t(policy_type)"
                " WHERE NOT EXISTS (SELECT 1 FROM maintenance_run q WHERE q.entry_id = e.id"
                "  AND q.policy_type = t.policy_type AND q.status IN ('queued', 'running') AND NOT q.dry_run)"
                f" ON CONFLICT DO NOTHING RETURNING {RUN_COLUMNS}",
                {"entry": table.entry_id, "next": next_due_s, "trigger": trigger, "types": policy_types},
            ).fetchall()
        return sorted((RunRow(**row) for row in rows), key=lambda run: run.id)

    def get(self, entry_id: int, run_id: int) -> RunRow | None:
        """The run, if it is one of this table's."""
        with self.db.connection() as conn:
            row = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM maintenance_run WHERE id = %s AND entry_id = %s", (run_id, entry_id)
            ).fetchone()
        return RunRow(**row) if row is not None else None

    def cancel(self, entry_id: int, run_id: int) -> RunRow | None:
        """A queued job is cancelled at once; a running run is asked to stop at its next commit
        point (its runner records it 'cancelled'); a finished run stays as it is."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE maintenance_run SET"
                " status = CASE WHEN status = 'queued' THEN 'cancelled' ELSE status END,"
                " finished_at = CASE WHEN status = 'queued' THEN now() ELSE finished_at END,"
                " outcome = CASE WHEN status = 'queued' THEN '{\"reason\": \"cancelled before it started\"}'::jsonb"
                "  ELSE outcome END,"
                " cancel_requested = cancel_requested OR status IN ('queued', 'running')"
                f" WHERE id = %s AND entry_id = %s RETURNING {RUN_COLUMNS}",
                (run_id, entry_id),
            ).fetchone()
        return RunRow(**row) if row is not None else None

    def cancel_requested(self, run_id: int) -> bool:
        with self.db.connection() as conn:
            row = conn.execute("SELECT cancel_requested FROM maintenance_run WHERE id = %s", (run_id,)).fetchone()
        return row is None or bool(row["cancel_requested"])

    def progress(self, run_id: int, progress: dict[str, Any]) -> None:
        with self.db.connection() as conn:
            conn.execute(
                "UPDATE maintenance_run SET progress = %s WHERE id = %s AND status = 'running'",
                (json.dumps(progress), run_id),
            )

    def issue_report_token(self, run_id: int, token_hash: bytes) -> None:
        """The report token of the job about to be submitted for the running run (its SHA-256 only),
        replacing any earlier one: a job submitted before (a runner that died) can no longer report."""
        with self.db.connection() as conn:
            conn.execute(
                "UPDATE maintenance_run SET report_token_hash = %s, job_result = NULL"
                " WHERE id = %s AND status = 'running'",
                (token_hash, run_id),
            )

    def record_report(
        self,
        entry_id: int,
        run_id: int,
        token_hash: bytes,
        progress: dict[str, Any] | None,
        result: dict[str, Any] | None,
    ) -> ReportAnswer:
        """A job's report, written only when the run is this table's, still running, and the token
        is the one issued to the job (all in the statement: a refused report writes nothing)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "WITH run AS (SELECT id, status, report_token_hash FROM maintenance_run"
                "  WHERE id = %(run)s AND entry_id = %(entry)s),"
                " reported AS (UPDATE maintenance_run m SET progress = coalesce(%(progress)s::jsonb, m.progress),"
                "  job_result = coalesce(%(result)s::jsonb, m.job_result)"
                "  FROM run WHERE m.id = run.id AND run.status = 'running' AND run.report_token_hash = %(token)s"
                "  RETURNING m.cancel_requested)"
                " SELECT run.status, run.report_token_hash = %(token)s AS token_holds,"
                "  (SELECT cancel_requested FROM reported) AS cancel_requested FROM run",
                {
                    "run": run_id,
                    "entry": entry_id,
                    "token": token_hash,
                    "progress": json.dumps(progress) if progress is not None else None,
                    "result": json.dumps(result) if result is not None else None,
                },
            ).fetchone()
        if row is None:
            return ReportAnswer(found=False, token_holds=False, running=False, cancel_requested=False)
        return ReportAnswer(
            found=True,
            token_holds=bool(row["token_holds"]),
            running=row["status"] == "running",
            cancel_requested=bool(row["cancel_requested"]),
        )

    def job_result(self, run_id: int) -> dict[str, Any] | None:
        """What the run's job reported as its end (its result or its error), if it did."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT job_result FROM maintenance_run WHERE id = %s", (run_id,)).fetchone()
        return row["job_result"] if row is not None else None

    def claim(self, holder: str, lease_s: float, limits: Limits, abandoned: str) -> ClaimedJob | None:
        """The oldest queued job that fits the limits and whose table no runner holds: its table's
        lease taken for ``holder`` and the job marked running, in one transaction. A queued job of a
        table that is gone is recorded skipped on the way."""
        with self.db.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (CLAIM_LOCK,))
            conn.execute(
                "UPDATE maintenance_run r SET status = 'skipped', finished_at = now(),"
                ' outcome = \'{"reason": "the table was dropped"}\'::jsonb'
                " WHERE r.status = 'queued' AND NOT EXISTS (SELECT 1 FROM catalog_entry e WHERE e.id = r.entry_id)"
            )
            row = conn.execute(
                "WITH busy AS (SELECT warehouse_id, count(*) AS n FROM maintenance_run WHERE status = 'running'"
                "  GROUP BY warehouse_id)"
                " SELECT r.id, r.entry_id, r.policy_type, r.dry_run, r.trigger, w.name AS warehouse, n.path, e.name"
                " FROM maintenance_run r JOIN catalog_entry e ON e.id = r.entry_id"
                " JOIN namespace n ON n.id = e.namespace_id JOIN warehouse w ON w.id = n.warehouse_id"
                " LEFT JOIN maintenance_lease l ON l.entry_id = r.entry_id"
                " WHERE r.status = 'queued' AND coalesce(l.lease_until, '-infinity') <= now()"
                " AND (SELECT coalesce(sum(n), 0) FROM busy) < %(total)s"
                " AND coalesce((SELECT b.n FROM busy b WHERE b.warehouse_id = n.warehouse_id), 0) < %(per)s"
                " ORDER BY r.id LIMIT 1 FOR UPDATE OF r SKIP LOCKED",
                {"total": limits.total, "per": limits.per_warehouse},
            ).fetchone()
            if row is None:
                return None
            taken = conn.execute(
                "INSERT INTO maintenance_lease (entry_id, holder, lease_until)"
                " VALUES (%(entry)s, %(holder)s, now() + make_interval(secs => %(lease)s))"
                " ON CONFLICT (entry_id) DO UPDATE SET holder = EXCLUDED.holder, lease_until = EXCLUDED.lease_until"
                " WHERE maintenance_lease.lease_until <= now() RETURNING entry_id",
                {"entry": row["entry_id"], "holder": holder, "lease": lease_s},
            ).fetchone()
            if taken is None:
                return None
            # what a runner that died left 'running' on this table: back to the queue, or failed
            conn.execute(
                f"UPDATE maintenance_run SET {ABANDON_SET.format(t='')}"
                " WHERE entry_id = %(entry)s AND status = 'running'",
                {"abandoned": abandoned, "entry": row["entry_id"], "attempts": MAX_ATTEMPTS},
            )
            conn.execute(
                "UPDATE maintenance_run SET status = 'running', holder = %s, attempts = attempts + 1,"
                " started_at = now() WHERE id = %s",
                (holder, row["id"]),
            )
        table = TableRef(row["entry_id"], row["warehouse"], tuple(row["path"]), row["name"])
        return ClaimedJob(row["id"], table, row["policy_type"], row["dry_run"], row["trigger"])
