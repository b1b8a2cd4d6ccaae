"""The rows housekeeping works on: objects pending a commit, references a purge must leave, purge jobs.

A part of ``CatalogRepository`` (which derives from ``HousekeepingRows``), kept apart for size:
the commit loop records and settles pending objects, the sweeper and the purger read and
update the rest. Plain, parameterised SQL; callers never see psycopg.
"""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg

from app.ground.locations import InvalidLocation, Location
from storage.db import Database


def settle_pending(conn: psycopg.Connection, locations: list[str]) -> None:
    """The objects written and now referenced are no longer pending. One location (a create's, one
    table's commit) by equality: PostgreSQL keeps a generic plan for it, while ``= ANY`` of a
    one-element array was planned anew on every call (0.07 ms of its 0.1, issue 47)."""
    if len(locations) == 1:
        conn.execute("DELETE FROM pending_object WHERE location = %s", (locations[0],))
    elif locations:
        conn.execute("DELETE FROM pending_object WHERE location = ANY(%s)", (locations,))


def bare(location: Location) -> str:
    """The text a reference to ``location`` contains whatever its scheme spelling: ``bucket/key``."""
    return f"{location.bucket}/{location.key}".strip("/") if location.scheme == "s3" else location.key


class HousekeepingRows:
    db: Database

    # -- pending objects (crash safety) -------------------------------------------------

    def record_pending(self, locations: list[str]) -> None:
        """Durably note objects about to be written, before writing them."""
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO pending_object (location) SELECT unnest(%s::text[]) ON CONFLICT DO NOTHING",
                (locations,),
            )

    def settle_pending(self, locations: list[str]) -> None:
        with self.db.connection() as conn:
            settle_pending(conn, locations)

    def delete_old_metrics_reports(self, older_than_s: float, limit: int = 10_000) -> int:
        """Forget metrics reports received more than ``older_than_s`` ago (a batch per call)."""
        with self.db.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM metrics_report WHERE id IN (SELECT id FROM metrics_report"
                " WHERE received_at < now() - make_interval(secs => %s) ORDER BY received_at LIMIT %s)",
                (older_than_s, limit),
            )
        return cursor.rowcount

    def stale_pending(self, older_than_s: float, limit: int = 1000) -> list[str]:
        """Pending objects whose commit can no longer happen (older than any request may run).

        A row whose deletion failed waits until its ``next_attempt_at`` (see ``defer_pending``).
        """
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT location FROM pending_object WHERE created_at < now() - make_interval(secs => %s)"
                " AND next_attempt_at <= now() ORDER BY created_at LIMIT %s",
                (older_than_s, limit),
            ).fetchall()
        return [row["location"] for row in rows]

    def defer_pending(self, location: str, error: str, base_delay_s: float, max_delay_s: float) -> int:
        """Count a failed sweep of one object and put its next attempt off (exponential backoff)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "UPDATE pending_object SET attempts = attempts + 1, last_error = %(error)s,"
                " next_attempt_at = now() + make_interval(secs => least(%(max)s, %(base)s * 2 ^ least(attempts, 30)))"
                " WHERE location = %(location)s RETURNING attempts",
                {"error": error[:1000], "max": max_delay_s, "base": base_delay_s, "location": location},
            ).fetchone()
        return row["attempts"] if row else 0

    def references_under(self, root: Location, exclude_id: int | None = None) -> set[Location]:
        """Objects under ``root`` that a live or binned table's or view's metadata names (but
        ``exclude_id``'s, the binned table being purged): current metadata file, metadata-log
        entries, snapshot manifest lists (a purge must leave them)."""
        needle = re.match(r"[\x20-\x7e]*", bare(root)).group()  # documents may escape the rest
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT metadata_location, metadata FROM catalog_entry WHERE strpos(metadata, %(n)s) > 0"
                " OR strpos(metadata_location, %(n)s) > 0"
                " UNION ALL SELECT metadata_location, metadata FROM bin_entry WHERE id IS DISTINCT FROM %(me)s"
                " AND (strpos(metadata, %(n)s) > 0 OR strpos(metadata_location, %(n)s) > 0)",
                {"n": needle, "me": exclude_id},
            ).fetchall()
        found: set[Location] = set()
        for row in rows:
            texts = [row["metadata_location"]]
            try:
                document = json.loads(row["metadata"])
            except ValueError:
                document = {}
            logged = document.get("metadata-log") or []
            texts += [entry.get("metadata-file") for entry in logged if isinstance(entry, dict)]
            snapshots = document.get("snapshots") or []
            texts += [snapshot.get("manifest-list") for snapshot in snapshots if isinstance(snapshot, dict)]
            for text in texts:
                try:
                    location = Location.parse(text)
                except InvalidLocation:
                    continue
                if location.is_within(root):
                    found.add(location)
        return found

    def current_metadata_locations(self, locations: list[str]) -> set[str]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT metadata_location FROM catalog_entry WHERE metadata_location = ANY(%s)", (locations,)
            ).fetchall()
        return {row["metadata_location"] for row in rows}

    # -- purge queue ----------------------------------------------------------------------

    def claim_purge_job(self, lease_seconds: int) -> dict[str, Any] | None:
        """Take the next due purge job and push its lease forward (another worker skips it)."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT id, location, extra_objects, metadata_path, bin_entry_id FROM purge_job"
                " WHERE not_before <= now()"
                " ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
            ).fetchone()
            if row is None:
                return None
            conn.execute(
                "UPDATE purge_job SET attempts = attempts + 1,"
                " not_before = now() + make_interval(secs => %s) WHERE id = %s",
                (lease_seconds, row["id"]),
            )
        return row

    def finish_purge_job(self, job_id: int) -> None:
        """The job is done; a binned table it purged is forgotten (and its unit with its last one)."""
        with self.db.transaction() as conn:
            job = conn.execute("DELETE FROM purge_job WHERE id = %s RETURNING bin_entry_id", (job_id,)).fetchone()
            if job is None or job["bin_entry_id"] is None:
                return
            gone = conn.execute(
                "DELETE FROM bin_entry WHERE id = %s RETURNING unit_id", (job["bin_entry_id"],)
            ).fetchone()
            if gone is not None:
                conn.execute(
                    "DELETE FROM bin_unit u WHERE u.id = %s"
                    " AND NOT EXISTS (SELECT 1 FROM bin_entry b WHERE b.unit_id = u.id)",
                    (gone["unit_id"],),
                )

    def fail_purge_job(self, job_id: int, error: str, base_delay_s: float = 60, max_delay_s: float = 86_400) -> None:
        """Record the failure; the next attempt waits longer after each one (exponential backoff)."""
        with self.db.connection() as conn:
            conn.execute(
                "UPDATE purge_job SET last_error = %(error)s, not_before = now()"
                " + make_interval(secs => least(%(max)s, %(base)s * 2 ^ least(greatest(attempts - 1, 0), 30)))"
                " WHERE id = %(id)s",
                {"error": error[:1000], "max": max_delay_s, "base": base_delay_s, "id": job_id},
            )
