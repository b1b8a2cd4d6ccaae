"""The application factory: the services wired by app/composition, then the HTTP app over them."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import yaml
from connexion import FlaskApp
from connexion.exceptions import ProblemException
from connexion.jsonifier import Jsonifier
from connexion.middleware import ConnexionMiddleware, MiddlewarePosition
from connexion.middleware.security import SecurityMiddleware
from connexion.options import SwaggerUIOptions
from starlette.exceptions import HTTPException

from app.audit.writer import AuditWriter
from app.composition.catalog import build_catalog
from app.composition.events import build_events
from app.composition.maintenance import build_maintenance
from app.composition.management import (
    build_audit,
    build_housekeeper,
    build_management,
    build_restrictions,
    build_table_moves,
)
from app.composition.services import SERVICES, Services
from app.composition.storage import build_foundation
from app.edge.audit import AuditMiddleware
from app.edge.auth import AuthMiddleware, AuthSettings
from app.edge.contract import ContractReader
from app.edge.dispatch import Dispatcher
from app.edge.http import (
    LivenessMiddleware,
    RequestGuardMiddleware,
    handle_catalog_error,
    handle_http_exception,
    handle_problem,
    handle_undecodable_body,
    handle_unexpected,
)
from app.edge.loop_reads import (
    ListEntriesOnLoop,
    ListNamespacesOnLoop,
    LoadNamespaceOnLoop,
    LoadTableOnLoop,
    SignRequestOnLoop,
)
from app.edge.observability import ObservabilityMiddleware
from app.edge.operations import RouteTable, compile_operations
from app.edge.resolver import (
    HANDLER_MODULES,
    MANAGEMENT_MODULES,
    DispatchedResolver,
    handlers_of,
    implemented_endpoints,
)
from app.edge.startup import Startup, StartupGate
from app.edge.validation import BoundedJSONProvider, validator_map
from app.ground import limits, metrics
from app.ground.errors import CatalogError
from app.ground.events import configure_event_logs
from app.ground.page_tokens import new_key as new_page_key
from app.ground.settings import Settings
from app.maintenance.trigger import CommitTrigger
from storage.db import AsyncDatabase, Database
from storage.loop_reads import AsyncEntryReader
from storage.migrate import migrate
from storage.page_keys import PageKeyRepository
from storage.staged import AsyncPlacesReader

log = logging.getLogger(__name__)

SPEC_FILE = Path(__file__).resolve().parents[2] / "openapi" / "catalog.yaml"
MANAGEMENT_SPEC_FILE = SPEC_FILE.with_name("management.yaml")
EVENTS_SPEC_FILE = SPEC_FILE.with_name("events.yaml")
MANAGEMENT_BASE_PATH = "/management/v1"
# How long a worker waits for PostgreSQL before serving (503 until ready, retrying meanwhile).
STARTUP_WAIT_S = 5.0


def create_app(settings: Settings | None = None, auth_settings: AuthSettings | None = None) -> FlaskApp:
    """The app: each capability wired by its builder (app/composition), then the HTTP app over them."""
    settings = settings or Settings.from_env()
    auth_settings = auth_settings or AuthSettings.from_env()  # refuses GROWLER_AUTH=none off loopback
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    configure_event_logs()  # request and commit lines: JSON

    base = build_foundation(settings, auth_settings)
    database, auth, page_tokens = base.database, base.auth, base.page_tokens
    spec = load_spec()
    trigger = CommitTrigger()  # maintenance's: the table service tells it of every commit
    catalog = build_catalog(base, spec, after_commit=trigger.note)
    maintenance = build_maintenance(base, catalog.tables, trigger)
    management = build_management(base)
    events = build_events(base)
    audit = build_audit(base)
    restrictions = build_restrictions(base)
    housekeeper = build_housekeeper(base, catalog, maintenance.service, audit)
    # PostgreSQL down at boot must not fail the worker (gunicorn would stop): see app/edge/startup.py.
    startup = Startup(
        [
            lambda: _migrate(settings.database_url),
            catalog.namespaces.ensure_default_warehouse,
            lambda: page_tokens.install(PageKeyRepository(database).key(new_page_key())),
            auth.start,
            housekeeper.start,
            events.publisher.start,
            maintenance.runner.start,
        ]
    )
    startup.run(first_wait_s=STARTUP_WAIT_S)
    # getToken is served in front of connexion (app/edge/auth/endpoint.py), when Growler issues tokens
    token_endpoint = ["POST /v1/oauth/tokens"] if auth.endpoint is not None else []
    services = Services(
        namespaces=catalog.namespaces,
        tables=catalog.tables,
        views=catalog.views,
        functions=catalog.functions,
        planning=catalog.planning,
        signer=catalog.signer,
        idempotency=catalog.idempotency,
        recycle_bin=catalog.recycle_bin,
        protection=catalog.protection,
        management=management,
        maintenance=maintenance.service,
        events=events.feed,
        event_sinks=events.sinks,
        publisher=events.publisher,
        previews=catalog.previews,
        federation=catalog.federation,
        audit=audit,
        restrictions=restrictions,
        table_moves=build_table_moves(base, catalog),
        authorizer=base.authorizer,
        endpoints=sorted([*implemented_endpoints(spec), *token_endpoint]),
        console_oidc=auth.console_oidc is not None,
        namespace_separator=settings.namespace_separator,
    )

    async_database = AsyncDatabase(
        settings.database_url,
        max_size=settings.async_pool_max_size,
        timeout_s=settings.pool_timeout_s,
        statement_timeout_ms=settings.statement_timeout_ms,
        deadline_s=settings.db_timeout_s,
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        await warm_up(database, async_database, ready=startup.ready)
        yield
        startup.stop()
        auth.stop()
        housekeeper.stop()
        events.publisher.stop()
        maintenance.runner.stop()
        services.planning.close()
        await async_database.close()
        database.close()

    # Compact JSON: connexion's default indents every response body, which costs time and bytes.
    # Large bodies are encoded by the json module's Python encoder (app.ground.limits.dumps).
    compact = Jsonifier(SimpleNamespace(dumps=limits.dumps, loads=json.loads), separators=(",", ":"))
    # No Swagger UI: it needs connexion[swagger-ui], which Growler does not install, and connexion
    # would warn for each yaml in every worker that it is missing. Nor connexion's /openapi.json:
    # it serves the spec with its references resolved, and the catalog's recursive schemas
    # (expressions) made that a 500; the contracts are the files in openapi/.
    app = FlaskApp(
        __name__,
        lifespan=lifespan,
        middlewares=_middlewares(),
        jsonifier=compact,
        swagger_ui_options=SwaggerUIOptions(swagger_ui=False, serve_spec=False),
    )
    validators = validator_map(settings.limits)
    # The APIs: each yaml with its base path and handler modules. connexion gets each for its app
    # object (404s, 405s); the dispatcher serves every operation of each (app/edge/dispatch.py).
    apis = served_apis(spec)
    operations, handlers = [], {}
    for api_spec, base_path, modules in apis:
        app.add_api(
            api_spec,
            base_path=base_path or None,
            resolver=DispatchedResolver(),
            strict_validation=True,
            validate_responses=settings.validate_responses,
            validator_map=validators,
        )
        found = handlers_of(api_spec, modules, compact.dumps)
        handlers.update(found)
        operations += compile_operations(
            api_spec,
            found.get,
            base_path=base_path,
            body_validator=validators["body"]["*/*json"],
            check_responses=settings.validate_responses,
        )
    # Outermost of ours: the request id (given or made) for every request, its log line and metrics.
    app.add_middleware(
        ObservabilityMiddleware,
        position=MiddlewarePosition.BEFORE_EXCEPTION,
        namespace_separator=settings.namespace_separator,
    )
    app.add_middleware(LivenessMiddleware, position=MiddlewarePosition.BEFORE_EXCEPTION)  # logged, counted
    app.add_middleware(StartupGate, position=MiddlewarePosition.BEFORE_EXCEPTION, startup=startup)
    # The audit trail, when on: each request's record committed before its response starts
    # (outside authentication, so that a 401 is recorded too).
    if settings.audit_trail:
        app.add_middleware(
            AuditMiddleware,
            position=MiddlewarePosition.BEFORE_EXCEPTION,
            writer=AuditWriter(audit.rows, async_database, gather_s=settings.audit_gather_ms / 1000),
            namespace_separator=settings.namespace_separator,
        )
    # Every request but the probes is authenticated here, before the dispatcher.
    app.add_middleware(AuthMiddleware, position=MiddlewarePosition.BEFORE_EXCEPTION, **auth.middleware_options())
    # The guard and the dispatcher sit in front of connexion's Swagger UI middleware (which copies the
    # scope and runs a router of its own for every request) and still inside its exception
    # handling, so what they raise is rendered by the handlers below.
    app.add_middleware(
        RequestGuardMiddleware,
        position=MiddlewarePosition.BEFORE_SWAGGER,
        max_body_bytes=settings.max_body_bytes,
        default_prefix=settings.warehouse,
    )
    # just inside the guard: its limits and unprefixed routes apply
    dispatcher_options = {
        "routes": RouteTable(operations),
        "handlers": handlers,
        "contract": ContractReader(validators, settings.limits),
        "authorizer": services.authorizer,
        "gate": base.rights,  # the management API's rights, which its MANAGEMENT_OPERATIONS rows call
        "services": services,
        "serialize": compact.dumps,
        "threads": settings.pool_max_size,
        "loop_reads": [
            LoadTableOnLoop(services.tables, AsyncEntryReader(async_database), settings.namespace_separator),
            LoadNamespaceOnLoop(
                services.namespaces, AsyncEntryReader(async_database), settings.namespace_separator, compact.dumps
            ),
            ListNamespacesOnLoop(
                services.namespaces, AsyncEntryReader(async_database), settings.namespace_separator, compact.dumps
            ),
            *(
                ListEntriesOnLoop(
                    entries, AsyncEntryReader(async_database), settings.namespace_separator, compact.dumps
                )
                for entries in (services.tables.entries, services.views.entries)
            ),
            SignRequestOnLoop(
                services.signer, AsyncPlacesReader(async_database), settings.namespace_separator, compact.dumps
            ),
        ],
    }
    app.add_middleware(Dispatcher, position=MiddlewarePosition.BEFORE_SWAGGER, **dispatcher_options)
    app.add_error_handler(CatalogError, handle_catalog_error)
    app.add_error_handler(ProblemException, handle_problem)
    app.add_error_handler(HTTPException, handle_http_exception)
    app.add_error_handler(UnicodeDecodeError, handle_undecodable_body)
    app.add_error_handler(Exception, handle_unexpected)

    flask_app = app.app
    # A path with an empty segment ("/v1/test//namespaces") is no route, as everywhere else in the
    # API: werkzeug would answer 308 to the path with the slashes merged, and that reached clients
    # as an error body without a Location.
    flask_app.url_map.merge_slashes = False
    flask_app.json = type("LimitedJSONProvider", (BoundedJSONProvider,), {"limits": settings.limits})(flask_app)
    flask_app.extensions[SERVICES] = services  # the console and the probes: app.edge.context.services()
    flask_app.config["MAX_CONTENT_LENGTH"] = settings.max_body_bytes

    # The console (issue 38) at /ui/: Flask views over the same services, its session checked by
    # AuthMiddleware (app/edge/auth/console.py).
    from app import console

    console.install(flask_app)

    from handlers import health
    from handlers import metrics as metrics_handler

    app.add_url_rule("/healthz", "healthz", health.healthz, methods=["GET"])
    app.add_url_rule("/readyz", "readyz", health.readyz, methods=["GET"])
    app.add_url_rule("/metrics", "metrics", metrics_handler.metrics, methods=["GET"])
    metrics.watch_pool(database.pool.pop_stats)
    return app


async def warm_up(database: Database, async_database: AsyncDatabase, *, ready: bool) -> None:
    """What a worker does before it accepts connections (uvicorn runs the lifespan first).

    Its first requests must not pay for what every later one finds ready: both pools hold their
    first connections (when PostgreSQL is reachable; otherwise they grow on demand, as always),
    and what start-up built is out of the garbage collector's sight (W10, the first seconds).
    """
    started = time.perf_counter()
    if ready:
        await asyncio.to_thread(database.fill)
    await async_database.start(fill=ready)
    if gc.get_freeze_count():  # the process froze its start-up objects (gunicorn.conf.py): these too
        gc.collect()
        gc.freeze()
    log.info(
        "worker warmed up in %.0f ms (pid %d; %d connections open for reads on the event loop)",
        (time.perf_counter() - started) * 1000,
        os.getpid(),
        async_database.pool.get_stats().get("pool_available", 0),
    )


def served_apis(spec: dict | None = None) -> list[tuple[dict, str, tuple[str, ...]]]:
    """Every API the dispatcher serves: its spec (the catalog's with the change feed's, the
    management API's), its base path and its handler modules (tests/api/test_dispatch.py checks
    that every yaml under openapi/ is here, each operation routed and with its row)."""
    return [
        (spec or load_spec(), "", HANDLER_MODULES),
        (load_management_spec(), MANAGEMENT_BASE_PATH, MANAGEMENT_MODULES),
    ]


def load_spec() -> dict:
    """The contract (the catalog's and the change feed's), with each path's HEAD operation ahead of its GET.

    Flask answers HEAD on every GET rule it registers; connexion registers operations in spec
    order, so an explicit HEAD (tableExists, namespaceExists, ...) must come first to be routed.
    """
    # libyaml's parser (PyYAML's C binding) when present: the pure-Python one took ~1 s of every
    # worker's start-up on this spec, and a worker serves nothing until it is built (W10).
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    spec = yaml.load(SPEC_FILE.read_text(), Loader=loader)  # noqa: S506 - a safe loader
    # The change feed's endpoint, proposed upstream (apache/iceberg#12584), is an extension in a file
    # of its own: its paths and schemas join the catalog's (whose shared parts it refers to).
    events = yaml.load(EVENTS_SPEC_FILE.read_text(), Loader=loader)  # noqa: S506 - a safe loader
    spec["paths"].update(events["paths"])
    spec["components"]["schemas"].update(events["components"]["schemas"])
    for path, item in spec["paths"].items():
        if "head" in item:
            spec["paths"][path] = {"head": item["head"], **{k: v for k, v in item.items() if k != "head"}}
    return spec


def load_management_spec() -> dict:
    """The management API's contract (its own file; the catalog's stays identical to upstream)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(MANAGEMENT_SPEC_FILE.read_text(), Loader=loader)  # noqa: S506 - a safe loader


def _middlewares() -> list:
    """connexion's stack without its SecurityMiddleware.

    The spec declares OAuth2/bearer security; Growler enforces it in ``app.edge.auth.AuthMiddleware``,
    in front of the dispatcher, which connexion's security would not cover.
    """
    return [m for m in ConnexionMiddleware.default_middlewares if m is not SecurityMiddleware]


def _migrate(database_url: str) -> None:
    applied = migrate(database_url)
    if applied:
        log.info("database migrated: %s", ", ".join(applied))
