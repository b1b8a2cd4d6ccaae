"""The console's change events page and maintenance page (issue 38, item 5).

Both read through the services the API's endpoints use, under the signed-in principal, so the
same checks decide what shows:

- **Events** (``/ui/events``): a warehouse's change feed, or what happened under a namespace or
  to one table or view, read with ``EventFeed.read`` - the reading behind ``POST
  /v1/{prefix}/events``: ``queryEvents`` first (SEE on the warehouse), then the feed's own
  per-event filter (a caller sees only events of what it may read), its filters (operation type,
  object type, identifier prefix, since) and its sealed continuation token as the page link.
  The feed is in commit order, oldest first; "since" narrows it to the recent past.
- **Maintenance** (``/ui/maintenance``): the policies attached to a warehouse or namespace, and
  for a table its effective policies (attached there or inherited, and from where), its health
  report and its recent runs (status, plan, outcome, duration) from ``MaintenanceService``, whose
  rights are the management API's (``read`` or ``manage-maintenance``).

Each page costs a handful of queries: the feed's two per batch (one batch unless the caller's
grants or filters hide events), the maintenance service's few per call (two calls per table).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any, get_args

from flask import Blueprint, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from app.console.common import authorize, name_arg, namespaces, ns_arg, ns_param, page_arg, size_arg
from app.console.extras import TableAt, event_details, stamp
from app.edge.context import services
from app.events.feed import EventFeed
from app.ground.errors import BadRequest, CatalogError, Forbidden, NotFound
from app.maintenance.service import MaintenanceService
from app.rules.contract.events import CatalogObjectType, EventOperationType
from app.rules.identifiers import check_name, check_namespace
from app.rules.maintenance import POLICY_TYPES
from app.rules.requests import parse_request
from app.rules.requests.events import QueryEventsRequest
from app.rules.requests.management import RunRequest, SecurableRef, SecurableType

# The feed's operation types and object types, the filters' choices: the contract's own lists
# (openapi/events.yaml, generated into app/rules/contract/events.py).
OPERATION_TYPES: tuple[str, ...] = get_args(EventOperationType.model_fields["root"].annotation)
OBJECT_TYPES: tuple[str, ...] = get_args(CatalogObjectType.model_fields["root"].annotation)
SINCE = {"": None, "1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400}
MAX_TOKEN = 1024  # as the endpoint's continuation-token (openapi/events.yaml)
MAX_OBJECT = 1000  # characters of a typed identifier prefix


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/events", "events", events, methods=["GET"])
    bp.add_url_rule("/maintenance", "maintenance", maintenance, methods=["GET"])
    bp.add_url_rule("/maintenance/run", "run_maintenance", run_maintenance, methods=["POST"])
    bp.add_url_rule("/maintenance/cancel", "cancel_maintenance_run", cancel_maintenance_run, methods=["POST"])


# -- events --------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventLine:
    """One event as the page shows it; ``levels``/``name`` locate the object for its link."""

    when: str
    operation: str
    object_type: str
    levels: tuple[str, ...]
    name: str | None
    actor: str
    details: str
    request_id: str


@dataclass(frozen=True)
class Filters:
    operation: str
    object_type: str
    object_prefix: tuple[str, ...]
    since: str

    @classmethod
    def of_request(cls) -> Filters:
        operation = request.args.get("op") or ""
        if operation and operation not in OPERATION_TYPES:
            raise BadRequest(f"Unknown operation type {operation[:40]!r}")
        object_type = request.args.get("type") or ""
        if object_type and object_type not in OBJECT_TYPES:
            raise BadRequest(f"Unknown object type {object_type[:40]!r}")
        since = request.args.get("since") or ""
        if since not in SINCE:
            raise BadRequest(f"since must be one of {', '.join(s for s in SINCE if s)}")
        return cls(operation, object_type, _object_prefix(), since)

    def feed_request(self, token: str, size: int) -> QueryEventsRequest:
        """The events endpoint's request for these filters (the same model, the same reading)."""
        body: dict[str, Any] = {"page-size": size}
        if token:
            body["continuation-token"] = token
        if self.operation:
            body["operation-types"] = [self.operation]
        if self.object_type:
            body["object-types"] = [self.object_type]
        if self.object_prefix:
            body["catalog-objects-by-name"] = [list(self.object_prefix)]
        seconds = SINCE[self.since]
        if seconds is not None:
            body["since-timestamp-ms"] = int((time.time() - seconds) * 1000)
        return parse_request(QueryEventsRequest, body)


