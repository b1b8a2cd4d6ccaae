"""Table maintenance through the management API, and in the background (docs/maintenance.md).

``MaintenanceService`` is what the handlers call: attach, detach and list policies; a table's
effective policies, its runs, its health report; a run on demand (or a dry run). Each operation's
row of ``MANAGEMENT_OPERATIONS`` (app/management/operations.py) checks the caller's right first
(``manage-maintenance`` to change or run, it or ``read`` to look); a policy's securable, known once
the body is parsed, is checked here; each change writes one audit line. The executor
(``app/maintenance/runs.py``) does the runs. ``run_due`` is housekeeping's due-work pass: it only
queues jobs - one per enabled, executable policy type of each table whose schedule is due, once per
table across the fleet (``MaintenanceJobs.enqueue_due``) - and the job runners of every worker of
every replica execute them (app/maintenance/jobs.py), within the limits on concurrent runs, with
progress, cancel and the stops at commit points of any job: due work spreads over the fleet instead
of running inside one worker's housekeeping round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from app.ground.callers import current_principal
from app.ground.errors import BadRequest, CatalogError, Forbidden, NotFound
from app.ground.events import audit
from app.ground.lru import LruCache
from app.maintenance.files import current_shape
from app.maintenance.lease import ABANDONED
from app.maintenance.options import InvalidRewrite, RewriteSettings
from app.maintenance.runs import MaintenanceBusy, MaintenanceExecutor
from app.maintenance.spark import report_token_hash
from app.management.rights import ManagementRights
from app.management.service import parse_securable, securable_view
from app.rules import maintenance as policy_rules
from app.rules import table as table_rules
from app.rules.requests.management import (
    AttachPolicyRequest,
    DetachPolicyRequest,
    RunReport,
    RunRequest,
    SecurableRef,
)
from storage.maintenance_jobs import MaintenanceJobs
from storage.maintenance_rows import MaintenanceRows, RunRow, TableRef
from storage.management_rows import Securable

log = logging.getLogger(__name__)

MAX_RUNS_LISTED = 100
MAX_QUEUED_PER_TABLE = 10  # jobs waiting on one table: a caller cannot fill the queue
MAX_PARTITIONS_SHOWN = 1000
DUE_BATCH = 20
RUN_RETENTION_S = 30 * 86_400  # recorded runs are kept 30 days
# The current snapshot's shape by (metadata location, target file size): a metadata file never
# changes, so neither do the manifests it points to; a health report (the console shows one on
# every table page) reads them once per worker and metadata version, not per request.
SHAPES: LruCache[tuple[str, int], dict[str, Any]] = LruCache(64)


class RunNotRunning(CatalogError):
    """A job's report for a run that has ended (finished, failed, taken over): the job stops."""

    code, error_type = 409, "RunNotRunningException"


