"""The recycle bin meets location ownership (storage/placement.py): the shared state is a dropped
table's location, metadata directory and data path, which its bin entry may still bring back (undrop), purge
(housekeeping) or give up to a new entry (a take-over, docs/recycle-bin.md).

Each sequence runs on the default, soft warehouse as it would on a catalog without a bin: a table
created at a dropped one's explicit location (ETL scripts, Iceberg's Java ``CatalogTests``), a
staged create then its commit there (Java's create/replace transactions, Spark's ``CREATE OR
REPLACE TABLE ... AS SELECT``); and the bin stays safe: an undrop over the new owner is a 409
naming it that writes nothing (raced against a create through a held lock: never two owners), a
purge of the taken-over entry leaves every file of the new table (raced against the create too),
and a dropped table whose purge runs still keeps new entries out.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.composition.services import services_of
from app.ground.locations import Location
from storage.objects import S3ObjectStore
from storage.placement import _LOCK_SEED, _prefixes
from tests.api.bin_support import BIN, M, bin_state, held_rows, undrop, units, until
from tests.api.tables_support import PREFIX, TextStore, create_request, error_type, table_url, tables_url

OTHER_BUCKET = "growler-test-other"


@pytest.fixture
def s3(app) -> TextStore:
    return TextStore(services_of(app.app).namespaces.objects)


@pytest.fixture
def home(client) -> str:
    """The namespace ``db`` and the explicit location its tables are given here."""
    created = client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    assert created.status_code == 200, created.text
    location = client.get(f"{PREFIX}/namespaces/db").json()["properties"]["location"].rstrip("/")
    return f"{location}/explicit"


def create_at(client, name: str, location: str, **extra: Any):
    return client.post(tables_url(), json=create_request(name, location=location, **extra))


def add_snapshot(client, s3: TextStore, name: str, location: str, snapshot_id: int) -> dict[str, Any]:
    """A data file and a manifest list written under ``location``, and a snapshot naming the list."""
    data_file = f"{location}/data/part-{snapshot_id}.parquet"
    manifest_list = f"{location}/metadata/snap-{snapshot_id}.avro"
    s3.write_new(data_file, b"rows", "application/octet-stream")
    s3.write_new(manifest_list, b"list", "application/octet-stream")
    snapshot = {
        "snapshot-id": snapshot_id,
        "timestamp-ms": 1_700_000_000_000,
        "manifest-list": manifest_list,
        "summary": {"operation": "append"},
        "schema-id": 0,
    }
    body = {
        "requirements": [],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
        ],
    }
    response = client.post(table_url(name), json=body)
    assert response.status_code == 200, response.text
    return {"data": data_file, "manifest-list": manifest_list, **response.json()}


def test_a_table_created_at_a_dropped_tables_explicit_location_takes_it_over(client, home, db):
    old = create_at(client, "t", home)
    assert old.status_code == 200, old.text
    assert client.delete(table_url("t")).status_code == 204
    (unit,) = units(client)

    new = create_at(client, "t", home)  # DROP TABLE t; CREATE TABLE t ... LOCATION '<the same>'
    assert new.status_code == 200, new.text
    assert new.json()["metadata"]["location"] == home
    assert client.get(table_url("t")).json()["metadata"]["table-uuid"] == new.json()["metadata"]["table-uuid"]
    assert create_at(client, "other", home).status_code == 400  # a live owner still keeps others out

    before = bin_state(db)
    refused = undrop(client, unit["id"], name="t_old")  # a free name: the location is what is taken
    assert (refused.status_code, error_type(refused)) == (409, "LocationTakenException"), refused.text
    message = refused.json()["error"]["message"]
    assert "table db.t holds it now" in message and home in message
    assert f"DELETE /management/v1/warehouses/test/bin/{unit['id']}" in message
    assert bin_state(db) == before  # nothing written; still in the bin

    # The new owner goes (into the bin too): the old table may come back to its place.
    assert client.delete(table_url("t")).status_code == 204
    back = undrop(client, unit["id"])
    assert back.status_code == 200, back.text
    assert client.get(table_url("t")).json()["metadata"]["table-uuid"] == old.json()["metadata"]["table-uuid"]
    (second,) = units(client)
    again = undrop(client, second["id"], name="t_new")
    assert (again.status_code, error_type(again)) == (409, "LocationTakenException")


def test_the_holder_is_named_only_to_a_caller_who_sees_it(app, client, home, principals, settings, unique):
    """A table of another namespace took the place over (both may use the warehouse's allowed
    location): a restorer holding undrop on ``db`` only is not told its name."""
    S3ObjectStore(settings.s3).ensure_bucket(OTHER_BUCKET)
    shared = f"s3://{OTHER_BUCKET}/{unique}/shared"
    catalog = services_of(app.app).namespaces
    catalog.warehouses.remember(
        catalog.repository.upsert_warehouse(
            settings.warehouse,
            settings.warehouse_location,
            {"endpoint": settings.s3.endpoint, "region": "us-east-1", "path-style": True},
            [f"s3://{OTHER_BUCKET}/{unique}/"],
        )
    )
    try:
        assert create_at(client, "t", shared).status_code == 200
        assert client.delete(table_url("t")).status_code == 204
        (unit,) = units(client)
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["other"]}).status_code == 200
        hidden = client.post(tables_url("other"), json=create_request("hidden", location=shared))
        assert hidden.status_code == 200, hidden.text
        restorer = principals.new("restorer")
        principals.grant(restorer, "undrop", "namespace", "test", ("db",))
        refused = undrop(restorer.client, unit["id"])
        assert refused.status_code == 409, refused.text
        message = refused.json()["error"]["message"]
        assert "hidden" not in message and "another table, view or staged table holds it now" in message
        assert "other.hidden holds it now" in undrop(client, unit["id"]).json()["error"]["message"]  # an admin
    finally:
        catalog.ensure_default_warehouse()


def test_a_staged_create_then_its_commit_after_a_drop_at_the_same_location(client, home, db):
    """Java's ``createTransaction``/``createOrReplaceTransaction`` of a table that is not there (and
    Spark's ``CREATE OR REPLACE TABLE ... AS SELECT``): stage-create, write, commit the create."""
    create_at(client, "t", home)
    assert client.delete(table_url("t")).status_code == 204
    staged = create_at(client, "t", home, **{"stage-create": True})
    assert staged.status_code == 200, staged.text
    metadata = staged.json()["metadata"]
    commit = {
        "requirements": [{"type": "assert-create"}],
        "updates": [
            {"action": "assign-uuid", "uuid": metadata["table-uuid"]},
            {"action": "upgrade-format-version", "format-version": 2},
            {"action": "add-schema", "schema": metadata["schemas"][0]},
            {"action": "set-current-schema", "schema-id": -1},
            {"action": "add-spec", "spec": metadata["partition-specs"][0]},
            {"action": "set-default-spec", "spec-id": -1},
            {"action": "add-sort-order", "sort-order": metadata["sort-orders"][0]},
            {"action": "set-default-sort-order", "sort-order-id": -1},
            {"action": "set-location", "location": home},
        ],
    }
    committed = client.post(table_url("t"), json=commit)
    assert committed.status_code == 200, committed.text
    assert client.get(table_url("t")).json()["metadata"]["table-uuid"] == metadata["table-uuid"]
    assert db.execute("SELECT count(*) FROM staged_table").fetchone()[0] == 0
    assert len(units(client)) == 1  # the dropped one stays in the bin, not to be undropped over it
    assert undrop(client, units(client)[0]["id"], name="t_old").status_code == 409


