"""Maintenance in PostgreSQL (SQL only): attached policies, the per-table lease, recorded runs, and
the question every delete asks first - who else owns something at these locations.

The rules (what a policy means, which one wins, what to delete) live in ``app/rules/maintenance.py``
and ``app/maintenance*.py``. Attachments are by id (migration 0019), named here by their parts like
grants (``storage.management_rows.Securable``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.ground.locations import InvalidLocation, Location
from storage.db import Database
from storage.housekeeping_rows import bare
from storage.management_rows import Securable, securable_ids
from storage.placement import overlapping_entries
from storage.protection_rows import protection_of


@dataclass(frozen=True)
class StoredPolicy:
    policy_type: str
    securable: Securable
    content: dict[str, Any]
    depth: int  # namespace levels of the attachment (0 above namespaces)


@dataclass(frozen=True)
class TableRef:
    """A table maintenance works on: its row id and where it is."""

    entry_id: int
    warehouse: str
    namespace: tuple[str, ...]
    name: str


@dataclass(frozen=True)
class Standing:
    """Whether maintenance may act on a table now: live (not dropped, not in the recycle bin) and
    what protects it (the table, one of its namespaces, its warehouse), described, or None."""

    live: bool
    binned: bool
    protected_by: str | None
    copy_kept: bool = False  # moved home with its remote copy still there (storage/table_moves.py)


@dataclass(frozen=True)
class RunRow:
    id: int
    policy_type: str
    trigger: str
    dry_run: bool
    status: str
    plan: dict[str, Any]
    outcome: dict[str, Any]
    files_removed: int
    error: str | None
    started_at: datetime
    finished_at: datetime | None
    progress: dict[str, Any] = field(default_factory=dict)  # a job's groups and bytes done of total
    cancel_requested: bool = False
    attempts: int = 0
    requested_by: str | None = None  # the principal who asked (a request); None for the schedule's


RUN_COLUMNS = (
    "id, policy_type, trigger, dry_run, status, plan, outcome, files_removed, error, started_at, finished_at,"
    " progress, cancel_requested, attempts, requested_by"
)
MAX_ATTEMPTS = 3  # a job whose runner died is taken over this many times at most, then failed
# What becomes of a run left 'running' by a runner that died (its lease ran out): a job (queued by
# a request or by the schedule: migrations 0025, 0026) goes back to the queue for another runner, a
# few times at most; any other run - and a job asked to stop - is failed with the reason given as
# %(abandoned)s.
ABANDON_SET = (
    "status = CASE WHEN {t}queued_at IS NOT NULL AND {t}attempts < %(attempts)s AND NOT {t}cancel_requested"
    " THEN 'queued' ELSE 'failed' END,"
    " error = CASE WHEN {t}queued_at IS NOT NULL AND {t}attempts < %(attempts)s AND NOT {t}cancel_requested"
    " THEN NULL ELSE %(abandoned)s END,"
    " finished_at = CASE WHEN {t}queued_at IS NOT NULL AND {t}attempts < %(attempts)s AND NOT {t}cancel_requested"
    " THEN NULL ELSE now() END, holder = NULL"
)


class MaintenanceRows:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- policies ---------------------------------------------------------------------------

    def attach(self, policy_type: str, securable: Securable, content: dict[str, Any]) -> None:
        """Attach (or replace) the policy of this type at ``securable``; NotFound if it is missing."""
        with self.db.transaction() as conn:
            ids = securable_ids(conn, securable)
            conn.execute(
                "INSERT INTO maintenance_policy (policy_type, securable, warehouse_id, namespace_id, entry_id, content)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (policy_type, warehouse_id, namespace_id, entry_id)"
                " DO UPDATE SET content = EXCLUDED.content, updated_at = now()",
                (policy_type, securable.type, *ids, json.dumps(content)),
            )

    def detach(self, policy_type: str, securable: Securable) -> bool:
        with self.db.transaction() as conn:
            ids = securable_ids(conn, securable)
            row = conn.execute(
                "DELETE FROM maintenance_policy WHERE policy_type = %s AND warehouse_id IS NOT DISTINCT FROM %s"
                " AND namespace_id IS NOT DISTINCT FROM %s AND entry_id IS NOT DISTINCT FROM %s RETURNING id",
                (policy_type, *ids),
            ).fetchone()
        return row is not None

    def attached_at(self, securable: Securable) -> list[StoredPolicy]:
        """The policies attached exactly at ``securable`` (not inherited ones)."""
        with self.db.connection() as conn:
            ids = securable_ids(conn, securable)
            rows = conn.execute(
                "SELECT policy_type, content FROM maintenance_policy WHERE warehouse_id IS NOT DISTINCT FROM %s"
                " AND namespace_id IS NOT DISTINCT FROM %s AND entry_id IS NOT DISTINCT FROM %s ORDER BY policy_type",
                ids,
            ).fetchall()
        depth = len(securable.namespace)
        return [StoredPolicy(row["policy_type"], securable, row["content"], depth) for row in rows]

    def attached_above(self, table: TableRef) -> list[StoredPolicy]:
        """Every policy on the table's way up: the table, its namespace and their ancestors, the
        warehouse, the catalog. The rules pick the nearest per type."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT p.policy_type, p.securable, p.content, coalesce(cardinality(n.path), 0) AS depth"
                " FROM maintenance_policy p LEFT JOIN namespace n ON n.id = p.namespace_id"
                " JOIN catalog_entry e ON e.id = %(entry)s JOIN namespace tn ON tn.id = e.namespace_id"
                " WHERE p.warehouse_id IS NULL"
                " OR (p.securable = 'warehouse' AND p.warehouse_id = tn.warehouse_id)"
                " OR (p.securable = 'namespace' AND n.warehouse_id = tn.warehouse_id"
                "     AND n.path = tn.path[1:cardinality(n.path)])"
                " OR p.entry_id = e.id",
                {"entry": table.entry_id},
            ).fetchall()
        return [
            StoredPolicy(row["policy_type"], Securable(row["securable"]), row["content"], row["depth"]) for row in rows
        ]

    # -- tables -----------------------------------------------------------------------------

    def table(self, warehouse: str, namespace: tuple[str, ...], name: str) -> TableRef:
        """The live table of that name; NotFound otherwise."""
        with self.db.connection() as conn:
            _, _, entry_id = securable_ids(conn, Securable("table", warehouse, namespace, name))
        return TableRef(int(entry_id or 0), warehouse, namespace, name)

    def due_tables(self, limit: int, discover_properties: bool, only: list[int] | None = None) -> list[TableRef]:
        """Tables whose schedule is due and no runner holds: those maintenance knows already (a
        lease row), those an enabled policy may apply to, and - only with ``discover_properties``,
        which reads every table's document - those whose metadata sets ``history.expire.*``.
        Those made due by commits (``mark_due``) first; with ``only``, just those ids."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT e.id, w.name AS warehouse, n.path, e.name FROM catalog_entry e"
                " JOIN namespace n ON n.id = e.namespace_id JOIN warehouse w ON w.id = n.warehouse_id"
                " LEFT JOIN maintenance_lease l ON l.entry_id = e.id"
                " WHERE e.kind = 'table' AND coalesce(l.next_due_at, '-infinity') <= now()"
                " AND coalesce(l.lease_until, '-infinity') <= now()"
                " AND (%(only)s::bigint[] IS NULL OR e.id = ANY(%(only)s::bigint[]))"
                " AND (l.entry_id IS NOT NULL OR EXISTS ("
                "   SELECT 1 FROM maintenance_policy p LEFT JOIN namespace pn ON pn.id = p.namespace_id"
                "   WHERE (p.content ->> 'enable')::boolean AND (p.warehouse_id IS NULL"
                "   OR (p.securable = 'warehouse' AND p.warehouse_id = n.warehouse_id)"
                "   OR (p.securable = 'namespace' AND pn.warehouse_id = n.warehouse_id"
                "       AND pn.path = n.path[1:cardinality(pn.path)])"
                "   OR p.entry_id = e.id))"
                "  OR (%(discover)s AND strpos(e.metadata, '\"history.expire.') > 0))"
                " ORDER BY coalesce(l.next_due_at, 'epoch'), e.id LIMIT %(limit)s",
                {"discover": discover_properties, "limit": limit, "only": only},
            ).fetchall()
        return [TableRef(row["id"], row["warehouse"], tuple(row["path"]), row["name"]) for row in rows]

    def mark_due(self, entry_ids: list[int], by_properties: Sequence[int] = ()) -> list[int]:
        """Make these tables due now (commits made them: app/maintenance/trigger.py); only those
        maintenance knows (a lease row: a table with a policy and no row is due anyway), and those
        of ``by_properties`` (their metadata sets ``history.expire.*``: the commit said so), which
        become known here - the schedule would find them only at its next discovery. Marked
        '-infinity', they come first. Returns the ids now due."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "INSERT INTO maintenance_lease (entry_id, next_due_at)"
                " SELECT e.id, '-infinity' FROM catalog_entry e WHERE e.id = ANY(%(ids)s::bigint[])"
                " AND (e.id = ANY(%(known)s::bigint[])"
                "  OR EXISTS (SELECT 1 FROM maintenance_lease l WHERE l.entry_id = e.id))"
                " ON CONFLICT (entry_id) DO UPDATE SET next_due_at = '-infinity' RETURNING entry_id",
                {"ids": entry_ids, "known": list(by_properties)},
            ).fetchall()
        return [row["entry_id"] for row in rows]

    def standing(self, entry_id: int) -> Standing:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT e.name, n.warehouse_id, n.path, EXISTS (SELECT 1 FROM table_move m WHERE m.entry_id = e.id)"
                " AS copy_kept FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id"
                " WHERE e.id = %s AND e.kind = 'table'",
                (entry_id,),
            ).fetchone()
            if row is None:
                binned = conn.execute("SELECT 1 FROM bin_entry WHERE id = %s", (entry_id,)).fetchone()
                return Standing(False, binned is not None, None)
            protected_by = protection_of(conn, row["warehouse_id"], tuple(row["path"]), row["name"])
            return Standing(True, False, protected_by, row["copy_kept"])

    # -- the lease --------------------------------------------------------------------------

    def take_lease(self, entry_id: int, holder: str, lease_s: float, *, abandoned: str) -> bool:
        """Hold the table for ``lease_s`` unless another runner holds it now (any worker, any
        replica).

        Taken, the table's runs still 'running' were left by a runner whose lease ran out (it died:
        a live one renews its lease, app/maintenance/lease.py): they are marked failed with
        ``abandoned`` as their error (a job: back to the queue), in the same transaction.
        """
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO maintenance_lease (entry_id, holder, lease_until)"
                " SELECT %(entry)s, %(holder)s, now() + make_interval(secs => %(lease)s)"
                " WHERE EXISTS (SELECT 1 FROM catalog_entry WHERE id = %(entry)s)"
                " ON CONFLICT (entry_id) DO UPDATE SET holder = EXCLUDED.holder, lease_until = EXCLUDED.lease_until"
                " WHERE maintenance_lease.lease_until <= now() RETURNING entry_id",
                {"entry": entry_id, "holder": holder, "lease": lease_s},
            ).fetchone()
            if row is not None:
                conn.execute(
                    f"UPDATE maintenance_run SET {ABANDON_SET.format(t='')}"
                    " WHERE entry_id = %(entry)s AND status = 'running'",
                    {"abandoned": abandoned, "entry": entry_id, "attempts": MAX_ATTEMPTS},
                )
        return row is not None

    def renew_lease(self, entry_id: int, holder: str, lease_s: float) -> bool:
        """Extend a lease its holder still holds; False when it is no longer its own (it ran out and
        another runner took the table, or the table's row is gone: dropped)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "UPDATE maintenance_lease SET lease_until = now() + make_interval(secs => %s)"
                " WHERE entry_id = %s AND holder = %s AND lease_until > now() RETURNING entry_id",
                (lease_s, entry_id, holder),
            ).fetchone()
        return row is not None

    def abandon_runs(self, abandoned: str) -> int:
        """Mark failed every run still 'running' whose holder holds no live lease on its table (the
        runner died, or its table was dropped under it) - a job goes back to the queue instead, a
        few times at most (``ABANDON_SET``); housekeeping's sweep."""
        with self.db.connection() as conn:
            cursor = conn.execute(
                f"UPDATE maintenance_run r SET {ABANDON_SET.format(t='r.')}"
                " WHERE r.status = 'running' AND NOT EXISTS (SELECT 1 FROM maintenance_lease l"
                " WHERE l.entry_id = r.entry_id AND l.holder = r.holder AND l.lease_until > now())",
                {"abandoned": abandoned, "attempts": MAX_ATTEMPTS},
            )
        return cursor.rowcount

    def release_lease(self, entry_id: int, holder: str) -> None:
        """Let the table go (when the schedule wants it next was set when its jobs were queued)."""
        with self.db.connection() as conn:
            conn.execute(
                "UPDATE maintenance_lease SET lease_until = '-infinity', holder = NULL"
                " WHERE entry_id = %s AND holder = %s",
                (entry_id, holder),
            )

    def schedule(self, entry_id: int, next_due_s: float) -> None:
        """When the schedule wants the table next (kept apart from the lease)."""
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO maintenance_lease (entry_id, next_due_at)"
                " SELECT %(entry)s, now() + make_interval(secs => %(next)s)"
                " WHERE EXISTS (SELECT 1 FROM catalog_entry WHERE id = %(entry)s)"
                " ON CONFLICT (entry_id) DO UPDATE SET next_due_at = EXCLUDED.next_due_at",
                {"entry": entry_id, "next": next_due_s},
            )

    # -- runs -------------------------------------------------------------------------------

    def start_run(self, entry_id: int, policy_type: str, trigger: str, dry_run: bool, holder: str) -> int:
        with self.db.connection() as conn:
            row = conn.execute(
                "INSERT INTO maintenance_run (entry_id, policy_type, trigger, dry_run, status, holder, warehouse_id)"
                " SELECT %(entry)s, %(type)s, %(trigger)s, %(dry)s, 'running', %(holder)s,"
                " (SELECT n.warehouse_id FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id"
                "  WHERE e.id = %(entry)s) RETURNING id",
                {"entry": entry_id, "type": policy_type, "trigger": trigger, "dry": dry_run, "holder": holder},
            ).fetchone()
        return row["id"]

    def finish_run(
        self,
        run_id: int,
        status: str,
        plan: dict[str, Any],
        outcome: dict[str, Any],
        files_removed: int,
        error: str | None,
        holder: str | None = None,
    ) -> RunRow:
        """Record the run's end - only while ``holder`` (when given) still holds it: a job put back
        in the queue and taken over by another runner is never overwritten by the runner it left."""
        with self.db.connection() as conn:
            row = conn.execute(
                "UPDATE maintenance_run SET status = %s, plan = %s, outcome = %s, files_removed = %s, error = %s,"
                " finished_at = now() WHERE id = %s AND (%s::text IS NULL OR holder = %s)"
                f" RETURNING {RUN_COLUMNS}",
                (status, json.dumps(plan), json.dumps(outcome), files_removed, error and error[:2000], run_id)
                + (holder, holder),
            ).fetchone()
            if row is None:
                row = conn.execute(f"SELECT {RUN_COLUMNS} FROM maintenance_run WHERE id = %s", (run_id,)).fetchone()
        return RunRow(**row)

    def forget_runs(self, older_than_s: float, limit: int = 10_000) -> int:
        """Drop finished runs started more than ``older_than_s`` ago (a batch per call). A run still
        running is kept whatever its age: its runner finishes it (or it is abandoned) first."""
        with self.db.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM maintenance_run WHERE id IN (SELECT id FROM maintenance_run"
                " WHERE started_at < now() - make_interval(secs => %s) AND finished_at IS NOT NULL"
                " ORDER BY id LIMIT %s)",
                (older_than_s, limit),
            )
        return cursor.rowcount

    def runs(self, entry_id: int, limit: int) -> list[RunRow]:
        """The table's most recent runs, newest first."""
        with self.db.connection() as conn:
            rows = conn.execute(
                f"SELECT {RUN_COLUMNS} FROM maintenance_run WHERE entry_id = %s ORDER BY id DESC LIMIT %s",
                (entry_id, limit),
            ).fetchall()
        return [RunRow(**row) for row in rows]

    def pending_under(self, root: Location) -> list[str]:
        """Objects recorded as pending a commit under ``root`` (being written: never orphans)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT location FROM pending_object WHERE strpos(location, %s) > 0", (bare(root) + "/",)
            ).fetchall()
        return [row["location"] for row in rows]

    # -- who else owns files here -----------------------------------------------------------

    def owners_besides(self, roots: list[Location], entry_id: int) -> list[str]:
        """Locations owned by any entry other than ``entry_id`` - live, staged, or dropped but
        retained in the recycle bin (issue 35) - that are at, under or above ``roots``, or
        whose metadata names an object under them. A maintenance delete skips everything under
        these, and refuses to run at all when one contains the table's own location.

        This is the one check point every maintenance delete goes through: an entry kind that
        keeps files alive (a retained drop, a protected entry) adds its locations here.
        """
        owned: list[str] = []
        with self.db.connection() as conn:
            for entry in overlapping_entries(conn, roots, entry_id):
                owned += [entry.location, _parent(entry.metadata_location), entry.data_path or ""]
            stages = conn.execute(
                "SELECT location, metadata_path, data_path FROM staged_table WHERE expires_at > now()"
            ).fetchall()
            needles = [bare(root) + "/" for root in roots]  # "t/" never matches the sibling "t2/"
            naming = conn.execute(
                "SELECT location, metadata_location FROM catalog_entry WHERE id <> %s"
                " AND EXISTS (SELECT 1 FROM unnest(%s::text[]) AS needle WHERE strpos(metadata, needle) > 0)",
                (entry_id, needles),
            ).fetchall()
            # the recycle bin (issue 35): a dropped entry keeps owning its files until it expires
            binned = conn.execute(
                "SELECT location, metadata_location, data_path,"
                " EXISTS (SELECT 1 FROM unnest(%s::text[]) AS needle WHERE strpos(metadata, needle) > 0) AS names_ours"
                " FROM bin_entry WHERE id <> %s",
                (needles, entry_id),
            ).fetchall()
        for stage in stages:
            owned += [stage["location"], stage["metadata_path"], stage["data_path"] or ""]
        for entry in binned:
            owned += [entry["location"], _parent(entry["metadata_location"]), entry["data_path"] or ""]
            if entry["names_ours"]:
                owned += [root.uri for root in roots]
        if naming:  # another entry's metadata names our objects (a registered copy): theirs too
            owned += [root.uri for root in roots]
        return [text for text in owned if text and _near(text, roots)]


def _parent(text: str) -> str:
    try:
        return Location.parse(text).parent.uri
    except InvalidLocation:
        return text


def _near(text: str, roots: list[Location]) -> bool:
    """At, under or above a root (an unparsable location counts: it is nobody's to guess)."""
    try:
        location = Location.parse(text)
    except InvalidLocation:
        return True
    return any(location.overlaps(root) for root in roots)
