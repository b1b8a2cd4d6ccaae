"""Creating, staging, loading and listing tables through the HTTP API on real PostgreSQL and S3: fresh
ids, format versions, locations, refusals that write nothing, ETags, credentials on request, paging."""

from __future__ import annotations

import json
import time

import pytest

from tests.api.tables_support import (
    METADATA_FILE,
    PREFIX,
    append,
    bucket_objects,
    create_request,
    error_type,
    set_properties,
    table_url,
    tables_url,
)
from tests.conftest import TEST_BUCKET


def test_create_table(client, ns, s3, db):
    response = client.post(tables_url(), json=create_request("events", properties={"owner": "ana"}))
    assert response.status_code == 200, response.text
    body = response.json()
    metadata = body["metadata"]
    assert METADATA_FILE.search(body["metadata-location"])
    assert metadata["format-version"] == 2
    assert metadata["location"].startswith(f"s3://{TEST_BUCKET}/db/events-")
    assert metadata["properties"]["owner"] == "ana"
    assert metadata["current-schema-id"] == 0
    assert metadata["partition-specs"][0]["fields"][0]["field-id"] == 1000
    assert metadata["last-partition-id"] == 1000
    assert s3.exists(body["metadata-location"])
    stored = json.loads(s3.read(body["metadata-location"]))
    assert stored == metadata
    assert response.headers["ETag"]
    row = db.execute("SELECT metadata_location FROM catalog_entry WHERE name = 'events'").fetchone()
    assert row[0] == body["metadata-location"]


def test_create_assigns_fresh_ids(client, ns):
    request = create_request("fresh")
    request["schema"]["fields"] = [
        {"id": 10, "name": "a", "type": "long", "required": True},
        {
            "id": 20,
            "name": "s",
            "type": {"type": "struct", "fields": [{"id": 30, "name": "x", "type": "int", "required": False}]},
            "required": False,
        },
    ]
    request["partition-spec"] = {"fields": [{"source-id": 30, "field-id": 5, "name": "x_id", "transform": "identity"}]}
    request["write-order"] = {
        "order-id": 7,
        "fields": [{"source-id": 10, "transform": "identity", "direction": "desc", "null-order": "nulls-last"}],
    }
    metadata = client.post(tables_url(), json=request).json()["metadata"]
    fields = metadata["schemas"][0]["fields"]
    assert [f["id"] for f in fields] == [1, 2]
    assert fields[1]["type"]["fields"][0]["id"] == 3
    assert metadata["last-column-id"] == 3
    assert metadata["partition-specs"][0]["fields"][0] == {
        "source-id": 3,
        "field-id": 1000,
        "name": "x_id",
        "transform": "identity",
    }
    assert metadata["sort-orders"][-1]["fields"][0]["source-id"] == 1
    assert metadata["default-sort-order-id"] == 1


@pytest.mark.parametrize("version", [1, 2, 3])
def test_format_versions(client, ns, version):
    request = create_request(f"v{version}", properties={"format-version": str(version)})
    response = client.post(tables_url(), json=request)
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["format-version"] == version


def test_create_in_missing_namespace_is_404(client, ns):
    response = client.post(tables_url("nowhere"), json=create_request("t"))
    assert response.status_code == 404
    assert error_type(response) == "NoSuchNamespaceException"


def test_create_existing_is_409_and_writes_nothing(client, ns, s3):
    assert client.post(tables_url(), json=create_request("dup")).status_code == 200
    before = bucket_objects(s3)
    response = client.post(tables_url(), json=create_request("dup"))
    assert response.status_code == 409
    assert error_type(response) == "AlreadyExistsException"
    assert bucket_objects(s3) == before


def test_recreated_table_gets_a_new_location(client, ns):
    first = client.post(tables_url(), json=create_request("again")).json()["metadata"]["location"]
    assert client.delete(table_url("again")).status_code == 204
    second = client.post(tables_url(), json=create_request("again")).json()["metadata"]["location"]
    assert first != second