def test_a_purge_after_a_take_over_keeps_every_file_of_the_new_table(client, home, s3, app, db):
    old = create_at(client, "t", home).json()
    old_files = add_snapshot(client, s3, "t", home, 1)
    assert client.delete(table_url("t")).status_code == 204
    (unit,) = units(client)

    create_at(client, "t2", home)
    new_files = add_snapshot(client, s3, "t2", home, 2)
    assert client.delete(f"{BIN}/{unit['id']}").status_code == 204  # an administrator's purge, now
    until(lambda: not units(client) and not db.execute("SELECT count(*) FROM purge_job").fetchone()[0], app)

    for location in (new_files["metadata-location"], new_files["data"], new_files["manifest-list"]):
        assert s3.exists(location), location
    # under a live table's location the purge deletes nothing: the old table's files are the new one's now
    assert s3.exists(old["metadata-location"]) and s3.exists(old_files["data"])
    loaded = client.get(table_url("t2")).json()
    assert loaded["metadata"]["current-snapshot-id"] == 2
    assert s3.exists(loaded["metadata-location"])


def test_a_dropped_table_being_purged_keeps_new_entries_out(client, home, db):
    create_at(client, "t", home)
    assert client.delete(table_url("t")).status_code == 204
    db.execute("UPDATE bin_unit SET purging_since = now()")  # its purge runs (no job: nothing deleted)
    before = bin_state(db)
    refused = create_at(client, "t", home)
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message.startswith("Cannot place table db.t at ") and "being purged" in message
    assert "Try again once its purge finished" in message
    assert bin_state(db) == before
    db.execute("DELETE FROM bin_unit")  # the purge finished: the location is free
    assert create_at(client, "t", home).status_code == 200


