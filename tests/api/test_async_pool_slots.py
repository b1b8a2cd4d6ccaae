"""Reads on the event loop wait for a connection on a semaphore, not in psycopg_pool's queue.

The pool's queue costs a Task and a Condition per waiting read (W1 at 64 connections: 0.08 ms of
CPU a request); the semaphore has a slot per connection the pool may hold, and its wait is bounded
by the pool's timeout as the pool's own was.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from app.ground.errors import ServiceUnavailable
from storage.db import AsyncDatabase

LOCK = 20_251_125  # an advisory lock the test holds: a read that wants it stays busy until released
HELD_READ = "SELECT pg_advisory_xact_lock(%s) IS NULL AS waited"


async def _started(task: asyncio.Task) -> None:
    """Let ``task`` run up to its first real wait (a slot, or PostgreSQL's answer)."""
    await asyncio.sleep(0)
    assert not task.done()


@contextlib.asynccontextmanager
async def _one_busy_connection(settings, timeout_s: float) -> AsyncIterator[tuple[AsyncDatabase, asyncio.Task, Any]]:
    """A one-connection asyncio pool whose only slot and connection a read holds (it waits for
    an advisory lock held by ``holder``, which the caller releases)."""
    database = AsyncDatabase(
        settings.database_url, min_size=1, max_size=1, timeout_s=timeout_s, statement_timeout_ms=5000
    )
    await database.start(fill=True)
    holder = await psycopg.AsyncConnection.connect(settings.database_url, autocommit=True)
    try:
        await holder.execute("SELECT pg_advisory_lock(%s)", (LOCK,))
        busy = asyncio.create_task(database.fetch_one(HELD_READ, (LOCK,)))
        await _started(busy)  # holds the only slot and the only connection
        yield database, busy, holder
    finally:
        await holder.close()
        await database.close()


def test_a_read_beyond_the_pool_waits_for_a_slot_and_then_runs(settings):
    async def scenario() -> tuple[list, dict, bool]:
        async with _one_busy_connection(settings, timeout_s=5.0) as (database, busy, holder):
            waiting = asyncio.create_task(database.fetch_one("SELECT 1 AS one", ()))
            await _started(waiting)
            slot_taken = database._slots.locked()
            await holder.execute("SELECT pg_advisory_unlock(%s)", (LOCK,))
            rows = await asyncio.gather(busy, waiting)
            return rows, database.pool.get_stats(), slot_taken

    rows, stats, slot_taken = asyncio.run(scenario())
    assert slot_taken
    assert rows == [{"waited": False}, {"one": 1}]
    assert stats.get("requests_queued", 0) == 0  # nobody waited in the pool's own queue
    assert stats["connections_num"] == 1


def test_a_read_that_gets_no_slot_in_time_is_a_503(settings):
    async def scenario() -> None:
        async with _one_busy_connection(settings, timeout_s=0.3) as (database, busy, holder):
            with pytest.raises(ServiceUnavailable, match="database is unavailable"):
                await database.fetch_one("SELECT 1 AS one", ())
            await holder.execute("SELECT pg_advisory_unlock(%s)", (LOCK,))
            assert await busy == {"waited": False}
            assert not database._slots.locked()  # the timed-out wait took no slot with it
            assert await database.fetch_one("SELECT 1 AS one", ()) == {"one": 1}

    asyncio.run(scenario())
