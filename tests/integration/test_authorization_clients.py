"""Real clients refused by authorization (issue 16): what Spark and PyIceberg users see.

Everything is set up the way an operator would, over HTTP with the admin's token (the session's
gunicorn ``server`` authenticates, and the tests' httpx calls carry the admin's bearer): a
namespace and a table holding two rows, two principals (their secrets shown once), a role with
``read`` on the namespace, a role with ``write`` on it, and the memberships. Then each principal
uses a real client with its own ``id:secret`` credential:

- the reader queries the table, and its ``INSERT`` (Spark, both lines, one more catalog in the
  shared session) or ``append`` (PyIceberg) fails before anything is committed: on the defaults
  its vended credentials are read-only (an STS session policy without writes), so the storage
  itself refuses the data file (``AccessDenied``), and the table's snapshot list is unchanged
  (through remote signing the signer refuses the write instead: tests/api/test_authorization.py);
- the writer does both, and its commit adds exactly one snapshot.

Each test builds its own namespace, principals and roles (other tests truncate grants and
namespaces between tests), and reads the snapshot list from Growler's loadTable as the admin.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from tests.conftest import TEST_CREDENTIAL
from tests.integration.conftest import Server
from tests.integration.spark_support import CATALOG, SparkError, add_catalog

TABLE = "events"


@dataclass
class Setup:
    """A namespace with one table, and a reader's and a writer's ``id:secret`` credentials."""

    namespace: str
    reader: str
    writer: str


def _management(server: Server, method: str, path: str, expect: int, json: dict | None = None) -> httpx.Response:
    response = httpx.request(method, f"{server.url}/management/v1{path}", json=json, timeout=30)
    assert response.status_code == expect, (method, path, response.status_code, response.text)
    return response


def _principal_with_role(server: Server, privilege: str, namespace: str) -> str:
    """A new principal holding ``privilege`` on ``namespace`` through a new role; its credential."""
    suffix = uuid.uuid4().hex[:8]
    created = _management(server, "POST", "/principals", 201, {"name": f"{privilege}-{suffix}"}).json()
    role = f"{privilege}ers-{suffix}"
    _management(server, "POST", "/roles", 201, {"name": role})
    securable = {"type": "namespace", "warehouse": server.warehouse, "namespace": [namespace]}
    _management(server, "POST", f"/roles/{role}/grants", 201, {"privilege": privilege, "securable": securable})
    _management(server, "PUT", f"/roles/{role}/members/{created['client-id']}", 204)
    return f"{created['client-id']}:{created['client-secret']}"


def _setup(server: Server, namespace: str) -> Setup:
    return Setup(
        namespace,
        reader=_principal_with_role(server, "read", namespace),
        writer=_principal_with_role(server, "write", namespace),
    )


def _snapshot_ids(server: Server, namespace: str) -> list[int]:
    """The table's snapshots, from Growler's loadTable as the admin (no client cache involved)."""
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{namespace}/tables/{TABLE}"
    response = httpx.get(url, timeout=30)
    assert response.status_code == 200, response.text
    return [snapshot["snapshot-id"] for snapshot in response.json()["metadata"].get("snapshots", [])]


# ------------------------------------------------------------------------------------------
# Spark (3.5 and 4.1: the session-wide drivers, one more catalog per principal)
# ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_spark_reader_queries_and_is_refused_an_insert_writer_does_both(spark, server):
    namespace = f"authz_spark_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE NAMESPACE {CATALOG}.{namespace}")
    spark.sql(f"CREATE TABLE {CATALOG}.{namespace}.{TABLE} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{namespace}.{TABLE} VALUES (1), (2)")
    setup = _setup(server, namespace)
    uri = spark.conf.get(f"spark.sql.catalog.{CATALOG}.uri")
    suffix = uuid.uuid4().hex[:8]
    reader = add_catalog(spark, f"reader_{suffix}", uri, server.warehouse, credential=setup.reader)
    writer = add_catalog(spark, f"writer_{suffix}", uri, server.warehouse, credential=setup.writer)
    before = _snapshot_ids(server, namespace)
    assert len(before) == 1

    query = f"SELECT id FROM {{}}.{namespace}.{TABLE} ORDER BY id"
    assert [tuple(row) for row in spark.sql(query.format(reader)).collect()] == [(1,), (2,)]
    with pytest.raises(SparkError) as refused:
        spark.sql(f"INSERT INTO {reader}.{namespace}.{TABLE} VALUES (3)")
    assert "Access Denied" in str(refused.value)  # the storage refused the read-only credentials' write
    assert _snapshot_ids(server, namespace) == before  # nothing committed
    assert [tuple(row) for row in spark.sql(query.format(reader)).collect()] == [(1,), (2,)]

    assert [tuple(row) for row in spark.sql(query.format(writer)).collect()] == [(1,), (2,)]
    spark.sql(f"INSERT INTO {writer}.{namespace}.{TABLE} VALUES (3)")
    after = _snapshot_ids(server, namespace)
    assert after[:-1] == before and len(after) == 2
    assert [tuple(row) for row in spark.sql(query.format(writer)).collect()] == [(1,), (2,), (3,)]


# ------------------------------------------------------------------------------------------
# PyIceberg
# ------------------------------------------------------------------------------------------


def _catalog(server: Server, credential: str) -> RestCatalog:
    return RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=credential)


def test_pyiceberg_reader_scans_and_is_refused_an_append_writer_does_both(server):
    namespace = f"authz_py_{uuid.uuid4().hex[:8]}"
    admin = _catalog(server, TEST_CREDENTIAL)
    admin.create_namespace(namespace)
    schema = Schema(NestedField(1, "id", LongType(), required=False))
    admin.create_table((namespace, TABLE), schema).append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    setup = _setup(server, namespace)
    before = _snapshot_ids(server, namespace)
    assert len(before) == 1

    def ids(catalog: RestCatalog) -> list[int]:
        return sorted(catalog.load_table((namespace, TABLE)).scan().to_arrow()["id"].to_pylist())

    reader = _catalog(server, setup.reader)
    assert ids(reader) == [1, 2]
    table = reader.load_table((namespace, TABLE))
    with pytest.raises(OSError, match="ACCESS_DENIED"):  # read-only credentials: the storage refuses
        table.append(pa.table({"id": pa.array([3], pa.int64())}))
    assert _snapshot_ids(server, namespace) == before  # nothing committed
    assert ids(reader) == [1, 2]

    writer = _catalog(server, setup.writer)
    assert ids(writer) == [1, 2]
    writer.load_table((namespace, TABLE)).append(pa.table({"id": pa.array([3], pa.int64())}))
    after = _snapshot_ids(server, namespace)
    assert after[:-1] == before and len(after) == 2
    assert ids(reader) == [1, 2, 3]  # and the reader sees the writer's commit