def test_a_live_owner_refusal_says_what_to_do(client, home):
    assert create_at(client, "t", home).status_code == 200
    refused = create_at(client, "u", f"{home}/inside")
    assert refused.status_code == 400
    message = refused.json()["error"]["message"]
    assert message.startswith(f"Cannot place table db.u at {home}/inside")
    assert "Give it a location of its own, or none for a new folder under its namespace's location" in message
    assert "db.t" not in message  # names no other entry


def test_an_undrop_racing_a_create_at_its_location_exactly_one_owns_it(client, home, services, db):
    """Both wait on the location's claim lock (held by the test), then go at once: one wins."""
    old = create_at(client, "t", home).json()
    assert client.delete(table_url("t")).status_code == 204
    (unit,) = units(client)
    outcome: dict[str, Any] = {}

    def create() -> None:
        outcome["create"] = create_at(client, "t2", home)

    def back() -> None:
        outcome["undrop"] = undrop(client, unit["id"])

    (exclusive,) = _prefixes(Location.parse(home))[-1:]
    lock = "SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))"
    with held_rows(services.database_url, lock, (exclusive, _LOCK_SEED)) as wait:
        racers = [threading.Thread(target=create), threading.Thread(target=back)]
        for racer in racers:
            racer.start()
        wait(2)
    for racer in racers:
        racer.join(30)
    codes = (outcome["create"].status_code, outcome["undrop"].status_code)
    assert codes in ((200, 409), (400, 200)), (outcome["create"].text, outcome["undrop"].text)
    owners = db.execute("SELECT name, uuid::text FROM catalog_entry ORDER BY name").fetchall()
    if codes == (400, 200):
        assert owners == [("t", old["metadata"]["table-uuid"])] and units(client) == []
    else:
        assert [name for name, _ in owners] == ["t2"] and [u["id"] for u in units(client)] == [unit["id"]]


def test_a_purge_starting_while_a_create_claims_its_location_never_deletes_the_new_table(
    client, home, services, s3, app, db
):
    """An administrator's purge and a create at the dropped table's location, both held at the
    location's claim lock, then let go at once: the create comes first and keeps its files, or
    the purge does and the create is refused. Never a new table whose files the purge deletes."""
    old = create_at(client, "t", home).json()
    assert client.delete(table_url("t")).status_code == 204
    (unit,) = units(client)
    outcome: dict[str, Any] = {}

    def create() -> None:
        outcome["create"] = create_at(client, "t2", home)

    def purge() -> None:
        outcome["purge"] = client.delete(f"{BIN}/{unit['id']}")

    (exclusive,) = _prefixes(Location.parse(home))[-1:]
    lock = "SELECT pg_advisory_xact_lock(hashtextextended(%s, %s))"
    with held_rows(services.database_url, lock, (exclusive, _LOCK_SEED)) as wait:
        racers = [threading.Thread(target=create), threading.Thread(target=purge)]
        for racer in racers:
            racer.start()
        wait(2)
    for racer in racers:
        racer.join(30)
    assert outcome["purge"].status_code == 204, outcome["purge"].text
    until(lambda: not units(client) and not db.execute("SELECT count(*) FROM purge_job").fetchone()[0], app)
    if outcome["create"].status_code == 200:  # first: a live table the purge leaves alone
        loaded = client.get(table_url("t2")).json()
        assert loaded["metadata-location"] == outcome["create"].json()["metadata-location"]
        assert s3.exists(loaded["metadata-location"]) and s3.exists(old["metadata-location"])
    else:  # second: refused while the purge ran, nothing of it written; the old files are gone
        assert outcome["create"].status_code == 400 and "being purged" in outcome["create"].text
        assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0
        assert not s3.exists(old["metadata-location"])
        assert create_at(client, "t2", home).status_code == 200  # free once the purge finished


