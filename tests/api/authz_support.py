"""Principals with exactly the grants a test gives them, and what the catalog holds (authorization tests).

Grants are made through ``storage.grants.GrantRepository`` (the management API is built
elsewhere). After a change the test waits - on a condition, not a clock - until the app's
authorization cache follows the ``auth_state.version`` it wrote.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from app.edge.context import AUTHORIZER
from app.principals import PrincipalService
from storage.db import Database
from storage.grants import GrantRepository
from storage.principals import PrincipalRepository
from tests.conftest import fetch_token

PREFIX = "/v1/test"
WAREHOUSE = "test"


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
        self.database = Database(database_url, max_size=2)
        self.database.open()
        self.principals = PrincipalService(PrincipalRepository(self.database))
        self.grants = GrantRepository(self.database)

    def close(self) -> None:
        self.database.close()

    def new(self, label: str = "p") -> Caller:
        name = f"{label}-{uuid.uuid4().hex[:8]}"
        credential = self.principals.create(name)
        assert credential is not None
        token = fetch_token(self.app.anonymous_client(), credential.client_id, credential.secret)
        role = f"role-{name}"
        assert self.grants.create_role(role)
        assert self.grants.add_member(role, name)
        client = self.app.anonymous_client(headers={"Authorization": f"Bearer {token}"})
        return Caller(name, role, client)

    def grant(self, caller: Caller, privilege: str, securable: str, *path: Any) -> None:
        assert self.grants.grant(caller.role, privilege, securable, *path)
        self.settle()

    def revoke(self, caller: Caller, privilege: str, securable: str, *path: Any) -> None:
        assert self.grants.revoke(caller.role, privilege, securable, *path)
        self.settle()

    def settle(self, timeout_s: float = 5.0) -> None:
        """Until the app's authorizer decides at the database's current version (it polls it)."""
        wait_for_version(lambda: self.app.app.extensions[AUTHORIZER]._version(), self.database_url, timeout_s)


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
    metadata, metrics reports, scan plans, idempotency keys, queued purges."""
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
    }


def reset_catalog(db: psycopg.Connection) -> None:
    db.execute("TRUNCATE role_grant, scan_plan_page, scan_plan, catalog_function, catalog_entry, namespace")


def denied(response: Any) -> bool:
    """Refused by authorization: 403 ForbiddenException naming the missing privilege."""
    if response.status_code != 403:
        return False
    if not response.content:  # HEAD: no body to tell by
        return True
    error = response.json()["error"]
    return error["type"] == "ForbiddenException" and "lacks" in error["message"]
