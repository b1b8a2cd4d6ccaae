"""GET /metrics on a real gunicorn with several workers (prometheus_client multiprocess mode),
the JSON request/commit log lines, and what must never appear in either: credentials.

The server here trusts no proxy (GROWLER_TRUSTED_PROXIES=""), so X-Forwarded-For is ignored.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.tables_support import create_request
from tests.conftest import TEST_BUCKET
from tests.integration.bearer import BEARER
from tests.integration.conftest import Server, start_server, stop_server
from tests.integration.log_support import json_lines

WORKERS = 2


@pytest.fixture(scope="module")
def metrics_server(settings, app, tmp_path_factory) -> Iterator[Server]:
    running = start_server(
        settings,
        tmp_path_factory.mktemp("metrics"),
        {"GROWLER_TRUSTED_PROXIES": "", "GROWLER_WORKERS": str(WORKERS)},
    )
    try:
        yield running
    finally:
        stop_server(running)


class Scrape:
    def __init__(self, server: Server) -> None:
        self.request_id = f"scrape-{uuid.uuid4().hex[:12]}"
        response = httpx.get(f"{server.url}/metrics", headers={"X-Request-Id": self.request_id}, timeout=10)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain")
        self.text = response.text
        self.samples = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(self.text)
            for sample in family.samples
        }

    def value(self, name: str, **labels: str) -> float:
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def served_by(self, server: Server) -> int:
        [line] = json_lines(server, event="request", request_id=self.request_id)
        return line["pid"]


def test_request_counters_add_up_across_workers(metrics_server):
    before = Scrape(metrics_server)
    count = before.value("growler_http_requests_total", operation="getConfig", status="200")
    histogram = before.value("growler_http_request_duration_seconds_count", operation="getConfig", status="200")

    # Fresh connections until both workers have answered some (the kernel spreads them).
    served_by: set[int] = set()
    made = 0
    while made < 30 or (len(served_by) < WORKERS and made < 400):
        request_id = f"config-{uuid.uuid4().hex[:12]}"
        assert httpx.get(f"{metrics_server.url}/v1/config", headers={"X-Request-Id": request_id}).status_code == 200
        made += 1
        if made % 10 == 0 or made >= 30:
            served_by = {line["pid"] for line in json_lines(metrics_server, event="request", operation="getConfig")}
    assert len(served_by) == WORKERS, "all requests went to one worker"

    # Whichever worker answers the scrape, it reports the sum over all workers.
    scraped_by: set[int] = set()
    for _ in range(60):
        scrape = Scrape(metrics_server)
        assert scrape.value("growler_http_requests_total", operation="getConfig", status="200") == count + made
        assert (
            scrape.value("growler_http_request_duration_seconds_count", operation="getConfig", status="200")
            == histogram + made
        )
        scraped_by.add(scrape.served_by(metrics_server))
        if len(scraped_by) == WORKERS:
            break
    assert len(scraped_by) == WORKERS, "every scrape went to the same worker"
    assert scrape.value("growler_http_requests_in_progress") >= 1  # the scrape itself


def test_catalog_metrics_move(metrics_server, clean_catalog):
    url = f"{metrics_server.url}/v1/{metrics_server.warehouse}"
    before = Scrape(metrics_server)
    with httpx.Client(timeout=30) as client:
        key = str(uuid.uuid4())
        for _ in range(2):
            response = client.post(f"{url}/namespaces", json={"namespace": ["m"]}, headers={"Idempotency-Key": key})
            assert response.status_code == 200
        assert response.headers["idempotent-replayed"] == "true"
        assert client.post(f"{url}/namespaces/m/tables", json=create_request("t")).status_code == 200
        table = f"{url}/namespaces/m/tables/t"
        uuid_ = client.get(table).json()["metadata"]["table-uuid"]
        ok = client.post(
            table,
            json={
                "requirements": [{"type": "assert-table-uuid", "uuid": uuid_}],
                "updates": [{"action": "set-properties", "updates": {"a": "1"}}],
            },
        )
        assert ok.status_code == 200
        conflict = client.post(
            table, json={"requirements": [{"type": "assert-table-uuid", "uuid": str(uuid.uuid4())}], "updates": []}
        )
        assert conflict.status_code == 409
        missing = client.post(
            f"{url}/namespaces/m/register",
            json={"name": "r", "metadata-location": f"s3://{TEST_BUCKET}/m/none/metadata/00000-x.metadata.json"},
        )
        assert missing.status_code == 400
        assert client.get(f"{url}/namespaces/nope/tables").status_code == 404
        assert client.get("/".join([metrics_server.url, "no", "such", "route"])).status_code == 404
        # pool counters are copied at most once a second per worker, after a request: touch the
        # database until a scrape shows what the pools counted (a condition, not a guessed sleep)
        deadline = time.monotonic() + 30
        while True:
            # a fresh connection each time: whichever worker accepts it flushes its pool's numbers
            assert httpx.get(f"{url}/namespaces", timeout=30).status_code == 200
            after = Scrape(metrics_server)
            pools_reported = after.value("growler_db_pool_connections", state="max") == 10 * WORKERS
            counted = after.value("growler_db_pool_events_total", event="requests") > before.value(
                "growler_db_pool_events_total", event="requests"
            )
            if (pools_reported and counted) or time.monotonic() > deadline:
                break
            time.sleep(0.1)

    def moved(name: str, **labels: str) -> float:
        return after.value(name, **labels) - before.value(name, **labels)

    assert moved("growler_idempotency_replays_total", operation="createNamespace") == 1
    assert moved("growler_http_requests_total", operation="createNamespace", status="200") == 2
    assert moved("growler_http_requests_total", operation="updateTable", status="409") == 1
    assert moved("growler_http_requests_total", operation="listTables", status="404") == 1
    assert moved("growler_http_requests_total", operation="unmatched", status="404") == 1
    assert moved("growler_commits_total", kind="table", outcome="committed") == 1
    assert moved("growler_commits_total", kind="table", outcome="conflict") == 1
    # the table's first metadata file and the commit's new one
    assert moved("growler_object_store_duration_seconds_count", operation="write") == 2
    assert moved("growler_object_store_errors_total", operation="read", error="NoSuchKey") == 1

    # the pools of both workers (10 connections at most each), summed
    assert after.value("growler_db_pool_connections", state="max") == 10 * WORKERS
    assert after.value("growler_db_pool_connections", state="size") >= WORKERS
    assert 0 <= after.value("growler_db_pool_connections", state="in_use") <= 10 * WORKERS
    assert "growler_db_pool_requests_waiting" in after.text
    assert moved("growler_db_pool_events_total", event="requests") > 0


def test_request_and_commit_log_lines(metrics_server, clean_catalog):
    url = f"{metrics_server.url}/v1/{metrics_server.warehouse}"
    with httpx.Client(timeout=30) as client:
        client.post(f"{url}/namespaces", json={"namespace": ["sales"]})
        client.post(f"{url}/namespaces", json={"namespace": ["sales", "eu"]})
        created = client.post(f"{url}/namespaces/sales%1Feu/tables", json=create_request("orders")).json()
        request_id = f"commit-{uuid.uuid4().hex[:12]}"
        response = client.post(
            f"{url}/namespaces/sales%1Feu/tables/orders",
            json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"x": "1"}}]},
            headers={"X-Request-Id": request_id},
        )
        assert response.status_code == 200

    [request] = json_lines(metrics_server, event="request", request_id=request_id)
    assert request["operation"] == "updateTable"
    assert request["warehouse"] == metrics_server.warehouse
    assert request["namespace"] == "sales.eu"
    assert request["table"] == "orders"
    assert request["status"] == 200
    assert request["method"] == "POST"
    assert request["duration_ms"] > 0
    assert request["level"] == "INFO" and request["ts"].endswith("Z")

    [commit] = json_lines(metrics_server, event="commit", request_id=request_id)
    assert commit["outcome"] == "committed"
    assert commit["table"] == "sales.eu.orders"
    assert commit["old_metadata_location"] == created["metadata-location"]
    assert commit["new_metadata_location"] == response.json()["metadata-location"]
    assert commit["retries"] == 0


def test_forwarded_for_ignored_from_untrusted_peer(metrics_server):
    request_id = f"xff-{uuid.uuid4().hex[:12]}"
    httpx.get(f"{metrics_server.url}/v1/config", headers={"X-Request-Id": request_id, "X-Forwarded-For": "203.0.113.9"})
    [line] = json_lines(metrics_server, event="request", request_id=request_id)
    assert line["client"] == "127.0.0.1"


def test_no_credentials_in_metrics_or_logs(metrics_server, settings, clean_catalog):
    url = f"{metrics_server.url}/v1/{metrics_server.warehouse}"
    token = BEARER.token(metrics_server.url)  # a real one: accepted, and never written anywhere
    wrong_secret = f"secret-{uuid.uuid4().hex}"
    headers = {"Authorization": f"Bearer {token}", "X-Iceberg-Access-Delegation": "vended-credentials"}
    with httpx.Client(timeout=30, headers=headers) as client:
        client.post(f"{url}/namespaces", json={"namespace": ["secret"]})
        client.post(f"{url}/namespaces/secret/tables", json=create_request("t"))
        loaded = client.get(f"{url}/namespaces/secret/tables/t")
        vended = loaded.json()["config"]  # temporary credentials (sts, the default), as asked
        renewed = client.get(f"{url}/namespaces/secret/tables/t/credentials").json()["storage-credentials"][0]
        secrets = [settings.s3.secret_key, token, wrong_secret]
        secrets += [
            config[key]
            for config in (vended, renewed["config"])
            for key in ("s3.secret-access-key", "s3.session-token")
        ]
        client.post(
            f"{metrics_server.url}/v1/oauth/tokens",
            data={"grant_type": "client_credentials", "client_id": "me", "client_secret": wrong_secret},
        )

    scrape = Scrape(metrics_server)
    json_lines(metrics_server, event="request", request_id=scrape.request_id)  # all lines written
    log = metrics_server.log()
    for secret in secrets:
        assert secret not in scrape.text
        assert secret not in log
    assert settings.s3.access_key not in scrape.text
