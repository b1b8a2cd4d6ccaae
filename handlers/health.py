"""Liveness and readiness probes (outside the Iceberg spec)."""

from app.edge.context import services


def healthz():
    return {"status": "alive"}, 200


def readyz():
    return {"status": "ready", "checks": services().namespaces.check_ready()}, 200
