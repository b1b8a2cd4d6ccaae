"""Request bodies of server-side scan planning: planTableScan and fetchScanTasks, the generated
models of ``openapi/catalog.yaml``.

PyIceberg's ``PlanTableScanRequest`` is not used: it parses ``filter`` into an unbound expression
and refuses snapshot combinations with its own wording, where Growler binds the filter to the
scanned schema and refuses with Java's (``app.rules.scan.planning.resolve_scan``, after the table
is found); the generated model keeps the filter as the JSON expression the rules bind (the
generator's override, scripts/models.py).
"""

from __future__ import annotations

from app.rules.contract.catalog import FetchScanTasksRequest, PlanTableScanRequest

__all__ = ["FetchScanTasksRequest", "PlanTableScanRequest"]
