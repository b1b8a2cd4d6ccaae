"""What only Growler has, in the console (issue 38, item 5): the recycle bin with undrop, and a
table page's change events timeline and health report.

Every call goes through the service the management and events APIs use, under the signed-in
principal, so the same checks decide: the bin page is the API's 403 for a principal without
``undrop`` there, and a table section a principal may not read (``queryEvents`` and the feed's
per-event filter; ``read`` or ``manage-maintenance`` for health) is left out of the page: the
console never shows what the API would refuse. Undrop is a confirmed POST (CSRF checked first).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, redirect, render_template, request, url_for

from app.console import common
from app.console.common import PAGE_SIZE, namespaces, ns_param, page_arg
from app.edge.context import services
from app.events.feed import EventFeed
from app.ground.errors import BadRequest, CatalogError, Forbidden, NotFound
from app.maintenance.service import MaintenanceService
from app.recycle_bin.service import RecycleBinService
from app.rules.identifiers import check_namespace
from app.rules.requests.management import UndropRequest

log = logging.getLogger(__name__)

TIMELINE_LIMIT = 50  # events a table page shows, newest first


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/bin", "recycle_bin", recycle_bin, methods=["GET"])
    bp.add_url_rule("/bin/<warehouse>/<int:unit_id>/undrop", "undrop", undrop, methods=["POST"])
    common.SECTION_LOADERS["events"] = _events_section
    common.SECTION_LOADERS["maintenance"] = _maintenance_section


def _bin() -> RecycleBinService:
    return services().recycle_bin


def stamp(value: datetime | None) -> str:
    return value.isoformat(" ")[:19] + " UTC" if value is not None else ""


def _dotted(raw: str | None) -> tuple[str, ...] | None:
    """A namespace typed in a form, levels separated by dots (empty: none)."""
    raw = (raw or "").strip()
    return check_namespace(raw.split(".")) if raw else None


# -- the recycle bin ---------------------------------------------------------------------------


def recycle_bin() -> str:
    warehouse = (request.args.get("warehouse") or "").strip()
    if not warehouse:
        return render_template("console/recycle_bin.html", warehouse=None, warehouses=_visible_warehouses())
    namespace = _dotted(request.args.get("namespace"))
    common.authorize("listBin", {"warehouse": warehouse, **({"namespace": ns_param(namespace)} if namespace else {})})
    page = _bin().list_units(warehouse, namespace, page_arg(), PAGE_SIZE)
    return render_template(
        "console/recycle_bin.html",
        warehouse=warehouse,
        namespace=".".join(namespace or ()),
        units=page.items,
        page=page,
        stamp=stamp,
    )


def _visible_warehouses() -> list[str]:
    return list(namespaces().visible_warehouses())


def undrop(warehouse: str, unit_id: int) -> Response:
    if request.form.get("confirm") != "yes":
        raise BadRequest("Tick the confirmation box to undrop")
    body = UndropRequest.model_construct(
        namespace=_dotted(request.form.get("namespace")), name=(request.form.get("name") or "").strip() or None
    )
    common.authorize("undropBinUnit", {"warehouse": warehouse, "unit": unit_id}, body)
    unit = _bin().undrop(warehouse, unit_id, body)
    if unit.kind == "namespace":
        return redirect(url_for("console.namespace", warehouse=warehouse, ns=ns_param(unit.namespace)), code=303)
    return redirect(
        url_for(f"console.{unit.kind}", warehouse=warehouse, ns=ns_param(unit.namespace), name=unit.name), code=303
    )


# -- a table page's sections -------------------------------------------------------------------


@dataclass(frozen=True)
class TableAt:
    warehouse: str
    levels: tuple[str, ...]
    name: str
    uuid: str | None


@dataclass(frozen=True)
class TimelineEvent:
    when: str
    operation: str
    actor: str
    details: str
    request_id: str


def _events_section(feed: EventFeed, table: TableAt) -> list[TimelineEvent] | None:
    if table.uuid is None:
        return None
    feed.authorizer.authorize("queryEvents", {"prefix": table.warehouse})
    return [
        TimelineEvent(
            stamp(event.created_at),
            event.operation_type,
            str((event.actor or {}).get("principal") or ""),
            event_details(event.operation),
            event.request_id,
        )
        for event in feed.timeline(table.warehouse, table.uuid, TIMELINE_LIMIT)
    ]


def event_details(operation: dict[str, Any]) -> str:
    """One line about what an event changed: its updates' actions, or a rename's destination."""
    updates = operation.get("updates")
    if isinstance(updates, list):
        actions = [str(u.get("action")) for u in updates if isinstance(u, dict)]
        return ", ".join(dict.fromkeys(actions))
    destination = operation.get("destination")
    if isinstance(destination, dict):
        return "to " + ".".join([*(destination.get("namespace") or []), str(destination.get("name"))])
    return ""


def _maintenance_section(service: MaintenanceService, table: TableAt) -> dict[str, Any] | None:
    params = {"warehouse": table.warehouse, "namespace": ns_param(table.levels), "table": table.name}
    common.authorize("getTableHealth", params)
    return service.health(table.warehouse, table.levels, table.name)


def table_sections(table: TableAt) -> list[tuple[str, str, Any, str | None]]:
    """The table page's extra sections the caller may read: (heading, template, data, trouble)."""
    found = []
    for key, template, heading in common.TABLE_SECTIONS:
        data, trouble = load_section(key, getattr(services(), key), table)
        if data is not None or trouble is not None:
            found.append((heading, template, data, trouble))
    return found


def load_section(key: str, service: object, table: TableAt) -> tuple[Any, str | None]:
    """A section's data, or None when the caller may not read it (the section is left out), or
    the reason it cannot be shown now (one section's trouble never breaks the page)."""
    loader = common.SECTION_LOADERS.get(key)
    if loader is None:
        return None, None
    try:
        return loader(service, table), None
    except (Forbidden, NotFound):
        return None, None
    except CatalogError as exc:
        return None, exc.message
    except Exception as exc:  # noqa: BLE001 - e.g. a manifest missing from storage: say so in the section
        log.warning("console section %s of %s failed: %s", key, table.name, type(exc).__name__)
        return None, "This section cannot be shown now."
