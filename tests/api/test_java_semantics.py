"""What a user of Iceberg's Java client sees: the reference catalog's exception types and wording.

Iceberg's own REST catalog (``CatalogHandlers`` over ``InMemoryCatalog``/``BaseMetastoreViewCatalog``,
``UpdateRequirement``, the metadata builders) answers these cases with these types and messages;
the Java client turns the type into its exception, and people and tools search for the messages.
Growler gives the same type and starts every message with the reference's wording (detail may
follow). Every case is checked for status, type and message, and that a refusal wrote nothing.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from app.composition.services import services_of
from app.ground.locations import Location
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url
from tests.conftest import TEST_BUCKET

VIEW_SCHEMA = {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "n", "type": "long", "required": False}]}
OTHER_UUID = "11111111-2222-4333-8444-555555555555"


def view_request(name: str) -> dict[str, Any]:
    version = {
        "version-id": 1,
        "timestamp-ms": 1_700_000_000_000,
        "schema-id": 0,
        "summary": {"engine-name": "spark"},
        "default-namespace": ["db"],
        "representations": [{"type": "sql", "sql": "SELECT 1 AS n", "dialect": "spark"}],
    }
    return {"name": name, "schema": copy.deepcopy(VIEW_SCHEMA), "view-version": version, "properties": {}}


def views_url(namespace: str = "db") -> str:
    return f"{PREFIX}/namespaces/{namespace}/views"


def view_url(name: str) -> str:
    return f"{views_url()}/{name}"


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    return "db"


@pytest.fixture
def s3(app):
    return services_of(app.app).namespaces.objects


@pytest.fixture
def table(client, ns) -> dict[str, Any]:
    response = client.post(tables_url(), json=create_request("tbl"))
    assert response.status_code == 200, response.text
    return response.json()


@pytest.fixture
def view(client, ns) -> dict[str, Any]:
    response = client.post(views_url(), json=view_request("vw"))
    assert response.status_code == 200, response.text
    return response.json()


class Unchanged:
    """The catalog rows and the bucket, before a refused request; ``check`` compares after it."""

    def __init__(self, db, s3) -> None:
        self.db, self.s3 = db, s3
        self.rows = self._rows()
        self.objects = self._objects()

    def _rows(self) -> list[tuple]:
        query = "SELECT name, kind, metadata_location FROM catalog_entry ORDER BY name"
        return [tuple(row) for row in self.db.execute(query).fetchall()]

    def _objects(self) -> set[str]:
        return {found.uri for found in self.s3.list(Location.parse(f"s3://{TEST_BUCKET}/"))}

    def check(self) -> None:
        assert self._rows() == self.rows, "a refused request changed the catalog"
        assert self._objects() == self.objects, "a refused request wrote to the bucket"


def assert_refused(response, status: int, error_type: str, message_prefix: str) -> str:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"]) == (status, error_type), error
    assert error["message"].startswith(message_prefix), error["message"]
    return error["message"]


def register(client, kind: str, name: str, metadata_location: str, overwrite: bool = False):
    body: dict[str, Any] = {"name": name, "metadata-location": metadata_location}
    if overwrite:
        body["overwrite"] = True
    path = "register" if kind == "table" else "register-view"
    return client.post(f"{PREFIX}/namespaces/db/{path}", json=body)


def rename(client, kind: str, source: tuple[list[str], str], destination: tuple[list[str], str]):
    return client.post(
        f"{PREFIX}/{kind}s/rename",
        json={
            "source": {"namespace": source[0], "name": source[1]},
            "destination": {"namespace": destination[0], "name": destination[1]},
        },
    )


# -- a table over a view, a view over a table ---------------------------------------------------


def test_create_table_over_a_view(client, view, s3, db):
    unchanged = Unchanged(db, s3)
    response = client.post(tables_url(), json=create_request("vw"))
    assert_refused(response, 409, "AlreadyExistsException", "View with same name already exists: db.vw")
    staged = client.post(tables_url(), json=create_request("vw", **{"stage-create": True}))
    assert_refused(staged, 409, "AlreadyExistsException", "View with same name already exists: db.vw")
    unchanged.check()


def test_create_transaction_over_a_view(client, view, s3, db):
    """The case the Java client hit as a 404 NoSuchNamespaceException: a staged create's commit."""
    unchanged = Unchanged(db, s3)
    updates = [
        {"action": "upgrade-format-version", "format-version": 2},
        {"action": "add-schema", "schema": create_request("x")["schema"]},
        {"action": "set-current-schema", "schema-id": -1},
    ]
    response = client.post(table_url("vw"), json={"requirements": [{"type": "assert-create"}], "updates": updates})
    assert_refused(response, 409, "AlreadyExistsException", "View with same name already exists: db.vw")
    multi = client.post(
        f"{PREFIX}/transactions/commit",
        json={
            "table-changes": [
                {
                    "identifier": {"namespace": ["db"], "name": "vw"},
                    "requirements": [{"type": "assert-create"}],
                    "updates": updates,
                }
            ]
        },
    )
    # the same through a multi-table transaction (Growler lets it create tables)
    assert_refused(multi, 409, "AlreadyExistsException", "View with same name already exists: db.vw")
    unchanged.check()


