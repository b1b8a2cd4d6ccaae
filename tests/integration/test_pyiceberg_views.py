"""PyIceberg's REST catalog client against a running gunicorn: views, as far as PyIceberg 0.12 goes.

PyIceberg 0.12 has create_view, load_view, view_exists, list_views, drop_view and register_view;
it cannot replace (commit to) or rename a view, so those are driven through its own HTTP session
(the client's URL building, headers and error mapping) where it helps, and otherwise left to
tests/api/views/.
"""

from __future__ import annotations

import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    NoSuchViewError,
    TableAlreadyExistsError,
    ViewAlreadyExistsError,
)
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType
from pyiceberg.view.metadata import SQLViewRepresentation, ViewRepresentation, ViewVersion

from tests.conftest import TEST_CREDENTIAL

NS = ("analytics", "daily")
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "total", DoubleType(), required=False),
)


@pytest.fixture
def catalog(server, clean_catalog) -> RestCatalog:
    catalog = RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)
    catalog.create_namespace(NS[:1])
    catalog.create_namespace(NS)
    return catalog


def view_version(*queries: tuple[str, str]) -> ViewVersion:
    """A version as a user builds it; version-id and schema-id are the server's to assign."""
    return ViewVersion(
        version_id=1,
        schema_id=0,
        timestamp_ms=1_700_000_000_000,
        summary={"engine-name": "pyiceberg"},
        representations=[
            ViewRepresentation(SQLViewRepresentation(type="sql", sql=sql, dialect=dialect))
            for dialect, sql in queries or (("spark", "SELECT id, category, total FROM analytics.daily.sales"),)
        ],
        default_namespace=list(NS),
    )


def view_url(catalog: RestCatalog, name: str) -> str:
    """loadView/replaceView's URL, built by the client (PyIceberg has no call that returns it)."""
    return catalog.url("namespaces/{namespace}/views/{view}", namespace="\x1f".join(NS), view=name)


def test_every_operation_pyiceberg_has(catalog):
    assert catalog.list_views(NS) == []
    created = catalog.create_view(
        (*NS, "sales_view"),
        SCHEMA,
        view_version(("spark", "SELECT 1 AS id"), ("trino", "SELECT 1 AS id")),
        properties={"comment": "daily sales"},
    )
    assert created.name() == (*NS, "sales_view")
    assert created.current_version().version_id == 1
    assert created.schema() == SCHEMA
    assert created.properties == {"comment": "daily sales"}

    catalog.create_view((*NS, "another"), SCHEMA, view_version())
    assert catalog.list_views(NS) == [(*NS, "another"), (*NS, "sales_view")]
    assert catalog.list_views(NS[:1]) == []
    assert catalog.view_exists((*NS, "sales_view"))
    assert not catalog.view_exists((*NS, "missing"))

    loaded = catalog.load_view((*NS, "sales_view"))
    assert loaded.metadata == created.metadata
    assert loaded.sql_for("TRINO").sql == "SELECT 1 AS id"
    assert [entry.version_id for entry in loaded.history()] == [1]
    assert loaded.location().startswith("s3://")
    assert str(loaded.uuid()) == created.metadata.view_uuid

    catalog.drop_view((*NS, "sales_view"))
    assert not catalog.view_exists((*NS, "sales_view"))
    assert catalog.list_views(NS) == [(*NS, "another")]


def test_list_views_pages(server, catalog):
    paging = RestCatalog(
        "growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL, **{"rest-page-size": "2"}
    )
    for n in range(5):
        catalog.create_view((*NS, f"v{n}"), SCHEMA, view_version())
    assert paging.list_views(NS) == [(*NS, f"v{n}") for n in range(5)]


def test_register_view_from_a_dropped_views_file(server, clean_catalog, hard_policy_warehouse):
    # On a hard-policy warehouse (on the soft default: tests/api/seams/test_bin_register.py).
    catalog = RestCatalog("growler", uri=server.url, warehouse=hard_policy_warehouse, credential=TEST_CREDENTIAL)
    catalog.create_namespace(NS[:1])
    catalog.create_namespace(NS)
    created = catalog.create_view((*NS, "before"), SCHEMA, view_version())
    location = catalog._session.get(view_url(catalog, "before")).json()["metadata-location"]
    catalog.drop_view((*NS, "before"))
    registered = catalog.register_view((*NS, "after"), location)
    assert registered.metadata == created.metadata
    assert catalog.load_view((*NS, "after")).metadata == created.metadata
    with pytest.raises(ViewAlreadyExistsError):
        catalog.register_view((*NS, "after"), location)


def test_replace_through_the_clients_session(catalog):
    """PyIceberg cannot replace a view; its session posts what Java's client would send."""
    created = catalog.create_view((*NS, "replaced"), SCHEMA, view_version())
    url = view_url(catalog, "replaced")
    new_schema = Schema(NestedField(1, "total", DoubleType(), required=False), schema_id=1)
    new_version = view_version(("spark", "SELECT sum(total) AS total FROM analytics.daily.sales"))
    response = catalog._session.post(
        url,
        json={
            "requirements": [{"type": "assert-view-uuid", "uuid": created.metadata.view_uuid}],
            "updates": [
                {"action": "add-schema", "schema": new_schema.model_dump(mode="json", by_alias=True)},
                {
                    "action": "add-view-version",
                    "view-version": {
                        **new_version.model_dump(mode="json", by_alias=True, exclude_none=True),
                        "schema-id": -1,
                    },
                },
                {"action": "set-current-view-version", "view-version-id": -1},
            ],
        },
    )
    assert response.status_code == 200, response.text
    loaded = catalog.load_view((*NS, "replaced"))
    assert loaded.current_version().version_id == 2
    assert loaded.schema().schema_id == 1
    assert [entry.version_id for entry in loaded.history()] == [1, 2]
    assert loaded.sql_for("spark").sql.startswith("SELECT sum(total)")


def test_errors_map_to_pyiceberg_exceptions(catalog):
    catalog.create_view((*NS, "once"), SCHEMA, view_version())
    with pytest.raises(ViewAlreadyExistsError):
        catalog.create_view((*NS, "once"), SCHEMA, view_version())
    with pytest.raises(NoSuchViewError):
        catalog.load_view((*NS, "never"))
    with pytest.raises(NoSuchViewError):
        catalog.drop_view((*NS, "never"))
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_views(("nowhere",))
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace(NS)


def test_tables_and_views_share_one_identifier_space(catalog):
    catalog.create_table((*NS, "a_table"), SCHEMA)
    catalog.create_view((*NS, "a_view"), SCHEMA, view_version())

    with pytest.raises(ViewAlreadyExistsError):
        catalog.create_view((*NS, "a_table"), SCHEMA, view_version())
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table((*NS, "a_view"), SCHEMA)
    with pytest.raises(NoSuchViewError):
        catalog.load_view((*NS, "a_table"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table((*NS, "a_view"))
    with pytest.raises(NoSuchViewError):
        catalog.drop_view((*NS, "a_table"))
    with pytest.raises(NoSuchTableError):
        catalog.drop_table((*NS, "a_view"))
    assert not catalog.table_exists((*NS, "a_view"))
    assert not catalog.view_exists((*NS, "a_table"))
    assert catalog.list_tables(NS) == [(*NS, "a_table")]
    assert catalog.list_views(NS) == [(*NS, "a_view")]
    # PyIceberg checks for a table itself before registering a view
    location = catalog.load_table((*NS, "a_table")).metadata_location
    with pytest.raises(TableAlreadyExistsError):
        catalog.register_view((*NS, "a_table"), location)
