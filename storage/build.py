"""The storage layer built from settings: the database pool, the repository, the object store.

Two steps, because the object store routes each warehouse's locations to that warehouse's own
store, which the warehouse directory (a service over the repository) decides: the repository
first, then the object store with that directory handed in (``StoreRouter``). Used by the
composition root (app/composition), ``python -m app.housekeeping`` and ``scripts/functions.py``.
"""

from __future__ import annotations

from app.ground.settings import Settings
from storage.db import Database
from storage.objects import RoutingObjectStore, S3ObjectStore, StoreRouter
from storage.repository import CatalogRepository


def open_database(settings: Settings) -> tuple[Database, CatalogRepository]:
    """The pool (opened) and the repository for these settings."""
    database = Database(
        settings.database_url,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        timeout_s=settings.pool_timeout_s,
        statement_timeout_ms=settings.statement_timeout_ms,
        deadline_s=settings.db_timeout_s,
    )
    database.open()
    return database, CatalogRepository(database)


def object_store(settings: Settings, router: StoreRouter | None) -> RoutingObjectStore:
    """The environment's S3 store (when configured) and the local one, each warehouse with
    storage of its own routed to it by ``router``."""
    return RoutingObjectStore(S3ObjectStore(settings.s3) if settings.s3.endpoint else None, router=router)
