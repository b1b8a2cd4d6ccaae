"""The storage layer built from settings: the database pool, the repository, the object store.

One function, used by the app factory, ``python -m app.housekeeping`` and ``scripts/functions.py``.
"""

from __future__ import annotations

from app.ground.settings import Settings
from storage.db import Database
from storage.objects import RoutingObjectStore, S3ObjectStore
from storage.repository import CatalogRepository


def build_storage(settings: Settings) -> tuple[Database, CatalogRepository, RoutingObjectStore]:
    """The pool (opened), the repository and the object store for these settings."""
    database = Database(
        settings.database_url,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        timeout_s=settings.pool_timeout_s,
        statement_timeout_ms=settings.statement_timeout_ms,
        deadline_s=settings.db_timeout_s,
    )
    database.open()
    objects = RoutingObjectStore(S3ObjectStore(settings.s3) if settings.s3.endpoint else None)
    return database, CatalogRepository(database), objects
