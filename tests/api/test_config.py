"""GET /v1/config and the advertised endpoints."""

from __future__ import annotations

import re

import yaml

from app.edge.factory import SPEC_FILE

OPERATIONS = [
    (method.upper(), path, op["operationId"])
    for path, item in yaml.safe_load(SPEC_FILE.read_text())["paths"].items()
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
    missing = [(m, p, op) for m, p, op in OPERATIONS if f"{m} {p}" not in advertised]
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
