"""View operations through the HTTP API on real PostgreSQL and S3, views in nested namespaces."""

from __future__ import annotations

import copy
import json
import re
import threading
from typing import Any

import pytest

from app.rules.requests.views import CommitViewRequest, CreateViewRequest
from tests.api.tables_support import PREFIX, TextStore, create_request, table_url, tables_url
from tests.conftest import TEST_BUCKET

NS = ("db", "nested")
NS_PATH = "db%1Fnested"
METADATA_FILE = re.compile(r"/metadata/(\d{5})-[0-9a-f-]{36}\.metadata\.json$")
OTHER_UUID = "11111111-2222-4333-8444-555555555555"

SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "data", "type": "string", "required": False},
    ],
}
TOTALS_SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 1,
    "fields": [{"id": 1, "name": "total", "type": "double", "required": False}],
}


def sql(text: str, dialect: str = "spark") -> dict[str, str]:
    return {"type": "sql", "sql": text, "dialect": dialect}


def view_version(*representations: dict, schema_id: int = 0, version_id: int = 1) -> dict[str, Any]:
    return {
        "version-id": version_id,
        "timestamp-ms": 1_700_000_000_000,
        "schema-id": schema_id,
        "summary": {"engine-name": "spark", "engine-version": "3.5"},
        "default-namespace": list(NS),
        "representations": list(representations) or [sql("SELECT id, data FROM db.nested.events")],
    }


def view_request(name: str, **extra: Any) -> dict[str, Any]:
    body = {"name": name, "schema": copy.deepcopy(SCHEMA), "view-version": view_version(), "properties": {}}
    body.update(extra)
    return body


def views_url(namespace: str = NS_PATH) -> str:
    return f"{PREFIX}/namespaces/{namespace}/views"


def view_url(name: str, namespace: str = NS_PATH) -> str:
    return f"{views_url(namespace)}/{name}"


def replace_updates(query: str, schema: dict | None = None, dialect: str = "spark") -> list[dict[str, Any]]:
    """A new schema, a version using it, made current: what a Java client sends for a replace."""
    return [
        {"action": "add-schema", "schema": schema or TOTALS_SCHEMA},
        {"action": "add-view-version", "view-version": view_version(sql(query, dialect), schema_id=-1)},
        {"action": "set-current-view-version", "view-version-id": -1},
    ]


def error_type(response) -> str:
    return response.json()["error"]["type"]


@pytest.fixture
def ns(client):
    for levels in (["db"], list(NS)):
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": levels}).status_code == 200
    return NS


@pytest.fixture
def s3(app):
    return TextStore(app.app.extensions["growler.catalog"].objects)


@pytest.fixture
def views(app):
    return app.app.extensions["growler.views"]


def bucket_objects(s3) -> set[str]:
    return set(s3.list(f"s3://{TEST_BUCKET}/"))


def catalog_state(db) -> list[tuple]:
    return db.execute("SELECT name, kind, metadata_location, metadata FROM catalog_entry ORDER BY name").fetchall()


def pending(db, under: str = f"s3://{TEST_BUCKET}/") -> set[str]:
    """Objects recorded as written-but-not-committed (other tests may leave their own behind)."""
    rows = db.execute("SELECT location FROM pending_object WHERE starts_with(location, %s)", (under,))
    return {row[0] for row in rows}


def create(client, name: str, **extra: Any) -> dict[str, Any]:
    response = client.post(views_url(), json=view_request(name, **extra))
    assert response.status_code == 200, response.text
    return response.json()


class Unchanged:
    """Asserts that a request wrote nothing: no row changed, no object appeared, nothing pending."""

    def __init__(self, db, s3) -> None:
        self.db, self.s3 = db, s3
        self.rows, self.objects, self.pending = catalog_state(db), bucket_objects(s3), pending(db)

    def check(self) -> None:
        assert catalog_state(self.db) == self.rows
        assert bucket_objects(self.s3) == self.objects
        assert pending(self.db) == self.pending


# -- config --------------------------------------------------------------------------------


