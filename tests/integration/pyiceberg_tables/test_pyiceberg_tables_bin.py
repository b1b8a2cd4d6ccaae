"""PyIceberg's standard sequences after a drop, on the default warehouse (soft deletion policy, a
recycle bin) against gunicorn: they work as on a catalog without a bin (docs/recycle-bin.md, "take-overs").

A table created again at the dropped one's explicit location takes writes and reads its own rows,
and the binned table cannot be undropped over it (409) while an administrator's purge of it leaves
every file of the new table; the dropped table's last metadata file registers again (same uuid,
same rows); a create transaction at the dropped table's location commits; a table unregistered
(through the client's session: PyIceberg has no call for it) registers again from the metadata
the unregister answered, with nothing of it in the bin.
"""

from __future__ import annotations

import time

import httpx
from pyiceberg.catalog.rest import RestCatalog

from app.ground.locations import Location
from tests.integration.pyiceberg_support import NS, SCHEMA, SPEC, create_sales, ids_of, objects_under, rows


def bin_units(server) -> list[dict]:
    url = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin"
    response = httpx.get(url, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()["units"]


def explicit_location(catalog: RestCatalog, name: str) -> str:
    """A location of the caller's choosing inside the namespace's, as ETL scripts give one."""
    return f"{catalog.load_namespace_properties(NS)['location'].rstrip('/')}/{name}_explicit"


def test_a_table_created_again_at_the_dropped_ones_location(server, catalog, objects):
    location = explicit_location(catalog, "sales")
    first = create_sales(catalog, location=location)
    first.append(rows(1, 2))
    catalog.drop_table((NS, "sales"))
    (unit,) = bin_units(server)

    second = create_sales(catalog, location=location)  # DROP TABLE; CREATE TABLE ... LOCATION '<same>'
    assert second.location() == location and second.metadata.table_uuid != first.metadata.table_uuid
    second.append(rows(3))
    assert ids_of(catalog.load_table((NS, "sales")).scan().to_arrow()) == [3]

    base = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin/{unit['id']}"
    refused = httpx.post(f"{base}/undrop", json={"name": "sales_before"}, timeout=30)
    assert refused.status_code == 409 and refused.json()["error"]["type"] == "LocationTakenException"
    assert httpx.delete(base, timeout=30).status_code == 204  # an administrator's purge of the old one
    deadline = time.monotonic() + 30
    while bin_units(server):
        assert time.monotonic() < deadline, "the purge did not finish"
        time.sleep(0.3)
    reloaded = catalog.load_table((NS, "sales"))
    assert ids_of(reloaded.scan().to_arrow()) == [3]  # every file of the new table is there
    for data_file in reloaded.inspect.files()["file_path"].to_pylist():
        assert objects.exists(Location.parse(data_file))


def test_the_dropped_tables_last_metadata_file_registers_again(server, catalog):
    table = create_sales(catalog)
    table.append(rows(1, 2))
    catalog.drop_table((NS, "sales"))  # into the bin, its files kept

    registered = catalog.register_table((NS, "sales"), table.metadata_location)
    assert registered.metadata.table_uuid == table.metadata.table_uuid
    assert ids_of(registered.scan().to_arrow()) == [1, 2]
    registered.append(rows(3))
    assert ids_of(catalog.load_table((NS, "sales")).scan().to_arrow()) == [1, 2, 3]
    assert [unit["uuid"] for unit in bin_units(server)] == [str(table.metadata.table_uuid)]


def test_a_create_transaction_at_the_dropped_tables_location(catalog):
    location = explicit_location(catalog, "staged")
    create_sales(catalog, "staged", location=location).append(rows(1))
    catalog.drop_table((NS, "staged"))

    txn = catalog.create_table_transaction((NS, "staged"), schema=SCHEMA, partition_spec=SPEC, location=location)
    txn.append(rows(7, 8))
    committed = txn.commit_transaction()
    assert committed.location() == location
    assert ids_of(catalog.load_table((NS, "staged")).scan().to_arrow()) == [7, 8]


def test_an_unregistered_table_registers_again(server, catalog, objects):
    table = create_sales(catalog)
    table.append(rows(1, 2))
    url = catalog.url("namespaces/{namespace}/tables/{table}/unregister", namespace=NS, table="sales")
    gone = catalog._session.post(url)
    assert gone.status_code == 200, gone.text
    assert gone.json()["metadata-location"] == table.metadata_location
    assert bin_units(server) == []  # forgotten, not binned
    assert objects_under(objects, table.location())  # every file kept

    back = catalog.register_table((NS, "sales"), gone.json()["metadata-location"])
    assert back.metadata.table_uuid == table.metadata.table_uuid
    back.append(rows(3))
    assert ids_of(catalog.load_table((NS, "sales")).scan().to_arrow()) == [1, 2, 3]