def test_create_view_over_a_table(client, table, s3, db):
    unchanged = Unchanged(db, s3)
    response = client.post(views_url(), json=view_request("tbl"))
    assert_refused(response, 409, "AlreadyExistsException", "Table with same name already exists: db.tbl")
    unchanged.check()


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
def test_register_table_over_a_view(client, table, view, s3, db, overwrite):
    unchanged = Unchanged(db, s3)
    response = register(client, "table", "vw", table["metadata-location"], overwrite)
    assert_refused(response, 409, "AlreadyExistsException", "View with same name already exists: db.vw")
    unchanged.check()


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
def test_register_view_over_a_table(client, table, view, s3, db, overwrite):
    unchanged = Unchanged(db, s3)
    response = register(client, "view", "tbl", view["metadata-location"], overwrite)
    assert_refused(response, 409, "AlreadyExistsException", "Table with same name already exists: db.tbl")
    unchanged.check()


# -- the same kind again ------------------------------------------------------------------------


def test_create_or_register_a_table_that_exists(client, table, s3, db):
    unchanged = Unchanged(db, s3)
    created = client.post(tables_url(), json=create_request("tbl"))
    assert_refused(created, 409, "AlreadyExistsException", "Table already exists: db.tbl")
    staged = client.post(tables_url(), json=create_request("tbl", **{"stage-create": True}))
    assert_refused(staged, 409, "AlreadyExistsException", "Table already exists: db.tbl")
    registered = register(client, "table", "tbl", table["metadata-location"])
    assert_refused(registered, 409, "AlreadyExistsException", "Table already exists: db.tbl")
    unchanged.check()


def test_create_or_register_a_view_that_exists(client, view, s3, db):
    unchanged = Unchanged(db, s3)
    created = client.post(views_url(), json=view_request("vw"))
    assert_refused(created, 409, "AlreadyExistsException", "View already exists: db.vw")
    registered = register(client, "view", "vw", view["metadata-location"])
    assert_refused(registered, 409, "AlreadyExistsException", "View already exists: db.vw")
    unchanged.check()


def test_create_transaction_over_an_existing_table(client, table, s3, db):
    """``assert-create`` on a table that exists: UpdateRequirement.AssertTableDoesNotExist's 409."""
    unchanged = Unchanged(db, s3)
    response = client.post(
        table_url("tbl"),
        json={"requirements": [{"type": "assert-create"}], "updates": [{"action": "set-properties", "updates": {}}]},
    )
    assert_refused(response, 409, "CommitFailedException", "Requirement failed: table already exists")
    unchanged.check()


# -- rename onto a taken name -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "source", "destination", "message"),
    [
        ("table", "tbl", "vw", "Cannot rename db.tbl to db.vw. View already exists"),
        ("table", "tbl", "tbl2", "Cannot rename db.tbl to db.tbl2. Table already exists"),
        ("view", "vw", "tbl", "Cannot rename db.vw to db.tbl. Table already exists"),
        ("view", "vw", "vw2", "Cannot rename db.vw to db.vw2. View already exists"),
    ],
    ids=["table-onto-view", "table-onto-table", "view-onto-table", "view-onto-view"],
)
def test_rename_onto_a_taken_name(client, table, view, s3, db, kind, source, destination, message):
    assert client.post(tables_url(), json=create_request("tbl2")).status_code == 200
    assert client.post(views_url(), json=view_request("vw2")).status_code == 200
    unchanged = Unchanged(db, s3)
    response = rename(client, kind, (["db"], source), (["db"], destination))
    assert_refused(response, 409, "AlreadyExistsException", message)
    unchanged.check()


