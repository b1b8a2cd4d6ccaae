"""The recycle bin meets registration (registerTable, registerView, unregisterTable): the shared
state is a dropped or unregistered entry's metadata file and uuid, which the bin keeps with it
while a registration may bring them back as a new live entry (docs/recycle-bin.md).

How Iceberg users bring a dropped table back without a bin - register its last metadata file - works
on the default, soft warehouse as on a catalog without a bin, the same uuid as the binned copy's
included; the binned copy then cannot be undropped over it (409, nothing written) and its purge
leaves every file the registered table uses. ``unregisterTable`` forgets the table on soft and hard
warehouses alike (no bin entry, its location free), so registering the metadata it returned works,
while a protection mark still refuses the unregister.
"""

from __future__ import annotations

import pytest

from app.composition.services import services_of
from tests.api.bin_support import BIN, bin_state, protect, undrop, units, until
from tests.api.tables_support import PREFIX, TextStore, append, create_request, error_type, table_url, tables_url
from tests.api.test_recycle_bin import VIEW_BODY

REGISTER = f"{PREFIX}/namespaces/db/register"
VIEWS = f"{PREFIX}/namespaces/db/views"


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    return "db"


@pytest.fixture
def s3(app) -> TextStore:
    return TextStore(services_of(app.app).namespaces.objects)


def test_a_dropped_tables_last_metadata_file_registered_again(client, ns, db):
    created = client.post(tables_url(), json=create_request("t")).json()
    assert append(client, table_url("t"), 1, 1, None).status_code == 200
    last = client.get(table_url("t")).json()
    assert client.delete(table_url("t")).status_code == 204
    (unit,) = units(client)

    registered = client.post(REGISTER, json={"name": "t", "metadata-location": last["metadata-location"]})
    assert registered.status_code == 200, registered.text
    loaded = client.get(table_url("t")).json()
    assert loaded["metadata"]["table-uuid"] == created["metadata"]["table-uuid"] == unit["uuid"]
    assert append(client, table_url("t"), 2, 2, 1).status_code == 200  # it carries on

    before = bin_state(db)
    refused = undrop(client, unit["id"], name="t_binned")
    assert (refused.status_code, error_type(refused)) == (409, "LocationTakenException"), refused.text
    assert "table db.t holds it now" in refused.json()["error"]["message"]
    assert bin_state(db) == before


def test_a_registration_under_another_name_and_the_binned_copys_purge(client, ns, s3, app, db):
    client.post(tables_url(), json=create_request("t"))
    assert append(client, table_url("t"), 1, 1, None).status_code == 200
    last = client.get(table_url("t")).json()
    assert client.delete(table_url("t"), params={"purgeRequested": "true"}).status_code == 204
    (unit,) = units(client)
    registered = client.post(REGISTER, json={"name": "t_again", "metadata-location": last["metadata-location"]})
    assert registered.status_code == 200, registered.text
    committed = append(client, table_url("t_again"), 2, 2, 1).json()

    assert client.delete(f"{BIN}/{unit['id']}").status_code == 204
    until(lambda: not units(client) and not db.execute("SELECT count(*) FROM purge_job").fetchone()[0], app)
    for location in (last["metadata-location"], committed["metadata-location"]):
        assert s3.exists(location), location
    loaded = client.get(table_url("t_again")).json()
    assert loaded["metadata"]["current-snapshot-id"] == 2


def test_a_view_registered_again_after_its_drop(client, ns, db):
    view = client.post(VIEWS, json=VIEW_BODY)
    assert view.status_code == 200, view.text
    assert client.delete(f"{VIEWS}/v").status_code == 204
    (unit,) = units(client)
    body = {"name": "v", "metadata-location": view.json()["metadata-location"]}
    registered = client.post(f"{PREFIX}/namespaces/db/register-view", json=body)
    assert registered.status_code == 200, registered.text
    assert client.get(f"{VIEWS}/v").json()["metadata"]["view-uuid"] == view.json()["metadata"]["view-uuid"]
    before = bin_state(db)
    refused = undrop(client, unit["id"], name="v_binned")
    assert refused.status_code == 409 and "view db.v holds it now" in refused.json()["error"]["message"]
    assert bin_state(db) == before


@pytest.mark.parametrize("policy", ["soft", "hard"])
def test_unregister_forgets_the_table_and_its_metadata_registers_again(client, ns, s3, db, request, policy):
    if policy == "hard":
        request.getfixturevalue("hard_policy")
    client.post(tables_url(), json=create_request("t"))
    assert append(client, table_url("t"), 1, 1, None).status_code == 200
    gone = client.post(f"{table_url('t')}/unregister")
    assert gone.status_code == 200, gone.text
    assert units(client) == [] and db.execute("SELECT count(*) FROM bin_entry").fetchone()[0] == 0
    assert s3.exists(gone.json()["metadata-location"])  # every file stays

    back = client.post(REGISTER, json={"name": "t", "metadata-location": gone.json()["metadata-location"]})
    assert back.status_code == 200, back.text
    assert back.json()["metadata"]["table-uuid"] == gone.json()["metadata"]["table-uuid"]
    assert append(client, table_url("t"), 2, 2, 1).status_code == 200
    again = client.post(f"{table_url('t')}/unregister")  # and again, under another name
    renamed = client.post(REGISTER, json={"name": "t2", "metadata-location": again.json()["metadata-location"]})
    assert renamed.status_code == 200, renamed.text
    assert client.get(table_url("t2")).json()["metadata"]["current-snapshot-id"] == 2


def test_a_protected_table_is_still_not_unregistered(client, ns, db):
    client.post(tables_url(), json=create_request("t"))
    assert protect(client, "table", ["db"], "t").status_code == 204
    before = bin_state(db)
    refused = client.post(f"{table_url('t')}/unregister")
    assert (refused.status_code, error_type(refused)) == (409, "ProtectedException")
    assert bin_state(db) == before
