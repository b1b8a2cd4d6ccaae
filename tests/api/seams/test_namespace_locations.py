"""Where namespaces meet location ownership (issue 46): a namespace's location is a place it owns.

Shared state: the ``location`` property of a namespace (else its default layout under the warehouse
location), which places every table and view created in it without a location of their own, and the
placement rules of storage/placement.py, which keep every location one entry's. A namespace's location
is claimed like a table's - inside its parent's home, overlapping nothing but its own subtree and its
ancestors - on create, when the property is set or removed, and when it comes back from the bin; so a
principal holding ``create`` on its own namespace can no longer point a child at the warehouse root
(which made every createTable of the warehouse a 400) or at anyone else's folder.
"""

from __future__ import annotations

import concurrent.futures
import threading
import uuid
from typing import Any

import pytest

from tests.api.bin_support import M, undrop
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url
from tests.conftest import TEST_BUCKET

WH = f"s3://{TEST_BUCKET}"
NAMESPACES = f"{PREFIX}/namespaces"


def create_namespace(client: Any, *levels: str, location: str | None = None) -> Any:
    body: dict[str, Any] = {"namespace": list(levels)}
    if location is not None:
        body["properties"] = {"location": location}
    return client.post(NAMESPACES, json=body)


def set_location(client: Any, levels: tuple[str, ...], location: str | None) -> Any:
    change = {"updates": {"location": location}} if location is not None else {"removals": ["location"]}
    return client.post(f"{NAMESPACES}/{'%1F'.join(levels)}/properties", json=change)


