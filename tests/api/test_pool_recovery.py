"""Pools recover at once when PostgreSQL dropped every connection they hold (a restart, a failover).

After a failover the pools held only connections to the dead server. psycopg_pool's ``check``
sleeps a backoff (1 s, 2 s, ...) after each failed check before it tries the next connection, so
the first read spent its whole timeout (5 s, twice with its retry) discarding them and answered
503 (issue 39: test_failover's first loadTable after the promotion; the suite's shared server
after test_faults' restart). Now one dead connection drains the pool: the request takes a fresh
one. The backends are terminated here by their pids, the way a restart ends them.
"""

from __future__ import annotations

import asyncio
import time

import psycopg
import pytest

import storage.db
from app.ground.errors import ServiceUnavailable
from storage.db import AsyncDatabase, Database

POOL_SIZE = 4


def terminate(db: psycopg.Connection, pids: list[int]) -> None:
    db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,))
    deadline = time.monotonic() + 30  # a hang guard, not a speed bound
    while db.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone()[0]:
        assert time.monotonic() < deadline, "the backends did not end"
        time.sleep(0.01)


def filled(settings) -> Database:
    # a timeout shorter than psycopg_pool's backoff after two failed checks (1 s + 2 s)
    database = Database(settings.database_url, min_size=POOL_SIZE, max_size=POOL_SIZE, timeout_s=2.0)
    database.open()
    assert database.fill()
    return database


def test_a_request_after_every_pooled_connection_died_gets_a_fresh_one(settings, db, monkeypatch):
    monkeypatch.setattr(storage.db, "CHECK_IDLE_AFTER_S", 0.0)  # every pooled connection is due a check
    database = filled(settings)
    try:
        dead = [conn.info.backend_pid for conn in database.pool._pool]
        assert len(dead) == POOL_SIZE
        terminate(db, dead)
        with database.connection() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
            assert conn.info.backend_pid not in dead
    finally:
        database.close()


def test_a_connection_that_breaks_in_use_drains_the_pool_for_the_next_request(settings, db, monkeypatch):
    monkeypatch.setattr(storage.db, "CHECK_IDLE_AFTER_S", 3600.0)  # no check: all look fresh
    database = filled(settings)
    try:
        dead = [conn.info.backend_pid for conn in database.pool._pool]
        terminate(db, dead)
        with pytest.raises(ServiceUnavailable):  # this one met a dead connection unchecked
            with database.connection() as conn:
                conn.execute("SELECT 1")
        with database.connection() as conn:  # the others of its age were replaced
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
            assert conn.info.backend_pid not in dead
    finally:
        database.close()


@pytest.mark.parametrize("idle_check_after_s", [0.0, 3600.0], ids=["checked", "unchecked"])
def test_a_read_on_the_event_loop_after_every_pooled_connection_died_succeeds(
    settings, db, monkeypatch, idle_check_after_s
):
    monkeypatch.setattr(storage.db, "CHECK_IDLE_AFTER_S", idle_check_after_s)

    async def scenario() -> tuple[list[int], dict]:
        database = AsyncDatabase(
            settings.database_url, min_size=POOL_SIZE, max_size=POOL_SIZE, timeout_s=2.0, statement_timeout_ms=5000
        )
        await database.start(fill=True)
        try:
            dead = [conn.info.backend_pid for conn in database.pool._pool]
            await asyncio.to_thread(terminate, db, dead)
            # checked: the failed check drains; unchecked: the read's one retry finds a fresh one
            return dead, await database.fetch_one("SELECT pg_backend_pid() AS pid", ())
        finally:
            await database.close()

    dead, row = asyncio.run(scenario())
    assert len(dead) == POOL_SIZE and row["pid"] not in dead
