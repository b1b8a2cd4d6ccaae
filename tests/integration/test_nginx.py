"""Growler behind a real nginx running deploy/nginx.conf: the catalog works through it unchanged.

Namespace and table operations over plain HTTP and a PyIceberg round trip (data files written
and read back) go through nginx; what nginx itself adds is checked too: the body limit matching
GROWLER_MAX_BODY_BYTES with an Iceberg error body, X-Request-Id and X-Forwarded-For reaching
Growler's request log, gzip for JSON, and /metrics kept private.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.api.tables_support import create_request
from tests.conftest import TEST_CREDENTIAL
from tests.integration.bearer import BEARER
from tests.integration.log_support import json_lines
from tests.integration.nginx_support import Nginx, start_nginx, stop_nginx

MAX_BODY = 8 * 1024 * 1024  # GROWLER_MAX_BODY_BYTES default = client_max_body_size 8m


@pytest.fixture(scope="module")
def nginx(server, tmp_path_factory) -> Iterator[Nginx]:
    proxy = start_nginx(server.url.removeprefix("http://"), tmp_path_factory.mktemp("nginx"))
    BEARER.register(proxy.url)
    try:
        yield proxy
    finally:
        stop_nginx(proxy)


@pytest.fixture
def http(nginx, clean_catalog) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=nginx.url, timeout=30) as client:
        yield client


def request_log(server, request_id: str) -> list[dict]:
    return json_lines(server, event="request", request_id=request_id)


def test_namespace_and_table_operations(http, server):
    prefix = f"/v1/{server.warehouse}"
    assert http.get("/v1/config").json()["overrides"]["prefix"] == server.warehouse

    assert http.post(f"{prefix}/namespaces", json={"namespace": ["web"], "properties": {"k": "v"}}).status_code == 200
    # a nested namespace, addressed with the percent-encoded unit separator: nginx must pass
    # the URI through exactly as received
    assert http.post(f"{prefix}/namespaces", json={"namespace": ["web", "eu"]}).status_code == 200
    assert http.get(f"{prefix}/namespaces/web%1Feu").json()["namespace"] == ["web", "eu"]
    assert http.get(f"{prefix}/namespaces", params={"parent": "web"}).json()["namespaces"] == [["web", "eu"]]
    assert http.head(f"{prefix}/namespaces/web").status_code == 204
    update = http.post(f"{prefix}/namespaces/web/properties", json={"updates": {"a": "1"}, "removals": ["k"]})
    assert update.json()["updated"] == ["a"]

    created = http.post(f"{prefix}/namespaces/web%1Feu/tables", json=create_request("clicks"))
    assert created.status_code == 200, created.text
    loaded = http.get(f"{prefix}/namespaces/web%1Feu/tables/clicks")
    assert loaded.status_code == 200
    assert loaded.headers["etag"]
    assert (
        http.get(
            f"{prefix}/namespaces/web%1Feu/tables/clicks", headers={"If-None-Match": loaded.headers["etag"]}
        ).status_code
        == 304
    )

    commit = http.post(
        f"{prefix}/namespaces/web%1Feu/tables/clicks",
        json={
            "requirements": [{"type": "assert-table-uuid", "uuid": loaded.json()["metadata"]["table-uuid"]}],
            "updates": [{"action": "set-properties", "updates": {"owner": "nginx-test"}}],
        },
    )
    assert commit.status_code == 200, commit.text
    assert commit.json()["metadata"]["properties"]["owner"] == "nginx-test"
    conflict = http.post(
        f"{prefix}/namespaces/web%1Feu/tables/clicks",
        json={"requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}], "updates": []},
    )
    assert conflict.status_code == 409
    assert conflict.json()["error"]["type"] == "CommitFailedException"

    renamed = http.post(
        f"{prefix}/tables/rename",
        json={
            "source": {"namespace": ["web", "eu"], "name": "clicks"},
            "destination": {"namespace": ["web"], "name": "clicks"},
        },
    )
    assert renamed.status_code == 204, renamed.text
    assert http.get(f"{prefix}/namespaces/web/tables").json()["identifiers"] == [
        {"namespace": ["web"], "name": "clicks"}
    ]
    assert http.delete(f"{prefix}/namespaces/web/tables/clicks").status_code == 204
    assert http.get(f"{prefix}/namespaces/web/tables/clicks").status_code == 404
    assert http.delete(f"{prefix}/namespaces/web%1Feu").status_code == 204
    assert http.delete(f"{prefix}/namespaces/web").status_code == 204
    # unprefixed routes (default warehouse) work through nginx too
    assert http.get("/v1/namespaces").json()["namespaces"] == []


def test_pyiceberg_round_trip(nginx, server, clean_catalog):
    catalog = RestCatalog("growler", uri=nginx.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)
    catalog.create_namespace("lake")
    schema = Schema(NestedField(1, "id", LongType(), required=False), NestedField(2, "name", StringType()))
    table = catalog.create_table(("lake", "people"), schema=schema)
    data = pa.Table.from_pylist(
        [{"id": i, "name": f"n{i}"} for i in range(100)],
        schema=pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())]),
    )
    table.append(data)
    table.append(data.slice(0, 10))

    reloaded = RestCatalog("growler", uri=nginx.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL).load_table(
        ("lake", "people")
    )
    assert len(reloaded.history()) == 2
    result = reloaded.scan().to_arrow()
    assert result.num_rows == 110
    assert sorted(result.column("id").to_pylist()) == sorted(list(range(100)) + list(range(10)))

    with reloaded.update_schema() as update:
        update.add_column("email", StringType())
    assert "email" in catalog.load_table(("lake", "people")).schema().column_names
    catalog.drop_table(("lake", "people"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table(("lake", "people"))


def test_body_limit_matches_growler(http, server):
    prefix = f"/v1/{server.warehouse}/namespaces"
    head = b'{"namespace": ["big"], "properties": {"k": "'
    tail = b'"}}'
    fits = head + b"x" * (MAX_BODY - len(head) - len(tail)) + tail
    assert len(fits) == MAX_BODY
    response = http.post(prefix, content=fits, headers={"content-type": "application/json"})
    assert response.status_code == 200, response.text[:300]  # nginx's limit is not below Growler's

    too_big = head + b"y" * (MAX_BODY + 1 - len(head) - len(tail)) + tail
    response = http.post(prefix, content=too_big, headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert response.json()["error"] == {
        "message": "Request body too large",
        "type": "BadRequestException",
        "code": 413,
    }
    assert http.head(f"{prefix}/big").status_code == 204


def test_request_id_and_forwarded_for_reach_growler(http, server, nginx):
    given = f"nginx-{uuid.uuid4().hex[:12]}"
    response = http.get("/v1/config", headers={"X-Request-Id": given, "X-Forwarded-For": "203.0.113.9"})
    assert response.headers["x-request-id"] == given
    [line] = request_log(server, given)
    assert line["operation"] == "getConfig"
    # nginx connects from loopback (trusted by default), and the test client is on loopback
    # too, so the left-most address is the client
    assert line["client"] == "203.0.113.9"
    assert wait_for_log_line(nginx, given)

    # without an id, nginx makes one up and Growler uses it
    response = http.get("/v1/config")
    generated = response.headers["x-request-id"]
    assert len(generated) == 32
    assert request_log(server, generated)
    assert wait_for_log_line(nginx, f'"request_id":"{generated}"')


def test_gzip_for_json(http, server):
    prefix = f"/v1/{server.warehouse}/namespaces"
    for i in range(60):
        http.post(prefix, json={"namespace": [f"namespace-number-{i:03d}"]})
    response = http.get(prefix, headers={"Accept-Encoding": "gzip"})
    assert response.status_code == 200
    assert response.headers["content-encoding"] == "gzip"
    assert len(response.json()["namespaces"]) == 60  # httpx decompressed it


def test_metrics_are_not_exposed(http, server):
    assert http.get("/metrics").status_code == 404
    assert http.get("/%6Detrics").status_code == 404
    assert httpx.get(f"{server.url}/metrics").status_code == 200


def wait_for_log_line(nginx, text: str, timeout_s: float = 5.0) -> bool:
    """nginx writes the access-log line after the response went out: give it a moment."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if text in nginx.access_log():
            return True
        time.sleep(0.05)
    return text in nginx.access_log()
