"""reportMetrics, bounded: what a caller holding only ``read`` may make Growler store.

Clients send a scan or commit report after their work; Growler keeps them for operators. Anyone
who may read a table may report on it, so each bound is one such a caller cannot exceed:

- **size**: a report of more than ``MAX_REPORT_BYTES`` (serialised) is refused (413);
- **rate**: each principal may store ``PER_SECOND`` reports a second per worker, in bursts of up
  to ``BURST``; beyond that the spec's 503 ``SlowDownException`` with ``Retry-After`` (Java and
  PyIceberg log a failed report and go on);
- **age**: housekeeping deletes reports older than ``RETENTION_S``.

So one principal can hold at most ``workers x PER_SECOND x RETENTION_S`` reports of bounded size.
"""

from __future__ import annotations

import json
import math
from typing import Any

from app.ground.callers import current_principal
from app.ground.errors import PayloadTooLarge, ServiceUnavailable
from app.ground.rates import TokenBuckets
from app.rules.requests.tables import ReportMetricsRequest

MAX_REPORT_BYTES = 64 * 1024
PER_SECOND = 20.0
BURST = 100.0
RETENTION_S = 7 * 86_400


class SlowDown(ServiceUnavailable):
    """The spec's 503 for a client sending faster than it may."""

    error_type = "SlowDownException"


class MetricsReports:
    def __init__(self, repository: Any, buckets: TokenBuckets | None = None) -> None:
        self.repository = repository  # storage.repository.CatalogRepository
        self.buckets = buckets or TokenBuckets(PER_SECOND, BURST)

    def accept(self, warehouse_id: int, namespace: tuple[str, ...], name: str, request: ReportMetricsRequest) -> None:
        report = request.report  # kept as the client sent it
        size = len(json.dumps(report, separators=(",", ":")))
        if size > MAX_REPORT_BYTES:
            raise PayloadTooLarge(f"A metrics report may hold at most {MAX_REPORT_BYTES} bytes, this one {size}")
        principal = current_principal.get()
        wait = self.buckets.take(principal.name if principal else "")
        if wait:
            raise SlowDown("Too many metrics reports: slow down", retry_after=max(1, math.ceil(wait)))
        self.repository.insert_metrics_report(warehouse_id, namespace, name, request.report_type, report)
