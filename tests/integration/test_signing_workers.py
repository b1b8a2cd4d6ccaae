"""Remote signing follows the table's current row on every worker of every process, at once.

Two gunicorn servers (two workers each) on one PostgreSQL. Every worker of the first signs for a
table (each would have cached what it checked), then the table is dropped and created again, or
renamed, through the second server. From the moment that answer is acknowledged, every signature
the first server's workers are asked for under the old location is refused, the very first one
included, and the same workers sign for the new location. Which worker answered is read from the
request log (its ``pid``, by the ``X-Request-Id`` of the answer).
"""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import httpx
import pytest

from app.ground.locations import Location
from tests.api.tables_support import create_request
from tests.integration.conftest import Server, start_server, stop_server

MAX_REQUESTS = 200


@pytest.fixture(scope="module")
def other_server(settings, app, tmp_path_factory):
    started = start_server(settings, tmp_path_factory.mktemp("signing-other"))
    try:
        yield started
    finally:
        stop_server(started)


def _pid(server: Server, request_id: str) -> int | None:
    for line in server.log().splitlines():
        if request_id in line and '"growler.request"' in line:
            return json.loads(line)["pid"]
    return None


def _sign(server: Server, namespace: str, table: str, method: str, location: str, settings) -> httpx.Response:
    parsed = Location.parse(location)
    body = {
        "method": method,
        "uri": f"{settings.s3.endpoint}/{parsed.bucket}/{quote(parsed.key)}",
        "region": "us-east-1",
        "headers": {},
    }
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{namespace}/tables/{table}/sign"
    # a new connection each time: gunicorn hands it to whichever worker accepts first
    return httpx.post(url, json=body, headers={"Connection": "close"}, timeout=10)


def _on_every_worker(server: Server, ask, expected: int) -> set[int]:
    """Ask until both workers answered; every answer must be ``expected``. The pids seen."""
    seen: set[int] = set()
    for _ in range(MAX_REQUESTS):
        response = ask()
        assert response.status_code == expected, response.text
        pid = _pid(server, response.headers["X-Request-Id"])
        if pid is not None:
            seen.add(pid)
        if len(seen) == 2:
            return seen
    raise AssertionError(f"only workers {seen} answered in {MAX_REQUESTS} requests")


def _create(server: Server, namespace: str, name: str) -> str:
    created = httpx.post(
        f"{server.url}/v1/{server.warehouse}/namespaces/{namespace}/tables", json=create_request(name), timeout=10
    )
    assert created.status_code == 200, created.text
    return created.json()["metadata"]["location"]


@pytest.mark.parametrize("change", ["drop-and-create", "rename"])
def test_no_worker_signs_for_an_old_location(server, other_server, settings, change):
    namespace = f"signers_{uuid.uuid4().hex[:8]}"
    prefix = f"{server.url}/v1/{server.warehouse}"
    assert httpx.post(f"{prefix}/namespaces", json={"namespace": [namespace]}).status_code == 200
    old = _create(server, namespace, "t")
    old_file = f"{old}/data/part-0.parquet"
    _on_every_worker(server, lambda: _sign(server, namespace, "t", "PUT", old_file, settings), 200)

    elsewhere = f"{other_server.url}/v1/{other_server.warehouse}"
    if change == "rename":
        body = {
            "source": {"namespace": [namespace], "name": "t"},
            "destination": {"namespace": [namespace], "name": "moved"},
        }
        assert httpx.post(f"{elsewhere}/tables/rename", json=body).status_code == 204
        new_name, new = "moved", old  # the table keeps its location under its new name
    else:
        assert httpx.delete(f"{elsewhere}/namespaces/{namespace}/tables/t").status_code == 204
        new_name, new = "t", _create(other_server, namespace, "t")
        assert new != old

    # from the first request on: the old name (or the old location) is refused by both workers
    _on_every_worker(server, lambda: _sign(server, namespace, "t", "PUT", old_file, settings), 403)
    _on_every_worker(server, lambda: _sign(server, namespace, new_name, "PUT", f"{new}/data/x", settings), 200)


def test_a_mark_set_through_another_server_stops_every_workers_deletes_at_once(server, other_server, settings):
    """Protection (docs/recycle-bin.md): the mark is read with the table's row for each request,
    so the first DELETE every worker is asked to sign after the mark's answer is refused - no
    worker serves an "unprotected" it remembered - and signed again once the mark is removed."""
    namespace = f"marked_{uuid.uuid4().hex[:8]}"
    prefix = f"{server.url}/v1/{server.warehouse}"
    assert httpx.post(f"{prefix}/namespaces", json={"namespace": [namespace]}).status_code == 200
    location = _create(server, namespace, "t")
    data_file = f"{location}/data/part-0.parquet"
    _on_every_worker(server, lambda: _sign(server, namespace, "t", "DELETE", data_file, settings), 200)

    marks = f"{other_server.url}/management/v1/warehouses/{other_server.warehouse}/protections"
    mark = {"type": "namespace", "namespace": [namespace]}
    assert httpx.post(marks, json=mark).status_code == 204
    _on_every_worker(server, lambda: _sign(server, namespace, "t", "DELETE", data_file, settings), 403)
    _on_every_worker(server, lambda: _sign(server, namespace, "t", "PUT", data_file, settings), 200)
    assert httpx.post(f"{marks}/remove", json=mark).status_code == 204
    _on_every_worker(server, lambda: _sign(server, namespace, "t", "DELETE", data_file, settings), 200)
