"""PyIceberg's REST catalog client against a running gunicorn: every namespace operation."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NamespaceNotEmptyError, NoSuchNamespaceError

from tests.conftest import TEST_CREDENTIAL


@pytest.fixture
def catalog(server, clean_catalog) -> RestCatalog:
    return RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)


def test_create_list_nested(catalog):
    catalog.create_namespace("analytics", {"owner": "data-eng"})
    catalog.create_namespace(("analytics", "daily"))
    catalog.create_namespace(("analytics", "daily", "eu"))
    catalog.create_namespace("raw")

    assert sorted(catalog.list_namespaces()) == [("analytics",), ("raw",)]
    assert catalog.list_namespaces(("analytics",)) == [("analytics", "daily")]
    assert catalog.list_namespaces(("analytics", "daily")) == [("analytics", "daily", "eu")]
    assert catalog.namespace_exists(("analytics", "daily", "eu"))
    assert not catalog.namespace_exists(("analytics", "weekly"))


def test_properties(catalog, settings):
    catalog.create_namespace("props", {"a": "1", "b": "2"})
    # the default location is reported, never stored (so it is not a removable property)
    default_location = settings.warehouse_location.rstrip("/") + "/props"
    assert catalog.load_namespace_properties("props") == {"a": "1", "b": "2", "location": default_location}

    summary = catalog.update_namespace_properties("props", removals={"a", "missing"}, updates={"c": "3"})
    assert summary.removed == ["a"]
    assert summary.missing == ["missing"]
    assert summary.updated == ["c"]
    assert catalog.load_namespace_properties("props") == {"b": "2", "c": "3", "location": default_location}

    catalog.update_namespace_properties("props", updates={"location": default_location + "-own"})
    assert catalog.load_namespace_properties("props")["location"] == default_location + "-own"


def test_errors_map_to_pyiceberg_exceptions(catalog):
    catalog.create_namespace("once")
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace("once")
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties("never")
    catalog.create_namespace(("once", "child"))
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace("once")
    with pytest.raises(NoSuchNamespaceError):
        catalog.drop_namespace("never")


def test_drop(catalog):
    catalog.create_namespace(("tmp",))
    catalog.create_namespace(("tmp", "inner"))
    catalog.drop_namespace(("tmp", "inner"))
    catalog.drop_namespace("tmp")
    assert catalog.list_namespaces() == []
