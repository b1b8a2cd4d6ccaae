"""Metrics reports in PostgreSQL (SQL only): what clients send to reportMetrics, kept as sent.

A part of ``CatalogRepository`` (which derives from ``MetricsReportRows``); the bounds a report
is kept under (size, rate, age) live in ``app/tables/metrics_reports.py``.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from storage.db import Database


class MetricsReportRows:
    db: Database

    def insert_metrics_report(
        self, warehouse_id: int, namespace: tuple[str, ...], table: str, report_type: str, report: dict[str, Any]
    ) -> None:
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO metrics_report (warehouse_id, namespace, table_name, report_type, report)"
                " VALUES (%s, %s, %s, %s, %s)",
                (warehouse_id, list(namespace), table, report_type, Jsonb(report)),
            )