def _object_prefix() -> tuple[str, ...]:
    """What the events are about: ``ns`` (and ``name``) from a namespace's or table's link, or an
    identifier prefix typed in the form, levels separated by dots."""
    if request.args.get("ns"):
        levels = ns_arg()
        return (*levels, name_arg()) if request.args.get("name") else levels
    typed = (request.args.get("object") or "").strip()
    if len(typed) > MAX_OBJECT:
        raise BadRequest(f"The object filter is longer than {MAX_OBJECT} characters")
    return check_namespace(typed.split(".")) if typed else ()


def events() -> str:
    feed: EventFeed = services().events
    warehouse = (request.args.get("warehouse") or "").strip()
    if not warehouse:
        return render_template("console/events.html", warehouse=None, warehouses=namespaces().visible_warehouses())
    filters = Filters.of_request()
    token = page_arg()
    if len(token) > MAX_TOKEN:
        raise BadRequest("Invalid page token")
    feed.authorizer.authorize("queryEvents", {"prefix": warehouse})
    found, next_token = feed.read(warehouse, filters.feed_request(token, size_arg()))
    lines = [
        EventLine(
            stamp(event.created_at),
            event.operation_type,
            event.object_type,
            tuple(event.namespace or ()),
            event.name,
            str((event.actor or {}).get("principal") or ""),
            event_details(event.operation),
            event.request_id,
        )
        for event in found
    ]
    return render_template(
        "console/events.html",
        warehouse=warehouse,
        filters=filters,
        object_text=".".join(filters.object_prefix),
        operation_types=OPERATION_TYPES,
        object_types=OBJECT_TYPES,
        since_choices=[s for s in SINCE if s],
        lines=lines,
        next_token=next_token,
        started=bool(token),
    )


# -- maintenance ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RunLine:
    id: int
    started: str
    policy_type: str
    trigger: str  # what started it, with the principal who asked for it when one did
    dry_run: bool
    status: str
    duration: str
    files_removed: int
    plan: str
    outcome: str
    error: str
    progress: str = ""  # a job's file groups and bytes done of total
    active: bool = False  # queued or running: the console offers to cancel it
    cancel_requested: bool = False


def progress_text(progress: dict[str, Any] | None) -> str:
    if not progress or not progress.get("file-groups-total"):
        return ""
    text = f"{progress['file-groups-done']} of {progress['file-groups-total']} file groups"
    if progress.get("bytes-total"):
        text += f", {_mib(progress['bytes-done'])} of {_mib(progress['bytes-total'])}"
    return text


def _mib(count: int) -> str:
    return f"{count / 2**20:.1f} MiB"


def run_line(run: dict[str, Any]) -> RunLine:
    """A run as ``run_view`` gives it, with its duration and its plan and outcome as JSON text."""
    started = datetime.fromisoformat(run["started-at"])
    finished = datetime.fromisoformat(run["finished-at"]) if run.get("finished-at") else None
    duration = f"{(finished - started).total_seconds():.1f} s" if finished is not None else run["status"]
    return RunLine(
        run["id"],
        stamp(started),
        run["policy-type"],
        f"{run['trigger']} by {run['requested-by']}" if run.get("requested-by") else run["trigger"],
        bool(run["dry-run"]),
        run["status"],
        duration,
        run.get("files-removed") or 0,
        json.dumps(run.get("plan"), indent=1, sort_keys=True) if run.get("plan") else "",
        json.dumps(run.get("outcome"), indent=1, sort_keys=True) if run.get("outcome") else "",
        run.get("error") or "",
        progress_text(run.get("progress")),
        run["status"] in ("queued", "running"),
        bool(run.get("cancel-requested")),
    )


