"""Catalog rows in PostgreSQL: one object for the services, its statements kept by entity.

``CatalogRepository`` is what the services are handed (storage/build.py); it derives from one
class per entity, each in its own module with its SQL: warehouses (storage/warehouses.py),
namespaces (storage/namespaces.py), tables and views (storage/entries.py), metrics reports
(storage/metrics_reports.py), what housekeeping works on (storage/housekeeping_rows.py) and the
recycle bin (storage/bin_rows.py). The
parts share the one database handle, so a service reaches every entity it orchestrates through
the object it already has. Methods return plain rows and raise ``app.ground.errors`` exceptions;
callers never see psycopg.
"""

from __future__ import annotations

from storage.bin_rows import BinRows
from storage.db import Database
from storage.entries import EntryRows
from storage.housekeeping_rows import HousekeepingRows
from storage.metrics_reports import MetricsReportRows
from storage.namespaces import NamespaceRows
from storage.warehouses import WarehouseRows


class CatalogRepository(WarehouseRows, NamespaceRows, EntryRows, MetricsReportRows, HousekeepingRows, BinRows):
    def __init__(self, db: Database) -> None:
        self.db = db

    def ping(self) -> None:
        """Readiness: the database answers."""
        self.db.ping()
