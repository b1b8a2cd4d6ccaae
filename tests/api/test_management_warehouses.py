"""Warehouses through the management API: create, list, get, update, delete (only when empty),
served at once by /v1/config and /v1/{prefix}/... on every app, objects written with the
warehouse's own storage settings and keys (kept encrypted, never returned, never logged)."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.api.tables_support import create_request
from tests.conftest import warehouse_body

M = "/management/v1"
SECOND_BUCKET = "growler-test-second"


def _error(response, status: int, error_type: str) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == error_type and error["code"] == status
    return error


@pytest.fixture(scope="module")
def second_bucket(settings) -> S3ObjectStore:
    store = S3ObjectStore(settings.s3)
    store.ensure_bucket(SECOND_BUCKET)
    return store


@pytest.fixture
def name() -> str:
    return "w" + uuid.uuid4().hex[:10]


def _warehouse_body(name: str, services, **storage) -> dict:
    body = warehouse_body(
        services, name, f"s3://{SECOND_BUCKET}/{name}", **{"allowed-locations": [f"s3://{SECOND_BUCKET}/{name}-extra"]}
    )
    return {**body, "storage": {**body["storage"], **storage}}


def _until(condition, timeout_s: float = 3.0) -> bool:
    """Polls ``condition`` until true or ``timeout_s`` passed (another app's cache is refreshed by
    its own poll of auth_state, every 0.1 s here)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_warehouse_lifecycle_and_its_objects_land_in_its_location(
    client, auth_client, services, second_bucket, name, db, caplog
):
    caplog.set_level(logging.DEBUG)
    # Hard deletion policy: the drops below remove the table and namespace at once, so the warehouse
    # is empty and can go (under the default soft policy its recycle bin would keep it: issue 35,
    # tests/api/test_recycle_bin.py).
    body = _warehouse_body(name, services) | {"deletion-policy": {"mode": "hard"}}
    created = client.post(f"{M}/warehouses", json=body)
    assert created.status_code == 201, created.text
    view = created.json()
    assert view == {
        "name": name,
        "location": f"s3://{SECOND_BUCKET}/{name}/",
        "storage": {
            "endpoint": services.s3_endpoint,
            "region": "us-east-1",
            "path-style": True,
            "credentials-mode": "static",
            "has-own-keys": True,
        },
        "allowed-locations": [f"s3://{SECOND_BUCKET}/{name}-extra"],
        "deletion-policy": {"mode": "hard", "retention": "7d"},
        "refuse-deletes": False,
        "protected": False,
    }
    (sealed,) = db.execute("SELECT storage_secret FROM warehouse WHERE name = %s", (name,)).fetchone()
    assert sealed and services.secret_key.encode() not in bytes(sealed)
    assert client.get(f"{M}/warehouses/{name}").json() == view
    assert view in client.get(f"{M}/warehouses").json()["warehouses"]

    # Served at once, by this app and by another one on the same database.
    for some in (client, auth_client):
        config = some.get("/v1/config", params={"warehouse": name})
        assert config.status_code == 200 and config.json()["overrides"]["prefix"] == name
    assert client.post(f"/v1/{name}/namespaces", json={"namespace": ["sales"]}).status_code == 200
    table = auth_client.post(
        f"/v1/{name}/namespaces/sales/tables",
        json=create_request("orders"),
        headers={"X-Iceberg-Access-Delegation": "vended-credentials"},
    )
    assert table.status_code == 200, table.text
    metadata = table.json()["metadata-location"]
    assert metadata.startswith(f"s3://{SECOND_BUCKET}/{name}/sales/orders")
    assert second_bucket.exists(Location.parse(metadata))
    assert table.json()["config"]["s3.access-key-id"] == services.access_key  # the warehouse's (static mode)
    loaded = client.get(f"/v1/{name}/namespaces/sales/tables/orders")
    assert loaded.status_code == 200 and loaded.json()["metadata-location"] == metadata

    # Not empty: 409, nothing deleted.
    _error(client.delete(f"{M}/warehouses/{name}"), 409, "WarehouseNotEmptyException")
    assert client.get(f"/v1/{name}/namespaces/sales/tables/orders").status_code == 200
    assert client.delete(f"/v1/{name}/namespaces/sales/tables/orders?purgeRequested=false").status_code == 204
    assert client.delete(f"/v1/{name}/namespaces/sales").status_code == 204

    assert client.delete(f"{M}/warehouses/{name}").status_code == 204
    _error(client.get(f"{M}/warehouses/{name}"), 404, "NotFoundException")
    assert client.get("/v1/config", params={"warehouse": name}).status_code == 404
    assert _until(lambda: auth_client.get("/v1/config", params={"warehouse": name}).status_code == 404)
    assert services.secret_key not in caplog.text