def test_config_advertises_every_view_operation(client):
    endpoints = set(client.get("/v1/config").json()["endpoints"])
    assert {
        "GET /v1/{prefix}/namespaces/{namespace}/views",
        "POST /v1/{prefix}/namespaces/{namespace}/views",
        "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
        "POST /v1/{prefix}/views/rename",
        "POST /v1/{prefix}/namespaces/{namespace}/register-view",
    } <= endpoints


# -- create, load, exists ------------------------------------------------------------------


def test_create_view(client, ns, s3, db):
    body = create(client, "events_view", properties={"comment": "events"})
    metadata = body["metadata"]
    match = METADATA_FILE.search(body["metadata-location"])
    assert match and match.group(1) == "00000"
    assert body["config"] == {}
    assert metadata["location"].startswith(f"s3://{TEST_BUCKET}/db/nested/events_view-")
    assert body["metadata-location"].startswith(metadata["location"] + "/metadata/")
    assert metadata["format-version"] == 1
    assert metadata["properties"] == {"comment": "events"}
    assert metadata["current-version-id"] == 1
    assert metadata["schemas"][0]["schema-id"] == 0
    (version,) = metadata["versions"]
    assert version["version-id"] == 1 and version["schema-id"] == 0
    assert version["default-namespace"] == ["db", "nested"]
    assert version["representations"] == [sql("SELECT id, data FROM db.nested.events")]
    assert metadata["version-log"] == [{"timestamp-ms": version["timestamp-ms"], "version-id": 1}]
    assert json.loads(s3.read(body["metadata-location"])) == metadata
    row = db.execute("SELECT kind, uuid::text, metadata_location FROM catalog_entry WHERE name = 'events_view'")
    assert row.fetchone() == ("view", metadata["view-uuid"], body["metadata-location"])
    assert pending(db, metadata["location"]) == set()


def test_create_rewrites_the_version_to_the_fresh_schema(client, ns):
    request = view_request("ids", schema={**SCHEMA, "schema-id": 5})
    request["view-version"] = view_version(schema_id=5, version_id=17)
    metadata = client.post(views_url(), json=request).json()["metadata"]
    assert metadata["schemas"][0]["schema-id"] == 0
    assert metadata["versions"][0]["schema-id"] == 0
    assert metadata["versions"][0]["version-id"] == 1


def test_create_with_gzip_codec(client, ns, s3):
    body = create(client, "zipped", properties={"write.metadata.compression-codec": "gzip"})
    assert body["metadata-location"].endswith(".gz.metadata.json")
    assert s3.read(body["metadata-location"])[:2] == b"\x1f\x8b"
    assert client.get(view_url("zipped")).json()["metadata"] == body["metadata"]


def test_load_view(client, ns):
    created = create(client, "loaded")
    response = client.get(view_url("loaded"))
    assert response.status_code == 200
    assert response.json() == created
    referenced = client.get(view_url("loaded"), params={"referenced-by": "db\x1fnested\x1fouter"})
    assert referenced.status_code == 200


def test_view_exists(client, ns):
    create(client, "present")
    assert client.head(view_url("present")).status_code == 204
    assert client.head(view_url("absent")).status_code == 404
    assert client.head(view_url("present", "db")).status_code == 404


def test_missing_view_and_namespace_are_404(client, ns):
    response = client.get(view_url("missing"))
    assert response.status_code == 404
    assert error_type(response) == "NoSuchViewException"
    # loadView's only 404 in the spec: the view's, even when its namespace is missing too
    assert error_type(client.get(view_url("v", "nowhere"))) == "NoSuchViewException"
    missing_ns = client.post(views_url("nowhere"), json=view_request("v"))
    assert missing_ns.status_code == 404
    assert error_type(missing_ns) == "NoSuchNamespaceException"


def test_create_existing_view_is_409_and_writes_nothing(client, ns, s3, db):
    create(client, "dup")
    unchanged = Unchanged(db, s3)
    response = client.post(views_url(), json=view_request("dup"))
    assert response.status_code == 409
    assert error_type(response) == "AlreadyExistsException"
    unchanged.check()


def test_caller_location_inside_its_namespace_is_honoured(client, ns):
    location = f"s3://{TEST_BUCKET}/db/nested/custom/views/placed"
    body = create(client, "placed", location=location + "/")
    assert body["metadata"]["location"] == location
    assert body["metadata-location"].startswith(location + "/metadata/")


