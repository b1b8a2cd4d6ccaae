"""Replacing views through the HTTP API on real PostgreSQL and S3: each replace a new metadata file,
every view update, history size, requirements, refusals that write nothing, and concurrent replaces
(a lost race retried on the server, a requirement that no longer holds, replaces that all land)."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from app.rules.requests.views import CommitViewRequest, CreateViewRequest
from tests.api.tables_support import error_type
from tests.api.views.views_support import (
    METADATA_FILE,
    NS,
    OTHER_UUID,
    TOTALS_SCHEMA,
    Unchanged,
    create,
    pending,
    replace_updates,
    sql,
    view_request,
    view_url,
    view_version,
)
from tests.conftest import TEST_BUCKET

# -- replace -----------------------------------------------------------------------------------


def test_replace_view_adds_a_version_in_a_new_file(client, ns, s3, db):
    created = create(client, "replaced")
    view_uuid = created["metadata"]["view-uuid"]
    response = client.post(
        view_url("replaced"),
        json={
            "identifier": {"namespace": list(NS), "name": "replaced"},
            "requirements": [{"type": "assert-view-uuid", "uuid": view_uuid}],
            "updates": replace_updates("SELECT sum(x) AS total FROM db.nested.events"),
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    metadata = body["metadata"]
    assert METADATA_FILE.search(body["metadata-location"]).group(1) == "00001"
    assert metadata["current-version-id"] == 2
    assert [s["schema-id"] for s in metadata["schemas"]] == [0, 1]
    assert metadata["versions"][-1]["schema-id"] == 1
    assert [e["version-id"] for e in metadata["version-log"]] == [1, 2]
    assert s3.exists(created["metadata-location"]), "a commit never overwrites or deletes the previous file"
    assert json.loads(s3.read(body["metadata-location"])) == metadata
    assert client.get(view_url("replaced")).json() == body
    row = db.execute("SELECT metadata_location FROM catalog_entry WHERE name = 'replaced'").fetchone()
    assert row[0] == body["metadata-location"]
    assert pending(db, metadata["location"]) == set()


def test_replace_back_to_an_equal_version_reuses_its_id(client, ns):
    created = create(client, "again")
    client.post(view_url("again"), json={"updates": replace_updates("SELECT 2")})
    first = created["metadata"]["versions"][0]
    response = client.post(
        view_url("again"),
        json={
            "updates": [
                {"action": "add-view-version", "view-version": {**first, "version-id": 3, "timestamp-ms": 1}},
                {"action": "set-current-view-version", "view-version-id": -1},
            ]
        },
    )
    metadata = response.json()["metadata"]
    assert [v["version-id"] for v in metadata["versions"]] == [1, 2]
    assert metadata["current-version-id"] == 1
    assert [e["version-id"] for e in metadata["version-log"]] == [1, 2, 1]


def test_every_view_update_through_the_api(client, ns):
    created = create(client, "all_updates", properties={"drop-me": "x"})
    view_uuid = created["metadata"]["view-uuid"]
    new_location = f"s3://{TEST_BUCKET}/db/nested/moved/all_updates"
    response = client.post(
        view_url("all_updates"),
        json={
            "requirements": [],
            "updates": [
                {"action": "assign-uuid", "uuid": view_uuid},
                {"action": "upgrade-format-version", "format-version": 1},
                {"action": "add-schema", "schema": TOTALS_SCHEMA},
                {"action": "set-location", "location": new_location},
                {"action": "set-properties", "updates": {"owner": "ana"}},
                {"action": "remove-properties", "removals": ["drop-me", "never-there"]},
                {
                    "action": "add-view-version",
                    "view-version": view_version(sql("SELECT 2"), sql("SELECT 2", "trino"), schema_id=-1),
                },
                {"action": "set-current-view-version", "view-version-id": -1},
            ],
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    metadata = body["metadata"]
    assert metadata["view-uuid"] == view_uuid
    assert metadata["location"] == new_location
    assert body["metadata-location"].startswith(new_location + "/metadata/00001-")
    assert metadata["properties"] == {"owner": "ana"}
    assert metadata["current-version-id"] == 2
    assert [r["dialect"] for r in metadata["versions"][-1]["representations"]] == ["spark", "trino"]


def test_a_commit_that_changes_nothing_writes_nothing(client, ns, s3, db):
    created = create(client, "same")
    unchanged = Unchanged(db, s3)
    response = client.post(
        view_url("same"),
        json={
            "updates": [
                {"action": "set-properties", "updates": {}},
                {"action": "set-current-view-version", "view-version-id": 1},
            ]
        },
    )
    assert response.status_code == 200
    assert response.json()["metadata-location"] == created["metadata-location"]
    unchanged.check()


def test_history_size_caps_the_versions(client, ns, s3):
    created = create(client, "capped", properties={"version.history.num-entries": "2"})
    for n in range(2, 6):
        response = client.post(
            view_url("capped"),
            json={
                "updates": [
                    {"action": "add-view-version", "view-version": view_version(sql(f"SELECT {n}"))},
                    {"action": "set-current-view-version", "view-version-id": -1},
                ]
            },
        )
        assert response.status_code == 200, response.text
    metadata = response.json()["metadata"]
    assert [v["version-id"] for v in metadata["versions"]] == [4, 5]
    assert [e["version-id"] for e in metadata["version-log"]] == [4, 5]
    files = sorted(s3.list(created["metadata"]["location"] + "/metadata/"))
    assert [METADATA_FILE.search(f).group(1) for f in files] == ["00000", "00001", "00002", "00003", "00004"]


def test_assert_view_uuid_mismatch_is_409_and_writes_nothing(client, ns, s3, db):
    create(client, "guarded")
    unchanged = Unchanged(db, s3)
    response = client.post(
        view_url("guarded"),
        json={
            "requirements": [{"type": "assert-view-uuid", "uuid": OTHER_UUID}],
            "updates": replace_updates("SELECT 2"),
        },
    )
    assert response.status_code == 409
    assert error_type(response) == "CommitFailedException"
    assert OTHER_UUID in response.json()["error"]["message"]
    unchanged.check()


@pytest.mark.parametrize(
    "updates",
    [
        # a version with two representations of one dialect
        [{"action": "add-view-version", "view-version": view_version(sql("SELECT 1"), sql("SELECT 2"))}],
        # set-current-view-version to an unknown id
        [{"action": "set-current-view-version", "view-version-id": 42}],
        [{"action": "set-current-view-version", "view-version-id": -1}],
        # a schema id that does not exist
        [{"action": "add-view-version", "view-version": view_version(sql("SELECT 1"), schema_id=9)}],
        [{"action": "add-view-version", "view-version": view_version(sql("SELECT 1"), schema_id=-1)}],
        [{"action": "assign-uuid", "uuid": OTHER_UUID}],
        [{"action": "upgrade-format-version", "format-version": 2}],
        [{"action": "set-location", "location": "s3://other-bucket/v"}],
        [{"action": "set-properties", "updates": {"write.metadata.path": "s3://other-bucket/m"}}],
        [{"action": "set-properties", "updates": {"version.history.num-entries": "none"}}],
        [{"action": "add-snapshot", "snapshot": {}}],
        [
            {
                "action": "add-schema",
                "schema": {
                    "type": "struct",
                    "fields": [
                        {"id": 1, "name": "a", "type": "int", "required": True},
                        {"id": 1, "name": "b", "type": "int", "required": True},
                    ],
                },
            }
        ],
        # dropping the trino dialect without replace.drop-dialect.allowed
        [
            {"action": "add-view-version", "view-version": view_version(sql("SELECT 1", "trino"))},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    ],
)
def test_invalid_replace_is_400_and_writes_nothing(client, ns, s3, db, request, updates):
    create(client, "strict")
    unchanged = Unchanged(db, s3)
    response = client.post(view_url("strict"), json={"updates": updates})
    assert response.status_code == 400, response.text
    # updates the view rules refuse: IllegalArgumentException, as Iceberg's reference catalog (the
    # Java client maps it to its own); malformed ones and locations: BadRequestException
    refused_by_the_rules = {f"updates{i}" for i in (1, 2, 3, 4, 5, 6, 9, 12)}
    expected = "IllegalArgumentException" if request.node.callspec.id in refused_by_the_rules else "BadRequestException"
    assert error_type(response) == expected
    unchanged.check()


def test_replace_missing_view_is_404(client, ns):
    response = client.post(view_url("missing"), json={"updates": replace_updates("SELECT 1")})
    assert response.status_code == 404
    assert error_type(response) == "NoSuchViewException"
    response = client.post(view_url("v", "nowhere"), json={"updates": []})
    assert error_type(response) == "NoSuchViewException"


# -- concurrent replaces ---------------------------------------------------------------------


class RaceBeforeWrite:
    """Runs ``interloper`` once, as the first metadata file is recorded as pending - after the
    commit read the view, before its file is written and its compare-and-set is sent - and records
    the files written (``written``)."""

    def __init__(self, monkeypatch, views, interloper) -> None:
        self.interloper, self.fired = interloper, False
        self.written: list[str] = []
        self.real_objects, self.real_repository = views.entries.objects, views.entries.files.repository
        monkeypatch.setattr(views.entries.files, "objects", self)
        monkeypatch.setattr(views.entries.files, "repository", self)

    def record_pending(self, locations: list[str]) -> None:
        if not self.fired:
            self.fired = True
            self.interloper()
        self.real_repository.record_pending(locations)

    def write_new(self, location, data: bytes, content_type: str = "application/json") -> None:
        self.written.append(location.uri)
        self.real_objects.write_new(location, data, content_type)

    def __getattr__(self, name: str):
        real = self.real_objects if hasattr(self.real_objects, name) else self.real_repository
        return getattr(real, name)


def test_a_lost_race_is_retried_on_the_server_and_its_file_deleted(client, ns, s3, db, views, monkeypatch):
    created = create(client, "raced")
    store = RaceBeforeWrite(
        monkeypatch,
        views,
        lambda: views.replace_view(
            "test", NS, "raced", CommitViewRequest.from_body({"updates": replace_updates("SELECT 'interloper'")})
        ),
    )
    response = client.post(
        view_url("raced"),
        json={
            "requirements": [{"type": "assert-view-uuid", "uuid": created["metadata"]["view-uuid"]}],
            "updates": [
                {"action": "add-view-version", "view-version": view_version(sql("SELECT 'mine'"))},
                {"action": "set-current-view-version", "view-version-id": -1},
            ],
        },
    )
    assert response.status_code == 200, response.text
    metadata = response.json()["metadata"]
    sqls = [v["representations"][0]["sql"] for v in metadata["versions"]]
    assert sqls == ["SELECT id, data FROM db.nested.events", "SELECT 'interloper'", "SELECT 'mine'"]
    assert metadata["current-version-id"] == 3
    interloper_file, lost_file, final_file = store.written
    assert not s3.exists(lost_file), "the losing attempt's file is deleted"
    assert final_file == response.json()["metadata-location"]
    assert METADATA_FILE.search(final_file).group(1) == "00002"
    files = set(s3.list(metadata["location"] + "/metadata/"))
    assert files == {created["metadata-location"], interloper_file, final_file}
    assert pending(db, metadata["location"]) == set()


def test_a_race_whose_requirement_no_longer_holds_is_409(client, ns, s3, db, views, monkeypatch):
    create(client, "recreated")

    def drop_and_recreate() -> None:
        views.drop_view("test", NS, "recreated")
        views.create_view("test", NS, CreateViewRequest.from_body(view_request("recreated")))

    original_uuid = client.get(view_url("recreated")).json()["metadata"]["view-uuid"]
    store = RaceBeforeWrite(monkeypatch, views, drop_and_recreate)
    response = client.post(
        view_url("recreated"),
        json={
            "requirements": [{"type": "assert-view-uuid", "uuid": original_uuid}],
            "updates": replace_updates("SELECT 2"),
        },
    )
    assert response.status_code == 409, response.text
    assert error_type(response) == "CommitFailedException"
    recreated_file, lost_file = store.written
    assert not s3.exists(lost_file)
    current = client.get(view_url("recreated")).json()
    assert current["metadata-location"] == recreated_file
    assert current["metadata"]["view-uuid"] != original_uuid
    assert pending(db, f"s3://{TEST_BUCKET}/db/nested/recreated-") == set()


def test_concurrent_replaces_all_land(client, ns, s3, views):
    created = create(client, "busy")
    results: list[Any] = []

    def replace(n: int) -> None:
        updates = [
            {"action": "add-view-version", "view-version": view_version(sql(f"SELECT {n}"))},
            {"action": "set-current-view-version", "view-version-id": -1},
        ]
        try:
            results.append(views.replace_view("test", NS, "busy", CommitViewRequest.from_body({"updates": updates})))
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            results.append(exc)

    threads = [threading.Thread(target=replace, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(not isinstance(r, Exception) for r in results), results
    metadata = client.get(view_url("busy")).json()["metadata"]
    assert sorted(v["representations"][0]["sql"] for v in metadata["versions"][1:]) == [f"SELECT {n}" for n in range(6)]
    assert [v["version-id"] for v in metadata["versions"]] == list(range(1, 8))
    assert len(metadata["version-log"]) == 7
    files = set(s3.list(metadata["location"] + "/metadata/"))
    assert files == {created["metadata-location"], *(r.metadata_location for r in results)}
