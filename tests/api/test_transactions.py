"""POST /v1/{prefix}/transactions/commit: all tables or none."""

from __future__ import annotations

import pytest

from app.composition.services import services_of
from app.ground.locations import Location
from app.rules.requests.tables import CommitTableRequest
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url

COMMIT = f"{PREFIX}/transactions/commit"


@pytest.fixture
def three_tables(client):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    return {name: client.post(tables_url(), json=create_request(name)).json() for name in ("a", "b", "c")}


def change(name: str, requirements=None, **properties):
    return {
        "identifier": {"namespace": ["db"], "name": name},
        "requirements": requirements or [],
        "updates": [{"action": "set-properties", "updates": properties}],
    }


def bucket_objects(app) -> set[str]:
    return set(services_of(app.app).namespaces.objects.list(Location.parse("s3://growler-test-warehouse/")))


def test_commits_every_table(client, three_tables):
    response = client.post(COMMIT, json={"table-changes": [change("a", x="1"), change("b", y="2")]})
    assert response.status_code == 204, response.text
    a, b, c = (client.get(table_url(n)).json() for n in ("a", "b", "c"))
    assert a["metadata"]["properties"]["x"] == "1"
    assert b["metadata"]["properties"]["y"] == "2"
    assert a["metadata-location"] != three_tables["a"]["metadata-location"]
    assert c["metadata-location"] == three_tables["c"]["metadata-location"]


def test_one_failing_requirement_changes_nothing(client, app, three_tables, db):
    before_objects = bucket_objects(app)
    before_rows = db.execute("SELECT name, metadata_location FROM catalog_entry ORDER BY name").fetchall()
    stale = [{"type": "assert-table-uuid", "uuid": "00000000-0000-0000-0000-000000000000"}]
    response = client.post(COMMIT, json={"table-changes": [change("a", x="1"), change("b", stale, y="2")]})
    assert response.status_code == 409
    assert response.json()["error"]["type"] == "CommitFailedException"
    assert db.execute("SELECT name, metadata_location FROM catalog_entry ORDER BY name").fetchall() == before_rows
    assert bucket_objects(app) == before_objects


def test_one_invalid_update_changes_nothing(client, app, three_tables, db):
    before_objects = bucket_objects(app)
    bad = {
        "identifier": {"namespace": ["db"], "name": "b"},
        "requirements": [],
        "updates": [{"action": "set-current-schema", "schema-id": 99}],
    }
    response = client.post(COMMIT, json={"table-changes": [change("a", x="1"), bad]})
    assert response.status_code == 400
    assert bucket_objects(app) == before_objects
    assert "x" not in client.get(table_url("a")).json()["metadata"]["properties"]


def test_unknown_table_is_404_and_changes_nothing(client, three_tables):
    missing = {"identifier": {"namespace": ["db"], "name": "zzz"}, "requirements": [], "updates": []}
    response = client.post(COMMIT, json={"table-changes": [change("a", x="1"), missing]})
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NoSuchTableException"
    assert "x" not in client.get(table_url("a")).json()["metadata"]["properties"]


def test_table_named_twice_is_400(client, three_tables):
    response = client.post(COMMIT, json={"table-changes": [change("a", x="1"), change("a", y="2")]})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "BadRequestException"


def test_change_without_identifier_is_400(client, three_tables):
    response = client.post(COMMIT, json={"table-changes": [{"requirements": [], "updates": []}]})
    assert response.status_code == 400


def test_lost_race_is_retried_when_requirements_still_hold(client, app, three_tables, monkeypatch):
    """A concurrent commit lands between read and swap: the transaction re-reads and succeeds."""
    tables = services_of(app.app).tables
    real_prepare = tables.committer._prepare
    interfered = []

    def prepare_then_interfere(warehouse, table_change, allow_create):
        prepared = real_prepare(warehouse, table_change, allow_create)
        if not interfered and table_change.name == "b":
            interfered.append(True)
            interfering = CommitTableRequest.of([], [{"action": "set-properties", "updates": {"z": "9"}}])
            tables.commit_table("test", ("db",), "b", interfering)
        return prepared

    monkeypatch.setattr(tables.committer, "_prepare", prepare_then_interfere)
    response = client.post(COMMIT, json={"table-changes": [change("a", x="1"), change("b", y="2")]})
    assert response.status_code == 204, response.text
    props = client.get(table_url("b")).json()["metadata"]["properties"]
    assert props["z"] == "9" and props["y"] == "2"
    assert client.get(table_url("a")).json()["metadata"]["properties"]["x"] == "1"
