"""Liveness and readiness."""


def test_healthz(client):
    assert client.get("/healthz").json() == {"status": "alive"}


def test_readyz_when_dependencies_are_up(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": "ok", "object-storage": "ok"}
