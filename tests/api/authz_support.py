"""Principals with exactly the grants a test gives them, and what the catalog holds (authorization tests).

Principals, roles, memberships and grants are made through the management API, as an operator
would, with the bootstrap admin's client. After a change the test waits - on a condition, not a
clock - until the app's authorization cache follows the ``auth_state.version`` it wrote.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from app.composition.services import services_of
from storage.db import Database
from storage.grants import GrantRepository
from tests.conftest import TRUNCATE_CATALOG, fetch_token

PREFIX = "/v1/test"
WAREHOUSE = "test"
MANAGEMENT = "/management/v1"


@dataclass
class Caller:
    name: str
    role: str
    client: Any  # a test client sending this principal's token


class Principals:
    """Makes principals (each with a role of its own) against one app and database."""

    def __init__(self, app: Any, database_url: str) -> None:
        self.app = app
        self.database_url = database_url
        self.admin = app.test_client()  # the bootstrap admin: may use the management API
        self.database = Database(database_url, max_size=2)
        self.database.open()
        self.grants = GrantRepository(self.database)  # the authorizer's read side, for direct decisions

    def close(self) -> None:
        self.database.close()

    def new(self, label: str = "p") -> Caller:
        response = self.admin.post(f"{MANAGEMENT}/principals", json={"name": f"{label}-{uuid.uuid4().hex[:8]}"})
        assert response.status_code == 201, response.text
        credential = response.json()
        name = credential["client-id"]
        role = self.create_role(f"role-{name}")
        assert self.admin.put(f"{MANAGEMENT}/roles/{role}/members/{name}").status_code == 204
        token = fetch_token(self.app.anonymous_client(), name, credential["client-secret"])
        client = self.app.anonymous_client(headers={"Authorization": f"Bearer {token}"})
        return Caller(name, role, client)

    def create_role(self, role: str) -> str:
        response = self.admin.post(f"{MANAGEMENT}/roles", json={"name": role})
        assert response.status_code == 201, response.text
        return role

    def grant_role(self, role: str, privilege: str, securable: str, *path: Any) -> None:
        body = {"privilege": privilege, "securable": securable_body(securable, *path)}
        response = self.admin.post(f"{MANAGEMENT}/roles/{role}/grants", json=body)
        assert response.status_code == 201, response.text

    def grant(self, caller: Caller, privilege: str, securable: str, *path: Any) -> None:
        self.grant_role(caller.role, privilege, securable, *path)
        self.settle()

    def revoke(self, caller: Caller, privilege: str, securable: str, *path: Any, settle: bool = True) -> None:
        body = {"privilege": privilege, "securable": securable_body(securable, *path)}
        response = self.admin.post(f"{MANAGEMENT}/roles/{caller.role}/grants/revoke", json=body)
        assert response.status_code == 204, response.text
        if settle:
            self.settle()

    def settle(self, timeout_s: float = 5.0) -> None:
        """Until the app's authorizer decides at the database's current version (it polls it)."""
        wait_for_version(lambda: services_of(self.app.app).authorizer._version(), self.database_url, timeout_s)


def securable_body(
    kind: str, warehouse: str | None = None, namespace: tuple[str, ...] = (), name: str | None = None
) -> dict[str, Any]:
    """A securable as the management API takes it (openapi/management.yaml)."""
    body: dict[str, Any] = {"type": kind}
    if warehouse is not None:
        body["warehouse"] = warehouse
    if namespace:
        body["namespace"] = list(namespace)
    if name is not None:
        body["name"] = name
    return body


def database_version(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return int(conn.execute("SELECT version FROM auth_state").fetchone()[0])


def wait_for_version(seen: Any, database_url: str, timeout_s: float = 5.0) -> None:
    """A condition wait: returns as soon as ``seen()`` reaches the database's version."""
    target = database_version(database_url)
    deadline = time.monotonic() + timeout_s
    tick = threading.Event()
    while (seen() or 0) < target:
        assert time.monotonic() < deadline, f"the authorization state did not reach version {target}"
        tick.wait(0.02)


def catalog_state(db: psycopg.Connection) -> dict[str, Any]:
    """Everything an operation could write: namespaces and their properties, entries and their
    metadata, metrics reports, scan plans, idempotency keys, queued purges, change feed events."""
    return {
        "namespaces": db.execute("SELECT path, properties FROM namespace ORDER BY path").fetchall(),
        "entries": db.execute(
            "SELECT n.path, e.name, e.kind, e.metadata_location FROM catalog_entry e"
            " JOIN namespace n ON n.id = e.namespace_id ORDER BY n.path, e.name"
        ).fetchall(),
        "reports": db.execute("SELECT count(*) FROM metrics_report").fetchone()[0],
        "plans": db.execute("SELECT count(*) FROM scan_plan").fetchone()[0],
        "keys": db.execute("SELECT count(*) FROM idempotency_key").fetchone()[0],
        "purges": db.execute("SELECT count(*) FROM purge_job").fetchone()[0],
        "events": db.execute("SELECT count(*) FROM change_event").fetchone()[0],  # refusals write none
    }


def reset_catalog(db: psycopg.Connection) -> None:
    db.execute(TRUNCATE_CATALOG)


def denied(response: Any) -> bool:
    """Refused by authorization: 403 ForbiddenException naming the missing privilege."""
    if response.status_code != 403:
        return False
    if not response.content:  # HEAD: no body to tell by
        return True
    error = response.json()["error"]
    return error["type"] == "ForbiddenException" and "lacks" in error["message"]
