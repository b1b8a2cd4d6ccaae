"""Scan planning as the REST spec runs it: plan, poll, fetch tasks, cancel.

A scan whose snapshot summaries say it touches fewer than ``async_min_files`` files is planned
in the request and answered ``completed``; a larger one is answered ``submitted`` with a
``plan-id`` and planned on a thread of this worker. Either way the result lives in PostgreSQL
(``storage/plans.py``), so any worker or replica answers the polls. The tasks are cut into pages
of ``page_size`` file scan tasks: the first page comes with the ``completed`` answer, the others
as ``plan-tasks`` (``<plan-id>:<page>``) that fetchScanTasks expands, so no answer is unbounded.
Plans expire after ``lifetime_s``; a submitted plan whose worker stops reporting progress (it
died) is reported ``failed`` after ``stale_after_s`` (``PlanningService.fetch`` says in what shape).
cancelPlanning marks the plan cancelled and forgets its tasks; the planning thread, wherever it
runs, notices within a second and stops.

Read restrictions (issue 51): a restricted caller's plan is cut to what it may read (the rules:
``app/rules/scan/restricted.py``), trusted engine or not - a plan without credentials is
answered to anyone with READ. The restrictions are read in the request, from the caller's cached
grants, and resolved into the scan, so a plan run on a planning thread (no request context there)
uses the ones of the caller who asked. Vended credentials are storage access: only a trusted
engine gets them for a restricted table (``restrictions_for_storage``: 403 for anyone else), for
the plan as for loadCredentials with its ``planId``. A stored plan's pages are the caller's: each
names the restrictions it was made under (``READER``), and fetchPlanningResult and fetchScanTasks
answer them only to a caller under the same ones (anyone else: the plan's 404), so a plan id
passed on cannot widen what its bearer reads, and a change of restrictions meanwhile is no
stale answer.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from app.ground.errors import CatalogError, NotFound, ServiceUnavailable, error_body
from app.rules import table as table_rules
from app.rules.privileges import Kind, Securable
from app.rules.requests.scans import PlanTableScanRequest
from app.rules.restrictions.policies import Restrictions
from app.rules.scan.planning import PlanningCancelled, ResolvedScan, plan_scan, resolve_scan, task_pages
from app.tables.service import TableService
from storage.manifests import BoundManifestReader, ManifestReader
from storage.plans import PlanRepository, PlanRow
from storage.rows import EntryRow
from storage.warehouses import WarehouseRow

log = logging.getLogger(__name__)

# Background plans a worker accepts per planning thread (running or queued); more is a 503.
MAX_QUEUED_PER_THREAD = 8
# In a stored page: the digest of the read restrictions the plan was made under (absent: none);
# taken out before the page is answered.
READER = "growler-reader"


class NoSuchPlanId(NotFound):
    error_type = "NoSuchPlanIdException"


class NoSuchPlanTask(NotFound):
    error_type = "NoSuchPlanTaskException"


def _env_int(env: Mapping[str, str], name: str, default: int, minimum: int = 1) -> int:
    raw = env.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return value


@dataclass(frozen=True)
class PlanningConfig:
    async_min_files: int = 1000
    page_size: int = 500
    lifetime_s: int = 3600
    stale_after_s: float = 60.0
    threads: int = 2
    manifest_cache: int = 512

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PlanningConfig:
        env = os.environ if env is None else env
        return cls(
            async_min_files=_env_int(env, "GROWLER_PLAN_ASYNC_MIN_FILES", cls.async_min_files, 0),
            page_size=_env_int(env, "GROWLER_PLAN_PAGE_SIZE", cls.page_size),
            lifetime_s=_env_int(env, "GROWLER_PLAN_LIFETIME_S", cls.lifetime_s),
            threads=_env_int(env, "GROWLER_PLAN_THREADS", cls.threads),
            manifest_cache=_env_int(env, "GROWLER_MANIFEST_CACHE_ENTRIES", cls.manifest_cache),
        )


class PlanningService:
    def __init__(self, tables: TableService, plans: PlanRepository, config: PlanningConfig) -> None:
        self.tables = tables
        self.plans = plans
        self.config = config
        self.reader = ManifestReader(tables.objects, config.manifest_cache)
        self._executor = ThreadPoolExecutor(max_workers=config.threads, thread_name_prefix="scan-plan")
        self._queued: set[str] = set()
        self._running: set[str] = set()
        self._cancelled: set[str] = set()
        self._closing = False
        self._lock = threading.Lock()

    # -- operations ---------------------------------------------------------------------

    def plan(
        self, prefix: str, namespace: tuple[str, ...], name: str, request: PlanTableScanRequest, vend: bool
    ) -> dict[str, Any]:
        warehouse, row = self._table(prefix, namespace, name)
        restrictions = self._restrictions(prefix, namespace, name, vend)
        metadata = self.tables.parsed.parse(row.metadata_location, row.metadata)
        scan = resolve_scan(metadata, request, restrictions)
        # only the table's own manifest lists, manifests, data and delete files are read or planned
        source = BoundManifestReader(
            self.reader, table_rules.files_of_entry(row.location, row.metadata_location, row.data_path)
        )
        plan_id = str(uuid.uuid4())
        if scan.estimated_files() >= self.config.async_min_files:
            with self._lock:
                if len(self._queued) + len(self._running) >= self.config.threads * MAX_QUEUED_PER_THREAD:
                    raise ServiceUnavailable("Too many scans are being planned; retry shortly", retry_after=1)
                self._queued.add(plan_id)
            try:
                self.plans.create(plan_id, row.id, "submitted", self.config.lifetime_s)
                self._executor.submit(self._run, plan_id, scan, source)
            except BaseException:
                with self._lock:
                    self._queued.discard(plan_id)
                raise
            return {"status": "submitted", "plan-id": plan_id}
        pages = self._pages(scan, plan_scan(scan, source))
        self.plans.create(plan_id, row.id, "completed", self.config.lifetime_s, pages)
        _, first = _stored(pages[0])  # planned under the caller's restrictions a moment ago
        return self._completed(plan_id, first, len(pages), warehouse, row, vend, with_id=True)

    def fetch(self, prefix: str, namespace: tuple[str, ...], name: str, plan_id: str, vend: bool) -> dict[str, Any]:
        """fetchPlanningResult. A plan that failed in the background is a 200 ``{"status": "failed",
        "error": {message, type, code}}``, the error being what a request planned at once would
        have been answered (a 503 for a worker that died, say).

        Why a 200 with the status and not the error response itself: that is what both clients
        read. Java's ``RESTTableScan`` (1.11+) parses the 200 body with
        ``FetchPlanningResultResponseParser`` (``status`` plus ``error`` via ``ErrorResponseParser``)
        and fails the scan with "Remote scan planning failed for planId ..."; an HTTP error would
        go through its retrying HTTP client and error handler instead (a 503 polled again for
        nothing). PyIceberg's ``PlanFailed`` is the same ``status`` + ``error`` object. Upstream's
        ``FailedPlanningResult`` schema means this shape but cannot validate it (an ``allOf`` with
        ``IcebergErrorResponse``, whose ``additionalProperties: false`` forbids the ``status`` it
        requires); ``openapi/catalog.yaml`` keeps the envelope without that line (a documented
        deviation). Iceberg's reference ``CatalogHandlers`` never fails a plan, so it shows nothing.
        """
        warehouse, row = self._table(prefix, namespace, name)
        restrictions = self._restrictions(prefix, namespace, name, vend)
        plan = self._plan(plan_id, row)
        if plan.status == "submitted" and plan.stale:
            error = error_body(
                "Planning was interrupted (the worker planning it stopped); plan the scan again",
                "ServiceUnavailableException",
                503,
            )
            self.plans.fail(plan.id, error["error"], stale_only_s=self.config.stale_after_s)
            plan = self._plan(plan_id, row)
        if plan.status == "completed":
            first = self.plans.page(plan.id, row.id, 0)
            if first is None:  # cancelled between the two reads
                return {"status": "cancelled"}
            page = _readers_page(first, restrictions)
            if page is None:
                raise NoSuchPlanId(_not_readers(plan_id))
            return self._completed(plan.id, page, plan.pages, warehouse, row, vend, with_id=False)
        if plan.status == "failed":
            return {"status": "failed", "error": _failure(plan.error)}
        return {"status": plan.status}

    def tasks(self, prefix: str, namespace: tuple[str, ...], name: str, plan_task: str) -> dict[str, Any]:
        _, row = self._table(prefix, namespace, name)
        restrictions = self._restrictions(prefix, namespace, name, vend=False)
        plan_id, _, page = plan_task.rpartition(":")
        body = None
        if _is_uuid(plan_id) and page.isdigit() and 0 < int(page) < 1_000_000_000:
            body = self.plans.page(plan_id, row.id, int(page))
        if body is None:
            raise NoSuchPlanTask(f"Plan task does not exist: {plan_task}")
        answer = _readers_page(body, restrictions)
        if answer is None:
            raise NoSuchPlanTask(_not_readers(plan_task, "Plan task"))
        return answer

    def cancel(self, prefix: str, namespace: tuple[str, ...], name: str, plan_id: str) -> None:
        _, row = self._table(prefix, namespace, name)
        if not _is_uuid(plan_id) or not self.plans.cancel(plan_id, row.id):
            raise NoSuchPlanId(f"Plan does not exist: {plan_id}")
        with self._lock:
            if plan_id in self._running:  # planned here: stop at once (elsewhere: at the heartbeat)
                self._cancelled.add(plan_id)

    def credentials(self, prefix: str, namespace: tuple[str, ...], name: str, plan_id: str) -> list[dict[str, Any]]:
        """loadCredentials with ``planId``: the table's credentials, for a plan of this table that
        can still be read (submitted or completed, not expired); else 404 NoSuchPlanIdException, as
        fetchPlanningResult would answer. A client's FileIO asks again when its credentials expire
        while it reads the plan's files (Java: ``rest-scan-plan-id``). A restricted caller that is
        no trusted engine: 403, as loadCredentials without a plan."""
        warehouse, row = self._table(prefix, namespace, name)
        self.tables.access.restrictions_for_storage(prefix, namespace, name)
        plan = self._plan(plan_id, row)
        if plan.status not in ("submitted", "completed"):
            raise NoSuchPlanId(f"Plan does not exist: {plan_id} (it is {plan.status})")
        return self.tables.access.credentials(
            warehouse, self.tables.access.row_roots(row), True, write=False
        )  # a plan is read

    def close(self) -> None:
        """Stop planning: running plans stop at their next check and are reported interrupted."""
        self._closing = True
        self._executor.shutdown(wait=False, cancel_futures=True)

    # -- internals ----------------------------------------------------------------------

    def _table(self, prefix: str, namespace: tuple[str, ...], name: str) -> tuple[WarehouseRow, EntryRow]:
        warehouse = self.tables.warehouses.get(prefix)
        return warehouse, self.tables.entries.require_entry(warehouse, namespace, name)

    def _restrictions(self, prefix: str, namespace: tuple[str, ...], name: str, vend: bool) -> Restrictions | None:
        """The caller's read restrictions on the table (None: none), from its cached grants. With
        vended credentials asked for, only a trusted engine may have any (403 otherwise): a plan
        without credentials is answered to everyone with READ, cut to what it may read."""
        if vend:
            return self.tables.access.restrictions_for_storage(prefix, namespace, name)
        securable = Securable.of_entry(Kind.TABLE, prefix, namespace, name)
        return self.tables.authorizer.grants().restrictions_on(securable)

    def _plan(self, plan_id: str, row: EntryRow) -> PlanRow:
        plan = self.plans.load(plan_id, self.config.stale_after_s) if _is_uuid(plan_id) else None
        if plan is None or plan.entry_id != row.id:
            raise NoSuchPlanId(f"Plan does not exist: {plan_id}")
        return plan

    def _pages(self, scan: ResolvedScan, tasks: list) -> list[str]:
        """The pages as stored, each naming the restrictions the plan was made under."""
        marked = {READER: scan.reader} if scan.reader is not None else {}
        return [
            json.dumps({**page, **marked}, separators=(",", ":"))
            for page in task_pages(scan, tasks, self.config.page_size)
        ]

    def _completed(
        self,
        plan_id: str,
        first: dict[str, Any],
        pages: int,
        warehouse: WarehouseRow,
        row: EntryRow,
        vend: bool,
        with_id: bool,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"status": "completed", **first}
        if with_id:
            body["plan-id"] = plan_id
        if pages > 1:
            body["plan-tasks"] = [f"{plan_id}:{page}" for page in range(1, pages)]
        credentials = self.tables.access.credentials(
            warehouse, self.tables.access.row_roots(row), vend, write=False
        )  # a plan is read
        if credentials:
            body["storage-credentials"] = credentials
        return body

    def _run(self, plan_id: str, scan: ResolvedScan, source: BoundManifestReader) -> None:
        """Plan a submitted scan; the result (or the error) goes to PostgreSQL."""
        checked = [time.monotonic()]

        def should_stop() -> bool:
            with self._lock:
                if plan_id in self._cancelled or self._closing:
                    return True
                waiting = sorted(self._queued)
            if time.monotonic() - checked[0] < 1.0:
                return False
            checked[0] = time.monotonic()
            # the plans queued behind this one are alive too: keep them from looking interrupted
            return self.plans.heartbeat([plan_id, *waiting]).get(plan_id) != "submitted"

        with self._lock:
            self._queued.discard(plan_id)
            self._running.add(plan_id)
        try:
            if self._closing or self.plans.heartbeat([plan_id]).get(plan_id) != "submitted":
                return
            pages = self._pages(scan, plan_scan(scan, source, should_stop))
            self.plans.complete(plan_id, pages)
        except PlanningCancelled:
            log.info("scan plan %s cancelled while planning", plan_id)
        except CatalogError as exc:
            self._fail(plan_id, exc.body()["error"])
        except Exception:  # noqa: BLE001 - reported to the client as a failed plan
            log.exception("scan plan %s failed", plan_id)
            self._fail(plan_id, error_body("Planning failed", "ServiceFailureException", 500)["error"])
        finally:
            with self._lock:
                self._running.discard(plan_id)
                self._cancelled.discard(plan_id)

    def _fail(self, plan_id: str, error: dict[str, Any]) -> None:
        try:
            self.plans.fail(plan_id, error)
        except CatalogError:
            log.warning("could not record the failure of scan plan %s", plan_id)


def _failure(error: dict[str, Any] | None) -> dict[str, Any]:
    """The stored failure as an ErrorModel (message, type, code), whatever was stored."""
    error = error or {}
    code = error.get("code")
    return {
        "message": str(error.get("message") or "Planning failed"),
        "type": str(error.get("type") or "ServiceFailureException"),
        "code": code if isinstance(code, int) and 400 <= code <= 599 else 500,
    }


def _stored(text: str) -> tuple[str | None, dict[str, Any]]:
    """A stored page: the restrictions it was made under (None: none), and the page as answered."""
    page = json.loads(text)
    return page.pop(READER, None), page


def _readers_page(text: str, restrictions: Restrictions | None) -> dict[str, Any] | None:
    """A stored page as answered to a caller under ``restrictions``; None when the plan was made
    under other ones (or none while the caller has some, or the reverse)."""
    reader, page = _stored(text)
    return page if reader == (restrictions.digest if restrictions is not None else None) else None


def _not_readers(what: str, kind: str = "Plan") -> str:
    return f"{kind} does not exist for this caller: {what} (planned under other read restrictions; plan the scan again)"


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text.lower()
    except (ValueError, AttributeError, TypeError):
        return False
