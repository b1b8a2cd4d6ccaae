"""Shared fixtures: real PostgreSQL and S3 (embedded, on throwaway ports), the app, a client.

Set ``GROWLER_TEST_DATABASE_URL`` (with ``GROWLER_TEST_ADMIN_DATABASE_URL``, a superuser, for the
tests that create databases; and ``GROWLER_TEST_S3_ENDPOINT`` with
``GROWLER_TEST_S3_ACCESS_KEY``/``GROWLER_TEST_S3_SECRET_KEY``) to run against external
services instead; the database must be empty or Growler's own.
"""

from __future__ import annotations

import graphlib
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from app.composition.services import services_of
from app.edge.auth.config import AuthSettings
from app.ground.settings import S3Settings, Settings, StsSettings, default_credentials_mode

TEST_ACCESS_KEY = "growler-test"
TEST_SECRET_KEY = "growler-test-secret"
TEST_BUCKET = "growler-test-warehouse"
# Authentication of the test servers: the bootstrap admin every test client authenticates as.
TEST_CLIENT_ID = "test-admin"
TEST_CLIENT_SECRET = "test-admin-secret"
TEST_KEY_PASSWORD = "growler-test-key-password"
# Encrypts the storage keys of warehouses made through the management API (GROWLER_SECRETS_KEY).
TEST_SECRETS_KEY = "22LTy4sZez88TuZrpqh-WSGz8EFNeNEawifAMmIa3sU="
# Empties the catalog (warehouses, principals and roles kept): every API test starts from it. Purge
# jobs too: a purge a busy machine made fail is put off for a minute, and would otherwise stand in
# the next tests' "every purge ran" waits and counts.
CATALOG_TABLES = (
    "role_grant", "read_restriction", "bin_read_restriction", "view_definer", "maintenance_policy",
    "maintenance_lease", "maintenance_run", "scan_plan_page", "scan_plan", "catalog_function", "staged_table",
    "table_move", "catalog_entry", "namespace", "bin_grant", "bin_function", "bin_entry", "bin_namespace",
    "bin_unit", "purge_job", "change_event", "event_stream", "event_dead_letter", "event_sink_cursor",
    "audit_sink_cursor", "event_sink",
)  # fmt: skip
UNPROTECT_WAREHOUSES = "UPDATE warehouse SET protected = false WHERE protected"
TRUNCATE_CATALOG = f"TRUNCATE {', '.join(CATALOG_TABLES)}; {UNPROTECT_WAREHOUSES}"
# Which of them hold a row: one statement, a fraction of a millisecond when they are empty.
NON_EMPTY_CATALOG_TABLES = " UNION ALL ".join(f"(SELECT '{name}' FROM {name} LIMIT 1)" for name in CATALOG_TABLES)
# Rows no request writes, changed by a clock: the change feed publisher's lease, renewed every 2 s
# (app/publisher/service.py). "Nothing written" checks leave them out.
HEARTBEAT_TABLES = frozenset({"event_publisher_lease"})
# Rows every request writes, refused ones included: the audit trail (docs/audit.md). "Nothing
# written" checks leave them out too (tests/api/test_audit.py checks what they hold).
AUDIT_TABLES = frozenset({"audit_record"})
UNWATCHED_TABLES = HEARTBEAT_TABLES | AUDIT_TABLES
# Spark's and PyIceberg's ``credential`` property for that admin (client id:secret).
TEST_CREDENTIAL = f"{TEST_CLIENT_ID}:{TEST_CLIENT_SECRET}"


def auth_settings_for_tests(**overrides: object) -> AuthSettings:
    """Authentication on, Growler's own tokens, the test admin bootstrapped from these values."""
    values: dict[str, object] = dict(
        mode="oauth2",
        key_password=TEST_KEY_PASSWORD,
        bootstrap_client_id=TEST_CLIENT_ID,
        bootstrap_client_secret=TEST_CLIENT_SECRET,
    )
    values.update(overrides)
    return AuthSettings(**values)  # type: ignore[arg-type]


def auth_env_for_tests() -> dict[str, str]:
    """The same, for a server started as a process (tests/integration/conftest.py)."""
    return {
        "GROWLER_AUTH": "oauth2",
        "GROWLER_TOKEN_KEY_PASSWORD": TEST_KEY_PASSWORD,
        "GROWLER_BOOTSTRAP_CLIENT_ID": TEST_CLIENT_ID,
        "GROWLER_BOOTSTRAP_CLIENT_SECRET": TEST_CLIENT_SECRET,
    }


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--part",
        choices=("slow", "rest"),
        default=None,
        help="run one part of the suite (tests/suite_parts.py; make test runs both side by side)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--part``: keep that part's tests, deselect the other's (the whole suite without it)."""
    part = config.getoption("part")
    if part is None:
        return
    from tests.suite_parts import split

    kept, dropped = split(items, part)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# Every app this process builds (create_app reads the environment) authenticates; its test
