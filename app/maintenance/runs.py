"""The maintenance executor: runs a table's effective policy, once, recorded, under a lease.

One runner per table at a time, across workers and replicas: a run holds the table's lease row in
PostgreSQL (``maintenance_lease``; a job's claim takes it, app/maintenance/jobs.py); while it is
held no other job of the table is claimed. Every run is recorded - its plan, its outcome, the files it
removed, how long, its error - whether it succeeded, failed, was skipped or was a dry run. A dry
run plans and records exactly what it would do, and changes nothing.

- **Snapshot expiry** plans with ``app.rules.maintenance.plan_expiry`` and commits
  ``remove-snapshot-ref``/``remove-snapshots`` through ``TableService.commit_table``: the same
  lane, commit loop and compare-and-set as any writer. Its requirements assert every ref it
  planned from, so a writer that moved one wins and the run re-plans on the new version (a
  bounded number of times). Only after the commit does it delete: the files the expired snapshots
  reached, minus everything the table's metadata reaches *as it is then* (so a writer that
  committed meanwhile keeps its files), filtered by ``Deletable``.
- **Orphan file removal** lists the table's location and deletes the objects that nothing in the
  table's metadata names (deleted manifest entries included), that are older than the policy's
  floor, and that ``Deletable`` allows. It re-reads the metadata before deleting and starts over
  when a commit moved it.

Neither holds the commit lane longer than its one commit; the reads and deletes run outside it.

The lease is renewed while the run lives (``app/maintenance/lease.py``): a runner that died leaves
its run 'running' only until its lease runs out, then the next runner (or housekeeping) marks it
failed; a runner that lost its lease stops before its next commit or delete.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from app.ground.errors import BadRequest, CatalogError, CommitFailed, NoSuchTable
from app.ground.locations import Location
from app.ground.settings import SparkSettings
from app.maintenance import compaction
from app.maintenance import data as data_compaction
from app.maintenance import spark as maintenance_spark
from app.maintenance.context import (
    CURRENT_RUN,
    RUN_LEASE,
    RunCancelled,
    RunContext,
    RunControl,
)
from app.maintenance.files import Deletable, Reachable, parsed
from app.maintenance.lease import LEASE_SECONDS, TableLease
from app.maintenance.options import InvalidRewrite, RewriteSettings
from app.maintenance.trigger import CommitTrigger
from app.rules import maintenance as policy_rules
from app.rules import table as table_rules
from app.rules.requests.tables import CommitTableRequest
from app.tables.service import TableService
from storage.maintenance_jobs import ClaimedJob
from storage.maintenance_rows import MaintenanceRows, RunRow, TableRef
from storage.rows import EntryRow

log = logging.getLogger(__name__)

MAX_REPLANS = 5
DELETE_BATCH = 500
SHOWN_FILES = 100  # a run's record lists this many of the files it removes (and counts them all)


class RunSkipped(Exception):
    """The run stops without a change (or after its commit, before its deletes): recorded as skipped."""

    def __init__(self, reason: str, plan: dict[str, Any], outcome: dict[str, Any]) -> None:
        super().__init__(reason)
        self.reason, self.plan, self.outcome = reason, plan, outcome


class MaintenanceBusy(CatalogError):
    code, error_type = 409, "CommitFailedException"


@dataclass
class Outcome:
    plan: dict[str, Any]
    outcome: dict[str, Any]
    removed: int = 0
    status: str = "succeeded"


class MaintenanceExecutor:
    def __init__(self, tables: TableService, rows: MaintenanceRows, interval_s: float, trigger: CommitTrigger) -> None:
        self.tables = tables
        self.rows = rows
        self.objects = tables.objects
        self.interval_s = interval_s
        self.lease_s = LEASE_SECONDS  # a test shortens it
        self.spark = tables.settings.spark  # where data compaction beyond one process runs
        # Commits tell it which tables to look at soon (app/maintenance/trigger.py); memory only:
        # the same trigger whose ``note`` the table service was built with (app/composition).
        self.trigger = trigger
        # Called with the plan between planning and committing an expiry: where a test puts a
        # concurrent writer, deterministically (the run must then re-plan, never lose its commit).
        self.planned: Callable[[policy_rules.ExpiryPlan], None] = lambda _plan: None
        # The same between a manifest rewrite's plan and its commit.
        self.compaction_planned: Callable[[Any], None] = lambda _plan: None

    # -- one run ---------------------------------------------------------------------------

    def run(self, table: TableRef, policy_type: str, *, dry_run: bool, now_ms: int | None = None) -> RunRow:
        """Run the table's effective ``policy_type`` once, now (a request), recorded; MaintenanceBusy
        when another runner holds the table. ``now_ms`` (the clock of the plan) is for tests only:
        the API never takes one."""
        lease = TableLease(self.rows, table.entry_id, self.lease_s)
        if not lease.take():
            raise MaintenanceBusy(f"Maintenance of {'.'.join((*table.namespace, table.name))} is running elsewhere")
        with lease:
            return self._recorded(table, lease, policy_type, dry_run, "request", now_ms or int(time.time() * 1000))

    def run_job(self, job: ClaimedJob, holder: str, control: RunControl) -> RunRow:
        """A job a runner claimed (``storage.maintenance_jobs``) - asked for by hand or queued by the
        schedule: its table's lease was taken for ``holder`` in the claim; renewed while the run
        goes on (the heartbeat), released after."""
        lease = TableLease(self.rows, job.table.entry_id, self.lease_s, holder=holder)
        with lease:
            return self._recorded(
                job.table,
                lease,
                job.policy_type,
                job.dry_run,
                job.trigger,
                int(time.time() * 1000),
                run_id=job.run_id,
                control=control,
            )

    def _recorded(
        self,
        table: TableRef,
        lease: TableLease,
        policy_type: str,
        dry_run: bool,
        trigger: str,
        now_ms: int,
        *,
        run_id: int | None = None,
        control: RunControl | None = None,
    ) -> RunRow:
        if run_id is None:
            run_id = self.rows.start_run(table.entry_id, policy_type, trigger, dry_run, lease.holder)
        started = time.monotonic()
        token = RUN_LEASE.set(lease)
        run_token = CURRENT_RUN.set(RunContext(run_id, policy_type, control))
        try:
            result = self._execute(table, policy_type, dry_run, now_ms)
        except RunCancelled:
            log.info("maintenance %s of %s cancelled", policy_type, table.name)
            outcome = {"reason": "cancelled on request", "seconds": round(time.monotonic() - started, 3)}
            return self.rows.finish_run(run_id, "cancelled", {}, outcome, 0, None, lease.holder)
        except RunSkipped as skipped:
            log.info("maintenance %s of %s skipped: %s", policy_type, table.name, skipped.reason)
            outcome = {**skipped.outcome, "reason": skipped.reason, "seconds": round(time.monotonic() - started, 3)}
            return self.rows.finish_run(run_id, "skipped", skipped.plan, outcome, 0, None, lease.holder)
        except Exception as exc:  # noqa: BLE001 - every failure is recorded; the next run tries again
            log.warning("maintenance %s of %s failed: %s", policy_type, table.name, type(exc).__name__)
            message = exc.message if isinstance(exc, CatalogError) else str(exc)
            error = f"{type(exc).__name__}: {message}"
            seconds = {"seconds": time.monotonic() - started}
            return self.rows.finish_run(run_id, "failed", {}, seconds, 0, error, lease.holder)
        finally:
            CURRENT_RUN.reset(run_token)
            RUN_LEASE.reset(token)
        result.outcome["seconds"] = round(time.monotonic() - started, 3)
        return self.rows.finish_run(
            run_id, result.status, result.plan, result.outcome, result.removed, None, lease.holder
        )

    def _guard(self, table: TableRef, plan: dict[str, Any] | None = None, done: dict[str, Any] | None = None) -> None:
        """Before each commit and each delete: this run still holds the table
        (app/maintenance/lease.py), and the table may still be acted on (``_standing``)."""
        self._standing(table, plan, done)  # first: a drop also ends the lease, and says why
        run = CURRENT_RUN.get()
        if run is not None:
            if run.control is not None and run.control.cancel_requested(run.run_id):
                raise RunCancelled()
            self._still_enabled(table, run.policy_type, plan, done)
        lease = RUN_LEASE.get()
        if lease is not None:
            lease.check()

    def _still_enabled(
        self, table: TableRef, policy_type: str, plan: dict[str, Any] | None, done: dict[str, Any] | None
    ) -> None:
        """RunSkipped when the policy the run executes no longer applies (detached, or switched off
        with ``enable: false``) since the run started: a revoked policy stops it at its next commit
        point, the commit not made."""
        try:
            properties = table_rules.parse_metadata(self.row(table).metadata).properties
        except NoSuchTable:
            raise RunSkipped("the table was dropped", plan or {}, done or {}) from None
        policy = self.effective(table, properties).get(policy_type)
        if policy is None or not policy.enabled:
            raise RunSkipped(f"the {policy_type} policy was revoked during the run", plan or {}, done or {})

    def _progress(self, groups_done: int, groups_total: int, bytes_done: int = 0, bytes_total: int = 0) -> None:
        """A job's progress, recorded for its run (getMaintenanceRun, the console)."""
        run = CURRENT_RUN.get()
        if run is None or run.control is None:
            return
        progress = {
            "file-groups-done": groups_done,
            "file-groups-total": groups_total,
            "bytes-done": bytes_done,
            "bytes-total": bytes_total,
        }
        try:
            run.control.progress(run.run_id, progress)
        except Exception as exc:  # noqa: BLE001 - progress is a view: never fails the run
            log.warning("cannot record a maintenance run's progress: %s", type(exc).__name__)

    def _standing(
        self, table: TableRef, plan: dict[str, Any] | None = None, done: dict[str, Any] | None = None
    ) -> None:
        """RunSkipped when the table is protected (a mark on it, a namespace or its warehouse), is
        no longer live (dropped into the recycle bin, or gone) or was moved home with its remote copy
        kept (app/table_moves/): maintenance leaves its files and its history alone. Checked at the
        start and again before every commit and delete, so a mark set or a drop made during a run
        stops it before its next change."""
        standing = self.rows.standing(table.entry_id)
        if standing.protected_by is not None:
            reason = f"protected ({standing.protected_by}): maintenance leaves protected entries alone"
        elif standing.binned:
            reason = "the table is in the recycle bin: maintenance never touches a dropped table's files"
        elif not standing.live:
            reason = "the table was dropped"
        elif standing.copy_kept:
            reason = (
                "the table was moved home and its federated remote still holds a copy that reads its files:"
                " finish the move (moveTableHome with remote drop) or undo it before maintenance changes them"
            )
        else:
            return
        raise RunSkipped(reason, plan or {}, done or {})

    def _execute(self, table: TableRef, policy_type: str, dry_run: bool, now_ms: int) -> Outcome:
        self._standing(table)
        row = self.row(table)
        metadata = table_rules.parse_metadata(row.metadata)
        policy = self.effective(table, metadata.properties).get(policy_type)
        if policy is None or not policy.enabled:
            return Outcome({}, {"reason": f"no enabled {policy_type} policy applies to the table"}, 0, "skipped")
        if policy_type not in policy_rules.EXECUTABLE:
            return Outcome({}, {"reason": f"{policy_type} is not executed by this version of Growler"}, 0, "skipped")
        if policy_type == policy_rules.SNAPSHOT_EXPIRY:
            return self._expire(table, policy_rules.ExpirySettings.of(policy), dry_run, now_ms)
        if policy_type == policy_rules.METADATA_COMPACTION:
            return self._compact_manifests(table, policy, dry_run)
        if policy_type == policy_rules.DATA_COMPACTION:
            return self._compact_data(table, policy, dry_run)
        return self._remove_orphans(table, policy, dry_run, now_ms)

    def effective(self, table: TableRef, properties: dict[str, str]) -> dict[str, policy_rules.EffectivePolicy]:
        attachments = [
            policy_rules.Attachment(stored.policy_type, stored.securable.type, stored.depth, stored.content)
            for stored in self.rows.attached_above(table)
        ]
        return policy_rules.effective(attachments, properties)

    def row(self, table: TableRef) -> EntryRow:
        warehouse = self.tables.warehouses.get(table.warehouse)
        row = self.tables.repository.load_entry(warehouse.id, table.namespace, table.name)
        if row is None or row.kind != "table" or row.id != table.entry_id:
            raise NoSuchTable(f"Table does not exist: {'.'.join((*table.namespace, table.name))}")
        return row

    def reachable(self, row: EntryRow, known: Reachable | None = None) -> Reachable:
        """A reader of the table's own files (``Reachable``: anything else fails the run); ``known``
        when it still reads the same table's places (its reads are kept)."""
        files = table_rules.files_of_entry(row.location, row.metadata_location, row.data_path)
        if known is not None and known.files == files:
            return known
        return Reachable(self.objects, files)

    def _deletable(self, table: TableRef, row: EntryRow) -> Deletable:
        root = Location.parse(row.location, "table location")
        metadata_dir = Location.parse(row.metadata_location).parent
        return Deletable(root, self.rows.owners_besides([root, metadata_dir], table.entry_id))

    # -- snapshot expiry --------------------------------------------------------------------

    def _expire(self, table: TableRef, settings: policy_rules.ExpirySettings, dry_run: bool, now_ms: int) -> Outcome:
        for _ in range(MAX_REPLANS):
            row = self.row(table)
            base = table_rules.parse_metadata(row.metadata)
            plan = policy_rules.plan_expiry(base, settings, now_ms)
            shown = {"settings": settings.view(), **plan.view()}
            if plan.empty:
                return Outcome(shown, {"committed": False, "reason": "nothing to expire"})
            # what the plan would remove, read before the commit (as a dry run): a file outside the
            # table's own locations fails the run here, nothing committed or deleted
            reachable = self.reachable(row)
            doomed = self._expired_files(table, row, base, base, plan, reachable)
            if dry_run:
                shown["files-to-remove"] = _listed(doomed)
                return Outcome(shown, {"committed": False, "dry-run": True})
            self.planned(plan)
            self._guard(table, shown, {"committed": False})
            try:
                requirements = plan.requirements(str(base.table_uuid))
                commit = CommitTableRequest.of(requirements, plan.updates())
                self.tables.commit_table(table.warehouse, table.namespace, table.name, commit)
            except CommitFailed:
                log.info("expiry of %s lost to a concurrent writer; planning again", table.name)
                continue
            after_row = self.row(table)
            after = table_rules.parse_metadata(after_row.metadata)
            doomed = self._expired_files(table, after_row, base, after, plan, self.reachable(after_row, reachable))
            shown["files-to-remove"] = _listed(doomed)
            removed = self._delete(table, sorted(doomed, key=str), shown, {"committed": True, "files-removed": 0})
            return Outcome(shown, {"committed": True, "files-removed": removed}, removed)
        raise CommitFailed(f"Snapshot expiry lost {MAX_REPLANS} races with concurrent writers; the next run retries")

    def _expired_files(
        self,
        table: TableRef,
        row: EntryRow,
        base: Any,
        live: Any,
        plan: policy_rules.ExpiryPlan,
        reachable: Reachable,
    ) -> set[Location]:
        """What only the expired snapshots reached: their files, minus all that the other snapshots
        of ``live`` (the metadata as it is now, with whatever was committed since the plan) reach."""
        candidates = reachable.of(base, plan.snapshot_ids, live_only=False, missing_ok=True).all()
        if not candidates:
            return set()
        expired = set(plan.snapshot_ids)  # (a dry run's ``live`` still holds them)
        survivors = [snapshot.snapshot_id for snapshot in live.snapshots if snapshot.snapshot_id not in expired]
        kept = reachable.of(live, survivors, live_only=True).all()
        kept |= _metadata_files(live, row.metadata_location)
        allowed = self._deletable(table, row)
        return {location for location in candidates - kept if allowed(location)}

    # -- metadata compaction ---------------------------------------------------------------

    def _compact_manifests(self, table: TableRef, policy: policy_rules.EffectivePolicy, dry_run: bool) -> Outcome:
        row = self.row(table)
        metadata = table_rules.parse_metadata(row.metadata)
        target = compaction.target_size(policy)
        snapshot = metadata.current_snapshot()
        reachable = self.reachable(row)
        manifests = reachable.manifests(snapshot.manifest_list) if snapshot is not None else []
        plan = compaction.plan_manifests(metadata, manifests, target)
        if plan is None:
            return Outcome({"target-manifest-size-bytes": target}, {"committed": False, "reason": "nothing to compact"})
        shown = {"target-manifest-size-bytes": target, **plan.view()}
        if dry_run:
            return Outcome(shown, {"committed": False, "dry-run": True})
        rewrite = compaction.ManifestRewrite(self.objects, reachable.files, metadata)
        self._progress(0, 1)
        return self._commit_rewrite(table, metadata, plan, shown, rewrite, lambda: rewrite.write(plan, target))

    def _compact_data(self, table: TableRef, policy: policy_rules.EffectivePolicy, dry_run: bool) -> Outcome:
        row = self.row(table)
        metadata = table_rules.parse_metadata(row.metadata)
        target = policy_rules.target_file_size(policy, metadata.properties)
        try:
            settings = RewriteSettings.of(policy.content.get("config") or {})
        except InvalidRewrite as exc:
            raise BadRequest(str(exc)) from exc
        reachable = self.reachable(row)  # every file of the current snapshot checked, Spark or not
        plan = data_compaction.plan_data(metadata, reachable, target, settings)
        described = {"target-file-size-bytes": target, "strategy": settings.strategy, "options": settings.options()}
        if plan is None:  # a table in shape: one planning pass, no job
            return Outcome(described, {"committed": False, "reason": "nothing to compact"})
        spark = self.spark
        on_spark = bool(plan.skipped) and spark.enabled
        shown = {**described, **plan.view(on_spark)}
        if on_spark:  # Spark rewrites by the same thresholds (Iceberg's planner)
            shown["engine"] = "spark"
            if dry_run:
                return Outcome(shown, {"committed": False, "dry-run": True})
            return self._compact_on_spark(table, spark, target, shown, settings)
        if dry_run or not plan.groups:
            return Outcome(shown, {"committed": False, "dry-run": dry_run})
        rewrite = data_compaction.DataRewrite(self.objects, reachable.files, metadata, reachable)
        groups_total = len(plan.groups)
        bytes_total = sum(f.file_size_in_bytes for files in plan.groups.values() for f in files)
        done = [0, 0]

        def after_group(files: list[Any]) -> None:
            done[0] += 1
            done[1] += sum(f.file_size_in_bytes for f in files)
            self._progress(done[0], groups_total, done[1], bytes_total)
            self._guard(table, shown, {"committed": False})

        self._progress(0, groups_total, 0, bytes_total)
        return self._commit_rewrite(
            table, metadata, plan, shown, rewrite.manifests, lambda: rewrite.write_data(plan, after_group)
        )

    def _compact_on_spark(
        self, table: TableRef, spark: SparkSettings, target: int, shown: dict[str, Any], settings: RewriteSettings
    ) -> Outcome:
        """Iceberg's ``rewrite_data_files`` in a Spark job Growler starts (app/maintenance/spark.py);
        the job commits through the catalog like any writer, so the guard comes before it starts.
        The job's progress lines (file groups and bytes done of total) are the run's progress."""
        self._guard(table, shown, {"committed": False})
        request = maintenance_spark.RewriteRequest(table.warehouse, (*table.namespace, table.name), target, settings)
        reports = None
        if maintenance_spark.cluster_mode(spark):  # the job reports through the run's report channel
            run = CURRENT_RUN.get()
            if run is None or run.control is None:
                raise maintenance_spark.SparkJobFailed("Cluster deploy mode reports through a job's run: queue the run")
            reports = maintenance_spark.issue_reports(spark, run.control, run.run_id, table)
        # while the job runs, the guard every few seconds: a cancel, a protection mark, a drop, a
        # revoked policy or a lost lease kill it (its commit, not made yet, is never made)
        result = maintenance_spark.run_guarded(
            spark,
            request,
            lambda: self._guard(table, shown, {"committed": False}),
            (RunSkipped, RunCancelled, CatalogError),
            progress=lambda reported: self._progress(
                reported["file-groups-done"],
                reported["file-groups-total"],
                reported["bytes-done"],
                reported["bytes-total"],
            ),
            reports=reports,
        )
        done = {key.replace("_", "-"): value for key, value in result.items()}
        return Outcome(shown, {"committed": bool(result.get("rewritten_data_files_count")), "engine": "spark", **done})

    def may_go_on(self, table: TableRef) -> bool:
        """Whether a job on the table may make its next commit (no protection mark, not dropped):
        the answer to a cluster-mode job's report (the guard, every few seconds, kills it as well)."""
        try:
            self._standing(table)
        except RunSkipped:
            return False
        return True

    def _commit_rewrite(
        self,
        table: TableRef,
        metadata: Any,
        plan: Any,
        shown: dict[str, Any],
        rewrite: compaction.ManifestRewrite,
        write: Callable[[], dict[str, Any]],
    ) -> Outcome:
        """Write the rewrite's files, commit its replace snapshot with main asserted at the plan's
        base; a concurrent writer wins: the run gives up and deletes what it wrote."""
        try:
            snapshot_update = write()
            self.compaction_planned(plan)
            self._guard(table, shown, {"committed": False})
            commit = CommitTableRequest.of(
                compaction.requirements_for(metadata, plan), compaction.updates_for(snapshot_update)
            )
            self.tables.commit_table(table.warehouse, table.namespace, table.name, commit)
        except CommitFailed:
            rewrite.forget()
            return Outcome(shown, {"committed": False, "reason": "a concurrent writer won; the next run retries"})
        except BaseException:
            rewrite.forget()
            raise
        done = {"committed": True, "snapshot-id": snapshot_update["snapshot-id"], "files-written": len(rewrite.written)}
        return Outcome(shown, done)

    # -- orphan files -----------------------------------------------------------------------

    def _remove_orphans(
        self, table: TableRef, policy: policy_rules.EffectivePolicy, dry_run: bool, now_ms: int
    ) -> Outcome:
        cutoff_ms = policy_rules.orphan_cutoff_ms(policy, now_ms)
        for _ in range(MAX_REPLANS):
            row = self.row(table)
            metadata = table_rules.parse_metadata(row.metadata)
            root = Location.parse(row.location, "table location")
            listed = _within_policy_location(policy, root)
            allowed = self._deletable(table, row)
            referenced = self._referenced(table, row, metadata)
            orphans = [
                location
                for location, modified_s in self.objects.list_modified(listed)
                if modified_s * 1000 < cutoff_ms and location not in referenced and allowed(location)
            ]
            shown = {
                "listed": listed.uri,
                "older-than-ms": cutoff_ms,
                "refused": allowed.refused,
                "files-to-remove": _listed(orphans),
            }
            if dry_run or not orphans:
                return Outcome(shown, {"dry-run": dry_run, "files-removed": 0})
            if self.tables.repository.current_metadata_location(row.id) != row.metadata_location:
                continue  # a commit landed while we listed: what it names is not an orphan
            removed = self._delete(table, orphans, shown, {"files-removed": 0})
            return Outcome(shown, {"files-removed": removed}, removed)
        raise CommitFailed(f"The table changed during {MAX_REPLANS} listings; the next run retries")

    def _referenced(self, table: TableRef, row: EntryRow, metadata: Any) -> set[Location]:
        """Everything this table's metadata names, deleted manifest entries and logged files too,
        and every object recorded as pending a commit (its metadata file is being written)."""
        files = self.reachable(row).of(metadata, None, live_only=False).all()
        files |= _metadata_files(metadata, row.metadata_location)
        root = Location.parse(row.location)
        files |= set(self.tables.repository.references_under(root))
        files |= {p for p in map(parsed, self.rows.pending_under(root)) if p is not None}
        return files

    # -- deleting ---------------------------------------------------------------------------

    def _delete(self, table: TableRef, locations: list[Location], plan: dict[str, Any], done: dict[str, Any]) -> int:
        removed = 0
        batches = iter(locations)
        total = -(-len(locations) // DELETE_BATCH)
        while batch := list(islice(batches, DELETE_BATCH)):
            self._progress(removed // DELETE_BATCH, total)
            self._guard(table, plan, {**done, "files-removed": removed})
            self.objects.delete(batch)
            removed += len(batch)
        self._progress(total, total)
        return removed


def _metadata_files(metadata: Any, current: str) -> set[Location]:
    texts = [current, *(entry.metadata_file for entry in metadata.metadata_log)]
    return {location for location in map(parsed, texts) if location is not None}


def _within_policy_location(policy: policy_rules.EffectivePolicy, root: Location) -> Location:
    """Polaris's ``location`` narrows the listing; it never leaves the table's own location."""
    text = policy.content.get("location")
    if not text:
        return root
    location = parsed(text)
    if location is None or not location.is_within(root):
        raise BadRequest(f"The policy's location {str(text)[:200]!r} is not within the table's location")
    return location


def _listed(locations: set[Location] | list[Location]) -> dict[str, Any]:
    ordered = sorted(location.uri for location in locations)
    return {"count": len(ordered), "first": ordered[:SHOWN_FILES]}
