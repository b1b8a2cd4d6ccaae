"""Federated warehouses through the management API (issue 50): created with a remote's settings,
the credential toward the remote sealed and never shown nor logged, bad input refused with 400 and
nothing written, grants on what they hold kept by path; and, in-process, the forwarding's own
refusals (read-only, unsupported operations, a remote that cannot be reached) before any handler."""

from __future__ import annotations

import logging
import uuid

import pytest

from tests.conftest import TEST_SECRETS_KEY

M = "/management/v1"
TOKEN = "static-remote-token-0123456789"
CLIENT_SECRET = "remote-client-secret-9876543210"
DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture
def name() -> str:
    return "fed" + uuid.uuid4().hex[:10]


def _error(response, status: int, error_type: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == error_type and error["code"] == status
    return error


def test_a_federated_warehouse_is_created_shown_and_deleted_without_its_secret(client, name, db, caplog):
    caplog.set_level(logging.DEBUG)
    body = {
        "name": name,
        "federation": {
            "uri": "https://remote.example.com/api/catalog/",
            "warehouse": "their-warehouse",
            "auth": {"type": "bearer", "token": TOKEN},
            "read-only": True,
            "timeout-ms": 2500,
        },
    }
    created = client.post(f"{M}/warehouses", json=body)
    assert created.status_code == 201, created.text
    view = created.json()
    assert view["federation"] == {
        "uri": "https://remote.example.com/api/catalog",
        "warehouse": "their-warehouse",
        "auth": {"type": "bearer", "has-secret": True},
        "read-only": True,
        "timeout-ms": 2500,
        "cache-ttl-ms": 0,
        "breaker-failures": 5,
        "breaker-cooldown-ms": 30_000,
    }
    assert view["location"] == "" and view["storage"]["credentials-mode"] == "none"
    assert client.get(f"{M}/warehouses/{name}").json() == view
    assert view in client.get(f"{M}/warehouses").json()["warehouses"]
    federation, sealed = db.execute(
        "SELECT federation::text, federation_secret FROM warehouse WHERE name = %s", (name,)
    ).fetchone()
    assert TOKEN not in federation and sealed and TOKEN.encode() not in bytes(sealed)
    from app.ground.secrets import SecretBox

    assert SecretBox(TEST_SECRETS_KEY).open(bytes(sealed)) == {"secret": TOKEN}
    # only its federation settings can change; the deletion works
    _error(client.put(f"{M}/warehouses/{name}", json={"refuse-deletes": True}), 400, "BadRequestException")
    assert client.delete(f"{M}/warehouses/{name}").status_code == 204
    assert client.get(f"{M}/warehouses/{name}").status_code == 404
    assert TOKEN not in caplog.text


def test_oauth2_settings_are_shown_without_the_client_secret(client, name):
    auth = {
        "type": "oauth2",
        "client-id": "growler",
        "client-secret": CLIENT_SECRET,
        "token-endpoint": "https://idp.example.com/token",
        "scope": "PRINCIPAL_ROLE:ALL",
    }
    created = client.post(
        f"{M}/warehouses", json={"name": name, "federation": {"uri": DEAD, "warehouse": "w", "auth": auth}}
    )
    assert created.status_code == 201, created.text
    assert created.json()["federation"]["auth"] == {
        "type": "oauth2",
        "client-id": "growler",
        "token-endpoint": "https://idp.example.com/token",
        "scope": "PRINCIPAL_ROLE:ALL",
        "has-secret": True,
    }
    assert CLIENT_SECRET not in created.text
    assert created.json()["federation"]["timeout-ms"] == 10_000 and created.json()["federation"]["read-only"] is False


@pytest.mark.parametrize(
    "federation",
    [
        {"uri": "ftp://remote/", "warehouse": "w"},
        {"uri": "remote.example.com", "warehouse": "w"},
        {"uri": "https://user:pw@remote.example.com", "warehouse": "w"},
        {"uri": "https://remote.example.com?token=x", "warehouse": "w"},
        {"uri": "https://remote.example.com", "warehouse": "w", "auth": {"type": "bearer"}},
        {"uri": "https://remote.example.com", "warehouse": "w", "auth": {"type": "bearer", "token": "t", "scope": "s"}},
        {"uri": "https://remote.example.com", "warehouse": "w", "auth": {"type": "oauth2", "client-id": "c"}},
        {"uri": "https://remote.example.com", "warehouse": "w", "auth": {"type": "none", "token": "t"}},
        {
            "uri": "https://remote.example.com",
            "warehouse": "w",
            "auth": {"type": "oauth2", "client-id": "c", "client-secret": "s", "token-endpoint": "file:/x"},
        },
        {"uri": "https://remote.example.com", "warehouse": "w", "auth": {"type": "kerberos"}},
        {"uri": "https://remote.example.com", "warehouse": "w", "timeout-ms": 5},
        {"uri": "https://remote.example.com", "warehouse": "w", "unknown": 1},
        {"uri": "https://remote.example.com"},
        {"uri": "https://remote.example.com", "warehouse": "w" * 1025},
    ],
)
def test_bad_federation_settings_are_400_and_write_nothing(client, name, db, federation):
    _error(client.post(f"{M}/warehouses", json={"name": name, "federation": federation}), 400, "BadRequestException")
    assert db.execute("SELECT 1 FROM warehouse WHERE name = %s", (name,)).fetchone() is None


def test_a_federated_warehouse_takes_no_location_and_a_native_one_needs_one(client, name, db):
    federation = {"uri": DEAD, "warehouse": "w"}
    for body in (
        {"name": name, "federation": federation, "location": "s3://bucket/x"},
        {"name": name, "federation": federation, "allowed-locations": ["s3://bucket/y"]},
        {"name": name, "federation": federation, "storage": {"region": "eu-west-1"}},
        {"name": name},
    ):
        _error(client.post(f"{M}/warehouses", json=body), 400, "BadRequestException")
    assert db.execute("SELECT 1 FROM warehouse WHERE name = %s", (name,)).fetchone() is None


def test_grants_inside_a_federated_warehouse_are_kept_by_path(client, name, db):
    assert (
        client.post(f"{M}/warehouses", json={"name": name, "federation": {"uri": DEAD, "warehouse": "w"}}).status_code
        == 201
    )
    role = "r-" + name
    assert client.post(f"{M}/roles", json={"name": role}).status_code == 201
    table = {"type": "table", "warehouse": name, "namespace": ["a", "b"], "name": "t"}
    namespace = {"type": "namespace", "warehouse": name, "namespace": ["a"]}
    for securable in (table, namespace):
        granted = client.post(f"{M}/roles/{role}/grants", json={"privilege": "read", "securable": securable})
        assert granted.status_code == 201, granted.text
        again = client.post(f"{M}/roles/{role}/grants", json={"privilege": "read", "securable": securable})
        assert again.status_code in (200, 201), again.text  # granted before: the same grant
    listed = client.get(f"{M}/roles/{role}/grants").json()["grants"]
    assert sorted((g["securable"]["type"], tuple(g["securable"]["namespace"])) for g in listed) == [
        ("namespace", ("a",)),
        ("table", ("a", "b")),
    ]
    assert (
        db.execute(
            "SELECT count(*) FROM role_grant g JOIN role r ON r.id = g.role_id WHERE r.name = %s", (role,)
        ).fetchone()[0]
        == 2
    )
    on_table = client.get(
        f"{M}/grants", params={"type": "table", "warehouse": name, "namespace": "a\x1fb", "name": "t"}
    )
    assert on_table.status_code == 200, on_table.text
    assert [g["role"] for g in on_table.json()["grants"]] == [role]
    revoked = client.post(f"{M}/roles/{role}/grants/revoke", json={"privilege": "read", "securable": table})
    assert revoked.status_code == 204
    assert len(client.get(f"{M}/roles/{role}/grants").json()["grants"]) == 1
    # the grants die with the warehouse
    assert client.delete(f"{M}/warehouses/{name}").status_code == 204
    assert client.get(f"{M}/roles/{role}/grants").json()["grants"] == []


def test_forwarding_refuses_before_the_remote_is_asked(client, name):
    body = {"name": name, "federation": {"uri": DEAD, "warehouse": "w", "read-only": True, "timeout-ms": 500}}
    assert client.post(f"{M}/warehouses", json=body).status_code == 201
    created = client.post(f"/v1/{name}/namespaces", json={"namespace": ["x"]})
    error = _error(created, 403, "ForbiddenException")
    assert "read-only federation" in error["message"]
    # Growler's own operations are not federated in this slice
    _error(client.get(f"/v1/{name}/namespaces/x/functions"), 406, "UnsupportedOperationException")
    # signing is Growler's, with storage settings of the warehouse's own: it has none
    sign = {"region": "us-east-1", "uri": "http://s3.local/b/k", "method": "GET", "headers": {}}
    unsigned = _error(client.post(f"/v1/{name}/namespaces/x/tables/t/sign", json=sign), 403, "ForbiddenException")
    assert "Remote signing is not enabled" in unsigned["message"]
    # a read reaches for the remote, which is not there: 503 with Retry-After, never a 500
    unreachable = client.get(f"/v1/{name}/namespaces")
    _error(unreachable, 503, "ServiceUnavailableException")
    assert int(unreachable.headers["Retry-After"]) >= 1
    # a malformed body is still the yaml's 400, before anything is forwarded
    _error(client.post(f"/v1/{name}/tables/rename", json={"source": 1}), 400, "BadRequestException")


def test_a_federated_warehouses_settings_change_and_are_served_at_once(client, name, db):
    created = {"uri": DEAD, "warehouse": "w", "auth": {"type": "bearer", "token": TOKEN}, "timeout-ms": 500}
    assert client.post(f"{M}/warehouses", json={"name": name, "federation": created}).status_code == 201
    (sealed,) = db.execute("SELECT federation_secret FROM warehouse WHERE name = %s", (name,)).fetchone()
    # reads reach for the remote (not there: 503); writes too, until the warehouse turns read-only
    _error(client.post(f"/v1/{name}/namespaces", json={"namespace": ["x"]}), 503, "ServiceUnavailableException")
    changed = client.put(
        f"{M}/warehouses/{name}", json={"federation": {"uri": DEAD, "warehouse": "w2", "read-only": True}}
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["federation"] == {
        "uri": DEAD,
        "warehouse": "w2",
        "auth": {"type": "bearer", "has-secret": True},  # no auth given: the credential is kept
        "read-only": True,
        "timeout-ms": 10_000,
        "cache-ttl-ms": 0,
        "breaker-failures": 5,
        "breaker-cooldown-ms": 30_000,
    }
    assert bytes(db.execute("SELECT federation_secret FROM warehouse WHERE name = %s", (name,)).fetchone()[0]) == bytes(
        sealed
    )
    error = _error(client.post(f"/v1/{name}/namespaces", json={"namespace": ["x"]}), 403, "ForbiddenException")
    assert "read-only federation" in error["message"]
    cleared = client.put(
        f"{M}/warehouses/{name}", json={"federation": {"uri": DEAD, "warehouse": "w2", "auth": {"type": "none"}}}
    )
    assert cleared.status_code == 200 and cleared.json()["federation"]["auth"] == {"type": "none", "has-secret": False}
    assert db.execute("SELECT federation_secret FROM warehouse WHERE name = %s", (name,)).fetchone()[0] is None
    assert TOKEN not in changed.text + cleared.text
    # bad settings: 400, nothing changed
    bad = client.put(f"{M}/warehouses/{name}", json={"federation": {"uri": "ftp://x", "warehouse": "w"}})
    _error(bad, 400, "BadRequestException")
    assert client.get(f"{M}/warehouses/{name}").json()["federation"]["uri"] == DEAD


def test_a_native_warehouse_does_not_become_federated(client, name, db):
    native = client.post(f"{M}/warehouses", json={"name": name, "location": f"s3://growler-fed-native/{name}/"})
    assert native.status_code == 201, native.text
    turned = client.put(f"{M}/warehouses/{name}", json={"federation": {"uri": DEAD, "warehouse": "w"}})
    assert "not federated" in _error(turned, 400, "BadRequestException")["message"]
    assert db.execute("SELECT federation FROM warehouse WHERE name = %s", (name,)).fetchone()[0] is None
    assert client.delete(f"{M}/warehouses/{name}").status_code == 204
