"""PyIceberg's REST catalog client against a running gunicorn: a table's lifecycle (staged creates,
rename, exists and list, drop with and without purge, register) and the errors a client meets (missing
and duplicate tables, a missing namespace, stale commits from a second client).

The clients are configured with Growler's URL and warehouse only, as in test_pyiceberg_tables_data.py.
"""

from __future__ import annotations

import time

import httpx
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.types import (
    StringType,
)

from app.ground.locations import Location
from tests.conftest import TEST_CREDENTIAL
from tests.integration.pyiceberg_support import NS, SCHEMA, SPEC, create_sales, ids_of, new_catalog, objects_under, rows

# ------------------------------------------------------------------------------------------
# Lifecycle: staged create, rename, exists/list, purge, register
# ------------------------------------------------------------------------------------------


def test_staged_create_transaction(access_catalog, objects):
    txn = access_catalog.create_table_transaction((NS, "staged"), schema=SCHEMA, partition_spec=SPEC)
    # nothing exists until the transaction commits
    assert not access_catalog.table_exists((NS, "staged"))
    txn.set_properties({"owner": "etl"})
    txn.append(rows(1, 2))
    table = txn.commit_transaction()

    assert access_catalog.table_exists((NS, "staged"))
    loaded = access_catalog.load_table((NS, "staged"))
    assert loaded.metadata_location == table.metadata_location
    assert loaded.properties["owner"] == "etl"
    assert [f.name for f in loaded.spec().fields] == ["category", "ts_day"]
    assert len(loaded.snapshots()) == 1
    assert ids_of(loaded.scan().to_arrow()) == [1, 2]
    assert objects.exists(Location.parse(loaded.metadata_location))


def test_staged_create_without_data(catalog):
    txn = catalog.create_table_transaction((NS, "empty"), schema=SCHEMA, partition_spec=SPEC)
    txn.set_properties({"owner": "etl"})
    txn.commit_transaction()

    loaded = catalog.load_table((NS, "empty"))
    assert loaded.properties["owner"] == "etl"
    assert [f.name for f in loaded.schema().fields] == ["id", "category", "ts", "qty", "price"]
    assert [f.name for f in loaded.spec().fields] == ["category", "ts_day"]
    assert loaded.current_snapshot() is None
    assert loaded.scan().to_arrow().num_rows == 0


def test_concurrent_staged_creates_only_one_wins(catalog):
    first = catalog.create_table_transaction((NS, "race"), schema=SCHEMA)
    second = catalog.create_table_transaction((NS, "race"), schema=SCHEMA)
    first.set_properties({"winner": "first"})
    second.set_properties({"winner": "second"})
    first.commit_transaction()
    with pytest.raises(CommitFailedException, match="already exists"):  # assert-create
        second.commit_transaction()
    assert catalog.load_table((NS, "race")).properties["winner"] == "first"


def test_stage_create_of_existing_table_is_refused(catalog):
    # Java's CatalogHandlers.stageTableCreate: 409 AlreadyExistsException, as for a plain create
    create_sales(catalog)
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table_transaction((NS, "sales"), schema=SCHEMA)


def test_rename_exists_and_list(catalog):
    catalog.create_namespace("archive")
    table = create_sales(catalog)
    table.append(rows(1, 2))
    create_sales(catalog, "returns")

    assert sorted(catalog.list_tables(NS)) == [(NS, "returns"), (NS, "sales")]
    assert catalog.table_exists((NS, "sales"))
    assert not catalog.table_exists((NS, "nothing"))

    renamed = catalog.rename_table((NS, "sales"), ("archive", "sales_2024"))
    assert renamed.name() == ("archive", "sales_2024")
    assert renamed.metadata.table_uuid == table.metadata.table_uuid
    assert ids_of(renamed.scan().to_arrow()) == [1, 2]
    assert not catalog.table_exists((NS, "sales"))
    assert catalog.list_tables(NS) == [(NS, "returns")]
    assert catalog.list_tables("archive") == [("archive", "sales_2024")]

    # the renamed table keeps taking writes
    renamed.append(rows(3))
    assert ids_of(catalog.load_table(("archive", "sales_2024")).scan().to_arrow()) == [1, 2, 3]