# clients send the test admin's token (``authenticated``). Servers started as processes get
# authentication only when a test asks for it (tests/integration/conftest.py, ``server_env``).
os.environ.update(auth_env_for_tests())
TOKEN_RENEWAL_S = 1800  # well within the tokens' 3600 s
# app id -> (token, time.monotonic() when fetched); no entry: not fetched yet. (Not a zero default:
# the monotonic clock counts from boot, so on a machine up for less than TOKEN_RENEWAL_S a token
# "fetched at 0" looked fresh and every request went out with an empty one.)
_admin_tokens: dict[int, tuple[str, float]] = {}


def authenticated(app):
    """The app, its ``test_client()`` sending the test admin's bearer token with every request
    (fetched from the app itself and renewed when it gets old); ``anonymous_client()`` sends none."""
    plain = app.test_client

    def test_client(**kwargs):
        held = _admin_tokens.get(id(app))
        if held is None or time.monotonic() - held[1] > TOKEN_RENEWAL_S:
            token = fetch_token(plain())
            _admin_tokens[id(app)] = (token, time.monotonic())
        else:
            token = held[0]
        headers = {"Authorization": f"Bearer {token}", **(kwargs.pop("headers", None) or {})}
        return plain(headers=headers, **kwargs)

    app.test_client = test_client
    app.anonymous_client = plain
    return app


@dataclass
class Services:
    database_url: str
    s3_endpoint: str
    access_key: str
    secret_key: str
    postgres: object | None = None  # EmbeddedPostgres when we started it (fault tests restart it)
    s3: object | None = None
    # A superuser's URL, for tests that set up databases (the catalog's own role may not).
    admin_database_url: str | None = None


@pytest.fixture(scope="session")
def services() -> Iterator[Services]:
    from scripts.postgres import EmbeddedPostgres
    from scripts.processes import free_port
    from scripts.seaweedfs import EmbeddedS3

    external_db = os.environ.get("GROWLER_TEST_DATABASE_URL")
    external_s3 = os.environ.get("GROWLER_TEST_S3_ENDPOINT")
    root = Path(tempfile.mkdtemp(prefix="growler-test-"))
    postgres = s3 = None
    try:
        if external_db:
            database_url = external_db
            admin_database_url = os.environ.get("GROWLER_TEST_ADMIN_DATABASE_URL") or external_db
        else:
            postgres = EmbeddedPostgres(root / "postgres", free_port(), fast=True)
            postgres.start()
            database_url = postgres.url
            admin_database_url = postgres.admin_url
        if external_s3:
            endpoint = external_s3
            access_key = os.environ["GROWLER_TEST_S3_ACCESS_KEY"]
            secret_key = os.environ["GROWLER_TEST_S3_SECRET_KEY"]
        else:
            # as `make run` starts it: with its STS (the product's default credentials mode is sts)
            s3 = _start_s3(EmbeddedS3, root, free_port)
            endpoint, access_key, secret_key = s3.endpoint, TEST_ACCESS_KEY, TEST_SECRET_KEY
        yield Services(database_url, endpoint, access_key, secret_key, postgres, s3, admin_database_url)
    finally:
        if s3 is not None:
            s3.stop()
        if postgres is not None:
            from app.publisher.service import Publisher
            from storage.db import Database

            # the in-process apps' publishers stopped and their pools closed before their server;
            # their background threads' complaints about it, past the last test, are not logged
            logging.disable(logging.WARNING)
            for publisher in Publisher.running():
                publisher.stop()
            for database in Database.opened():
                database.close()
            postgres.stop()
        shutil.rmtree(root, ignore_errors=True)


def _start_s3(embedded_s3: type, root: Path, free_port: Callable[[], int]) -> Any:
    """The session's SeaweedFS on a throwaway port, with its STS. A port free when picked may be
    taken before weed binds it (make test's two sessions pick theirs at the same moment; seen in
    a full run: "Port allocation failed ... for S3"): then again on other ports, in a fresh folder."""
    for attempt in range(3):
        s3 = embedded_s3(root / f"s3-{attempt}", free_port(), TEST_ACCESS_KEY, TEST_SECRET_KEY, sts=True)
        try:
            return s3.start()
        except RuntimeError as exc:
            s3.stop()
            if "port in use" not in str(exc) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def _sts_env(services: Services) -> dict[str, str]:
    """The STS part of the environment `make run` gives Growler: the embedded SeaweedFS's role
    (external test storage: whatever GROWLER_TEST_STS_ROLE_ARN names, else none)."""
    from scripts.seaweedfs import STS_ROLE_ARN

    role = STS_ROLE_ARN if services.s3 is not None else os.environ.get("GROWLER_TEST_STS_ROLE_ARN", "")
    return {"GROWLER_STS_ROLE_ARN": role} if role else {}