def test_caller_location_inside_its_namespace_is_honoured(client, ns, db):
    location = f"s3://{TEST_BUCKET}/db/custom/place"
    response = client.post(tables_url(), json=create_request("placed", location=location))
    assert response.status_code == 200
    assert response.json()["metadata"]["location"] == location
    assert response.json()["metadata-location"].startswith(location + "/metadata/")
    # elsewhere in the warehouse (another namespace's folder, or none's): refused, nothing written
    for elsewhere in (f"s3://{TEST_BUCKET}/custom/place", f"s3://{TEST_BUCKET}/other/t", f"s3://{TEST_BUCKET}/db"):
        refused = client.post(tables_url(), json=create_request("astray", location=elsewhere))
        assert refused.status_code == 400, refused.text
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 1


def test_caller_location_outside_warehouse_is_400(client, ns, db):
    response = client.post(tables_url(), json=create_request("escape", location="s3://other-bucket/x"))
    assert response.status_code == 400
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "no-such-type", "required": True}]},
        {
            "type": "struct",
            "fields": [
                {"id": 1, "name": "a", "type": "int", "required": True},
                {"id": 1, "name": "b", "type": "int", "required": True},
            ],
        },
        {
            "type": "struct",
            "fields": [
                {"id": 1, "name": "a", "type": "int", "required": True},
                {"id": 2, "name": "a", "type": "int", "required": True},
            ],
        },
    ],
)
def test_invalid_schema_is_400_and_leaves_nothing(client, ns, s3, db, request, schema):
    before = bucket_objects(s3)
    # a schema that does not parse is a bad request; one the rules refuse (duplicate names) is
    # typed as Iceberg's reference catalog types it, for the Java client's IllegalArgumentException
    expected = "IllegalArgumentException" if request.node.callspec.id == "schema1" else "BadRequestException"
    response = client.post(tables_url(), json={"name": "bad", "schema": schema})
    assert response.status_code == 400, response.text
    assert error_type(response) == expected
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0
    assert bucket_objects(s3) == before


def test_stage_create_writes_nothing(client, ns, s3, db):
    before = bucket_objects(s3)
    response = client.post(tables_url(), json=create_request("staged", **{"stage-create": True}))
    assert response.status_code == 200
    body = response.json()
    assert "metadata-location" not in body or body["metadata-location"] is None
    assert body["metadata"]["schemas"][0]["fields"][0]["name"] == "id"
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0
    assert bucket_objects(s3) == before
    assert client.head(table_url("staged")).status_code == 404


def test_staged_create_commits_with_assert_create(client, ns, s3):
    staged = client.post(tables_url(), json=create_request("ctas", **{"stage-create": True})).json()["metadata"]
    updates = [
        {"action": "assign-uuid", "uuid": staged["table-uuid"]},
        {"action": "upgrade-format-version", "format-version": staged["format-version"]},
        {"action": "add-schema", "schema": staged["schemas"][0], "last-column-id": staged["last-column-id"]},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": staged["partition-specs"][0]},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": staged["sort-orders"][0]},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": staged["location"]},
        {"action": "set-properties", "updates": {"created-by": "ctas"}},
    ]
    response = client.post(table_url("ctas"), json={"requirements": [{"type": "assert-create"}], "updates": updates})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["metadata"]["table-uuid"] == staged["table-uuid"]
    assert body["metadata"]["properties"]["created-by"] == "ctas"
    assert s3.exists(body["metadata-location"])
    again = client.post(table_url("ctas"), json={"requirements": [{"type": "assert-create"}], "updates": updates})
    assert again.status_code == 409
    assert error_type(again) == "CommitFailedException"


def test_load_table_etag_and_304(client, ns):
    created = client.post(tables_url(), json=create_request("etag"))
    loaded = client.get(table_url("etag"))
    assert loaded.status_code == 200
    etag = loaded.headers["ETag"]
    assert loaded.json()["metadata"] == created.json()["metadata"]
    not_modified = client.get(table_url("etag"), headers={"If-None-Match": etag})
    assert not_modified.status_code == 304
    assert not_modified.content == b""
    set_properties(client, "etag", k="v")
    changed = client.get(table_url("etag"), headers={"If-None-Match": etag})
    assert changed.status_code == 200
    assert changed.headers["ETag"] != etag
    assert client.get(table_url("etag"), params={"snapshots": "refs"}).headers["ETag"] != changed.headers["ETag"]


