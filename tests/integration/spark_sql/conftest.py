"""The Spark SQL scenarios' fixtures: a fresh namespace per test, the static-keys warehouse, and
``access``, each way a Spark job reaches storage (``objects``, the bucket: tests/integration/conftest.py)."""

from __future__ import annotations

import re

import httpx
import pytest

from storage.objects import S3ObjectStore
from tests.integration.spark_sql.spark_sql_support import STATIC_WAREHOUSE, Access
from tests.integration.spark_support import CATALOG, add_catalog


@pytest.fixture
def ns(spark, request) -> str:
    """A fresh namespace for this test, created through Spark."""
    name = "spark_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower()).strip("_")
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {CATALOG}.{name}")
    return name


@pytest.fixture(scope="session")
def static_warehouse(server, settings) -> str:
    """A warehouse with keys of its own in ``static`` mode (the development opt-in: clients get its keys)."""
    bucket = "growler-static-keys"
    S3ObjectStore(settings.s3).ensure_bucket(bucket)
    storage = {
        "endpoint": settings.s3.endpoint,
        "credentials-mode": "static",
        "access-key-id": settings.s3.access_key,
        "secret-access-key": settings.s3.secret_key,
    }
    body = {"name": STATIC_WAREHOUSE, "location": f"s3://{bucket}/wh/", "storage": storage}
    response = httpx.post(f"{server.url}/management/v1/warehouses", json=body, timeout=30)
    assert response.status_code in (201, 409), response.text  # 409: made for the other Spark line
    return STATIC_WAREHOUSE


@pytest.fixture(params=["sts", "signing", "static"])
def access(request, spark, server, ns) -> Access:
    """Each way a Spark job reaches storage: temporary credentials (the default: ``growler`` asks for
    vended credentials, the default warehouse's mode is sts), remote signing (the same warehouse,
    the client asks to sign), and a static-keys warehouse. The scenarios that reach storage
    differently (CTAS/RTAS, MERGE, the procedures, purge) take it; the integration conftest keeps
    the two other modes to Spark 3.5."""
    uri = spark.conf.get(f"spark.sql.catalog.{CATALOG}.uri")
    if request.param == "sts":
        return Access(CATALOG, server.warehouse)
    if request.param == "signing":
        # as docs/security.md advises with signing: Growler purges a dropped table's files (a table that
        # is gone cannot be signed for, so Spark's own purge after the drop would be refused)
        options = {"header.X-Iceberg-Access-Delegation": "remote-signing", "rest-catalog-purge": "true"}
        catalog = add_catalog(spark, f"{CATALOG}_signing", uri, server.warehouse, **options)
        return Access(catalog, server.warehouse, bulk_deletes=False, catalog_purges=True)
    warehouse = request.getfixturevalue("static_warehouse")
    catalog = add_catalog(spark, f"{CATALOG}_static", uri, warehouse)
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.{ns}")
    return Access(catalog, warehouse)
