"""Creating, loading and listing views through the HTTP API on real PostgreSQL and S3, views in
nested namespaces: the config advertising the view operations, create (locations, codecs, refusals that
write nothing), load, exists, 404s, and listing with pages."""

from __future__ import annotations

import json

import pytest

from tests.api.tables_support import create_request, error_type, tables_url
from tests.api.views.views_support import (
    METADATA_FILE,
    NS,
    NS_PATH,
    SCHEMA,
    Unchanged,
    create,
    pending,
    sql,
    view_request,
    view_url,
    view_version,
    views_url,
)
from tests.conftest import TEST_BUCKET

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
