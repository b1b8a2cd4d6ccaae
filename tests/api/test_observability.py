"""Metrics and JSON request/commit logs in one process (no PROMETHEUS_MULTIPROC_DIR): the
operationId and path parameters come from connexion's routing, errors are counted too.
The multi-worker behaviour is tested against gunicorn in tests/integration/test_metrics.py.
"""

from __future__ import annotations

import json

from prometheus_client import REGISTRY

from app.ground import metrics
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url


def sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def log_lines(err: str, **match) -> list[dict]:
    docs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    return [doc for doc in docs if all(doc.get(k) == v for k, v in match.items())]


def test_single_process_mode():
    assert not metrics.MULTIPROCESS


def test_requests_are_counted_by_operation_and_status(client):
    def count(operation: str, status: str) -> float:
        return sample("growler_http_requests_total", operation=operation, status=status)

    before = {
        key: count(*key)
        for key in [
            ("getConfig", "200"),
            ("loadNamespaceMetadata", "404"),
            ("unmatched", "404"),
            ("createNamespace", "400"),
            ("healthz", "200"),
        ]
    }
    assert client.get("/v1/config").status_code == 200
    assert client.get(f"{PREFIX}/namespaces/missing").status_code == 404
    assert client.get("/v2/nothing/here").status_code == 404
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": "not-a-list"}).status_code == 400
    assert client.get("/healthz").status_code == 200
    for key, value in before.items():
        assert count(*key) == value + 1, key
    assert sample("growler_http_request_duration_seconds_count", operation="getConfig", status="200") >= 1


def test_metrics_endpoint(client):
    client.get("/v1/config")
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=")
    text = response.text
    assert 'growler_http_requests_total{operation="getConfig",status="200"}' in text
    assert 'growler_db_pool_connections{state="max"} 10.0' in text
    assert "growler_db_pool_requests_waiting" in text


def test_request_and_commit_log_lines(client, capsys):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    created = client.post(tables_url(), json=create_request("logged")).json()
    capsys.readouterr()
    response = client.post(
        table_url("logged"),
        json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
        headers={"X-Request-Id": "observed-1"},
    )
    assert response.status_code == 200
    err = capsys.readouterr().err
    token = client.headers["authorization"].removeprefix("Bearer ")
    assert token not in err

    [request] = log_lines(err, event="request", request_id="observed-1")
    assert {k: request[k] for k in ("operation", "warehouse", "namespace", "table", "status", "method")} == {
        "operation": "updateTable",
        "warehouse": "test",
        "namespace": "db",
        "table": "logged",
        "status": 200,
        "method": "POST",
    }
    [commit] = log_lines(err, event="commit", request_id="observed-1")
    assert commit["old_metadata_location"] == created["metadata-location"]
    assert commit["new_metadata_location"] == response.json()["metadata-location"]
    assert (commit["outcome"], commit["retries"]) == ("committed", 0)
    assert (commit["table"], commit["kind"], commit["warehouse"]) == ("db.logged", "table", "test")


def test_failed_commit_is_counted_and_logged(client, capsys):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("stale"))
    before = sample("growler_commits_total", kind="table", outcome="conflict")
    capsys.readouterr()
    response = client.post(
        table_url("stale"),
        json={"requirements": [{"type": "assert-current-schema-id", "current-schema-id": 7}], "updates": []},
        headers={"X-Request-Id": "observed-2"},
    )
    assert response.status_code == 409
    assert sample("growler_commits_total", kind="table", outcome="conflict") == before + 1
    [commit] = log_lines(capsys.readouterr().err, event="commit", request_id="observed-2")
    assert (commit["outcome"], commit["error"], commit["level"]) == ("conflict", "CommitFailedException", "WARNING")
