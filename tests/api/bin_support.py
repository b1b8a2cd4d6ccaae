"""What the recycle bin and protection tests share: the management calls, housekeeping rounds,
and a barrier made of a PostgreSQL row lock (two requests held until both wait on it)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from app.composition.services import services_of
from app.housekeeping import Housekeeper
from storage.idempotency import IdempotencyRepository

M = "/management/v1"
BIN = f"{M}/warehouses/test/bin"
PROTECTIONS = f"{M}/warehouses/test/protections"


def units(client: Any, namespace: str | None = None) -> list[dict[str, Any]]:
    response = client.get(BIN, params={"namespace": namespace} if namespace else None)
    assert response.status_code == 200, response.text
    return response.json()["units"]


def unit_of(client: Any, name: str) -> dict[str, Any]:
    (found,) = [unit for unit in units(client) if unit.get("name") == name or unit["namespace"][-1:] == [name]]
    return found


def undrop(client: Any, unit_id: int, **body: Any) -> Any:
    return client.post(f"{BIN}/{unit_id}/undrop", json=body)


def protect(client: Any, kind: str, namespace: list[str] | None = None, name: str | None = None) -> Any:
    return client.post(PROTECTIONS, json=_mark(kind, namespace, name))


def unprotect(client: Any, kind: str, namespace: list[str] | None = None, name: str | None = None) -> Any:
    return client.post(f"{PROTECTIONS}/remove", json=_mark(kind, namespace, name))


def _mark(kind: str, namespace: list[str] | None, name: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {"type": kind}
    if namespace:
        body["namespace"] = namespace
    if name:
        body["name"] = name
    return body


def housekeeper(app: Any) -> Housekeeper:
    """A housekeeper of the test's own over the app's services (the app's thread may run too)."""
    tables = services_of(app.app).tables
    recycle_bin = services_of(app.app).recycle_bin
    return Housekeeper(
        tables.repository,
        tables.objects,
        IdempotencyRepository(tables.repository.db),
        threading.Event(),
        expire_bin=recycle_bin.expire_due,
    )


def until(condition: Callable[[], bool], app: Any, timeout_s: float = 30.0) -> None:
    """Housekeeping rounds until ``condition`` holds (a purge leased by the app's thread: polled)."""
    keeper = housekeeper(app)
    deadline = time.monotonic() + timeout_s
    while not condition():
        keeper.run_round(3600)
        assert time.monotonic() < deadline, "housekeeping did not get there"
        time.sleep(0.05)


def bin_state(db: psycopg.Connection) -> dict[str, Any]:
    """Everything a destructive operation could write, the bin included."""
    return {
        "warehouses": db.execute("SELECT name, protected FROM warehouse ORDER BY name").fetchall(),
        "namespaces": db.execute("SELECT path, properties, protected FROM namespace ORDER BY path").fetchall(),
        "entries": db.execute(
            "SELECT n.path, e.name, e.kind, e.metadata_location, e.protected FROM catalog_entry e"
            " JOIN namespace n ON n.id = e.namespace_id ORDER BY n.path, e.name"
        ).fetchall(),
        "bin": db.execute("SELECT id, purging_since FROM bin_unit ORDER BY id").fetchall(),
        "binned": db.execute("SELECT id FROM bin_entry ORDER BY id").fetchall(),
        "purges": db.execute("SELECT count(*) FROM purge_job").fetchone()[0],
        "grants": db.execute("SELECT count(*) FROM role_grant").fetchone()[0],
    }


@contextmanager
def held_rows(database_url: str, lock_sql: str, params: tuple[Any, ...]) -> Iterator[Callable[[int], None]]:
    """A barrier: holds the rows ``lock_sql`` locks (FOR UPDATE) in a transaction of its own; the
    caller starts its racers, calls ``wait_for(n)`` until n backends wait on a lock, and leaves the
    block to release them all at once."""
    with psycopg.connect(database_url) as holder, psycopg.connect(database_url, autocommit=True) as watcher:
        assert holder.execute(lock_sql, params).fetchall(), "nothing to hold"

        def wait_for(count: int, timeout_s: float = 20.0) -> None:
            deadline = time.monotonic() + timeout_s
            while True:
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    " AND datname = current_database()"
                ).fetchone()[0]
                if waiting >= count:
                    return
                assert time.monotonic() < deadline, f"{waiting} of {count} racers reached the barrier"
                time.sleep(0.02)

        yield wait_for
        holder.rollback()
