"""docs/federation.md's, docs/audit.md's and docs/read-restrictions.md's commands, run as written
(``readme_snippet``: only the URL and the credential file pointed at the server the test starts),
against a server of the suite: the federation and read-restriction examples on the defaults, the
audit query on a server with the trail on, as the page says to run it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx
import psycopg
import pytest

from tests.conftest import TEST_CREDENTIAL
from tests.integration.conftest import Server, start_server, stop_server
from tests.integration.test_example import json_values, readme_snippet, run_shell_snippet


def as_make_run(server: Server, tmp_path: Path) -> SimpleNamespace:
    """What ``readme_snippet`` points a snippet at: the server's URL and a credential file."""
    (tmp_path / "credential").write_text(TEST_CREDENTIAL)
    return SimpleNamespace(url=server.url, data_dir=tmp_path)


@pytest.fixture(scope="module")
def audited(settings, app, tmp_path_factory) -> Iterator[Server]:
    running = start_server(settings, tmp_path_factory.mktemp("audited"), {"GROWLER_AUDIT_TRAIL": "on"})
    try:
        yield running
    finally:
        stop_server(running)


def test_the_federation_pages_create_example_runs_as_written(server, tmp_path):
    code = readme_snippet("federation-create", as_make_run(server, tmp_path), page="docs/federation.md", language="sh")
    try:
        (created,) = json_values(run_shell_snippet(code))
        assert created["name"] == "lake-polaris", created
        assert created["federation"]["uri"] == "https://polaris.example.com/api/catalog"
        assert created["federation"]["read-only"] is True and created["federation"]["auth"]["has-secret"] is False
        # read-only: a create on it is refused before the (unreachable) remote is asked
        refused = httpx.post(f"{server.url}/v1/lake-polaris/namespaces", json={"namespace": ["x"]})
        assert refused.status_code == 403 and "read-only federation" in refused.json()["error"]["message"]
    finally:
        httpx.delete(f"{server.url}/management/v1/warehouses/lake-polaris")


def test_the_audit_pages_query_examples_run_as_written(audited, tmp_path):
    # a refusal to find: a principal without rights asks for the trail (administrators only)
    made = httpx.post(f"{audited.url}/management/v1/principals", json={"name": f"snoop-{uuid.uuid4().hex[:8]}"})
    assert made.status_code == 201, made.text
    credential = made.json()
    token = httpx.post(
        f"{audited.url}/v1/oauth/tokens",
        data={
            "grant_type": "client_credentials",
            "client_id": credential["client-id"],
            "client_secret": credential["client-secret"],
        },
        headers={"Authorization": ""},
    ).json()["access_token"]
    snooped = httpx.get(f"{audited.url}/management/v1/audit", headers={"Authorization": f"Bearer {token}"})
    assert snooped.status_code == 403, snooped.text
    for _ in range(3):  # more records than a page of 2
        assert httpx.get(f"{audited.url}/v1/config").status_code == 200
    code = readme_snippet("audit-query", as_make_run(audited, tmp_path), page="docs/audit.md", language="sh")
    refused, second_page = json_values(run_shell_snippet(code))
    assert {record["decision"] for record in refused["records"]} == {"refused"}, refused
    assert credential["client-id"] in {record["principal"] for record in refused["records"]}
    assert len(second_page["records"]) == 2, second_page


def test_the_read_restrictions_page_example_runs_as_written(server, settings, tmp_path):
    """On a warehouse named as make run's default (``warehouse``), made for the test and removed."""
    from storage.objects import S3ObjectStore

    bucket = "growler-doc-restrictions"
    S3ObjectStore(settings.s3).ensure_bucket(bucket)
    body = {"name": "warehouse", "location": f"s3://{bucket}/wh-{uuid.uuid4().hex[:8]}/"}
    made = httpx.post(f"{server.url}/management/v1/warehouses", json=body, timeout=30)
    assert made.status_code == 201, made.text
    code = readme_snippet(
        "read-restriction-set", as_make_run(server, tmp_path), page="docs/read-restrictions.md", language="sh"
    )
    try:
        namespace, role, restriction = json_values(run_shell_snippet(code))
        assert namespace["namespace"] == ["hr"] and role["name"] == "eu-analysts"
        assert restriction["securable"] == {"type": "namespace", "namespace": ["hr"]}
        assert restriction["row-filter"] == {"type": "eq", "term": "region", "value": "eu"}
        listed = httpx.get(f"{server.url}/management/v1/warehouses/warehouse/read-restrictions", timeout=30)
        assert listed.json()["restrictions"] == [restriction]
    finally:
        httpx.delete(f"{server.url}/management/v1/roles/eu-analysts", timeout=30)
        httpx.delete(f"{server.url}/v1/warehouse/namespaces/hr", timeout=30)
        gone = httpx.delete(f"{server.url}/management/v1/warehouses/warehouse", timeout=30)
        assert gone.status_code == 204, gone.text  # nothing of the test's left for the others


def test_the_read_restrictions_pages_trusted_engine_example_runs_as_written(server, tmp_path, settings):
    code = readme_snippet(
        "trusted-engine", as_make_run(server, tmp_path), page="docs/read-restrictions.md", language="sh"
    )
    created, principal = json_values(run_shell_snippet(code))
    assert created["client-id"] == "spark-prod" and created["client-secret"]
    assert principal == {"name": "spark-prod", "admin": False, "trusted-engine": True, "roles": []}
    with psycopg.connect(settings.database_url, autocommit=True) as conn:
        assert conn.execute("SELECT trusted_engine FROM principal WHERE client_id = 'spark-prod'").fetchone() == (True,)
