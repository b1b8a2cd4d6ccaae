"""A revoked grant is refused by every worker of every Growler process within a second (issue 16).

Two gunicorn servers (two workers each) on one PostgreSQL. A reader's grant is first used on
all four workers (each caches it), then revoked through the management API; from a second after the revoke
on, every request is refused, and each of the four workers is seen refusing. Which worker
answered is read from the request log (its ``pid``, by the ``X-Request-Id`` of the answer).
"""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from tests.api.tables_support import create_request
from tests.integration.conftest import Server, start_server, stop_server

REVOKE_WITHIN_S = 1.0
MAX_REQUESTS = 400


@pytest.fixture(scope="module")
def servers(settings, app, tmp_path_factory):
    started: list[Server] = []
    try:
        for label in ("one", "two"):
            started.append(start_server(settings, tmp_path_factory.mktemp(f"authz-{label}")))
        yield started
    finally:
        for server in started:
            stop_server(server)


def _pids(server: Server, request_ids: dict[str, int]) -> dict[str, int]:
    """request id -> the pid of the worker that answered it, from the server's request log."""
    found = {}
    for line in server.log().splitlines():
        if '"growler.request"' not in line:
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if doc.get("request_id") in request_ids:
            found[doc["request_id"]] = doc["pid"]
    return found


def _load(server: Server, url: str, token: str) -> httpx.Response:
    # A new connection each time: gunicorn hands it to whichever worker accepts first.
    return httpx.get(url, headers={"Authorization": f"Bearer {token}", "Connection": "close"}, timeout=10)


def test_a_revoke_reaches_every_worker_of_every_process_within_a_second(servers):
    one = servers[0]
    namespace = f"authz_{uuid.uuid4().hex[:8]}"
    prefix = f"{one.url}/v1/{one.warehouse}"
    assert httpx.post(f"{prefix}/namespaces", json={"namespace": [namespace]}).status_code == 200
    assert httpx.post(f"{prefix}/namespaces/{namespace}/tables", json=create_request("t")).status_code == 200

    # The grant is made as an operator would: the management API, with the admin's token.
    management = f"{one.url}/management/v1"
    created = httpx.post(f"{management}/principals", json={"name": f"reader-{uuid.uuid4().hex[:8]}"})
    assert created.status_code == 201, created.text
    credential = created.json()
    role = f"readers-{uuid.uuid4().hex[:8]}"
    grant = {
        "privilege": "read",
        "securable": {"type": "namespace", "warehouse": one.warehouse, "namespace": [namespace]},
    }
    assert httpx.post(f"{management}/roles", json={"name": role}).status_code == 201
    assert httpx.put(f"{management}/roles/{role}/members/{credential['client-id']}").status_code == 204
    assert httpx.post(f"{management}/roles/{role}/grants", json=grant).status_code == 201
    token = httpx.post(
        f"{one.url}/v1/oauth/tokens",
        data={
            "grant_type": "client_credentials",
            "client_id": credential["client-id"],
            "client_secret": credential["client-secret"],
            "scope": "catalog",
        },
    ).json()["access_token"]

    def sweep(expect_status: int, until: float | None = None) -> set[tuple[str, int]]:
        """Requests round the servers until every worker answered ``expect_status`` (and, with
        ``until``, until that time); returns the (server, pid) pairs seen answering it."""
        seen: set[tuple[str, int]] = set()
        answered: dict[str, dict[str, int]] = {server.url: {} for server in servers}
        for attempt in range(MAX_REQUESTS):
            server = servers[attempt % 2]
            url = f"{server.url}/v1/{server.warehouse}/namespaces/{namespace}/tables/t"
            started = time.monotonic()
            response = _load(server, url, token)
            if until is not None and started < until:
                continue  # still within the second the revoke may take
            assert response.status_code == expect_status, (response.status_code, response.text)
            answered[server.url][response.headers["X-Request-Id"]] = response.status_code
            if attempt % 20 == 19:
                for server in servers:
                    seen |= {(server.url, pid) for pid in _pids(server, answered[server.url]).values()}
                if len(seen) == 4 and (until is None or time.monotonic() > until):
                    return seen
        for server in servers:
            seen |= {(server.url, pid) for pid in _pids(server, answered[server.url]).values()}
        return seen

    assert len(sweep(200)) == 4  # every worker of both processes has the grant cached
    assert httpx.post(f"{management}/roles/{role}/grants/revoke", json=grant).status_code == 204
    revoked_at = time.monotonic()
    refusing = sweep(404, until=revoked_at + REVOKE_WITHIN_S)  # nothing left: the namespace is hidden
    assert len(refusing) == 4
