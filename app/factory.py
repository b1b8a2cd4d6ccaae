"""The application factory: the one place that wires settings, storage, service and HTTP."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path

from connexion import FlaskApp
from connexion.exceptions import ProblemException
from connexion.middleware import MiddlewarePosition
from starlette.exceptions import HTTPException

from app.catalog import CatalogService
from app.errors import CatalogError
from app.http import (
    RequestGuardMiddleware,
    RequestIdMiddleware,
    handle_catalog_error,
    handle_http_exception,
    handle_problem,
    handle_unexpected,
)
from app.resolver import CatalogResolver
from app.settings import Settings
from storage.db import Database
from storage.migrate import migrate
from storage.objects import RoutingObjectStore, S3ObjectStore
from storage.repository import CatalogRepository

log = logging.getLogger(__name__)

SPEC_FILE = Path(__file__).resolve().parent.parent / "openapi" / "catalog.yaml"
STARTUP_WAIT_S = 30.0

CATALOG = "growler.catalog"
ENDPOINTS = "growler.endpoints"


def create_app(settings: Settings | None = None) -> FlaskApp:
    settings = settings or Settings.from_env()
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    _migrate_when_reachable(settings.database_url)
    database = Database(
        settings.database_url,
        min_size=settings.pool_min_size,
        max_size=settings.pool_max_size,
        timeout_s=settings.pool_timeout_s,
        statement_timeout_ms=settings.statement_timeout_ms,
    )
    database.open()
    objects = RoutingObjectStore(S3ObjectStore(settings.s3) if settings.s3.endpoint else None)
    service = CatalogService(settings, CatalogRepository(database), objects)
    service.ensure_default_warehouse()

    @contextlib.asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        yield
        database.close()

    resolver = CatalogResolver()
    app = FlaskApp(__name__, lifespan=lifespan)
    app.add_api(
        SPEC_FILE,
        resolver=resolver,
        strict_validation=True,
        validate_responses=settings.validate_responses,
    )
    app.add_middleware(RequestIdMiddleware, position=MiddlewarePosition.BEFORE_EXCEPTION)
    app.add_middleware(
        RequestGuardMiddleware,
        position=MiddlewarePosition.BEFORE_ROUTING,
        max_body_bytes=settings.max_body_bytes,
        default_prefix=settings.warehouse,
    )
    app.add_error_handler(CatalogError, handle_catalog_error)
    app.add_error_handler(ProblemException, handle_problem)
    app.add_error_handler(HTTPException, handle_http_exception)
    app.add_error_handler(Exception, handle_unexpected)

    flask_app = app.app
    flask_app.extensions[CATALOG] = service
    flask_app.extensions[ENDPOINTS] = sorted(resolver.endpoints)
    flask_app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes

    from handlers import health

    app.add_url_rule("/healthz", "healthz", health.healthz, methods=["GET"])
    app.add_url_rule("/readyz", "readyz", health.readyz, methods=["GET"])
    return app


def _migrate_when_reachable(database_url: str) -> None:
    """Apply migrations, waiting a little for a database that is still starting."""
    deadline = time.monotonic() + STARTUP_WAIT_S
    while True:
        try:
            applied = migrate(database_url)
            if applied:
                log.info("database migrated: %s", ", ".join(applied))
            return
        except Exception as exc:  # noqa: BLE001 - any connection failure means "not yet"
            if time.monotonic() > deadline:
                raise
            log.warning("database not ready (%s), retrying", type(exc).__name__)
            time.sleep(1.0)
