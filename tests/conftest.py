"""Shared fixtures: real PostgreSQL and S3 (embedded, on throwaway ports), the app, a client.

Set ``GROWLER_TEST_DATABASE_URL`` (with ``GROWLER_TEST_ADMIN_DATABASE_URL``, a superuser, for the
tests that create databases; and ``GROWLER_TEST_S3_ENDPOINT`` with
``GROWLER_TEST_S3_ACCESS_KEY``/``GROWLER_TEST_S3_SECRET_KEY``) to run against external
services instead; the database must be empty or Growler's own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from app.ground.settings import S3Settings, Settings

TEST_ACCESS_KEY = "growler-test"
TEST_SECRET_KEY = "growler-test-secret"
TEST_BUCKET = "growler-test-warehouse"


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
    from scripts.services import EmbeddedPostgres, EmbeddedS3, free_port

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
            s3 = EmbeddedS3(root / "s3", free_port(), TEST_ACCESS_KEY, TEST_SECRET_KEY)
            s3.start()
            endpoint, access_key, secret_key = s3.endpoint, TEST_ACCESS_KEY, TEST_SECRET_KEY
        yield Services(database_url, endpoint, access_key, secret_key, postgres, s3, admin_database_url)
    finally:
        if s3 is not None:
            s3.stop()
        if postgres is not None:
            postgres.stop()
        shutil.rmtree(root, ignore_errors=True)


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
    )


@pytest.fixture(scope="session")
def app(settings: Settings):
    from app.edge.factory import create_app

    return create_app(settings)


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
    with psycopg.connect(services.database_url, autocommit=True) as conn:
        conn.execute("TRUNCATE scan_plan_page, scan_plan, catalog_function, catalog_entry, namespace")


@pytest.fixture
def unique() -> str:
    return "t" + uuid.uuid4().hex[:10]