def test_drop_with_purge_removes_objects(catalog, objects, server):
    table = create_sales(catalog)
    table.append(rows(1, 2))
    table.append(rows(3))
    location = table.location()
    before = objects_under(objects, location)
    assert any(o.endswith(".parquet") for o in before)
    assert any(o.endswith(".avro") for o in before)  # manifests and manifest lists
    assert sum(o.endswith(".metadata.json") for o in before) == 3

    catalog.purge_table((NS, "sales"))
    assert not catalog.table_exists((NS, "sales"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table((NS, "sales"))

    # The default soft policy (issue 35) keeps the table in the recycle bin, its files in place,
    # until its retention ends; an administrator's purge runs the purge now.
    assert objects_under(objects, location) == before
    bin_url = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin"
    (unit,) = httpx.get(bin_url, timeout=30).json()["units"]
    assert unit["name"] == "sales" and unit["purge-requested"] is True
    assert httpx.delete(f"{bin_url}/{unit['id']}", timeout=30).status_code == 204
    # the purge runs in the background; give it a few seconds
    deadline = time.monotonic() + 15
    remaining = objects_under(objects, location)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.2)
        remaining = objects_under(objects, location)
    assert remaining == []


def test_drop_without_purge_keeps_objects(catalog, objects):
    table = create_sales(catalog)
    table.append(rows(1))
    before = objects_under(objects, table.location())
    catalog.drop_table((NS, "sales"))
    assert not catalog.table_exists((NS, "sales"))
    time.sleep(0.5)
    assert objects_under(objects, table.location()) == before


def test_register_table_from_metadata_file(server, clean_catalog, hard_policy_warehouse):
    # On a hard-policy warehouse (the soft default's same sequence: test_pyiceberg_tables_bin.py).
    # Made through the management API without a credentials mode, it takes the server's (sts), as
    # the default warehouse does: PyIceberg gets vended credentials, no signer.
    catalog = RestCatalog("growler", uri=server.url, warehouse=hard_policy_warehouse, credential=TEST_CREDENTIAL)
    catalog.create_namespace(NS)
    table = create_sales(catalog)
    assert "s3.session-token" in table.io.properties
    assert "s3.remote-signing-enabled" not in table.io.properties
    table.append(rows(1, 2))
    table.append(rows(3))
    metadata_location = table.metadata_location
    snapshot_id = table.current_snapshot().snapshot_id
    catalog.drop_table((NS, "sales"))  # files stay

    registered = catalog.register_table((NS, "restored"), metadata_location)
    assert registered.metadata_location == metadata_location
    assert registered.metadata.table_uuid == table.metadata.table_uuid
    assert registered.current_snapshot().snapshot_id == snapshot_id
    assert ids_of(registered.scan().to_arrow()) == [1, 2, 3]
    assert catalog.list_tables(NS) == [(NS, "restored")]

    # the registered table is a normal table: it takes writes, its next file follows on
    assert metadata_location.rsplit("/", 1)[1].startswith("00002-")
    registered.append(rows(4))
    assert registered.metadata_location.rsplit("/", 1)[1].startswith("00003-")
    assert registered.metadata.metadata_log[-1].metadata_file == metadata_location
    assert ids_of(catalog.load_table((NS, "restored")).scan().to_arrow()) == [1, 2, 3, 4]

    with pytest.raises(TableAlreadyExistsError):
        catalog.register_table((NS, "restored"), metadata_location)


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------


def test_missing_and_duplicate_tables(catalog):
    with pytest.raises(NoSuchTableError):
        catalog.load_table((NS, "missing"))
    with pytest.raises(NoSuchTableError):
        catalog.drop_table((NS, "missing"))
    with pytest.raises(NoSuchTableError):
        catalog.rename_table((NS, "missing"), (NS, "other"))

    create_sales(catalog)
    with pytest.raises(TableAlreadyExistsError):
        create_sales(catalog)
    create_sales(catalog, "second")
    with pytest.raises(TableAlreadyExistsError):
        catalog.rename_table((NS, "second"), (NS, "sales"))


def test_missing_namespace(catalog):
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table(("nowhere", "t"), schema=SCHEMA)
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("nowhere")
    with pytest.raises((NoSuchNamespaceError, NoSuchTableError)):
        catalog.load_table(("nowhere", "t"))
    create_sales(catalog)
    with pytest.raises(NoSuchNamespaceError):
        catalog.rename_table((NS, "sales"), ("nowhere", "sales"))
    assert catalog.table_exists((NS, "sales"))


def test_stale_schema_commit_from_second_client_fails(server, catalog):
    create_sales(catalog)
    first = catalog.load_table((NS, "sales"))
    second = new_catalog(server).load_table((NS, "sales"))

    with first.update_schema() as update:
        update.add_column("from_first", StringType())
    with pytest.raises(CommitFailedException, match="Requirement failed"):
        with second.update_schema() as update:  # based on the old schema: assert-current-schema-id fails
            update.add_column("from_second", StringType())

    names = [f.name for f in catalog.load_table((NS, "sales")).schema().fields]
    assert "from_first" in names and "from_second" not in names

    # after a refresh the second client's change applies
    with second.refresh().update_schema() as update:
        update.add_column("from_second", StringType())
    names = [f.name for f in catalog.load_table((NS, "sales")).schema().fields]
    assert names[-2:] == ["from_first", "from_second"]


def test_stale_append_from_second_client_fails_without_retries(server, catalog):
    # no client-side retries, so the catalog's 409 reaches the caller
    create_sales(catalog, properties={"commit.retry.num-retries": "0"})
    first = catalog.load_table((NS, "sales"))
    second = new_catalog(server).load_table((NS, "sales"))

    first.append(rows(1))
    with pytest.raises(CommitFailedException, match="branch main was created concurrently"):
        second.append(rows(2))  # assert-ref-snapshot-id main: expected none, found first's snapshot
    assert ids_of(catalog.load_table((NS, "sales")).scan().to_arrow()) == [1]


def test_stale_append_is_retried_by_pyiceberg(server, catalog):
    create_sales(catalog)
    first = catalog.load_table((NS, "sales"))
    second = new_catalog(server).load_table((NS, "sales"))

    first.append(rows(1))
    second.append(rows(2))  # 409 from Growler, PyIceberg refreshes and re-commits
    final = catalog.load_table((NS, "sales"))
    assert ids_of(final.scan().to_arrow()) == [1, 2]
    assert len(final.snapshots()) == 2