class MaintenanceService:
    def __init__(
        self,
        executor: MaintenanceExecutor,
        rows: MaintenanceRows,
        *,
        rights: ManagementRights,
        jobs: MaintenanceJobs,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        self.rights = rights  # the management API's rights (app/management/rights.py)
        self.maintenance = rows
        self.executor = executor
        self.jobs = jobs  # every run is a job (app/maintenance/jobs.py), the schedule's too
        self.wake = wake  # this worker's job runner, told a job was queued
        self._discovered_at = float("-inf")
        # Called with a due table between the pass seeing it due and queueing its jobs: where a
        # test holds two passes (two replicas) at once, deterministically (one set of jobs results).
        self.due_seen: Callable[[TableRef], None] = lambda _table: None

    # -- policies ---------------------------------------------------------------------------

    def attach(self, request: AttachPolicyRequest) -> dict[str, Any]:
        policy_type, target = request.policy_type, policy_target(request)
        on = _policy_securable(request.securable)
        who = self.rights.require_maintainer("attach-maintenance-policy", target, on)
        try:
            checked = policy_rules.validate(policy_type, request.content)
            if policy_type == policy_rules.DATA_COMPACTION:  # thresholds, strategy, Spark resources
                RewriteSettings.of(checked.get("config") or {})
        except (policy_rules.InvalidPolicy, InvalidRewrite) as exc:
            raise BadRequest(str(exc)) from exc
        self.maintenance.attach(policy_type, on, checked)
        audit("attach-maintenance-policy", who, target)
        return {"policy-type": policy_type, "securable": securable_view(on), "content": checked}

    def detach(self, request: DetachPolicyRequest) -> None:
        policy_type, target = request.policy_type, policy_target(request)
        on = _policy_securable(request.securable)
        who = self.rights.require_maintainer("detach-maintenance-policy", target, on)
        if not self.maintenance.detach(policy_type, on):
            raise NotFound(f"No {policy_type} policy is attached there")
        audit("detach-maintenance-policy", who, target)

    def attached(self, securable: SecurableRef) -> list[dict[str, Any]]:
        on = _policy_securable(securable)
        self.rights.require_maintenance_reader("list-maintenance-policies", {"securable": securable.view()}, on)
        return [
            {"policy-type": p.policy_type, "securable": securable_view(on), "content": p.content}
            for p in self.maintenance.attached_at(on)
        ]

    # -- one table --------------------------------------------------------------------------

    def effective(self, warehouse: str, namespace: tuple[str, ...], name: str) -> list[dict[str, Any]]:
        table = self._table(warehouse, namespace, name)
        policies = self._effective(table)
        return [
            {"policy-type": p.policy_type, "content": p.content, "inherited-from": p.inherited_from}
            for p in sorted(policies.values(), key=lambda p: p.policy_type)
        ]

    def run(self, warehouse: str, namespace: tuple[str, ...], name: str, request: RunRequest) -> dict[str, Any]:
        """Queue the run as a job (app/maintenance/jobs.py) and answer it at once, 'queued': the
        caller follows it at its URL (getMaintenanceRun) and may cancel it."""
        policy_type, dry_run = request.policy_type, request.dry_run
        if policy_type not in policy_rules.POLICY_TYPES:
            raise BadRequest(f"Unknown policy type {policy_type!r}")
        table = self._table(warehouse, namespace, name)
        row = self.jobs.enqueue(table, policy_type, dry_run, _caller(), MAX_QUEUED_PER_TABLE)
        if row is None:
            raise MaintenanceBusy(f"The table already has {MAX_QUEUED_PER_TABLE} maintenance runs queued")
        self.wake()
        target = {"table": ".".join((*table.namespace, table.name)), "warehouse": warehouse}
        audit("run-maintenance", _caller(), {**target, "policy-type": policy_type, "dry-run": dry_run, "run": row.id})
        return run_view(row)

    def get_run(self, warehouse: str, namespace: tuple[str, ...], name: str, run_id: int) -> dict[str, Any]:
        table = self._table(warehouse, namespace, name)
        row = self.jobs.get(table.entry_id, run_id)
        if row is None:
            raise NotFound(f"No maintenance run {run_id} of this table")
        return run_view(row)

    def cancel_run(self, warehouse: str, namespace: tuple[str, ...], name: str, run_id: int) -> dict[str, Any]:
        """A queued job is cancelled at once; a running run stops at its next commit point (what
        it had not committed is not committed); a finished run is answered as it is."""
        table = self._table(warehouse, namespace, name)
        row = self.jobs.cancel(table.entry_id, run_id)
        if row is None:
            raise NotFound(f"No maintenance run {run_id} of this table")
        target = {"table": ".".join((*table.namespace, table.name)), "warehouse": warehouse, "run": run_id}
        audit("cancel-maintenance-run", _caller(), target)
        return run_view(row)

    def report_run(
        self, warehouse: str, namespace: tuple[str, ...], name: str, run_id: int, token: str, report: RunReport
    ) -> dict[str, Any]:
        """A Spark job's report of its run (cluster deploy mode: app/maintenance/spark.py), taken
        only with the token issued to that job (403 otherwise, nothing written) and while the run
        is running (409: the job stops). The answer's ``stop`` is the guard's verdict: a cancel, a
        protection mark, a drop or a revoked policy stops the job before its next commit."""
        table = self._table(warehouse, namespace, name)
        progress = report.progress.model_dump(by_alias=True, exclude_none=True) if report.progress else None
        result = None
        if report.result is not None or report.error is not None:
            result = {"error": report.error} if report.error is not None else {"result": dict(report.result or {})}
        answer = self.jobs.record_report(table.entry_id, run_id, report_token_hash(token), progress, result)
        if not answer.found:
            raise NotFound(f"No maintenance run {run_id} of this table")
        if not answer.token_holds:
            raise Forbidden(
                "The report token is not the one issued for this run: only the job Growler started may report"
            )
        if not answer.running:
            raise RunNotRunning(f"Maintenance run {run_id} is no longer running: the job should stop")
        return {"stop": answer.cancel_requested or not self.executor.may_go_on(table)}

    def runs(self, warehouse: str, namespace: tuple[str, ...], name: str, limit: int | None) -> list[dict[str, Any]]:
        table = self._table(warehouse, namespace, name)
        return [run_view(row) for row in self.maintenance.runs(table.entry_id, min(limit or 20, MAX_RUNS_LISTED))]

    def health(self, warehouse: str, namespace: tuple[str, ...], name: str) -> dict[str, Any]:
        table = self._table(warehouse, namespace, name)
        return self.report(table, int(time.time() * 1000))

    def report(self, table: TableRef, now_ms: int) -> dict[str, Any]:
        """The health report: what the table holds now, and what each policy type would do."""
        row = self.executor.row(table)
        metadata = table_rules.parse_metadata(row.metadata)
        policies = self.executor.effective(table, metadata.properties)
        expiry = policies.get(policy_rules.SNAPSHOT_EXPIRY)
        expirable = 0
        if expiry is not None and expiry.enabled:
            plan = policy_rules.plan_expiry(metadata, policy_rules.ExpirySettings.of(expiry), now_ms)
            expirable = len(plan.snapshot_ids)
        target = policy_rules.target_file_size(policies.get(policy_rules.DATA_COMPACTION), metadata.properties)
        key = (row.metadata_location or "", target)
        shape = SHAPES.get(key) if row.metadata_location else None
        if shape is None:  # every manifest of the current snapshot read: once per metadata file
            shape = current_shape(self.executor.reachable(row), metadata, target, policy_rules.SMALL_FILE_SHARE)
            if row.metadata_location:
                SHAPES.put(key, shape)
        partitions = shape["partitions"]
        totals = {key: sum(getattr(p, key) for p in partitions.values()) for key in ("data_files", "delete_files")}
        small = sum(p.small_data_files for p in partitions.values())
        stamps = [snapshot.timestamp_ms for snapshot in metadata.snapshots]
        summary = policy_rules.TableShape(
            len(stamps),
            expirable,
            shape["manifests"],
            shape["small-manifests"],
            totals["data_files"],
            small,
            totals["delete_files"],
        )
        shown = sorted(partitions.items())[:MAX_PARTITIONS_SHOWN]
        return {
            "snapshots": {
                "count": len(stamps),
                "oldest-age-ms": now_ms - min(stamps) if stamps else None,
                "newest-age-ms": now_ms - max(stamps) if stamps else None,
                "expirable": expirable,
            },
            "manifests": {"count": shape["manifests"], "small": shape["small-manifests"]},
            "data-files": totals["data_files"],
            "delete-files": totals["delete_files"],
            "small-file-ratio": round(small / totals["data_files"], 4) if totals["data_files"] else 0.0,
            "target-file-size-bytes": target,
            "partitions": [
                {"partition": key, **{k.replace("_", "-"): v for k, v in asdict(stats).items()}} for key, stats in shown
            ],
            "last-runs": [run_view(run) for run in self.maintenance.runs(table.entry_id, 10)],
            "recommendations": policy_rules.recommendations(summary, policies),
        }

    def _effective(self, table: TableRef) -> dict[str, policy_rules.EffectivePolicy]:
        row = self.executor.row(table)
        return self.executor.effective(table, table_rules.parse_metadata(row.metadata).properties)

    def _table(self, warehouse: str, namespace: tuple[str, ...], name: str) -> TableRef:
        """The table (its row of MANAGEMENT_OPERATIONS checked the caller's right on it first)."""
        return self.maintenance.table(warehouse, tuple(namespace), name)

    # -- the schedule -----------------------------------------------------------------------

    def run_due(self, full: bool = True) -> int:
        """Queue the runs of every table whose schedule is due (housekeeping's due-work pass): a job
        per enabled, executable policy type, run by whichever job runner of the fleet claims it.
        Returns how many jobs were queued. A table is queued once however many passes see it due
        (``MaintenanceJobs.enqueue_due``) and is looked at again an interval later; one whose
        policies cannot be read is logged and put off an interval too. Tables that set expiry only
        by their properties are discovered once an interval (it reads every document).

        The tables commits made due (app/maintenance/trigger.py) come first, with the trigger
        ``commits``; housekeeping calls this every round with ``full`` only once a minute: the
        other rounds queue just those (their query reads only their rows).
        """
        committed = self.executor.trigger.take()
        if committed:
            self.maintenance.mark_due(committed, self.executor.trigger.by_properties(committed))
        if not full:
            if not committed:
                return 0
            return self._enqueue(self.maintenance.due_tables(DUE_BATCH, False, only=committed), set(committed))
        self.abandon_dead_runs()
        discover = time.monotonic() - self._discovered_at >= self.executor.interval_s
        if discover:
            self._discovered_at = time.monotonic()
            self.maintenance.forget_runs(RUN_RETENTION_S)
        return self._enqueue(self.maintenance.due_tables(DUE_BATCH, discover_properties=discover), set(committed))

    def _enqueue(self, tables: list[TableRef], by_commits: set[int]) -> int:
        queued = 0
        for table in tables:
            try:
                policies = self._effective(table)
                enabled = [t for t in policy_rules.EXECUTABLE if t in policies and policies[t].enabled]
                if not enabled:
                    self.maintenance.schedule(table.entry_id, self.executor.interval_s)
                    continue
                self.due_seen(table)
                trigger = "commits" if table.entry_id in by_commits else "schedule"
                queued += len(self.jobs.enqueue_due(table, enabled, trigger, self.executor.interval_s))
            except Exception as exc:  # noqa: BLE001 - one table's trouble never stops the others
                log.warning("scheduled maintenance of %s failed: %s", table.name, type(exc).__name__)
                self.maintenance.schedule(table.entry_id, self.executor.interval_s)
        if queued:
            self.wake()  # this worker's runner looks at the queue now; the others at their next poll
        return queued

    def abandon_dead_runs(self) -> int:
        """Mark failed the runs their runner left 'running' when it died (its lease ran out): the
        tables nobody takes again would otherwise show them running forever."""
        abandoned = self.maintenance.abandon_runs(ABANDONED)
        if abandoned:
            log.warning("%d maintenance runs abandoned by runners that died", abandoned)
        return abandoned


def _caller() -> str | None:
    principal = current_principal.get()
    return principal.name if principal is not None else None


def policy_target(request: DetachPolicyRequest) -> dict[str, Any]:
    """An attach's or a detach's audit target: the policy type, the securable as named."""
    return {"policy-type": request.policy_type, "securable": request.securable.view()}


def _policy_securable(securable: SecurableRef) -> Securable:
    on = parse_securable(securable)
    if on.type == "view":
        raise BadRequest("Maintenance policies attach to the catalog, a warehouse, a namespace or a table")
    return on


def run_view(row: RunRow) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": row.id,
        "policy-type": row.policy_type,
        "trigger": row.trigger,
        "dry-run": row.dry_run,
        "status": row.status,
        "plan": row.plan,
        "outcome": row.outcome,
        "files-removed": row.files_removed,
        "started-at": row.started_at.isoformat(),
    }
    if row.requested_by is not None:
        view["requested-by"] = row.requested_by
    if row.finished_at is not None:
        view["finished-at"] = row.finished_at.isoformat()
    if row.error:
        view["error"] = row.error
    if row.progress:
        view["progress"] = row.progress
    if row.cancel_requested:
        view["cancel-requested"] = True
    return view
