"""Liveness and readiness probes (outside the Iceberg spec)."""

from app.edge.context import namespaces


def healthz():
    return {"status": "alive"}, 200


def readyz():
    return {"status": "ready", "checks": namespaces().check_ready()}, 200
