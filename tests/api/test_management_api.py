"""The management API (/management/v1): principals, roles, members, grants; who may call it; the
audit lines; secrets shown once and never logged.

Warehouses have their own module (test_management_warehouses.py).
"""

from __future__ import annotations

import json
import logging
import uuid

import pytest

from tests.api.tables_support import create_request
from tests.conftest import fetch_token

M = "/management/v1"


def _name(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:10]}"


def _error(response, status: int, error_type: str, message: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == error_type and error["code"] == status
    if message is not None:
        assert error["message"] == message


def _audit_lines(caplog) -> list[dict]:
    return [r.fields for r in caplog.records if r.name == "growler.audit"]


@pytest.fixture
def principal(client) -> dict:
    name = _name("p")
    response = client.post(f"{M}/principals", json={"name": name})
    assert response.status_code == 201, response.text
    return {"name": name, **response.json()}


@pytest.fixture
def role(client) -> str:
    name = _name("r")
    assert client.post(f"{M}/roles", json={"name": name}).status_code == 201
    return name


def _as(app, credential: dict):
    """A client of ``app`` authenticated as a principal just created: its first token is accepted
    at once (the verifier reloads the auth state for a principal it has not seen yet)."""
    token = fetch_token(app.anonymous_client(), credential["client-id"], credential["client-secret"])
    user = app.anonymous_client(headers={"Authorization": f"Bearer {token}"})
    # accepted: not 401 (the token is good); a principal without grants is refused /v1/config
    # itself (403, the same whether the warehouse exists or not), an admin gets it
    assert user.get("/v1/config").status_code in (200, 403)
    return user


# -- principals --------------------------------------------------------------------------------


def test_principal_lifecycle_secret_shown_once(app, client, db):
    name = _name("p")
    created = client.post(f"{M}/principals", json={"name": name})
    assert created.status_code == 201
    body = created.json()
    assert body["client-id"] == name and len(body["client-secret"]) >= 32
    (stored,) = db.execute("SELECT secret_hash FROM principal WHERE client_id = %s", (name,)).fetchone()
    assert stored.startswith("$argon2id$") and body["client-secret"] not in stored

    got = client.get(f"{M}/principals/{name}")
    assert got.status_code == 200
    assert got.json() == {"name": name, "admin": False, "trusted-engine": False, "roles": []}
    assert body["client-secret"] not in got.text
    assert name in client.get(f"{M}/principals").json()["principals"]
    fetch_token(app.anonymous_client(), name, body["client-secret"])  # the secret works

    rotated = client.post(f"{M}/principals/{name}/rotate")
    assert rotated.status_code == 200
    new_secret = rotated.json()["client-secret"]
    assert new_secret != body["client-secret"] and rotated.json()["client-id"] == name
    refused = app.anonymous_client().post(
        "/v1/oauth/tokens",
        data={"grant_type": "client_credentials", "client_id": name, "client_secret": body["client-secret"]},
    )
    assert refused.status_code == 401
    fetch_token(app.anonymous_client(), name, new_secret)

    assert client.delete(f"{M}/principals/{name}").status_code == 204
    _error(client.get(f"{M}/principals/{name}"), 404, "NotFoundException", f"Principal does not exist: {name}")
    assert name not in client.get(f"{M}/principals").json()["principals"]
    _error(client.delete(f"{M}/principals/{name}"), 404, "NotFoundException")
    _error(client.post(f"{M}/principals/{name}/rotate"), 404, "NotFoundException")


def test_principal_bad_input(client, principal):
    _error(client.post(f"{M}/principals", json={"name": principal["name"]}), 409, "AlreadyExistsException")
    _error(client.post(f"{M}/principals", json={"name": "has:colon"}), 400, "BadRequestException")
    _error(client.post(f"{M}/principals", json={"name": "x", "secret": "mine"}), 400, "BadRequestException")
    _error(client.post(f"{M}/principals", json={}), 400, "BadRequestException")
    _error(client.get(f"{M}/principals/nobody-here"), 404, "NotFoundException", "Principal does not exist: nobody-here")
    _error(client.delete(f"{M}/principals/test-admin"), 400, "BadRequestException")  # not oneself


def test_principals_are_paginated(client):
    names = sorted(_name("page") for _ in range(3))
    for name in names:
        assert client.post(f"{M}/principals", json={"name": name}).status_code == 201
    seen: list[str] = []
    token = ""
    while True:
        page = client.get(f"{M}/principals", params={"pageToken": token, "pageSize": 2}).json()
        assert len(page["principals"]) <= 2
        seen += page["principals"]
        token = page.get("next-page-token")
        if not token:
            break
    assert seen == sorted(seen) and set(names) <= set(seen)
    _error(client.get(f"{M}/principals", params={"pageSize": 0}), 400, "BadRequestException")
    _error(client.get(f"{M}/principals", params={"pageToken": "%%%"}), 400, "BadRequestException")


# -- roles and members -------------------------------------------------------------------------


def test_role_lifecycle_and_members(client, principal, role, db):
    got = client.get(f"{M}/roles/{role}")
    assert got.status_code == 200 and got.json()["name"] == role
    assert role in client.get(f"{M}/roles").json()["roles"]
    _error(client.post(f"{M}/roles", json={"name": role}), 409, "AlreadyExistsException")

    version = db.execute("SELECT version FROM auth_state").fetchone()[0]
    assert client.put(f"{M}/roles/{role}/members/{principal['name']}").status_code == 204
    assert db.execute("SELECT version FROM auth_state").fetchone()[0] > version
    assert client.put(f"{M}/roles/{role}/members/{principal['name']}").status_code == 204  # idempotent
    assert client.get(f"{M}/roles/{role}/members").json() == {"members": [principal["name"]]}
    assert client.get(f"{M}/principals/{principal['name']}").json()["roles"] == [role]

    assert client.delete(f"{M}/roles/{role}/members/{principal['name']}").status_code == 204
    assert client.get(f"{M}/roles/{role}/members").json() == {"members": []}
    _error(client.delete(f"{M}/roles/{role}/members/{principal['name']}"), 404, "NotFoundException")

    assert client.delete(f"{M}/roles/{role}").status_code == 204
    _error(client.get(f"{M}/roles/{role}"), 404, "NotFoundException", f"Role does not exist: {role}")
    _error(client.delete(f"{M}/roles/{role}"), 404, "NotFoundException")


def test_members_bad_input(client, principal, role):
    _error(
        client.put(f"{M}/roles/{role}/members/nobody-here"),
        404,
        "NotFoundException",
        "Principal does not exist: nobody-here",
    )
    _error(client.put(f"{M}/roles/no-role/members/{principal['name']}"), 404, "NotFoundException")
    _error(client.get(f"{M}/roles/no-role/members"), 404, "NotFoundException", "Role does not exist: no-role")
    _error(client.post(f"{M}/roles", json={"name": "bad name"}), 400, "BadRequestException")


# -- grants ------------------------------------------------------------------------------------


def test_grants_on_every_kind_of_securable(client, role):
    assert client.post("/v1/namespaces", json={"namespace": ["sales"]}).status_code == 200
    assert client.post("/v1/namespaces", json={"namespace": ["sales", "eu"]}).status_code == 200
    assert client.post("/v1/namespaces/sales/tables", json=create_request("orders")).status_code == 200
    securables = [
        {"type": "catalog"},
        {"type": "warehouse", "warehouse": "test"},
        {"type": "namespace", "warehouse": "test", "namespace": ["sales", "eu"]},
        {"type": "table", "warehouse": "test", "namespace": ["sales"], "name": "orders"},
    ]
    for securable in securables:
        granted = client.post(f"{M}/roles/{role}/grants", json={"privilege": "read", "securable": securable})
        assert granted.status_code == 201, granted.text
        assert granted.json() == {"role": role, "privilege": "read", "securable": securable}
    again = client.post(f"{M}/roles/{role}/grants", json={"privilege": "read", "securable": securables[0]})
    assert again.status_code == 201  # granting twice holds one grant
    listed = client.get(f"{M}/roles/{role}/grants").json()["grants"]
    assert [g["securable"] for g in listed] == securables

    page = client.get(f"{M}/roles/{role}/grants", params={"pageToken": "", "pageSize": 3}).json()
    assert len(page["grants"]) == 3 and page["next-page-token"]
    rest = client.get(f"{M}/roles/{role}/grants", params={"pageToken": page["next-page-token"]}).json()
    assert [g["securable"] for g in page["grants"] + rest["grants"]] == securables

    on_table = client.get(
        f"{M}/grants", params={"type": "table", "warehouse": "test", "namespace": "sales", "name": "orders"}
    )
    assert on_table.status_code == 200 and on_table.json()["grants"] == [listed[3]]
    on_ns = client.get(f"{M}/grants", params={"type": "namespace", "warehouse": "test", "namespace": "sales\x1feu"})
    assert on_ns.json()["grants"] == [listed[2]]
    assert client.get(f"{M}/grants", params={"type": "catalog"}).json()["grants"] == [listed[0]]

    revoke = {"privilege": "read", "securable": securables[3]}
    assert client.post(f"{M}/roles/{role}/grants/revoke", json=revoke).status_code == 204
    _error(client.post(f"{M}/roles/{role}/grants/revoke", json=revoke), 404, "NotFoundException")
    assert len(client.get(f"{M}/roles/{role}/grants").json()["grants"]) == 3
    assert client.delete(f"{M}/roles/{role}").status_code == 204  # its grants go with it


def test_grant_bad_input(client, role):
    def grant(securable: dict, privilege: str = "read", to: str = role):
        return client.post(f"{M}/roles/{to}/grants", json={"privilege": privilege, "securable": securable})

    _error(grant({"type": "catalog"}, privilege="everything"), 400, "BadRequestException")
    _error(grant({"type": "galaxy"}), 400, "BadRequestException")
    _error(grant({"type": "catalog", "warehouse": "test"}), 400, "BadRequestException")
    _error(grant({"type": "table", "warehouse": "test", "namespace": ["a"]}), 400, "BadRequestException")
    _error(
        grant({"type": "warehouse", "warehouse": "nowhere"}),
        404,
        "NotFoundException",
        "Warehouse does not exist: nowhere",
    )
    _error(
        grant({"type": "namespace", "warehouse": "test", "namespace": ["missing"]}),
        404,
        "NotFoundException",
        "Namespace does not exist: missing",
    )
    _error(grant({"type": "catalog"}, to="no-role"), 404, "NotFoundException", "Role does not exist: no-role")
    _error(client.get(f"{M}/grants", params={"type": "namespace", "warehouse": "test"}), 400, "BadRequestException")
    _error(client.get(f"{M}/roles/no-role/grants"), 404, "NotFoundException")


# -- who may call it ---------------------------------------------------------------------------


def test_non_admin_is_forbidden_and_nothing_is_written(app, client, principal, role, db, caplog):
    caplog.set_level(logging.INFO, logger="growler.audit")
    user = _as(app, principal)
    caplog.clear()  # _as's probe of /v1/config was refused too (the principal holds no grant)
    before = db.execute("SELECT version FROM auth_state").fetchone()[0]
    attempts = [
        ("get", f"{M}/principals", None),
        ("post", f"{M}/principals", {"name": _name("sneaky")}),
        ("post", f"{M}/principals/test-admin/rotate", None),
        ("delete", f"{M}/principals/test-admin", None),
        ("post", f"{M}/roles", {"name": _name("sneaky")}),
        ("put", f"{M}/roles/{role}/members/{principal['name']}", None),
        ("post", f"{M}/roles/{role}/grants", {"privilege": "read", "securable": {"type": "catalog"}}),
        ("delete", f"{M}/roles/{role}", None),
        ("get", f"{M}/warehouses", None),
        ("post", f"{M}/warehouses", {"name": _name("w"), "location": "s3://sneaky/"}),
        ("delete", f"{M}/warehouses/test", None),
    ]
    for method, url, body in attempts:
        response = getattr(user, method)(url, json=body) if body is not None else getattr(user, method)(url)
        _error(response, 403, "ForbiddenException")
    assert db.execute("SELECT version FROM auth_state").fetchone()[0] == before
    assert client.get(f"{M}/roles/{role}/members").json() == {"members": []}
    assert client.get(f"{M}/roles/{role}/grants").json() == {"grants": []}
    refused = [line for line in _audit_lines(caplog) if line["outcome"] == "forbidden"]
    assert len(refused) == len(attempts) and {line["principal"] for line in refused} == {principal["name"]}
    assert app.anonymous_client().get(f"{M}/roles").status_code == 401


def test_admin_principal_made_through_the_api_may_manage(app, client):
    name = _name("admin")
    credential = client.post(f"{M}/principals", json={"name": name, "admin": True}).json()
    admin = _as(app, credential)
    assert admin.post(f"{M}/roles", json={"name": _name("r")}).status_code == 201
    assert client.get(f"{M}/principals/{name}").json()["admin"] is True


# -- audit and secrets -------------------------------------------------------------------------


def test_every_change_is_audited_without_secrets(app, client, caplog, capsys):
    caplog.set_level(logging.DEBUG)
    name, role = _name("p"), _name("r")
    created = client.post(f"{M}/principals", json={"name": name}).json()
    rotated = client.post(f"{M}/principals/{name}/rotate").json()
    client.post(f"{M}/roles", json={"name": role})
    client.put(f"{M}/roles/{role}/members/{name}")
    client.post(f"{M}/roles/{role}/grants", json={"privilege": "write", "securable": {"type": "catalog"}})
    client.post(f"{M}/roles/{role}/grants/revoke", json={"privilege": "write", "securable": {"type": "catalog"}})
    client.delete(f"{M}/roles/{role}/members/{name}")
    client.delete(f"{M}/roles/{role}")
    client.delete(f"{M}/principals/{name}")
    lines = [line for line in _audit_lines(caplog) if line["outcome"] == "ok"]
    assert [line["action"] for line in lines] == [
        "create-principal",
        "rotate-principal",
        "create-role",
        "assign-role",
        "grant",
        "revoke",
        "revoke-role",
        "delete-role",
        "delete-principal",
    ]
    assert all(line["principal"] == "test-admin" for line in lines)
    assert lines[3]["target"] == {"role": role, "principal": name}
    assert lines[4]["target"]["securable"] == {"type": "catalog"}
    captured = capsys.readouterr()
    everything = caplog.text + captured.out + captured.err + json.dumps(lines)
    for secret in (created["client-secret"], rotated["client-secret"]):
        assert secret not in everything
    assert any('"logger":"growler.audit"' in line for line in captured.err.splitlines())  # JSON lines
