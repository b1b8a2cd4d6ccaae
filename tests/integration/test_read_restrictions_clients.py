"""Read restrictions (issue 51) as real clients meet them, against the session's gunicorn server.

A principal restricted on a table (region eu only, salary hidden) that is not a trusted engine:
PyIceberg's ``load_table`` and Spark's query fail with the 403's message (what to do next in it),
and nothing of the table's storage is handed out. Marked as a trusted engine, the same principal
loads the table and its loadTable carries the spec's ``read-restrictions`` - today's PyIceberg and
Spark do not apply that field themselves (docs/read-restrictions.md: trust only an engine that
does), so the test checks that the clients keep working with it, not that they filter.
"""

from __future__ import annotations

import uuid

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import ForbiddenError
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from tests.conftest import TEST_CREDENTIAL
from tests.integration.conftest import Server
from tests.integration.proc_support import wait_for
from tests.integration.spark_support import CATALOG, SparkError, add_catalog

TABLE = "people"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "salary", DoubleType(), required=False),
)


def _management(server: Server, method: str, path: str, expect: int, json: dict | None = None) -> httpx.Response:
    response = httpx.request(method, f"{server.url}/management/v1{path}", json=json, timeout=30)
    assert response.status_code == expect, (method, path, response.status_code, response.text)
    return response


def _restricted_reader(server: Server, namespace: str) -> tuple[str, str]:
    """A principal with read on the namespace, restricted on the table; (its name, its credential)."""
    suffix = uuid.uuid4().hex[:8]
    created = _management(server, "POST", "/principals", 201, {"name": f"analyst-{suffix}"}).json()
    name, role = created["client-id"], f"analysts-{suffix}"
    _management(server, "POST", "/roles", 201, {"name": role})
    securable = {"type": "namespace", "warehouse": server.warehouse, "namespace": [namespace]}
    _management(server, "POST", f"/roles/{role}/grants", 201, {"privilege": "read", "securable": securable})
    _management(server, "PUT", f"/roles/{role}/members/{name}", 204)
    restriction = {
        "securable": {"type": "table", "namespace": [namespace], "name": TABLE},
        "grantee": {"type": "role", "name": role},
        "row-filter": {"type": "eq", "term": "region", "value": "eu"},
        "columns": [{"name": "salary", "action": "hide"}],
    }
    _management(server, "POST", f"/warehouses/{server.warehouse}/read-restrictions", 200, restriction)
    return name, f"{name}:{created['client-secret']}"


def _catalog(server: Server, credential: str) -> RestCatalog:
    return RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=credential)


def _people(server: Server) -> str:
    namespace = f"rr_{uuid.uuid4().hex[:8]}"
    admin = _catalog(server, TEST_CREDENTIAL)
    admin.create_namespace(namespace)
    rows = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "region": pa.array(["eu", "us"]),
            "salary": pa.array([10.0, 20.0]),
        }
    )
    admin.create_table((namespace, TABLE), SCHEMA).append(rows)
    return namespace


def test_pyiceberg_untrusted_is_refused_with_what_to_do_trusted_loads_with_the_restrictions(server):
    namespace = _people(server)
    name, credential = _restricted_reader(server, namespace)
    reader = _catalog(server, credential)
    with pytest.raises(ForbiddenError, match="not a trusted engine") as refused:
        reader.load_table((namespace, TABLE))
    assert "trusted-engine" in str(refused.value)  # the operation that fixes it
    # its namespace is still listed: the restriction is on reading the table, not on seeing it
    assert (namespace, TABLE) in reader.list_tables(namespace)

    _management(server, "PUT", f"/principals/{name}/trusted-engine", 200, {"trusted-engine": True})
    table = _wait_loadable(reader, (namespace, TABLE))
    assert [field.name for field in table.schema().fields] == ["id", "region", "salary"]
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{namespace}/tables/{TABLE}"
    headers = {"Authorization": f"Bearer {_token(server, credential)}"}

    def trusted_answer() -> dict | None:  # each worker follows the trust at its own poll: any may answer
        response = httpx.get(url, headers=headers, timeout=30)
        return response.json() if response.status_code == 200 else None

    answer = wait_for(trusted_answer, timeout_s=10, what="every worker's loadTable for the trusted engine")
    assert answer["read-restrictions"] == {
        "required-row-filter": {"type": "eq", "term": "region", "value": "eu"},
        "required-column-projections": [{"action": "replace-with-null", "field-id": 3}],
    }


@pytest.mark.slow
def test_spark_untrusted_restricted_query_fails_with_the_message(spark, server):
    namespace = _people(server)
    _, credential = _restricted_reader(server, namespace)
    uri = spark.conf.get(f"spark.sql.catalog.{CATALOG}.uri")
    reader = add_catalog(spark, f"restricted_{uuid.uuid4().hex[:8]}", uri, server.warehouse, credential=credential)
    with pytest.raises(SparkError) as refused:
        spark.sql(f"SELECT * FROM {reader}.{namespace}.{TABLE}").collect()
    assert "not a trusted engine" in str(refused.value)


def _token(server: Server, credential: str) -> str:
    client_id, secret = credential.split(":", 1)
    form = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret, "scope": "catalog"}
    response = httpx.post(f"{server.url}/v1/oauth/tokens", data=form, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["access_token"]


def _wait_loadable(catalog: RestCatalog, identifier: tuple[str, str]) -> Table:
    """Trust reaches every worker within the authorization poll: wait for it, on the condition."""

    def loaded() -> Table | None:
        try:
            return catalog.load_table(identifier)
        except ForbiddenError:
            return None

    return wait_for(loaded, timeout_s=10, what="the trusted engine's loadTable")