def test_load_missing_table_is_404(client, ns):
    response = client.get(table_url("missing"))
    assert response.status_code == 404
    assert error_type(response) == "NoSuchTableException"
    # the spec's only loadTable 404; Java falls back to metadata tables on it (db.t.snapshots)
    assert error_type(client.get(table_url("t", "nons"))) == "NoSuchTableException"
    assert error_type(client.get(f"{PREFIX}/namespaces//tables/db")) == "NoSuchTableException"


def test_snapshots_refs_hides_unreferenced_snapshots(client, ns):
    client.post(tables_url(), json=create_request("refs"))
    assert append(client, table_url("refs"), 1, 1, None).status_code == 200
    assert append(client, table_url("refs"), 2, 2, 1).status_code == 200
    all_snapshots = client.get(table_url("refs")).json()["metadata"]["snapshots"]
    refs_only = client.get(table_url("refs"), params={"snapshots": "refs"}).json()["metadata"]["snapshots"]
    assert sorted(s["snapshot-id"] for s in all_snapshots) == [1, 2]
    assert [s["snapshot-id"] for s in refs_only] == [2]


def test_credentials_only_when_delegation_is_requested(client, ns, settings):
    client.post(tables_url(), json=create_request("creds"))
    plain = client.get(table_url("creds"))
    assert "storage-credentials" not in plain.json()
    assert settings.s3.secret_key not in plain.text
    assert plain.json()["config"]["s3.endpoint"] == settings.s3.endpoint
    vended = client.get(table_url("creds"), headers={"X-Iceberg-Access-Delegation": "vended-credentials"}).json()
    (credential,) = vended["storage-credentials"]
    assert vended["metadata"]["location"].startswith(credential["prefix"])
    # the default mode (sts): temporary credentials, never the warehouse's own keys, and a way to renew them
    assert credential["config"]["s3.access-key-id"] != settings.s3.access_key
    assert settings.s3.secret_key not in json.dumps(vended)
    assert credential["config"]["s3.session-token"]
    assert int(credential["config"]["s3.session-token-expires-at-ms"]) > time.time() * 1000
    refresh = vended["config"]["client.refresh-credentials-endpoint"]
    assert refresh == "v1/test/namespaces/db/tables/creds/credentials"
    loaded = client.get(f"/{refresh}").json()
    (renewed,) = loaded["storage-credentials"]
    assert renewed["prefix"] == credential["prefix"]
    assert renewed["config"]["s3.access-key-id"] != credential["config"]["s3.access-key-id"]


def test_head_table(client, ns):
    client.post(tables_url(), json=create_request("exists"))
    assert client.head(table_url("exists")).status_code == 204
    assert client.head(table_url("nope")).status_code == 404


def test_list_tables_pagination_over_1000_tables(client, ns, db):
    ns_id = db.execute("SELECT id FROM namespace WHERE path = '{db}'").fetchone()[0]
    with db.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO catalog_entry (namespace_id, name, kind, uuid, location, metadata_location, metadata)"
            " VALUES (%s, %s, 'table', gen_random_uuid(), 's3://b/t', 's3://b/t/m.json', '{}')",
            [(ns_id, f"t{i:04d}") for i in range(1000)],
        )
    db.execute(
        "INSERT INTO catalog_entry (namespace_id, name, kind, uuid, location, metadata_location, metadata)"
        " VALUES (%s, 'a_view', 'view', gen_random_uuid(), 's3://b/v', 's3://b/v/m.json', '{}')",
        (ns_id,),
    )
    names, token, pages = [], "", 0
    while True:
        body = client.get(tables_url(), params={"pageToken": token, "pageSize": 100}).json()
        pages += 1
        names += [identifier["name"] for identifier in body["identifiers"]]
        token = body.get("next-page-token")
        if not token:
            break
    assert pages == 10
    assert names == [f"t{i:04d}" for i in range(1000)]
    assert len(client.get(tables_url()).json()["identifiers"]) == 1000


def test_java_style_nulls_in_create_request(client, ns):
    """The Java client sends unset optional fields as null."""
    request = create_request("nulls", location=None, **{"write-order": None, "stage-create": False})
    request["partition-spec"] = None
    response = client.post(tables_url(), json=request)
    assert response.status_code == 200, response.text
    metadata = response.json()["metadata"]
    assert metadata["location"].startswith(f"s3://{TEST_BUCKET}/db/nulls-")
    assert metadata["partition-specs"][0]["fields"] == []
