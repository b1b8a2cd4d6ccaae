"""The audit trail in the console (issue 51, docs/audit.md): its records, newest first, filtered
by principal, object and decision, paged.

The management API's query under the same check (administrators only: ``listAuditRecords``'s row),
so the page is the API's 403 for anyone else. With the trail off (``GROWLER_AUDIT_TRAIL``), the
page says so above what earlier runs recorded.
"""

from __future__ import annotations

from flask import Blueprint, render_template, request

from app.audit.service import AuditService
from app.console import common
from app.console.common import PAGE_SIZE, page_arg
from app.edge.context import services


def register(bp: Blueprint) -> None:
    bp.add_url_rule("/audit", "audit", audit_trail, methods=["GET"])
    common.NAV_EXTENSIONS.append(("audit", "console.audit", "Audit"))


def audit_trail() -> str:
    filters = {name: (request.args.get(name) or "").strip() or None for name in ("principal", "object", "decision")}
    common.authorize("listAuditRecords", {})
    trail: AuditService = services().audit
    page = trail.list_records(
        principal=filters["principal"],
        object_prefix=filters["object"],
        decision=filters["decision"],
        page_token=page_arg(),
        page_size=PAGE_SIZE,
    )
    return render_template(
        "console/audit.html", records=page.items, page=page, filters=filters, recording=trail.recording
    )