def refused(response: Any, *words: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "BadRequestException"
    for word in words:
        assert word in error["message"], error["message"]


def namespace_count(db: Any, *levels: str) -> int:
    return db.execute("SELECT count(*) FROM namespace WHERE path = %s", (list(levels),)).fetchone()[0]


@pytest.fixture
def owner(client, principals):
    """A principal holding create and manage-properties on namespace ``mine`` (and what it holds)
    and nothing else; the administrator's namespace ``other`` holds a table."""
    assert create_namespace(client, "mine").status_code == 200
    assert create_namespace(client, "other").status_code == 200
    assert client.post(tables_url("other"), json=create_request("theirs")).status_code == 200
    caller = principals.new("owner")
    principals.grant(caller, "create", "namespace", "test", ("mine",))
    principals.grant(caller, "manage-properties", "namespace", "test", ("mine",))
    return caller


def test_a_child_at_the_warehouse_root_is_refused_and_every_create_goes_on(client, owner, db):
    """The issue's attack: a child of the principal's own namespace placed at the warehouse root
    (however spelled) is refused with nothing written, and creates everywhere go on."""
    for root in (WH, f"{WH}/", f"s3a://{TEST_BUCKET}"):
        refused(create_namespace(owner.client, "mine", "c", location=root), "is outside")
    assert namespace_count(db, "mine", "c") == 0
    assert create_namespace(owner.client, "mine", "c").status_code == 200
    refused(set_location(owner.client, ("mine", "c"), WH), "is outside")
    assert client.post(tables_url("other"), json=create_request("after")).status_code == 200
    assert owner.client.post(tables_url("mine%1Fc"), json=create_request("t")).status_code == 200
    assert client.post(tables_url("mine"), json=create_request("t")).status_code == 200


def test_another_namespaces_or_tables_folder_is_refused(client, owner, db):
    theirs = client.get(table_url("theirs", "other")).json()["metadata"]["location"]
    for target in (f"{WH}/other", f"{WH}/other/sub", theirs, f"{theirs}/data"):
        refused(create_namespace(owner.client, "mine", "c", location=target), "outside its parent")
    # inside its own home, at or inside a table's folder: taken
    mine = owner.client.post(tables_url("mine"), json=create_request("t")).json()["metadata"]["location"]
    for target in (mine, f"{mine}/sub"):
        refused(create_namespace(owner.client, "mine", "c", location=target), "Cannot place namespace mine.c")
    assert namespace_count(db, "mine", "c") == 0
    # an administrator's top-level namespace inside another namespace's (default) folder: taken too
    refused(create_namespace(client, "squat", location=f"{WH}/mine/squat"), "Cannot place namespace squat")
    refused(create_namespace(client, "squat", location=f"{WH}/other"), "Cannot place namespace squat")
    assert namespace_count(db, "squat") == 0


def test_a_folder_of_its_own_inside_its_home_is_accepted_and_used(client, owner, db):
    home = f"{WH}/mine/c-{uuid.uuid4().hex[:6]}"
    made = create_namespace(owner.client, "mine", "c", location=home)
    assert made.status_code == 200, made.text
    table = owner.client.post(tables_url("mine%1Fc"), json=create_request("t"))
    assert table.status_code == 200, table.text
    assert table.json()["metadata"]["location"].startswith(home + "/t-")
    # a nested namespace inside it is its own subtree's; a sibling inside it is not
    assert create_namespace(owner.client, "mine", "c", "e", location=f"{home}/e").status_code == 200
    refused(create_namespace(owner.client, "mine", "d", location=f"{home}/d"), "Cannot place namespace mine.d")
    # nor may the home be the parent's folder itself
    refused(create_namespace(owner.client, "mine", "d", location=f"{WH}/mine"), "outside its parent")
    # a table of another namespace may not go inside it
    refused(
        client.post(tables_url("mine"), json=create_request("x", location=f"{home}/x")),
        "Cannot place table mine.x",
    )


def test_updating_the_location_follows_the_same_rules(client, owner, db):
    assert create_namespace(owner.client, "mine", "c").status_code == 200
    theirs = client.get(table_url("theirs", "other")).json()["metadata"]["location"]
    inside = owner.client.post(tables_url("mine%1Fc"), json=create_request("t")).json()["metadata"]["location"]
    for target in (WH, f"{WH}/other", theirs):
        refused(set_location(owner.client, ("mine", "c"), target), "is outside")
    for target in (inside, f"{inside}/x"):  # inside one of its own tables: not a home
        refused(set_location(owner.client, ("mine", "c"), target), "Cannot place namespace mine.c")
    assert (
        "location" not in db.execute("SELECT properties FROM namespace WHERE path = %s", (["mine", "c"],)).fetchone()[0]
    )
    # its own tables may stay where they are, inside the new home or not
    moved = f"{WH}/mine/c-moved"
    assert set_location(owner.client, ("mine", "c"), moved).status_code == 200
    assert set_location(owner.client, ("mine", "c"), f"{WH}/mine/c").status_code == 200  # contains its table
    assert set_location(owner.client, ("mine", "c"), moved).status_code == 200
    # removing it claims the default folder again, which another may have taken meanwhile
    squatter = client.post(tables_url("mine"), json=create_request("squatter", location=f"{WH}/mine/c/x"))
    assert squatter.status_code == 200, squatter.text
    refused(set_location(owner.client, ("mine", "c"), None), "Cannot place namespace mine.c at")
    assert client.get(f"{NAMESPACES}/mine%1Fc").json()["properties"]["location"] == moved


@pytest.mark.parametrize("rival", ["namespace", "table"])
def test_two_concurrent_claims_one_wins(client, db, rival):
    """Raced through a barrier, each in its own request and transaction: a namespace placed at a
    folder, against another namespace at the same folder, or a table of another namespace inside it.
    Exactly one wins; the loser wrote nothing."""
    assert create_namespace(client, "lake").status_code == 200
    folder = f"{WH}/lake/contested-{uuid.uuid4().hex[:8]}"
    start = threading.Barrier(2)

    def claim(which: str) -> int:
        start.wait(timeout=10)
        if which == "table":
            body = create_request("t", location=f"{folder}/t")
            return client.post(tables_url("lake"), json=body).status_code
        return create_namespace(client, "lake", which, location=folder).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        statuses = list(pool.map(claim, ["one", rival if rival == "table" else "two"]))
    assert sorted(statuses) == [200, 400]
    namespaces = db.execute("SELECT count(*) FROM namespace WHERE properties->>'location' = %s", (folder,))
    tables = db.execute("SELECT count(*) FROM catalog_entry WHERE location = %s", (f"{folder}/t",))
    assert namespaces.fetchone()[0] + tables.fetchone()[0] == 1


def test_an_undropped_namespace_claims_its_location_again(client, db):
    """A namespace in the bin blocks nothing: another may take its folder, and the undrop then
    answers 409 with nothing written, until the folder is free again."""
    folder = f"{WH}/lake-{uuid.uuid4().hex[:8]}"
    assert create_namespace(client, "gone", location=folder).status_code == 200
    assert client.post(tables_url("gone"), json=create_request("t")).status_code == 200
    dropped = client.delete(f"{M}/warehouses/test/namespaces/gone", params={"recursive": "true"})
    assert dropped.status_code == 200, dropped.text
    assert create_namespace(client, "taker", location=folder).status_code == 200
    taken = undrop(client, dropped.json()["id"])
    assert taken.status_code == 409, taken.text
    assert "namespace gone" in taken.json()["error"]["message"]
    assert namespace_count(db, "gone") == 0
    assert client.delete(f"{NAMESPACES}/taker").status_code == 204
    back = undrop(client, dropped.json()["id"])
    assert back.status_code == 200, back.text
    assert client.head(table_url("t", "gone")).status_code == 204
