"""Namespace operations through the real app on real PostgreSQL (responses validated against the yaml)."""

from __future__ import annotations

import pytest

from tests.conftest import TEST_BUCKET

NS = "/v1/test/namespaces"
WAREHOUSE_ROOT = f"s3://{TEST_BUCKET}"
SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": False}]}


def create(client, *levels, properties=None):
    body = {"namespace": list(levels)}
    if properties is not None:
        body["properties"] = properties
    return client.post(NS, json=body)


def assert_error(response, status: int, error_type: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status
    assert error["type"] == error_type
    assert error["message"]
    return error


def test_create_then_load(client):
    response = create(client, "sales", properties={"owner": "ana", "team": "finance"})
    assert response.status_code == 200
    assert response.json() == {"namespace": ["sales"], "properties": {"owner": "ana", "team": "finance"}}

    loaded = client.get(f"{NS}/sales")
    assert loaded.status_code == 200
    assert loaded.json() == {
        "namespace": ["sales"],
        "properties": {"owner": "ana", "team": "finance", "location": f"{WAREHOUSE_ROOT}/sales"},
    }


def test_create_without_properties_has_empty_properties(client):
    assert create(client, "bare").json() == {"namespace": ["bare"], "properties": {}}
    assert client.get(f"{NS}/bare").json()["properties"] == {"location": f"{WAREHOUSE_ROOT}/bare"}


def test_load_reports_a_default_location_where_the_tables_land(client):
    """Every namespace reports a location (warehouse root + namespace path), as other catalogs do."""
    create(client, "outer")
    create(client, "outer", "inner")
    loaded = client.get(f"{NS}/outer%1Finner")
    assert loaded.status_code == 200
    location = loaded.json()["properties"]["location"]
    assert location == f"{WAREHOUSE_ROOT}/outer/inner"

    # a table created without a location lands under it, its metadata file too
    created = client.post(f"{NS}/outer%1Finner/tables", json={"name": "t", "schema": SCHEMA})
    assert created.status_code == 200, created.text
    assert created.json()["metadata"]["location"].startswith(location + "/t")
    assert created.json()["metadata-location"].startswith(location + "/t")

    # reported, never stored: no property to remove, and listing the properties shows it again
    removed = client.post(f"{NS}/outer%1Finner/properties", json={"removals": ["location"]})
    assert removed.status_code == 200
    assert removed.json()["missing"] == ["location"]
    assert client.get(f"{NS}/outer%1Finner").json()["properties"] == {"location": location}


def test_explicit_location_wins_over_the_default(client):
    own = f"{WAREHOUSE_ROOT}/custom/place"
    assert create(client, "placed", properties={"location": own}).json()["properties"] == {"location": own}
    assert client.get(f"{NS}/placed").json()["properties"] == {"location": own}

    updated = client.post(f"{NS}/placed/properties", json={"updates": {"location": own + "2"}})
    assert updated.status_code == 200
    assert client.get(f"{NS}/placed").json()["properties"] == {"location": own + "2"}

    # removing the user's location brings the default back
    client.post(f"{NS}/placed/properties", json={"removals": ["location"]})
    assert client.get(f"{NS}/placed").json()["properties"] == {"location": f"{WAREHOUSE_ROOT}/placed"}


VIEW_VERSION = {
    "version-id": 1,
    "timestamp-ms": 1,
    "schema-id": 0,
    "summary": {},
    "default-namespace": ["x"],
    "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
}


def test_tables_and_views_land_under_an_explicit_namespace_location(client):
    """A user's ``location`` on the namespace places what is created in it without a location
    (as Hive, Glue and Java's JDBC catalog do); a staged create follows it too."""
    own = f"{WAREHOUSE_ROOT}/lake/placed-here"
    create(client, "homed", properties={"location": own + "/"})
    table = client.post(f"{NS}/homed/tables", json={"name": "t", "schema": SCHEMA})
    assert table.status_code == 200, table.text
    assert table.json()["metadata"]["location"].startswith(own + "/t-")
    assert table.json()["metadata-location"].startswith(own + "/t-")
    view = client.post(
        f"{NS}/homed/views", json={"name": "v", "schema": SCHEMA, "view-version": VIEW_VERSION, "properties": {}}
    )
    assert view.status_code == 200, view.text
    assert view.json()["metadata"]["location"].startswith(own + "/v-")

    staged = client.post(f"{NS}/homed/tables", json={"name": "s", "schema": SCHEMA, "stage-create": True})
    assert staged.status_code == 200, staged.text
    assert staged.json()["metadata"]["location"].startswith(own + "/s-")


def test_a_namespace_location_outside_the_warehouse_is_refused(client, db):
    """A namespace's location is one it owns (issue 46): outside the warehouse's allowed locations,
    or at the warehouse root itself, it is refused on create and on update, nothing written."""
    for outside in ("s3://someone-elses-bucket/data", WAREHOUSE_ROOT, "file:///etc"):
        refused = create(client, "astray", properties={"location": outside})
        assert_error(refused, 400, "BadRequestException")
        assert "outside the warehouse's allowed locations" in refused.json()["error"]["message"]
    assert db.execute("SELECT count(*) FROM namespace").fetchone()[0] == 0
    create(client, "astray")
    updated = client.post(f"{NS}/astray/properties", json={"updates": {"location": "s3://someone-elses-bucket/d"}})
    assert_error(updated, 400, "BadRequestException")
    assert client.get(f"{NS}/astray").json()["properties"] == {"location": f"{WAREHOUSE_ROOT}/astray"}


def test_create_existing_is_409(client):
    assert create(client, "dup").status_code == 200
    assert_error(create(client, "dup"), 409, "AlreadyExistsException")


def test_nested_namespace_needs_parent(client):
    # createNamespace declares no 404: a missing parent is a bad request
    assert_error(create(client, "nope", "child"), 400, "BadRequestException")
    assert create(client, "acct").status_code == 200
    assert create(client, "acct", "tax").status_code == 200
    assert create(client, "acct", "tax", "paid").status_code == 200
    loaded = client.get(f"{NS}/acct%1Ftax%1Fpaid")
    assert loaded.status_code == 200
    assert loaded.json()["namespace"] == ["acct", "tax", "paid"]


def test_list_top_level_and_children(client):
    for levels in (["a"], ["b"], ["a", "x"], ["a", "y"], ["a", "x", "deep"]):
        assert create(client, *levels).status_code == 200

    assert client.get(NS).json() == {"namespaces": [["a"], ["b"]]}
    assert client.get(NS, params={"parent": "a"}).json() == {"namespaces": [["a", "x"], ["a", "y"]]}
    assert client.get(NS, params={"parent": "a\x1fx"}).json() == {"namespaces": [["a", "x", "deep"]]}
    assert client.get(NS, params={"parent": "b"}).json() == {"namespaces": []}
    assert_error(client.get(NS, params={"parent": "missing"}), 404, "NoSuchNamespaceException")


def test_pagination_walks_every_page_once(client):
    names = [f"ns{i:03d}" for i in range(25)]
    for name in reversed(names):
        assert create(client, name).status_code == 200

    seen, token, pages = [], "", 0
    while True:
        response = client.get(NS, params={"pageToken": token, "pageSize": 10})
        assert response.status_code == 200
        body = response.json()
        pages += 1
        seen += [ns[0] for ns in body["namespaces"]]
        token = body.get("next-page-token")
        if not token:
            break
    assert pages == 3
    assert seen == names


def test_without_page_token_everything_is_returned(client):
    for i in range(12):
        create(client, f"n{i:02d}")
    body = client.get(NS).json()
    assert len(body["namespaces"]) == 12
    assert "next-page-token" not in body


def test_pagination_with_parent(client):
    create(client, "p")
    for i in range(5):
        create(client, "p", f"c{i}")
    first = client.get(NS, params={"parent": "p", "pageToken": "", "pageSize": 3}).json()
    assert first["namespaces"] == [["p", "c0"], ["p", "c1"], ["p", "c2"]]
    second = client.get(NS, params={"parent": "p", "pageToken": first["next-page-token"], "pageSize": 3}).json()
    assert second["namespaces"] == [["p", "c3"], ["p", "c4"]]
    assert "next-page-token" not in second


def test_head_namespace(client):
    create(client, "here")
    assert client.head(f"{NS}/here").status_code == 204
    assert client.head(f"{NS}/absent").status_code == 404


def test_drop_namespace(client):
    create(client, "gone")
    assert client.delete(f"{NS}/gone").status_code == 204
    assert client.head(f"{NS}/gone").status_code == 404
    assert_error(client.delete(f"{NS}/gone"), 404, "NoSuchNamespaceException")


def test_drop_namespace_with_children_is_409(client):
    create(client, "parent")
    create(client, "parent", "kid")
    assert_error(client.delete(f"{NS}/parent"), 409, "NamespaceNotEmptyException")
    assert client.delete(f"{NS}/parent%1Fkid").status_code == 204
    assert client.delete(f"{NS}/parent").status_code == 204


def test_drop_namespace_holding_a_table_or_view_is_409(client, db):
    create(client, "holder")
    ns_id = db.execute("SELECT id FROM namespace WHERE path = '{holder}'").fetchone()[0]
    for kind in ("table", "view"):
        db.execute(
            "INSERT INTO catalog_entry (namespace_id, name, kind, uuid, location, metadata_location, metadata)"
            " VALUES (%s, %s, %s, gen_random_uuid(), 's3://b/x', 's3://b/x/m.json', '{}')",
            (ns_id, f"a_{kind}", kind),
        )
        assert_error(client.delete(f"{NS}/holder"), 409, "NamespaceNotEmptyException")
        db.execute("DELETE FROM catalog_entry WHERE namespace_id = %s", (ns_id,))
    assert client.delete(f"{NS}/holder").status_code == 204


def test_update_properties(client):
    create(client, "props", properties={"a": "1", "b": "2", "c": "3"})
    response = client.post(
        f"{NS}/props/properties",
        json={"removals": ["a", "zzz"], "updates": {"b": "20", "d": "4"}},
    )
    assert response.status_code == 200
    body = response.json()
    assert sorted(body["updated"]) == ["b", "d"]
    assert body["removed"] == ["a"]
    assert body["missing"] == ["zzz"]
    assert client.get(f"{NS}/props").json()["properties"] == {
        "b": "20",
        "c": "3",
        "d": "4",
        "location": f"{WAREHOUSE_ROOT}/props",
    }


def test_update_properties_key_in_both_is_422(client):
    create(client, "both", properties={"k": "v"})
    response = client.post(f"{NS}/both/properties", json={"removals": ["k"], "updates": {"k": "w"}})
    assert_error(response, 422, "UnprocessableEntityException")
    assert client.get(f"{NS}/both").json()["properties"] == {"k": "v", "location": f"{WAREHOUSE_ROOT}/both"}


def test_update_properties_of_missing_namespace_is_404(client):
    response = client.post(f"{NS}/ghost/properties", json={"updates": {"k": "v"}})
    assert_error(response, 404, "NoSuchNamespaceException")


def test_unprefixed_routes_serve_the_default_warehouse(client):
    assert client.post("/v1/namespaces", json={"namespace": ["plain"]}).status_code == 200
    assert client.get(f"{NS}/plain").status_code == 200
    assert client.get("/v1/namespaces").json() == {"namespaces": [["plain"]]}
    assert client.head("/v1/namespaces/plain").status_code == 204
    assert client.delete("/v1/namespaces/plain").status_code == 204


def test_unknown_warehouse_is_404(client):
    assert_error(client.get("/v1/nowhere/namespaces"), 404, "NoSuchWarehouseException")
    assert_error(client.post("/v1/nowhere/namespaces", json={"namespace": ["x"]}), 404, "NoSuchWarehouseException")


@pytest.mark.parametrize("separator_form", ["%1F", "%1f"])
def test_unit_separator_in_path(client, separator_form):
    create(client, "u")
    create(client, "u", "v")
    assert client.get(f"{NS}/u{separator_form}v").json()["namespace"] == ["u", "v"]


def test_listing_an_empty_namespace_a_missing_one_and_the_last_page(client):
    """A page and its namespace come from one query: no row is no namespace, a row of NULL an
    empty page."""
    assert create(client, "hollow").status_code == 200
    for child in ("inner", "outer"):
        assert create(client, "hollow", child).status_code == 200
    for kind in ("tables", "views"):
        assert client.get(f"{NS}/hollow/{kind}").json() == {"identifiers": []}
        assert client.get(f"{NS}/hollow/{kind}", params={"pageToken": "", "pageSize": 1}).json() == {"identifiers": []}
        assert_error(client.get(f"{NS}/hollow%1Fnone/{kind}"), 404, "NoSuchNamespaceException")
    assert client.get(NS, params={"parent": "hollow\x1finner"}).json() == {"namespaces": []}
    first = client.get(NS, params={"parent": "hollow", "pageToken": "", "pageSize": 1}).json()
    assert first["namespaces"] == [["hollow", "inner"]]
    last = client.get(NS, params={"parent": "hollow", "pageSize": 1, "pageToken": first["next-page-token"]})
    assert last.json() == {"namespaces": [["hollow", "outer"]]}
