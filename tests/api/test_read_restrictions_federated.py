"""Read restrictions in a federated warehouse (issue 51 where it meets issue 50:
docs/read-restrictions.md "Federated warehouses"): set by path on a table the remote serves, and
applied by Growler to what it forwards, before the remote is asked - an untrusted restricted
caller gets 403 and nothing (no metadata, credentials or scan plan), a trusted engine the remote's
answer with the spec's ``read-restrictions`` bound to the remote's schema and no validator,
neither may drop or rename it, and an unrestricted administrator reads what the remote answered.

The remote is a local HTTP server answering loadTable with the metadata of a native table of the
suite (real metadata PyIceberg parses), and recording what reached it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.api.authz_support import MANAGEMENT
from tests.api.tables_support import create_request, table_url, tables_url
from tests.integration.test_federation import TinyRemote

SCHEMA_FIELDS = [
    {"id": 1, "name": "id", "type": "long", "required": False},
    {"id": 2, "name": "name", "type": "string", "required": False},
]


@pytest.fixture
def remote(client, ns) -> Iterator[tuple[str, TinyRemote]]:
    """A federated warehouse whose remote answers loadTable of ``db.people`` (and nothing else
    but its config and deletes): its name and the remote."""
    create = create_request("people")
    create["schema"] = {"type": "struct", "schema-id": 0, "fields": SCHEMA_FIELDS}
    create.pop("partition-spec", None)
    create.pop("write-order", None)
    assert client.post(tables_url(), json=create).status_code == 200
    loaded = client.get(table_url("people")).json()
    answer = json.dumps({"metadata-location": loaded["metadata-location"], "metadata": loaded["metadata"]}).encode()

    def serve(handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, bytes]:
        if handler.path.startswith("/v1/config"):
            return 200, b'{"defaults": {}, "overrides": {"prefix": "p"}}'
        if handler.command == "GET" and handler.path.startswith("/v1/p/namespaces/db/tables/people"):
            return 200, answer
        return 204, b""

    tiny = TinyRemote(serve)
    name = f"fed-{uuid.uuid4().hex[:8]}"
    created = client.post(
        f"{MANAGEMENT}/warehouses", json={"name": name, "federation": {"uri": tiny.url, "warehouse": "w"}}
    )
    assert created.status_code == 201, created.text
    try:
        yield name, tiny
    finally:
        tiny.stop()


def test_restrictions_hold_for_a_table_the_remote_serves(client, principals, remote):
    warehouse, tiny = remote
    caller = principals.new("fed-reader")
    for privilege in ("read", "drop", "create"):
        principals.grant(caller, privilege, "namespace", warehouse, ("db",))
    restriction = {
        "securable": {"type": "table", "namespace": ["db"], "name": "people"},
        "grantee": {"type": "role", "name": caller.role},
        "row-filter": {"type": "gt", "term": "id", "value": 1},
        "columns": [{"name": "name", "action": "hide"}],
    }
    restrictions = f"{MANAGEMENT}/warehouses/{warehouse}/read-restrictions"
    set_ = client.post(restrictions, json=restriction)
    assert set_.status_code == 200, set_.text  # no schema check: the table lives in the remote
    principals.settle()  # the app's authorizer at the database's version (it polls it)
    listed = client.get(restrictions).json()["restrictions"]
    assert [item["securable"] for item in listed] == [{"type": "table", "namespace": ["db"], "name": "people"}]
    table = f"/v1/{warehouse}/namespaces/db/tables/people"
    before = len(tiny.requests)

    refused = caller.client.get(table)
    assert refused.status_code == 403, refused.text
    assert "not a trusted engine" in refused.json()["error"]["message"]
    assert caller.client.get(f"{table}/credentials").status_code == 403
    planned = caller.client.post(f"{table}/plan", json={})
    assert planned.status_code == 403 and "plans scans without them" in planned.json()["error"]["message"]
    rename = {"source": {"namespace": ["db"], "name": "people"}, "destination": {"namespace": ["db"], "name": "p2"}}
    for response in (caller.client.delete(table), caller.client.post(f"/v1/{warehouse}/tables/rename", json=rename)):
        assert response.status_code == 403, response.text
        assert "by its path" in response.json()["error"]["message"]
    assert tiny.requests[before:] == []  # refused before the remote was asked

    trusted = client.put(f"{MANAGEMENT}/principals/{caller.name}/trusted-engine", json={"trusted-engine": True})
    assert trusted.status_code == 200, trusted.text
    principals.settle()
    answer = caller.client.get(table, headers={"If-None-Match": '"abc"'})
    assert answer.status_code == 200, answer.text
    assert answer.json()["read-restrictions"] == {
        "required-row-filter": {"type": "gt", "term": "id", "value": 1},
        "required-column-projections": [{"action": "replace-with-null", "field-id": 2}],
    }
    assert "etag" not in {key.lower() for key in answer.headers}
    sent = [headers for method, path, headers, _ in tiny.requests[before:] if method == "GET" and "people" in path]
    assert sent and all("If-None-Match" not in headers for headers in sent)  # its own answer, never a 304
    assert caller.client.delete(table).status_code == 403  # a trusted engine may not drop it either

    unrestricted = client.get(table)
    assert unrestricted.status_code == 200 and "read-restrictions" not in unrestricted.json()


def test_a_restriction_on_a_federated_namespace_applies_to_its_tables(client, principals, remote):
    warehouse, _ = remote
    caller = principals.new("fed-ns")
    principals.grant(caller, "read", "namespace", warehouse, ("db",))
    body: dict[str, Any] = {
        "securable": {"type": "namespace", "namespace": ["db"]},
        "grantee": {"type": "principal", "name": caller.name},
        "columns": [{"name": "name", "action": "mask-alphanum"}],
    }
    assert client.post(f"{MANAGEMENT}/warehouses/{warehouse}/read-restrictions", json=body).status_code == 200
    principals.settle()
    assert caller.client.get(f"/v1/{warehouse}/namespaces/db/tables/people").status_code == 403
    removed = client.post(
        f"{MANAGEMENT}/warehouses/{warehouse}/read-restrictions/remove",
        json={"securable": body["securable"], "grantee": body["grantee"]},
    )
    assert removed.status_code == 204, removed.text
    principals.settle()
    loaded = caller.client.get(f"/v1/{warehouse}/namespaces/db/tables/people")
    assert loaded.status_code == 200 and "read-restrictions" not in loaded.json()


def test_a_move_home_keeps_the_tables_restrictions_and_is_refused_to_a_restricted_caller(client, principals, remote):
    """Restrictions on the remote's table follow it into the native warehouse (and back on undo);
    a caller restricted on it may not move it (a move must not shed them). Nothing is written by
    the refusal."""
    warehouse, _ = remote
    # the remote answers with this native table's metadata: unregistered here first, its location is free
    assert client.post(f"{table_url('people')}/unregister").status_code == 200
    caller = principals.new("fed-mover")
    for privilege, path in (
        ("read", (warehouse, ("db",))),
        ("drop", (warehouse, ("db",))),
        ("create", ("test", ("db",))),
    ):
        principals.grant(caller, privilege, "namespace", *path)
    principals.grant(caller, "read", "namespace", "test", ("db",))
    restriction = {
        "securable": {"type": "table", "namespace": ["db"], "name": "people"},
        "grantee": {"type": "principal", "name": caller.name},
        "row-filter": {"type": "gt", "term": "id", "value": 1},
        "columns": [],
    }
    federated = f"{MANAGEMENT}/warehouses/{warehouse}/read-restrictions"
    assert client.post(federated, json=restriction).status_code == 200
    principals.settle()
    moves = f"{MANAGEMENT}/warehouses/{warehouse}/table-moves"
    body = {
        "namespace": ["db"],
        "name": "people",
        "target": {"warehouse": "test", "namespace": ["db"]},
        "remote": "keep",
    }
    refused = caller.client.post(moves, json=body)
    assert refused.status_code == 403, refused.text
    assert "must not shed" in refused.json()["error"]["message"]
    assert client.get(moves).json()["moves"] == []
    assert client.get(table_url("people")).status_code == 404

    moved = client.post(moves, json=body)
    assert moved.status_code == 200, moved.text
    principals.settle()
    native = client.get(f"{MANAGEMENT}/warehouses/test/read-restrictions").json()["restrictions"]
    assert [(item["securable"], item["grantee"]["name"]) for item in native] == [
        ({"type": "table", "namespace": ["db"], "name": "people"}, caller.name)
    ]
    assert client.get(federated).json()["restrictions"] == []
    assert caller.client.get(table_url("people")).status_code == 403  # restricted there now, not a trusted engine

    undone = client.post(f"{moves}/undo", json={"namespace": ["db"], "name": "people"})
    assert undone.status_code == 204, undone.text
    principals.settle()
    back = client.get(federated).json()["restrictions"]
    assert [item["securable"] for item in back] == [{"type": "table", "namespace": ["db"], "name": "people"}]
    assert client.get(f"{MANAGEMENT}/warehouses/test/read-restrictions").json()["restrictions"] == []
