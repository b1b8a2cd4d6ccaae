"""Request bodies of server-side scan planning: planTableScan and fetchScanTasks.

PyIceberg's ``FetchScanTasksRequest`` is used as it is. Its ``PlanTableScanRequest`` is not:
it parses ``filter`` into an unbound expression and refuses snapshot combinations with its own
wording, where Growler binds the filter to the scanned schema and refuses with Java's
(``app.rules.scan.planning.resolve_scan``, after the table is found); the model here keeps the
filter as the JSON expression the rules bind.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pyiceberg.catalog.rest.scan_planning import FetchScanTasksRequest
from pyiceberg.typedef import IcebergBaseModel

__all__ = ["FetchScanTasksRequest", "PlanTableScanRequest"]


class PlanTableScanRequest(IcebergBaseModel):
    """What to scan: a snapshot or a range of snapshots, columns, a filter (JSON) and options."""

    snapshot_id: int | None = Field(alias="snapshot-id", default=None)
    select: list[str] | None = None
    filter: Any = None  # the spec's Expression as JSON: bound to the scanned schema by the rules
    case_sensitive: bool = Field(alias="case-sensitive", default=True)
    use_snapshot_schema: bool = Field(alias="use-snapshot-schema", default=False)
    start_snapshot_id: int | None = Field(alias="start-snapshot-id", default=None)
    end_snapshot_id: int | None = Field(alias="end-snapshot-id", default=None)
    stats_fields: list[str] | None = Field(alias="stats-fields", default=None)
    min_rows_requested: int | None = Field(alias="min-rows-requested", default=None)