@pytest.fixture(scope="session")
def settings(services: Services) -> Settings:
    from storage.objects import S3ObjectStore

    s3 = S3Settings(
        endpoint=services.s3_endpoint,
        access_key=services.access_key,
        secret_key=services.secret_key,
        region="us-east-1",
        path_style=True,
    )
    S3ObjectStore(s3).ensure_bucket(TEST_BUCKET)
    return Settings(
        database_url=services.database_url,
        warehouse="test",
        warehouse_location=f"s3://{TEST_BUCKET}/",
        s3=s3,
        validate_responses=True,
        max_page_size=1000,
        pool_timeout_s=2.0,  # the dependency-failure tests wait this long per refused request
        # The suite's default warehouse is what `make run` serves (scripts/run.py): the embedded
        # SeaweedFS with its STS, the credentials mode the product picks for it (sts: vended
        # credentials to clients asking for them, the signer to those asking to sign). The other
        # modes are tested on warehouses of their own.
        storage_credentials_mode=default_credentials_mode(_sts_env(services)),
        sts=StsSettings(role_arn=_sts_env(services).get("GROWLER_STS_ROLE_ARN", "")),
        secrets_key=TEST_SECRETS_KEY,
        # The webhook tests' receivers listen on loopback, which the product refuses by default
        # (app/rules/network_targets.py; tests/api/test_event_webhooks.py checks the default).
        webhook_allowed_networks=("127.0.0.0/8", "::1/128"),
    )


# The threads every app starts (housekeeping, the feed's publisher, the maintenance job runner,
# the auth state's poll, a start-up retried in the background), by name.
APP_LOOPS = frozenset(
    {"growler-housekeeping", "growler-events-publisher", "maintenance-jobs", "growler-auth-state", "growler-startup"}
)
_session_loops: list[Any] = []  # the owners of the session apps' loops: kept running


def app_loops() -> list[Any]:
    """The objects whose loop an app's background thread runs now (each has ``stop()``)."""
    return [
        owner
        for thread in threading.enumerate()
        if thread.name in APP_LOOPS and (owner := getattr(getattr(thread, "_target", None), "__self__", None))
    ]


def session_app(build: Callable[[], Any]) -> Any:
    """Build an app that lives for the whole session: its loops outlive every module."""
    before = {id(owner) for owner in app_loops()}
    built = build()
    _session_loops.extend(owner for owner in app_loops() if id(owner) not in before)
    return built


@pytest.fixture(scope="module", autouse=True)
def stop_apps_built_by_tests() -> Iterator[None]:
    """An app a test module built (a setting changed, a second client) stops its loops when the
    module ends, as a worker's shutdown does: left running, its housekeeping would claim the next
    modules' purges with its own settings (a purge it cannot do is put off a minute) and its polls
    would take the machine's time for the rest of the session."""
    yield
    kept = {id(owner) for owner in _session_loops}
    for owner in app_loops():
        if id(owner) not in kept:
            owner.stop()


@pytest.fixture(scope="session")
def app(settings: Settings):
    from app.edge.factory import create_app

    return session_app(lambda: authenticated(create_app(settings)))


@pytest.fixture
def client(app, clean_catalog):
    # Not used as a context manager: that would run the app's lifespan, whose shutdown closes
    # the session-wide pool after the first test.
    return app.test_client()


