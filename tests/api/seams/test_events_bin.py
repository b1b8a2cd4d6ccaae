"""The change feed meets the recycle bin: the shared state is the entry a drop moves into the bin
and the name and location it frees, which a take-over, an undrop, an unregister and a register each
change in one transaction with their events (docs/events.md, docs/recycle-bin.md).

A reader of the feed must be able to replay a week of drops and re-creates: every acknowledged
change has exactly its event, in order, with the uuid of the entry it concerns (a re-created table
is a new uuid, a registered one keeps its file's), and a refusal - an undrop over a take-over, a
purge under a protection mark - writes none.
"""

from __future__ import annotations

import pytest

from tests.api.bin_support import BIN, protect, undrop, unit_of, unprotect
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url

pytestmark = pytest.mark.usefixtures("clean_catalog")
EVENTS = f"{PREFIX}/events"


def events_after(client, token: str | None) -> tuple[list[dict], str]:
    """The events after ``token`` (every page), and the token to read on from."""
    events = []
    while True:
        response = client.post(EVENTS, json={"continuation-token": token} if token else {})
        assert response.status_code == 200, response.text
        page = response.json()
        token = page["continuation-token"]
        if not page["events"]:
            return events, token
        events += page["events"]


def summary(events: list[dict]) -> list[tuple]:
    """(operation or custom type, name, uuid) of each event."""
    shown = []
    for event in events:
        operation = event["operation"]
        kind = operation.get("custom-type") or operation["operation-type"]
        identifier = operation.get("identifier") or {}
        shown.append((kind, identifier.get("name"), operation.get("table-uuid") or operation.get("uuid")))
    return shown


@pytest.fixture
def home(client) -> str:
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    location = client.get(f"{PREFIX}/namespaces/db").json()["properties"]["location"].rstrip("/")
    return f"{location}/explicit"


def _create(client, name: str, location: str) -> dict:
    created = client.post(tables_url(), json=create_request(name, location=location))
    assert created.status_code == 200, created.text
    return created.json()


def test_drop_take_over_refused_undrop_and_undrop_after_the_new_owner_left(client, home):
    _, token = events_after(client, None)
    first = _create(client, "t", home)
    assert client.delete(table_url("t")).status_code == 204
    second = _create(client, "t", home)  # the take-over: same name, same explicit location
    assert second["metadata"]["table-uuid"] != first["metadata"]["table-uuid"]
    events, token = events_after(client, token)
    first_uuid, second_uuid = first["metadata"]["table-uuid"], second["metadata"]["table-uuid"]
    assert [(kind, name) for kind, name, _ in summary(events)] == [
        ("create-table", "t"),
        ("drop-table", "t"),
        ("create-table", "t"),
    ]
    assert [event["operation"]["table-uuid"] for event in events] == [first_uuid, first_uuid, second_uuid]

    unit = unit_of(client, "t")["id"]
    refused = undrop(client, unit, name="t-back")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["type"] == "LocationTakenException"
    assert events_after(client, token)[0] == []  # the refusal wrote no event

    assert client.delete(table_url("t")).status_code == 204  # the new owner leaves
    restored = undrop(client, unit, name="t-back")
    assert restored.status_code == 200, restored.text
    events, token = events_after(client, token)
    assert [kind for kind, _, _ in summary(events)] == ["drop-table", "x-undrop-table"]
    assert events[0]["operation"]["table-uuid"] == second_uuid
    assert events[1]["operation"]["identifier"] == {"namespace": ["db"], "name": "t-back"}
    assert events[1]["operation"]["table-uuid"] == first_uuid  # the same table, back under a new name


def test_unregister_then_register_records_both_and_leaves_nothing_in_the_bin(client, home):
    created = _create(client, "u", home)
    _, token = events_after(client, None)
    unregistered = client.post(f"{PREFIX}/namespaces/db/tables/u/unregister")
    assert unregistered.status_code == 200, unregistered.text
    metadata_location = unregistered.json()["metadata-location"]
    assert client.get(BIN).json()["units"] == []  # forgotten, not binned
    registered = client.post(
        f"{PREFIX}/namespaces/db/register", json={"name": "u", "metadata-location": metadata_location}
    )
    assert registered.status_code == 200, registered.text

    events, _ = events_after(client, token)
    kinds = [kind for kind, _, _ in summary(events)]
    assert kinds == ["drop-table", "register-table"], kinds  # docs/events.md: an unregister is a drop
    assert events[0]["operation"]["purge"] is False
    uuid = created["metadata"]["table-uuid"]
    assert [event["operation"]["table-uuid"] for event in events] == [uuid, uuid]  # the file's own uuid


def test_a_purge_refused_under_a_mark_writes_no_event_and_the_one_allowed_after_does(client, home):
    uuid = _create(client, "p", home)["metadata"]["table-uuid"]
    assert client.delete(table_url("p")).status_code == 204
    unit = unit_of(client, "p")["id"]
    assert protect(client, "namespace", ["db"]).status_code == 204
    _, token = events_after(client, None)
    refused = client.delete(f"{BIN}/{unit}")
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["type"] == "ProtectedException"
    assert events_after(client, token)[0] == []

    assert unprotect(client, "namespace", ["db"]).status_code == 204
    assert client.delete(f"{BIN}/{unit}").status_code == 204
    events, _ = events_after(client, token)
    assert summary(events) == [("x-purge-table", "p", uuid)]  # (marks are recorded on the installation stream)