def test_objects_are_written_with_the_warehouses_own_keys(client, auth_client, services, second_bucket, name):
    """Wrong keys of its own: writing the warehouse's objects fails (the environment's keys,
    which would work, are not used); fixed by an update, seen by both apps."""
    body = _warehouse_body(name, services, **{"access-key-id": "wrong", "secret-access-key": "wrong-secret"})
    assert client.post(f"{M}/warehouses", json=body).status_code == 201
    assert client.post(f"/v1/{name}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    refused = client.post(f"/v1/{name}/namespaces/ns/tables", json=create_request("t"))
    _error(refused, 503, "ServiceUnavailableException")

    fixed = {"storage": {"access-key-id": services.access_key, "secret-access-key": services.secret_key}}
    updated = client.put(f"{M}/warehouses/{name}", json=fixed)
    assert updated.status_code == 200 and updated.json()["storage"]["has-own-keys"] is True
    assert updated.json()["storage"]["credentials-mode"] == "static"  # unchanged settings are kept
    assert client.post(f"/v1/{name}/namespaces/ns/tables", json=create_request("t")).status_code == 200
    assert _until(
        lambda: auth_client.post(f"/v1/{name}/namespaces/ns/tables", json=create_request("t2")).status_code == 200
    )


def test_update_changes_settings_and_allowed_locations(client, services, name):
    assert client.post(f"{M}/warehouses", json=_warehouse_body(name, services)).status_code == 201
    changed = client.put(
        f"{M}/warehouses/{name}",
        json={"storage": {"credentials-mode": "remote-signing", "region": "eu-west-1"}, "allowed-locations": []},
    )
    assert changed.status_code == 200, changed.text
    storage = changed.json()["storage"]
    assert storage["credentials-mode"] == "remote-signing" and storage["region"] == "eu-west-1"
    assert storage["has-own-keys"] is True and changed.json()["allowed-locations"] == []
    _error(client.put(f"{M}/warehouses/nowhere-{name}", json={}), 404, "NotFoundException")
    _error(client.put(f"{M}/warehouses/test", json={}), 400, "BadRequestException")  # the environment's
    _error(client.delete(f"{M}/warehouses/test"), 400, "BadRequestException")
    assert client.delete(f"{M}/warehouses/{name}").status_code == 204


def test_warehouse_bad_input(client, services, name):
    good = _warehouse_body(name, services)
    assert client.post(f"{M}/warehouses", json=good).status_code == 201
    _error(client.post(f"{M}/warehouses", json=good), 409, "AlreadyExistsException")
    bad_bodies = [
        {**good, "name": "other-" + name, "location": "http://not-s3/x"},
        {**good, "name": "other-" + name, "location": "s3://"},
        {**good, "name": "other-" + name, "location": "file:/tmp/growler"},
        {**good, "name": "other-" + name, "location": f"s3://{SECOND_BUCKET}/{name}/inside"},  # overlaps
        {
            **good,
            "name": "other-" + name,
            "location": f"s3://{SECOND_BUCKET}/o-{name}",
            "allowed-locations": ["ftp://x/"],
        },
        {**good, "name": "bad name", "location": f"s3://{SECOND_BUCKET}/b-{name}"},
        {**good, "name": "config", "location": f"s3://{SECOND_BUCKET}/c-{name}"},
        {
            **good,
            "name": "other-" + name,
            "location": f"s3://{SECOND_BUCKET}/e-{name}",
            "storage": {"endpoint": "ftp://x"},
        },
        {
            **good,
            "name": "other-" + name,
            "location": f"s3://{SECOND_BUCKET}/k-{name}",
            "storage": {"access-key-id": "a"},
        },
        {
            **good,
            "name": "other-" + name,
            "location": f"s3://{SECOND_BUCKET}/m-{name}",
            "storage": {"credentials-mode": "x"},
        },
        {  # static keys that would be the server's own: never
            **good,
            "name": "other-" + name,
            "location": f"s3://{SECOND_BUCKET}/s-{name}",
            "storage": {"endpoint": services.s3_endpoint, "credentials-mode": "static"},
        },
        *(
            {  # keys or anything else in the endpoint, shown back to every administrator and client
                **good,
                "name": "other-" + name,
                "location": f"s3://{SECOND_BUCKET}/u-{name}",
                "storage": {**good["storage"], "endpoint": endpoint},
            }
            for endpoint in (
                services.s3_endpoint.replace("http://", "http://user:password@"),
                services.s3_endpoint + "?x=1",
                services.s3_endpoint + "#f",
            )
        ),
        {"name": "other-" + name},
    ]
    for body in bad_bodies:
        _error(client.post(f"{M}/warehouses", json=body), 400, "BadRequestException")
    assert [w["name"] for w in client.get(f"{M}/warehouses").json()["warehouses"]].count("other-" + name) == 0
    _error(client.get(f"{M}/warehouses/nowhere-{name}"), 404, "NotFoundException")
    _error(client.delete(f"{M}/warehouses/nowhere-{name}"), 404, "NotFoundException")
    assert client.delete(f"{M}/warehouses/{name}").status_code == 204


def test_warehouses_are_paginated(client, services):
    names = sorted("wp" + uuid.uuid4().hex[:8] for _ in range(3))
    for one in names:
        assert client.post(f"{M}/warehouses", json=_warehouse_body(one, services)).status_code == 201
    seen, token = [], ""
    while True:
        page = client.get(f"{M}/warehouses", params={"pageToken": token, "pageSize": 1}).json()
        assert len(page["warehouses"]) <= 1
        seen += [w["name"] for w in page["warehouses"]]
        token = page.get("next-page-token")
        if not token:
            break
    assert seen == sorted(seen) and set(names) <= set(seen)
    for one in names:
        assert client.delete(f"{M}/warehouses/{one}").status_code == 204