@pytest.mark.parametrize(
    "extra",
    [
        {"location": "s3://other-bucket/v"},
        {"location": f"s3://{TEST_BUCKET}/a/../../escape"},
        {"properties": {"write.metadata.path": "s3://other-bucket/meta"}},
    ],
)
def test_locations_outside_the_warehouse_are_400(client, ns, s3, db, extra):
    unchanged = Unchanged(db, s3)
    response = client.post(views_url(), json=view_request("escape", **extra))
    assert response.status_code == 400, response.text
    unchanged.check()


@pytest.mark.parametrize(
    "change",
    [
        # a version with two representations of one dialect
        {"view-version": view_version(sql("SELECT 1"), sql("SELECT 2", "SPARK"))},
        {"view-version": {**view_version(), "representations": []}},
        {"view-version": view_version({"type": "substrait", "plan": "AAEC", "dialect": "x", "sql": "x"})},
        {"schema": {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "no-such-type", "required": True}]}},
        {
            "schema": {
                "type": "struct",
                "fields": [
                    {"id": 1, "name": "a", "type": "int", "required": True},
                    {"id": 1, "name": "b", "type": "int", "required": True},
                ],
            }
        },
        {"properties": {"version.history.num-entries": "0"}},
        {"name": "bad\x00name"},
    ],
)
def test_invalid_create_is_400_and_writes_nothing(client, ns, s3, db, request, change):
    unchanged = Unchanged(db, s3)
    response = client.post(views_url(), json={**view_request("bad"), **change})
    assert response.status_code == 400, response.text
    # a view definition the rules refuse: IllegalArgumentException, as Iceberg's reference catalog
    # types it; a bad name: BadRequestException
    expected = "BadRequestException" if request.node.callspec.id == "change6" else "IllegalArgumentException"
    assert error_type(response) == expected
    unchanged.check()


# -- list -------------------------------------------------------------------------------------


def test_list_views_pages_and_leaves_tables_out(client, ns):
    for name in ("v3", "v1", "v2", "v4", "v5"):
        create(client, name)
    assert client.post(tables_url(NS_PATH), json=create_request("a_table")).status_code == 200
    everything = client.get(views_url()).json()
    assert everything == {"identifiers": [{"namespace": list(NS), "name": f"v{i}"} for i in range(1, 6)]}
    names, token = [], ""
    for _ in range(5):
        page = client.get(views_url(), params={"pageToken": token, "pageSize": 2}).json()
        names += [identifier["name"] for identifier in page["identifiers"]]
        token = page.get("next-page-token")
        if not token:
            break
    assert names == ["v1", "v2", "v3", "v4", "v5"]
    tables = client.get(tables_url(NS_PATH)).json()["identifiers"]
    assert tables == [{"namespace": list(NS), "name": "a_table"}]
    assert client.get(views_url("db")).json() == {"identifiers": []}


def test_list_views_errors(client, ns):
    missing = client.get(views_url("nowhere"))
    assert missing.status_code == 404
    assert error_type(missing) == "NoSuchNamespaceException"
    assert client.get(views_url(), params={"pageToken": "%%%"}).status_code == 400
    assert client.get(views_url(), params={"pageSize": 0}).status_code == 400


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
        self.real_objects, self.real_repository = views.objects, views.files.repository
        monkeypatch.setattr(views.files, "objects", self)
        monkeypatch.setattr(views.files, "repository", self)

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


# -- drop --------------------------------------------------------------------------------------


def test_drop_view(client, ns, s3):
    created = create(client, "dropped")
    assert client.delete(view_url("dropped")).status_code == 204
    assert client.head(view_url("dropped")).status_code == 404
    again = client.delete(view_url("dropped"))
    assert again.status_code == 404
    assert error_type(again) == "NoSuchViewException"
    assert s3.exists(created["metadata-location"]), "dropping a view leaves its files (no purge for views)"
    assert error_type(client.delete(view_url("v", "nowhere"))) == "NoSuchNamespaceException"


def test_recreated_view_gets_a_new_location(client, ns):
    first = create(client, "phoenix")["metadata"]["location"]
    client.delete(view_url("phoenix"))
    assert create(client, "phoenix")["metadata"]["location"] != first