def maintenance() -> str:
    service: MaintenanceService = services().maintenance
    warehouse = (request.args.get("warehouse") or "").strip()
    if not warehouse:
        return render_template("console/maintenance.html", warehouse=None, warehouses=namespaces().visible_warehouses())
    typed = (request.args.get("dotted") or "").strip()  # the form's namespace, levels separated by dots
    levels = ns_arg() if request.args.get("ns") else check_namespace(typed.split(".")) if typed else ()
    name = check_name(request.args["name"], "name") if request.args.get("name") else None
    if name is None:  # a warehouse or a namespace: the policies attached there
        kind = SecurableType.NAMESPACE if levels else SecurableType.WAREHOUSE
        securable = SecurableRef(type=kind, warehouse=warehouse, namespace=levels or None)
        listed = {"type": kind.value, "warehouse": warehouse}
        authorize("listMaintenancePolicies", {**listed, "namespace": ns_param(levels)} if levels else listed)
        return render_template(
            "console/maintenance.html",
            warehouse=warehouse,
            levels=levels,
            name=None,
            attached=service.attached(securable),
        )
    if not levels:
        raise BadRequest("A table's maintenance needs its namespace")
    # the management API's row for this table's policies, runs and health (read or manage-maintenance)
    authorize("getEffectiveMaintenancePolicies", {"warehouse": warehouse, "namespace": ns_param(levels), "table": name})
    effective = service.effective(warehouse, levels, name)
    health, trouble = _health(service, TableAt(warehouse, levels, name, None))
    if health is not None:
        runs = health["last-runs"]
    else:  # the runs name the table's partitions too: the same rows as the API's
        try:
            authorize("listMaintenanceRuns", {"warehouse": warehouse, "namespace": ns_param(levels), "table": name})
            runs = service.runs(warehouse, levels, name, 20)
        except Forbidden:
            runs = []
    return render_template(
        "console/maintenance.html",
        warehouse=warehouse,
        levels=levels,
        name=name,
        effective=effective,
        data=health,
        trouble=trouble,
        runs=[run_line(run) for run in runs],
        policy_types=POLICY_TYPES,
    )


def _table_args() -> tuple[str, tuple[str, ...], str, dict[str, Any]]:
    """The table a maintenance form acts on (in its action's query string), and its API params."""
    warehouse = (request.args.get("warehouse") or "").strip()
    levels, name = ns_arg(), name_arg()
    return warehouse, levels, name, {"warehouse": warehouse, "namespace": ns_param(levels), "table": name}


def _back(warehouse: str, levels: tuple[str, ...], name: str) -> Response:
    return redirect(url_for("console.maintenance", warehouse=warehouse, ns=ns_param(levels), name=name), code=303)


def run_maintenance() -> Response:
    """The "Run now" button: the management API's runMaintenance (a job, queued; the page shows it)."""
    service: MaintenanceService = services().maintenance
    warehouse, levels, name, params = _table_args()
    body = parse_request(
        RunRequest,
        {"policy-type": request.form.get("policy-type", ""), "dry-run": request.form.get("dry-run") == "yes"},
    )
    authorize("runMaintenance", params, body)
    service.run(warehouse, levels, name, body)
    return _back(warehouse, levels, name)


def cancel_maintenance_run() -> Response:
    """The Cancel button of a queued or running run: the management API's cancelMaintenanceRun."""
    service: MaintenanceService = services().maintenance
    warehouse, levels, name, params = _table_args()
    try:
        run_id = int(request.args.get("run") or "")
    except ValueError:
        raise BadRequest("Which run?") from None
    authorize("cancelMaintenanceRun", {**params, "run": run_id})
    service.cancel_run(warehouse, levels, name, run_id)
    return _back(warehouse, levels, name)


def _health(service: MaintenanceService, table: TableAt) -> tuple[dict[str, Any] | None, str | None]:
    """The health report, or why it cannot be shown (the API's getTableHealth row refuses the
    caller - read restrictions on the table: its partitions' values -, its manifests unreadable):
    the policies still show."""
    params = {"warehouse": table.warehouse, "namespace": ns_param(table.levels), "table": table.name}
    try:
        authorize("getTableHealth", params)
    except Forbidden as refused:
        return None, refused.message
    try:
        return service.health(table.warehouse, table.levels, table.name), None
    except (Forbidden, NotFound):
        raise
    except CatalogError as exc:
        return None, exc.message
    except Exception:  # noqa: BLE001 - a manifest missing from storage: say so, show the rest
        return None, "The health report cannot be shown now."