def test_a_namespace_unit_whose_table_was_taken_over_does_not_come_back(client, db):
    """A recursive drop's unit is undropped whole or not at all: one of its tables' places taken
    (by a table of the namespace made again under the same name) refuses it, even under a new path."""
    for path in (["lake"], ["lake", "raw"]):
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": path}).status_code == 200
    assert client.post(tables_url("lake%1Fraw"), json=create_request("kept")).status_code == 200
    gone = client.post(tables_url("lake%1Fraw"), json=create_request("t")).json()
    dropped = client.delete(f"{M}/warehouses/test/namespaces/lake%1Fraw", params={"recursive": "true"})
    assert dropped.status_code == 200, dropped.text
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["lake", "raw"]}).status_code == 200
    location = gone["metadata"]["location"]
    taker = client.post(tables_url("lake%1Fraw"), json=create_request("t2", location=location))
    assert taker.status_code == 200, taker.text

    before = bin_state(db)
    refused = undrop(client, dropped.json()["id"], namespace=["lake", "restored"])
    assert (refused.status_code, error_type(refused)) == (409, "LocationTakenException"), refused.text
    assert f"the location of table lake.raw.t ({location})" in refused.json()["error"]["message"]
    assert "table lake.raw.t2 holds it now" in refused.json()["error"]["message"]
    assert bin_state(db) == before
    assert client.get(table_url("kept", "lake%1Frestored")).status_code == 404  # nothing of the unit back


def test_a_view_created_at_a_dropped_views_location(client, home):
    """createView at an explicit location after dropping the view there (Java's view tests)."""
    from tests.api.test_recycle_bin import VIEW_BODY

    body = {**VIEW_BODY, "location": f"{home}_view"}
    assert client.post(f"{PREFIX}/namespaces/db/views", json=body).status_code == 200
    assert client.delete(f"{PREFIX}/namespaces/db/views/v").status_code == 204
    again = client.post(f"{PREFIX}/namespaces/db/views", json=body)
    assert again.status_code == 200, again.text
    (unit,) = units(client)
    refused = undrop(client, unit["id"], name="v_old")
    assert refused.status_code == 409 and "view db.v holds it now" in refused.json()["error"]["message"]


def test_a_dropped_tables_data_path_can_be_taken_over_and_then_blocks_its_undrop(client, home, db):
    """A table's ``write.data.path`` outside its location is one of its folders (``table_roots``):
    once it is in the bin, a new table may be created there (a take-over, as at its location), and
    the undrop is then a 409 naming the data path and the new owner, with nothing written."""
    data_path = f"{home}-data"
    old = client.post(tables_url(), json=create_request("t", properties={"write.data.path": data_path}))
    assert old.status_code == 200, old.text
    assert create_at(client, "other", f"{data_path}/x").status_code == 400  # a live owner keeps others out
    assert client.delete(table_url("t")).status_code == 204
    (unit,) = units(client)

    new = create_at(client, "newer", data_path)
    assert new.status_code == 200, new.text

    before = bin_state(db)
    refused = undrop(client, unit["id"])
    assert (refused.status_code, error_type(refused)) == (409, "LocationTakenException"), refused.text
    message = refused.json()["error"]["message"]
    assert data_path in message and "table db.newer holds it now" in message
    assert bin_state(db) == before
    assert client.get(table_url("t")).status_code == 404