def test_a_namespace_holding_a_view_cannot_be_dropped(client, ns):
    create(client, "keeper")
    response = client.delete(f"{PREFIX}/namespaces/{NS_PATH}")
    assert response.status_code == 409
    assert error_type(response) == "NamespaceNotEmptyException"
    assert client.delete(view_url("keeper")).status_code == 204
    assert client.delete(f"{PREFIX}/namespaces/{NS_PATH}").status_code == 204


# -- rename ------------------------------------------------------------------------------------


def rename(client, source: tuple, destination: tuple, kind: str = "views"):
    return client.post(
        f"{PREFIX}/{kind}/rename",
        json={
            "source": {"namespace": list(source[:-1]), "name": source[-1]},
            "destination": {"namespace": list(destination[:-1]), "name": destination[-1]},
        },
    )


def test_rename_view_within_and_across_namespaces(client, ns):
    created = create(client, "old")
    assert rename(client, (*NS, "old"), (*NS, "new")).status_code == 204
    assert client.head(view_url("old")).status_code == 404
    assert client.get(view_url("new")).json() == created
    assert rename(client, (*NS, "new"), ("db", "moved")).status_code == 204
    assert client.get(view_url("moved", "db")).json()["metadata"] == created["metadata"]
    assert client.get(views_url()).json()["identifiers"] == []


def test_rename_view_conflicts_and_missing(client, ns, db, s3):
    create(client, "a")
    create(client, "b")
    assert client.post(tables_url(NS_PATH), json=create_request("t")).status_code == 200
    unchanged = Unchanged(db, s3)
    for destination in ("b", "t"):  # onto a view, onto a table
        response = rename(client, (*NS, "a"), (*NS, destination))
        assert response.status_code == 409
        assert error_type(response) == "AlreadyExistsException"
    response = rename(client, (*NS, "missing"), (*NS, "c"))
    assert response.status_code == 404
    assert error_type(response) == "NoSuchViewException"
    response = rename(client, (*NS, "a"), ("nowhere", "a"))
    assert response.status_code == 404
    assert error_type(response) == "NoSuchNamespaceException"
    # renameView does not move a table, renameTable does not move a view, nor onto one
    response = rename(client, (*NS, "t"), (*NS, "t2"))
    assert (response.status_code, error_type(response)) == (404, "NoSuchViewException")
    response = rename(client, (*NS, "a"), (*NS, "a2"), kind="tables")
    assert (response.status_code, error_type(response)) == (404, "NoSuchTableException")
    response = rename(client, (*NS, "t"), (*NS, "a"), kind="tables")
    assert (response.status_code, error_type(response)) == (409, "AlreadyExistsException")
    unchanged.check()


# -- one identifier space for tables and views ---------------------------------------------


def test_tables_and_views_share_one_identifier_space(client, ns, db, s3):
    create(client, "view_name")
    assert client.post(tables_url(NS_PATH), json=create_request("table_name")).status_code == 200
    unchanged = Unchanged(db, s3)

    onto_table = client.post(views_url(), json=view_request("table_name"))
    assert (onto_table.status_code, error_type(onto_table)) == (409, "AlreadyExistsException")
    onto_view = client.post(tables_url(NS_PATH), json=create_request("view_name"))
    assert (onto_view.status_code, error_type(onto_view)) == (409, "AlreadyExistsException")
    staged = client.post(tables_url(NS_PATH), json=create_request("view_name", **{"stage-create": True}))
    assert (staged.status_code, error_type(staged)) == (409, "AlreadyExistsException")

    # a view is not a table ...
    for response in (
        client.get(table_url("view_name", NS_PATH)),
        client.post(table_url("view_name", NS_PATH), json={"requirements": [], "updates": []}),
        client.delete(table_url("view_name", NS_PATH)),
        client.delete(table_url("view_name", NS_PATH), params={"purgeRequested": "true"}),
    ):
        assert (response.status_code, error_type(response)) == (404, "NoSuchTableException"), response.text
    assert client.head(table_url("view_name", NS_PATH)).status_code == 404
    # ... and a table is not a view
    for response in (
        client.get(view_url("table_name")),
        client.post(view_url("table_name"), json={"requirements": [], "updates": []}),
        client.delete(view_url("table_name")),
    ):
        assert (response.status_code, error_type(response)) == (404, "NoSuchViewException"), response.text
    assert client.head(view_url("table_name")).status_code == 404
    unchanged.check()


