"""Real clients against a gunicorn server with authentication on (two workers).

- PyIceberg with the legacy ``credential`` property (client_secret_post) and with the
  ``auth: {type: oauth2}`` block (HTTP Basic);
- invalidation across workers: a principal deleted in the database is refused by every worker
  within about a second;
- Spark (Java REST client, ``credential=id:secret``) with tokens that expire every 10 seconds,
  committing and reading for a minute: it refreshes by token exchange and never sees a 401.
"""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from app.management.principals import PrincipalService
from storage.db import Database
from storage.principals import PrincipalRepository
from tests.conftest import TEST_CLIENT_ID, TEST_CLIENT_SECRET, auth_env_for_tests
from tests.integration.conftest import start_server, stop_server

CREDENTIAL = f"{TEST_CLIENT_ID}:{TEST_CLIENT_SECRET}"
SHORT_TTL_S = 10
# Spark commits for two token lifetimes: each token it holds expires (and is replaced) twice.
SPARK_RUN_S = 2 * SHORT_TTL_S


@pytest.fixture(scope="module")
def auth_server(settings, app, tmp_path_factory):
    running = start_server(settings, tmp_path_factory.mktemp("auth-gunicorn"), auth_env_for_tests(), bearer=False)
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def principals(settings):
    database = Database(settings.database_url, max_size=1)
    database.open()
    yield PrincipalService(PrincipalRepository(database))
    database.close()


def _token(url: str, client_id: str = TEST_CLIENT_ID, secret: str = TEST_CLIENT_SECRET) -> str:
    response = httpx.post(
        f"{url}/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret},
    )
    assert response.status_code == 200, response.text
    return response.json()["access_token"]


def test_the_server_refuses_anonymous_requests(auth_server):
    response = httpx.get(f"{auth_server.url}/v1/config")
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert httpx.get(f"{auth_server.url}/readyz").status_code == 200


@pytest.mark.parametrize("style", ["credential", "auth-block"])
def test_pyiceberg(auth_server, style):
    if style == "credential":
        options = {"credential": CREDENTIAL}
    else:
        options = {
            "auth": {
                "type": "oauth2",
                "oauth2": {
                    "client_id": TEST_CLIENT_ID,
                    "client_secret": TEST_CLIENT_SECRET,
                    "token_url": f"{auth_server.url}/v1/oauth/tokens",
                    "scope": "catalog",
                },
            }
        }
    catalog = RestCatalog("growler", uri=auth_server.url, warehouse=auth_server.warehouse, **options)
    namespace = "py_" + uuid.uuid4().hex[:8]
    catalog.create_namespace(namespace)
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    catalog.create_table((namespace, "t"), schema)
    assert catalog.load_table((namespace, "t")).schema().find_field("id")
    assert (namespace, "t") in catalog.list_tables(namespace)
    catalog.drop_table((namespace, "t"))
    catalog.drop_namespace(namespace)


def test_deletion_reaches_every_worker_within_a_second(auth_server, principals):
    credential = principals.create("w-" + uuid.uuid4().hex[:10])
    headers = {"Authorization": f"Bearer {_token(auth_server.url, credential.client_id, credential.secret)}"}
    # no keep-alive: each request may land on either worker; accepted, the token meets the 403 of a
    # principal with no grant on the warehouse (refused, it would be 401)
    assert all(httpx.get(f"{auth_server.url}/v1/config", headers=headers).status_code == 403 for _ in range(10))
    assert principals.delete(credential.client_id)
    deleted_at = time.monotonic()
    # Every worker refuses from a few poll rounds after the deletion on (each polls every 0.5 s):
    # every request sent 3 s or more after it is refused, until 20 of them were. Timed by when a
    # request was sent, not when its answer came: slow requests on a busy machine do not count,
    # only when the workers applied the deletion (a timer's poll, which a slow machine does not
    # stretch). The loop ends by itself: from 3 s on, an accepted token fails the test.
    refused_after_the_bound = 0
    while refused_after_the_bound < 20:
        sent = time.monotonic()
        status = httpx.get(f"{auth_server.url}/v1/config", headers=headers).status_code
        if sent - deleted_at >= 3:
            assert status == 401, f"the token is still accepted {sent - deleted_at:.1f} s after the deletion"
            refused_after_the_bound += 1


@pytest.fixture(scope="module")
def short_ttl_server(settings, app, tmp_path_factory):
    env = {**auth_env_for_tests(), "GROWLER_TOKEN_TTL_S": str(SHORT_TTL_S)}
    running = start_server(settings, tmp_path_factory.mktemp("short-ttl-gunicorn"), env, bearer=False)
    try:
        yield running
    finally:
        stop_server(running)


def _metric(url: str, sample: str) -> float:
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.slow
def test_spark_keeps_working_while_its_tokens_expire(short_ttl_server):
    from tests.integration.spark_support import DRIVERS

    spark, catalog = DRIVERS.catalog("3.5", short_ttl_server.url, short_ttl_server.warehouse, credential=CREDENTIAL)
    table = f"{catalog}.refresh.t"
    try:
        spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog}.refresh")
        spark.sql(f"CREATE TABLE {table} (id bigint) USING iceberg")
        start, commits = time.monotonic(), 0
        # for two token lifetimes, and at least three commits however long each takes on a slow machine
        while time.monotonic() - start < SPARK_RUN_S or commits < 3:
            commits += 1
            spark.sql(f"INSERT INTO {table} VALUES ({commits})")
            assert spark.sql(f"SELECT count(*) AS n FROM {table}").collect()[0]["n"] == commits
        assert commits >= 3
        spark.sql(f"DROP TABLE {table} PURGE")
    except Exception:
        print(spark.log())
        raise
    url = short_ttl_server.url
    refreshed = _metric(url, 'growler_token_requests_total{grant="token_exchange",outcome="issued"}')
    fetched = _metric(url, 'growler_token_requests_total{grant="client_credentials",outcome="issued"}')
    assert refreshed + fetched >= SPARK_RUN_S // SHORT_TTL_S  # a new token at least every TTL
    assert _metric(url, 'growler_auth_failures_total{reason="expired"}') == 0
