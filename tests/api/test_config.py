"""GET /v1/config and the advertised endpoints."""

from __future__ import annotations

import re

import pytest
import yaml

from app.edge.factory import EVENTS_SPEC_FILE, SPEC_FILE

# The catalog's operations and the change feed's (openapi/events.yaml, an extension of the same contract)
OPERATIONS = [
    (method.upper(), path, op["operationId"])
    for spec_file in (SPEC_FILE, EVENTS_SPEC_FILE)
    for path, item in yaml.safe_load(spec_file.read_text())["paths"].items()
    for method, op in item.items()
    if method in {"get", "post", "put", "delete", "head", "patch"}
]


def test_config_for_the_default_warehouse(client):
    response = client.get("/v1/config")
    assert response.status_code == 200
    body = response.json()
    assert body["overrides"]["prefix"] == "test"
    assert body["overrides"]["namespace-separator"] == "%1F"
    assert isinstance(body["defaults"], dict)
    assert "GET /v1/{prefix}/namespaces" in body["endpoints"]
    assert "HEAD /v1/{prefix}/namespaces/{namespace}" in body["endpoints"]
    # every operation of the spec: the token endpoint (Growler issues tokens here) and signing too
    assert len(body["endpoints"]) == len(OPERATIONS)


def test_config_selects_a_warehouse(client):
    assert client.get("/v1/config", params={"warehouse": "test"}).json()["overrides"]["prefix"] == "test"
    response = client.get("/v1/config", params={"warehouse": "elsewhere"})
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "NoSuchWarehouseException"


def test_every_advertised_endpoint_is_a_spec_operation(client):
    advertised = client.get("/v1/config").json()["endpoints"]
    spec = {f"{method} {path}" for method, path, _ in OPERATIONS}
    assert advertised, "no endpoints advertised"
    assert set(advertised) <= spec
    assert len(advertised) == len(set(advertised))


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", lambda m: "test" if m.group(0) == "{prefix}" else "x", path)


def test_operations_not_advertised_answer_406(client):
    advertised = set(client.get("/v1/config").json()["endpoints"])
    # getToken is served in front of connexion (app/edge/auth/endpoint.py, tests/api/test_auth_tokens.py)
    missing = [(m, p, op) for m, p, op in OPERATIONS if f"{m} {p}" not in advertised and op != "getToken"]
    for method, path, operation_id in missing:
        kwargs = {"json": {}} if method in {"POST", "PUT"} else {}
        response = client.request(method, _concrete(path), **kwargs)
        # Request validation may reject the empty body first (400, or 415 for the form-encoded
        # token endpoint); what must never happen is a pretend success or a 5xx.
        assert response.status_code in (400, 406, 415), (operation_id, response.status_code, response.text)
        if method != "HEAD":
            assert response.json()["error"]["type"] in ("UnsupportedOperationException", "BadRequestException")
    # at least the GET/DELETE/HEAD ones reach the handler and say 406
    for method, path, operation_id in missing:
        if method in {"GET", "DELETE"}:
            response = client.request(method, _concrete(path))
            assert response.status_code == 406, (operation_id, response.text)
            assert response.json()["error"]["type"] == "UnsupportedOperationException"


def test_scan_planning_mode_switch(settings, clean_catalog):
    """``GROWLER_SCAN_PLANNING_MODE``: in /v1/config's defaults (PyIceberg reads only catalog
    properties) and in every LoadTableResult's config, where the spec puts it (Java honours it)."""
    import dataclasses

    from app.edge.factory import create_app
    from app.ground.settings import Settings
    from tests.api.tables_support import PREFIX, create_request, table_url
    from tests.conftest import authenticated

    plain = authenticated(create_app(settings)).test_client()
    assert "scan-planning-mode" not in plain.get("/v1/config").json()["defaults"]
    client = authenticated(create_app(dataclasses.replace(settings, scan_planning_mode="server"))).test_client()
    assert client.get("/v1/config").json()["defaults"]["scan-planning-mode"] == "server"
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    created = client.post(f"{PREFIX}/namespaces/db/tables", json=create_request("events"))
    assert created.json()["config"]["scan-planning-mode"] == "server"
    staged = client.post(f"{PREFIX}/namespaces/db/tables", json={**create_request("staged"), "stage-create": True})
    assert staged.json()["config"]["scan-planning-mode"] == "server"
    assert client.get(table_url("events")).json()["config"]["scan-planning-mode"] == "server"
    assert "scan-planning-mode" not in plain.get(table_url("events")).json()["config"]
    assert client.delete(table_url("events")).status_code == 204  # its files stay, to be registered again
    registered = client.post(
        f"{PREFIX}/namespaces/db/register",
        json={"name": "again", "metadata-location": created.json()["metadata-location"]},
    )
    assert registered.status_code == 200 and registered.json()["config"]["scan-planning-mode"] == "server"

    env = {"GROWLER_DATABASE_URL": "postgresql://x", "GROWLER_WAREHOUSE_LOCATION": "file:///tmp/w"}
    assert Settings.from_env({**env, "GROWLER_SCAN_PLANNING_MODE": " Server "}).scan_planning_mode == "server"
    assert Settings.from_env({**env, "GROWLER_SCAN_PLANNING_MODE": "client"}).scan_planning_mode == "client"
    assert Settings.from_env(env).scan_planning_mode is None
    with pytest.raises(ValueError, match="GROWLER_SCAN_PLANNING_MODE"):
        Settings.from_env({**env, "GROWLER_SCAN_PLANNING_MODE": "sometimes"})
