"""unregisterTable: the table leaves the catalog, every file stays, and it can be registered again."""

from __future__ import annotations

import uuid

import pytest

from app.composition.services import services_of
from app.ground.locations import Location
from tests.api.tables_support import PREFIX, append, create_request, table_url, tables_url


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    return "db"


@pytest.fixture
def s3(app):
    return services_of(app.app).namespaces.objects


def unregister(client, name: str, **kwargs):
    return client.post(f"{table_url(name)}/unregister", **kwargs)


def objects_under(s3, location: str) -> set[str]:
    return {found.uri for found in s3.list(Location.parse(location))}


def test_config_advertises_unregister(client):
    endpoints = client.get("/v1/config").json()["endpoints"]
    assert "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/unregister" in endpoints


def test_unregister_returns_the_last_version_and_keeps_every_file(client, ns, s3):
    client.post(tables_url(), json=create_request("t"))
    assert append(client, table_url("t"), 1, 1, None).status_code == 200
    loaded = client.get(table_url("t")).json()
    files = objects_under(s3, loaded["metadata"]["location"])
    assert len(files) == 2

    response = unregister(client, "t")
    assert response.status_code == 200, response.text
    assert response.json() == {"metadata-location": loaded["metadata-location"], "metadata": loaded["metadata"]}
    assert client.head(table_url("t")).status_code == 404
    assert objects_under(s3, loaded["metadata"]["location"]) == files
    later = append(client, table_url("t"), 2, 2, 1)
    assert (later.status_code, later.json()["error"]["type"]) == (404, "NoSuchTableException")
    assert objects_under(s3, loaded["metadata"]["location"]) == files  # the refused commit wrote nothing


def test_registered_again_it_carries_on(client, ns):
    client.post(tables_url(), json=create_request("t"))
    append(client, table_url("t"), 1, 1, None)
    gone = unregister(client, "t").json()
    register = {"name": "t", "metadata-location": gone["metadata-location"]}
    assert client.post(f"{PREFIX}/namespaces/db/register", json=register).status_code == 200
    assert append(client, table_url("t"), 2, 2, 1).status_code == 200
    metadata = client.get(table_url("t")).json()["metadata"]
    assert metadata["current-snapshot-id"] == 2
    assert metadata["table-uuid"] == gone["metadata"]["table-uuid"]


def test_missing_table_or_a_view_is_404(client, ns):
    for name in ("nothing",):
        response = unregister(client, name)
        assert (response.status_code, response.json()["error"]["type"]) == (404, "NoSuchTableException")
        assert response.json()["error"]["message"].startswith("Table does not exist: db.nothing")
    view = {
        "name": "v",
        "schema": {"type": "struct", "schema-id": 0, "fields": []},
        "view-version": {
            "version-id": 1,
            "timestamp-ms": 1,
            "schema-id": 0,
            "summary": {},
            "default-namespace": ["db"],
            "representations": [{"type": "sql", "sql": "select 1", "dialect": "spark"}],
        },
        "properties": {},
    }
    assert client.post(f"{PREFIX}/namespaces/db/views", json=view).status_code == 200
    response = unregister(client, "v")
    assert (response.status_code, response.json()["error"]["type"]) == (404, "NoSuchTableException")
    assert client.head(f"{PREFIX}/namespaces/db/views/v").status_code == 204


def test_a_commit_racing_unregister_fails_and_leaves_no_file(client, ns, app, s3, monkeypatch):
    """The unregister lands between the commit's read and its compare-and-set (forced, not hoped for)."""
    client.post(tables_url(), json=create_request("t"))
    service = services_of(app.app).tables
    location = client.get(table_url("t")).json()["metadata"]["location"]
    real_swap = service.repository.swap_metadata
    answers = []

    def unregister_first(swaps, before_commit, events):
        if not answers:
            answers.append(service.unregister_table("test", ("db",), "t"))
        return real_swap(swaps, before_commit=before_commit, events=events)

    monkeypatch.setattr(service.repository, "swap_metadata", unregister_first)
    response = append(client, table_url("t"), 1, 1, None)
    assert (response.status_code, response.json()["error"]["type"]) == (404, "NoSuchTableException")
    (gone,) = answers
    assert objects_under(s3, location) == {gone.metadata_location}  # the losing version was removed


def test_unregister_is_idempotent_with_a_key(client, ns):
    client.post(tables_url(), json=create_request("t"))
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    first, second = unregister(client, "t", headers=headers), unregister(client, "t", headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert second.headers.get("Idempotent-Replayed") == "true"