@pytest.fixture
def db(services: Services) -> Iterator[psycopg.Connection]:
    """A direct connection for asserting what was (not) written."""
    with psycopg.connect(services.database_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def clean_catalog(app, services: Services) -> None:
    """Every API test starts from an empty catalog (warehouses kept)."""
    truncate_catalog(services.database_url)


def truncate_catalog(database_url: str, attempts: int = 50) -> None:
    """Empty the catalog's tables: those that hold a row, deleted children first, on a connection
    kept for the session. (A TRUNCATE of all 26 tables cost some 20 ms a test - new files for each
    - and a new connection 25 ms more: a minute or two of the suite; most tests fill a few tables
    with a few rows, which a DELETE empties in a fraction of a millisecond.)

    The app's own background work (a purge or an expiry the previous test left queued,
    housekeeping's rounds, the job runners' claims) can deadlock with it; PostgreSQL then aborts
    one side whole, and the clean is simply run again - as often as it takes. A connection the
    server dropped (a test restarted it) is opened again."""
    for attempt in range(attempts):
        try:
            conn, order = _cleaning_connection(database_url)
            filled = {row[0] for row in conn.execute(NON_EMPTY_CATALOG_TABLES)}
            deletes = "".join(f"DELETE FROM {name}; " for name in order if name in filled)
            conn.execute(deletes + UNPROTECT_WAREHOUSES)  # one implicit transaction
            return
        except psycopg.errors.DeadlockDetected:
            if attempt == attempts - 1:
                raise
        except psycopg.OperationalError:
            dropped = _CLEANING_CONNECTIONS.pop(database_url, None)
            if dropped is not None:
                dropped[0].close()
            if attempt == attempts - 1:
                raise


_CLEANING_CONNECTIONS: dict[str, tuple[psycopg.Connection, list[str]]] = {}


def _cleaning_connection(database_url: str) -> tuple[psycopg.Connection, list[str]]:
    """The session's connection for cleaning, and the catalog's tables in the order a DELETE takes
    them: every table before those its foreign keys reference (``ON DELETE RESTRICT`` ones too)."""
    kept = _CLEANING_CONNECTIONS.get(database_url)
    if kept is not None and not kept[0].closed:
        return kept
    conn = psycopg.connect(database_url, autocommit=True)
    references = conn.execute(
        "SELECT conrelid::regclass::text, confrelid::regclass::text FROM pg_constraint"
        " WHERE contype = 'f' AND conrelid <> confrelid"
    ).fetchall()
    referrers: dict[str, set[str]] = {name: set() for name in CATALOG_TABLES}
    for child, parent in references:
        if child in referrers and parent in referrers:
            referrers[parent].add(child)
    order = list(graphlib.TopologicalSorter(referrers).static_order())  # referrers first
    _CLEANING_CONNECTIONS[database_url] = (conn, order)
    return conn, order


@pytest.fixture
def hard_policy(app, services: Services) -> Iterator[None]:
    """The default warehouse with the hard deletion policy (a drop removes the entry at once, its
    purge runs now: Growler before issue 35) for one test, for the tests of what a hard drop
    does (files purged at once). The product's default is soft."""

    def policy(mode: str) -> None:
        with psycopg.connect(services.database_url, autocommit=True) as conn:
            conn.execute("UPDATE warehouse SET deletion_policy = %s WHERE name = 'test'", (mode,))
        services_of(app.app).namespaces.warehouses.invalidate()

    policy("hard")
    yield
    policy("soft")


CPU_LOCK_ENV = "GROWLER_TEST_CPU_LOCK"  # set by scripts/suite.py for both sessions


@pytest.fixture
def cpu_alone() -> Iterator[None]:
    """For a test that measures throughput under a CPU-bound burst (guessers, stress): it holds a
    lock file that ``make test``'s two sessions share (scripts/suite.py), so no two such tests of
    the two sessions run at once. Without the variable (one session) it does nothing."""
    path = os.environ.get(CPU_LOCK_ENV)
    if not path:
        yield
        return
    import fcntl

    with open(path, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(held, fcntl.LOCK_UN)


@pytest.fixture
def unique() -> str:
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def auth_app(settings: Settings, app):
    """An app with authentication on (own tokens), beside ``app``; polls the auth state often."""
    from app.edge.factory import create_app

    return session_app(lambda: create_app(settings, auth_settings_for_tests(poll_s=0.1)))


def fetch_token(client, client_id: str = TEST_CLIENT_ID, secret: str = TEST_CLIENT_SECRET) -> str:
    response = client.post(
        "/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret, "scope": "catalog"},
    )
    assert response.status_code == 200, response.text
    return response.json()["access_token"]


@pytest.fixture(scope="session")
def admin_token(auth_app) -> str:
    return fetch_token(auth_app.test_client())


@pytest.fixture
def auth_client(auth_app, admin_token, clean_catalog):
    """A test client of ``auth_app`` that sends the test admin's token with every request."""
    return auth_app.test_client(headers={"Authorization": f"Bearer {admin_token}"})


@pytest.fixture(scope="session")
def token_forge(auth_app, settings):
    from tests.auth_support import TokenForge

    forge = TokenForge(settings.database_url, auth_settings_for_tests())
    yield forge
    forge.close()


@pytest.fixture
def expired_token(token_forge) -> str:
    past = int(time.time()) - 3600
    return token_forge.sign(TEST_CLIENT_ID, iat=past - 600, nbf=past - 600, exp=past)


@pytest.fixture
def foreign_token(token_forge) -> str:
    """Right claims, signed by a key that is not the catalog's."""
    return token_forge.sign(TEST_CLIENT_ID, stranger_key=True)


def warehouse_body(services: Services, name: str, location: str, **fields: Any) -> dict[str, Any]:
    """createWarehouse's body for a native warehouse on the suite's S3, with its static keys."""
    storage = {
        "endpoint": services.s3_endpoint,
        "region": "us-east-1",
        "path-style": True,
        "credentials-mode": "static",
        "access-key-id": services.access_key,
        "secret-access-key": services.secret_key,
    }
    return {"name": name, "location": location, "storage": storage, **fields}
