"""The recycle bin (issue 35) through the API: soft drops of tables and views (unregister forgets),
the bin's listing, undrop under the old or a new name with uuid, history and grants, expiry after a
shortened retention purging only what was asked and only the table's own files, an
administrator's purge, recursive namespace drop and undrop, and the races (a commit against a
drop, an undrop against a create of the same name) forced at a row-lock barrier."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from prometheus_client import REGISTRY

from app.composition.services import services_of
from storage.objects import S3ObjectStore
from tests.api.bin_support import BIN, M, bin_state, held_rows, undrop, unit_of, units, until
from tests.api.tables_support import PREFIX, TextStore, create_request, table_url, tables_url

VIEW_BODY = {
    "name": "v",
    "schema": {"type": "struct", "schema-id": 0, "fields": [{"id": 1, "name": "id", "type": "long", "required": True}]},
    "view-version": {
        "version-id": 1,
        "timestamp-ms": 1_700_000_000_000,
        "schema-id": 0,
        "summary": {"engine-name": "test"},
        "representations": [{"type": "sql", "sql": "SELECT 1 AS id", "dialect": "spark"}],
        "default-namespace": ["db"],
    },
    "properties": {},
}


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    return ("db",)


@pytest.fixture
def s3(app) -> TextStore:
    return TextStore(services_of(app.app).namespaces.objects)


def counted(action: str, kind: str) -> float:
    labels = {"action": action, "kind": kind, "policy": "soft"}
    return REGISTRY.get_sample_value("growler_recycle_bin_events_total", labels) or 0.0


def set_property(client, name: str, **properties: str) -> dict[str, Any]:
    body = {"requirements": [], "updates": [{"action": "set-properties", "updates": properties}]}
    response = client.post(table_url(name), json=body)
    assert response.status_code == 200, response.text
    return response.json()


def listed(client, namespace: str = "db") -> list[str]:
    return [ident["name"] for ident in client.get(tables_url(namespace)).json()["identifiers"]]


def test_a_dropped_table_leaves_the_name_space_and_comes_back_whole(client, ns, s3, principals, db):
    created = client.post(tables_url(), json=create_request("orders")).json()
    reader = principals.new("reader")
    principals.grant(reader, "read", "table", "test", ("db",), "orders")
    committed = set_property(client, "orders", owner="sales")
    drops, undrops = counted("drop", "table"), counted("undrop", "table")
    assert client.delete(table_url("orders")).status_code == 204
    assert counted("drop", "table") == drops + 1  # counted (growler_recycle_bin_events_total)

    assert client.get(table_url("orders")).status_code == 404
    assert client.head(table_url("orders")).status_code == 404
    assert "orders" not in listed(client)
    assert s3.exists(committed["metadata-location"])  # the files stay
    assert db.execute("SELECT count(*) FROM role_grant").fetchone()[0] == 0  # kept with it, not live
    unit = unit_of(client, "orders")
    assert unit["kind"] == "table" and unit["namespace"] == ["db"] and unit["purge-requested"] is False
    assert unit["metadata-location"] == committed["metadata-location"]
    assert unit["uuid"] == created["metadata"]["table-uuid"]
    assert unit["dropped-by"] == "test-admin" and unit["expires-at"] > unit["dropped-at"]

    back = undrop(client, unit["id"])
    assert back.status_code == 200, back.text
    assert counted("undrop", "table") == undrops + 1
    loaded = client.get(table_url("orders")).json()
    assert loaded["metadata-location"] == committed["metadata-location"]
    assert loaded["metadata"]["table-uuid"] == created["metadata"]["table-uuid"]
    assert [e["metadata-file"] for e in loaded["metadata"]["metadata-log"]] == [created["metadata-location"]]
    assert units(client) == []
    principals.settle()
    assert reader.client.get(table_url("orders")).status_code == 200  # its grant came back with it
    assert set_property(client, "orders", round="2")["metadata"]["properties"]["round"] == "2"  # writable again


def test_the_name_is_free_at_once_and_an_undrop_then_takes_a_new_name(client, ns):
    first = client.post(tables_url(), json=create_request("t")).json()
    assert client.delete(table_url("t")).status_code == 204
    second = client.post(tables_url(), json=create_request("t"))
    assert second.status_code == 200, second.text  # the name is free, its location a new one
    unit = unit_of(client, "t")
    taken = undrop(client, unit["id"])
    assert taken.status_code == 409 and "already exists" in taken.json()["error"]["message"]
    assert len(units(client)) == 1  # refused: still in the bin
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["archive"]}).status_code == 200
    moved = undrop(client, unit["id"], namespace=["archive"], name="t_old")
    assert moved.status_code == 200, moved.text
    assert moved.json()["namespace"] == ["archive"] and moved.json()["name"] == "t_old"
    old = client.get(table_url("t_old", "archive")).json()
    assert old["metadata"]["table-uuid"] == first["metadata"]["table-uuid"]
    assert client.get(table_url("t")).json()["metadata"]["table-uuid"] == second.json()["metadata"]["table-uuid"]


def test_views_go_to_the_bin_and_unregister_forgets(client, ns):
    view = client.post(f"{PREFIX}/namespaces/db/views", json=VIEW_BODY)
    assert view.status_code == 200, view.text
    assert client.delete(f"{PREFIX}/namespaces/db/views/v").status_code == 204
    assert client.get(f"{PREFIX}/namespaces/db/views/v").status_code == 404
    client.post(tables_url(), json=create_request("u"))
    unregistered = client.post(f"{PREFIX}/namespaces/db/tables/u/unregister")
    assert unregistered.status_code == 200, unregistered.text
    # unregister hands the table's metadata back to be registered: nothing of it stays in the bin
    assert [(unit["kind"], unit["name"]) for unit in units(client)] == [("view", "v")]
    assert undrop(client, unit_of(client, "v")["id"]).status_code == 200
    assert client.get(f"{PREFIX}/namespaces/db/views/v").json()["metadata-location"] == view.json()["metadata-location"]
    # (registering a dropped or unregistered entry's metadata again: tests/api/seams/test_bin_register.py)


def test_expiry_purges_only_where_asked_and_only_the_tables_own_files(client, ns, s3, app, db):
    """Retention shortened to 1 s for the drops: the purged table's files go, the one dropped
    without purge keeps its files, a live neighbour and a binned neighbour are left alone."""
    tables = {
        name: client.post(tables_url(), json=create_request(name)).json() for name in ("p", "kept", "live", "later")
    }
    for name in tables:
        s3.write_new(f"{tables[name]['metadata']['location']}/data/part-0.parquet", b"rows")
    db.execute("UPDATE warehouse SET retention_s = 1 WHERE name = 'test'")
    services_of(app.app).namespaces.warehouses.invalidate()
    try:
        assert client.delete(table_url("p"), params={"purgeRequested": "true"}).status_code == 204
        assert client.delete(table_url("kept")).status_code == 204
    finally:
        db.execute("UPDATE warehouse SET retention_s = 604800 WHERE name = 'test'")
        services_of(app.app).namespaces.warehouses.invalidate()
    assert client.delete(table_url("later"), params={"purgeRequested": "true"}).status_code == 204  # 7 days
    assert s3.exists(tables["p"]["metadata-location"])  # a purge waits for the end of the retention
    until(
        lambda: (
            [u["name"] for u in units(client)] == ["later"]
            and not db.execute("SELECT count(*) FROM purge_job").fetchone()[0]
        ),
        app,
    )
    assert list(s3.list(tables["p"]["metadata"]["location"] + "/")) == []
    for name in ("kept", "live", "later"):
        assert s3.exists(tables[name]["metadata-location"]), name
        assert s3.exists(f"{tables[name]['metadata']['location']}/data/part-0.parquet"), name
    assert db.execute("SELECT count(*) FROM bin_entry").fetchone()[0] == 1


def test_an_administrators_purge_is_at_once_and_ends_undrop(client, ns, s3, app, principals):
    table = client.post(tables_url(), json=create_request("gone")).json()
    assert client.delete(table_url("gone")).status_code == 204
    unit = unit_of(client, "gone")
    dropper = principals.new("dropper")
    principals.grant(dropper, "undrop", "warehouse", "test")
    refused = dropper.client.delete(f"{BIN}/{unit['id']}")
    assert refused.status_code == 403  # administrators only
    assert dropper.client.get(BIN).status_code == 200  # undrop lets it see the bin
    assert client.delete(f"{BIN}/{unit['id']}").status_code == 204
    late = undrop(client, unit["id"])
    assert late.status_code in (404, 409), late.text  # purge started (409), or finished already (404)
    if late.status_code == 409:
        assert "purge started" in late.json()["error"]["message"]
    until(lambda: not units(client), app)
    assert list(s3.list(table["metadata"]["location"] + "/")) == []
    assert undrop(client, unit["id"]).status_code == 404


def test_recursive_namespace_drop_and_undrop_as_one_unit(client, principals, db):
    for path in (["lake"], ["lake", "raw"], ["lake", "raw", "deep"], ["lake", "clean"]):
        assert client.post(
            f"{PREFIX}/namespaces", json={"namespace": path, "properties": {"p": "/".join(path)}}
        ).is_success
    made = {
        ns: client.post(tables_url(ns), json=create_request("t")).json()
        for ns in ("lake", "lake%1Fraw", "lake%1Fraw%1Fdeep")
    }
    view = client.post(f"{PREFIX}/namespaces/lake%1Fclean/views", json=VIEW_BODY)
    assert view.status_code == 200
    user = principals.new("lake")
    principals.grant(user, "read", "namespace", "test", ("lake", "raw"))
    principals.grant(user, "write", "table", "test", ("lake", "raw", "deep"), "t")
    grants_before = db.execute("SELECT id, privilege, namespace_id, entry_id FROM role_grant ORDER BY id").fetchall()
    assert user.client.get(table_url("t", "lake%1Fraw%1Fdeep")).status_code == 200

    not_recursive = client.delete(f"{M}/warehouses/test/namespaces/lake", params={"recursive": "false"})
    assert not_recursive.status_code == 400
    dropped = client.delete(f"{M}/warehouses/test/namespaces/lake", params={"recursive": "true"})
    assert dropped.status_code == 200, dropped.text
    assert dropped.json()["kind"] == "namespace" and dropped.json()["namespace"] == ["lake"]
    assert client.get(f"{PREFIX}/namespaces/lake").status_code == 404
    assert db.execute("SELECT count(*) FROM namespace").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM role_grant").fetchone()[0] == 0
    principals.settle()
    assert user.client.get(table_url("t", "lake%1Fraw%1Fdeep")).status_code in (403, 404)
    assert [u["kind"] for u in units(client, "lake")] == ["namespace"]

    back = undrop(client, dropped.json()["id"])
    assert back.status_code == 200, back.text
    for ns, table in made.items():
        loaded = client.get(table_url("t", ns)).json()
        assert loaded["metadata-location"] == table["metadata-location"]
    assert client.get(f"{PREFIX}/namespaces/lake%1Fclean/views/v").status_code == 200
    assert client.get(f"{PREFIX}/namespaces/lake%1Fraw%1Fdeep").json()["properties"]["p"] == "lake/raw/deep"
    assert db.execute("SELECT id, privilege, namespace_id, entry_id FROM role_grant ORDER BY id").fetchall() == (
        grants_before
    )
    principals.settle()
    assert user.client.get(table_url("t", "lake%1Fraw%1Fdeep")).status_code == 200

    # Again, and back under another path this time.
    dropped = client.delete(f"{M}/warehouses/test/namespaces/lake%1Fraw", params={"recursive": "true"}).json()
    moved = undrop(client, dropped["id"], namespace=["lake", "restored"])
    assert moved.status_code == 200, moved.text
    assert (
        client.get(table_url("t", "lake%1Frestored%1Fdeep")).json()["metadata-location"]
        == (made["lake%1Fraw%1Fdeep"]["metadata-location"])
    )
    children = client.get(f"{PREFIX}/namespaces", params={"parent": "lake"}).json()["namespaces"]
    assert sorted(children) == [["lake", "clean"], ["lake", "restored"]]


def test_a_commit_racing_a_drop_one_wins_nothing_lost(client, ns, services, db):
    client.post(tables_url(), json=create_request("race"))
    entry = db.execute("SELECT id, metadata_location FROM catalog_entry WHERE name = 'race'").fetchone()
    outcome: dict[str, Any] = {}

    def commit() -> None:
        body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {"w": "1"}}]}
        outcome["commit"] = client.post(table_url("race"), json=body)

    def drop() -> None:
        outcome["drop"] = client.delete(table_url("race"))

    with held_rows(services.database_url, "SELECT 1 FROM catalog_entry WHERE id = %s FOR UPDATE", (entry[0],)) as wait:
        racers = [threading.Thread(target=commit), threading.Thread(target=drop)]
        for racer in racers:
            racer.start()
        wait(2)
    for racer in racers:
        racer.join(30)
    assert outcome["drop"].status_code == 204
    (unit,) = units(client)
    if outcome["commit"].status_code == 200:  # the commit first: the drop took its version to the bin
        assert unit["metadata-location"] == outcome["commit"].json()["metadata-location"]
    else:  # the drop first: the commit found no table, nothing of it committed
        assert outcome["commit"].status_code in (404, 409), outcome["commit"].text
        assert unit["metadata-location"] == entry[1]
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0
    assert undrop(client, unit["id"]).status_code == 200
    assert client.get(table_url("race")).json()["metadata-location"] == unit["metadata-location"]


def test_an_undrop_racing_a_create_of_the_same_name_exactly_one_wins(client, ns, services, db):
    old = client.post(tables_url(), json=create_request("same")).json()
    assert client.delete(table_url("same")).status_code == 204
    unit = unit_of(client, "same")
    outcome: dict[str, Any] = {}

    def create() -> None:
        outcome["create"] = client.post(tables_url(), json=create_request("same"))

    def back() -> None:
        outcome["undrop"] = undrop(client, unit["id"])

    namespace_lock = "SELECT 1 FROM namespace WHERE path = %s FOR UPDATE"
    with held_rows(services.database_url, namespace_lock, (["db"],)) as wait:
        racers = [threading.Thread(target=create), threading.Thread(target=back)]
        for racer in racers:
            racer.start()
        wait(2)
    for racer in racers:
        racer.join(30)
    codes = sorted([outcome["create"].status_code, outcome["undrop"].status_code])
    assert codes == [200, 409], (outcome["create"].text, outcome["undrop"].text)
    rows = db.execute("SELECT uuid::text FROM catalog_entry WHERE name = 'same'").fetchall()
    assert len(rows) == 1  # never visible twice
    if outcome["undrop"].status_code == 200:
        assert rows[0][0] == old["metadata"]["table-uuid"] and units(client) == []
    else:  # the create won: the dropped table is still in the bin, nothing lost
        assert rows[0][0] == outcome["create"].json()["metadata"]["table-uuid"]
        assert [u["id"] for u in units(client)] == [unit["id"]]


def test_bin_listing_needs_undrop_and_pages(client, ns, principals):
    for name in ("a", "b", "c"):
        client.post(tables_url(), json=create_request(name))
        assert client.delete(table_url(name)).status_code == 204
    outsider = principals.new("outsider")
    assert outsider.client.get(BIN).status_code == 403
    assert outsider.client.post(f"{BIN}/{unit_of(client, 'a')['id']}/undrop", json={}).status_code == 403
    first = client.get(BIN, params={"pageToken": "", "pageSize": 2}).json()
    second = client.get(BIN, params={"pageToken": first["next-page-token"], "pageSize": 2}).json()
    assert [u["name"] for u in first["units"] + second["units"]] == ["a", "b", "c"]
    assert "next-page-token" not in second


def test_a_soft_warehouse_with_something_in_its_bin_is_not_deleted(client, settings, db):
    S3ObjectStore(settings.s3).ensure_bucket("growler-test-second")
    body = {"name": "binned", "location": "s3://growler-test-second/binned/"}
    created = client.post(f"{M}/warehouses", json=body)
    assert created.status_code == 201, created.text
    assert created.json()["deletion-policy"] == {"mode": "soft", "retention": "7d"}
    try:
        assert client.post("/v1/binned/namespaces", json={"namespace": ["n"]}).status_code == 200
        assert client.delete(f"{M}/warehouses/binned/namespaces/n", params={"recursive": "true"}).status_code == 200
        refused = client.delete(f"{M}/warehouses/binned")
        assert refused.status_code == 409 and "recycle bin" in refused.json()["error"]["message"]
        (unit,) = client.get(f"{M}/warehouses/binned/bin").json()["units"]
        assert client.delete(f"{M}/warehouses/binned/bin/{unit['id']}").status_code == 204
    finally:
        assert client.delete(f"{M}/warehouses/binned").status_code == 204
    assert bin_state(db)["bin"] == []


def test_a_hard_warehouse_drops_at_once_recursively_too(client, s3, hard_policy, app, db):
    """The hard policy: nothing goes to the bin; a recursive drop removes the unit now and, asked
    to, purges its tables' files (only theirs)."""
    for path in (["hard"], ["hard", "inner"]):
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": path}).status_code == 200
    inner = client.post(tables_url("hard%1Finner"), json=create_request("t")).json()
    outer = client.post(tables_url("hard"), json=create_request("kept")).json()
    assert client.delete(table_url("kept", "hard")).status_code == 204  # at once: the name and location free
    assert units(client) == []
    dropped = client.delete(
        f"{M}/warehouses/test/namespaces/hard", params={"recursive": "true", "purgeRequested": "true"}
    )
    assert dropped.status_code == 204, dropped.text
    assert client.get(f"{PREFIX}/namespaces/hard").status_code == 404
    # the purged table owns its location until its purge finished: listed as purging, never undropped
    assert all(unit["purging-since"] for unit in units(client))
    until(lambda: not db.execute("SELECT count(*) FROM purge_job").fetchone()[0] and not units(client), app)
    assert list(s3.list(inner["metadata"]["location"] + "/")) == []
    assert s3.exists(outer["metadata-location"])  # dropped without purge: its files stay
    assert db.execute("SELECT count(*) FROM bin_unit").fetchone()[0] == 0