# -- register ---------------------------------------------------------------------------------


def register(client, name: str, metadata_location: str, namespace: str = NS_PATH, **extra: Any):
    body = {"name": name, "metadata-location": metadata_location, **extra}
    return client.post(f"{PREFIX}/namespaces/{namespace}/register-view", json=body)


def test_register_view_from_a_metadata_file(client, ns, db, hard_policy):
    created = create(client, "original")
    client.post(view_url("original"), json={"updates": replace_updates("SELECT 2")})
    replaced = client.get(view_url("original")).json()
    assert client.delete(view_url("original")).status_code == 204
    # registered into another namespace than the one whose folder holds it: refused (its location
    # lies in db.nested's folder, not db's), then into its own
    assert register(client, "restored", replaced["metadata-location"], namespace="db").status_code == 400
    response = register(client, "restored", replaced["metadata-location"])
    assert response.status_code == 200, response.text
    assert response.json() == {**replaced, "config": {}}
    assert client.get(view_url("restored")).json() == response.json()
    # the registered view commits on top of the registered file
    committed = client.post(
        view_url("restored"),
        json={
            "updates": [
                {"action": "set-properties", "updates": {"restored": "yes"}},
            ]
        },
    )
    assert committed.status_code == 200, committed.text
    assert METADATA_FILE.search(committed.json()["metadata-location"]).group(1) == "00002"
    assert created["metadata"]["view-uuid"] == committed.json()["metadata"]["view-uuid"]
    row = db.execute("SELECT kind FROM catalog_entry WHERE name = 'restored'").fetchone()
    assert row == ("view",)


def test_register_view_conflicts_and_overwrite(client, ns, db, s3, hard_policy):
    first = create(client, "first")
    second = create(client, "second")
    assert client.post(tables_url(NS_PATH), json=create_request("tbl")).status_code == 200
    unchanged = Unchanged(db, s3)
    taken = register(client, "second", first["metadata-location"])
    assert (taken.status_code, error_type(taken)) == (409, "AlreadyExistsException")
    onto_table = register(client, "tbl", first["metadata-location"], overwrite=True)
    assert (onto_table.status_code, error_type(onto_table)) == (409, "AlreadyExistsException")
    copied = register(client, "second", first["metadata-location"], overwrite=True)  # a live view's location
    assert (copied.status_code, error_type(copied)) == (400, "BadRequestException")
    unchanged.check()
    third = create(client, "third")
    assert client.delete(view_url("third")).status_code == 204  # its files stay: nobody owns its location now
    overwritten = register(client, "second", third["metadata-location"], overwrite=True)
    assert overwritten.status_code == 200, overwritten.text
    assert client.get(view_url("second")).json()["metadata-location"] == third["metadata-location"]
    assert second["metadata-location"] != third["metadata-location"]


def test_register_view_rejects_bad_files(client, ns, db, s3):
    table = client.post(tables_url(NS_PATH), json=create_request("tbl")).json()
    view = create(client, "v")
    stray = f"s3://{TEST_BUCKET}/stray/not-metadata.json"
    s3.write_new(stray, b"{not json")
    unchanged = Unchanged(db, s3)
    for location, expected in (
        (f"s3://{TEST_BUCKET}/nothing/here.metadata.json", "BadRequestException"),  # missing
        ("s3://other-bucket/v.metadata.json", "BadRequestException"),  # outside the warehouse
        (table["metadata-location"], "IllegalArgumentException"),  # a table's metadata: not a view's
        (stray, "BadRequestException"),  # not JSON
    ):
        response = register(client, "registered", location)
        assert (response.status_code, error_type(response)) == (400, expected), location
    missing_ns = register(client, "registered", view["metadata-location"], namespace="nowhere")
    assert (missing_ns.status_code, error_type(missing_ns)) == (404, "NoSuchNamespaceException")
    unchanged.check()