@pytest.mark.parametrize("kind", ["table", "view"])
def test_rename_refusals_name_both_identifiers(client, ns, s3, db, kind):
    unchanged = Unchanged(db, s3)
    missing = rename(client, kind, (["db"], "ghost"), (["db"], "other"))
    not_found = "NoSuchTableException" if kind == "table" else "NoSuchViewException"
    assert_refused(missing, 404, not_found, f"Cannot rename db.ghost to db.other. {kind.capitalize()} does not exist")
    no_namespace = rename(client, kind, (["db"], "ghost"), (["nowhere"], "other"))
    assert_refused(
        no_namespace,
        404,
        "NoSuchNamespaceException",
        "Cannot rename db.ghost to nowhere.other. Namespace does not exist: nowhere",
    )
    unchanged.check()


# -- requirements -------------------------------------------------------------------------------


def test_view_uuid_requirement(client, view, s3, db):
    unchanged = Unchanged(db, s3)
    view_uuid = view["metadata"]["view-uuid"]
    response = client.post(
        view_url("vw"),
        json={
            "requirements": [{"type": "assert-view-uuid", "uuid": OTHER_UUID}],
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
        },
    )
    assert_refused(
        response,
        409,
        "CommitFailedException",
        f"Requirement failed: view UUID does not match: expected {view_uuid} != {OTHER_UUID}",
    )
    unchanged.check()


@pytest.mark.parametrize(
    ("requirement", "message"),
    [
        ({"type": "assert-table-uuid", "uuid": OTHER_UUID}, "Requirement failed: UUID does not match: expected "),
        ({"type": "assert-current-schema-id", "current-schema-id": 7}, "Requirement failed: current schema changed"),
        (
            {"type": "assert-default-spec-id", "default-spec-id": 7},
            "Requirement failed: default partition spec changed",
        ),
        (
            {"type": "assert-default-sort-order-id", "default-sort-order-id": 7},
            "Requirement failed: default sort order changed",
        ),
        (
            {"type": "assert-last-assigned-field-id", "last-assigned-field-id": 7},
            "Requirement failed: last assigned field id changed",
        ),
        (
            {"type": "assert-last-assigned-partition-id", "last-assigned-partition-id": 7},
            "Requirement failed: last assigned partition id changed",
        ),
        (
            {"type": "assert-ref-snapshot-id", "ref": "dev", "snapshot-id": 7},
            "Requirement failed: branch or tag dev is missing",
        ),
    ],
    ids=lambda value: value["type"] if isinstance(value, dict) else "",
)
def test_table_requirements(client, table, s3, db, requirement, message):
    unchanged = Unchanged(db, s3)
    response = client.post(
        table_url("tbl"),
        json={"requirements": [requirement], "updates": [{"action": "set-properties", "updates": {"k": "v"}}]},
    )
    assert_refused(response, 409, "CommitFailedException", message)
    unchanged.check()


# -- invalid metadata: the reference's 400 types ------------------------------------------------


def test_invalid_table_metadata_is_illegal_argument(client, table, s3, db):
    unchanged = Unchanged(db, s3)
    response = client.post(
        table_url("tbl"),
        json={"requirements": [], "updates": [{"action": "set-current-schema", "schema-id": 42}]},
    )
    assert_refused(response, 400, "IllegalArgumentException", "Invalid table update #0 (set-current-schema)")
    unchanged.check()


def test_table_metadata_failing_validation_is_validation_exception(client, table, s3, db):
    """A partition field whose source column is not in the schema fails the spec's validation."""
    unchanged = Unchanged(db, s3)
    spec = {"spec-id": 1, "fields": [{"source-id": 99, "field-id": 1001, "name": "bad", "transform": "identity"}]}
    response = client.post(
        table_url("tbl"), json={"requirements": [], "updates": [{"action": "add-spec", "spec": spec}]}
    )
    assert_refused(response, 400, "ValidationException", "Invalid table update #0 (add-spec)")
    unchanged.check()


def test_invalid_view_metadata_is_illegal_argument(client, view, s3, db):
    unchanged = Unchanged(db, s3)
    response = client.post(
        view_url("vw"), json={"updates": [{"action": "set-current-view-version", "view-version-id": 42}]}
    )
    assert_refused(response, 400, "IllegalArgumentException", "Invalid view update #0 (set-current-view-version)")
    unchanged.check()


def test_registering_a_file_that_is_not_view_metadata_is_illegal_argument(client, table, s3, db):
    unchanged = Unchanged(db, s3)
    response = register(client, "view", "from_table", table["metadata-location"])
    assert_refused(response, 400, "IllegalArgumentException", "Not valid view metadata")
    unchanged.check()
