"""Dropping, renaming and registering views through the HTTP API on real PostgreSQL and S3, and the one
identifier space tables and views share."""

from __future__ import annotations

from typing import Any

from tests.api.tables_support import PREFIX, create_request, error_type, table_url, tables_url
from tests.api.views.views_support import (
    METADATA_FILE,
    NS,
    NS_PATH,
    Unchanged,
    create,
    replace_updates,
    view_request,
    view_url,
    views_url,
)
from tests.conftest import TEST_BUCKET

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


def test_register_view_from_a_metadata_file(client, ns, db):
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


def test_register_view_conflicts_and_overwrite(client, ns, db, s3):
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
    assert client.delete(view_url("third")).status_code == 204  # its files stay, its location free (a take-over)
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
