"""Liveness and readiness probes (outside the Iceberg spec)."""

from app.edge.context import catalog


def healthz():
    return {"status": "alive"}, 200


def readyz():
    return {"status": "ready", "checks": catalog().check_ready()}, 200
