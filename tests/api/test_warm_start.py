"""A worker is fast from its first request (issue 20, the W10 tails).

Before it accepts connections, a worker's pools hold their first connections (the asyncio pool,
which serves the reads that come all at once, one for each of its slots); a new connection
carries its session settings in its start-up packet (no ``SET`` round trips) and is not checked
on its first checkout (it was opened a moment ago).
"""

from __future__ import annotations

import asyncio

from psycopg.conninfo import make_conninfo

from storage.db import AsyncDatabase, Database


def record_checks(database: Database | AsyncDatabase) -> list[bool]:
    """Whether each checkout of ``database``'s own pool asked for a liveness check (True: a round
    trip). Only this pool's: the suite's other pools check their connections meanwhile."""
    decisions: list[bool] = []
    due = database._idle.due

    def recorded(conn) -> bool:
        decisions.append(due(conn))
        return decisions[-1]

    database._idle.due = recorded
    return decisions


def test_a_filled_pool_serves_at_once_with_its_session_settings(settings):
    database = Database(settings.database_url, min_size=2, max_size=4, statement_timeout_ms=1234, deadline_s=5.0)
    checks = record_checks(database)
    database.open()
    try:
        assert database.fill()
        assert database.pool.get_stats()["pool_available"] == 2
        with database.connection() as conn:
            row = conn.execute(
                "SELECT current_setting('statement_timeout') AS timeout, current_setting('application_name') AS name"
            ).fetchone()
        assert row == {"timeout": "1234ms", "name": "growler"}
        assert database.pool.get_stats()["connections_num"] == 2  # nothing opened on demand
        assert checks == [False]  # a connection opened a moment ago is not checked again
    finally:
        database.close()


def test_options_of_the_database_url_are_kept(settings):
    """A URL's own ``options`` (a search_path, work_mem...) still apply, next to our timeout."""
    url = make_conninfo(settings.database_url, options="-c work_mem=5MB")
    database = Database(url, min_size=1, max_size=1, statement_timeout_ms=1234, deadline_s=5.0)
    database.open()
    try:
        with database.connection() as conn:
            row = conn.execute(
                "SELECT current_setting('work_mem') AS work_mem, current_setting('statement_timeout') AS timeout"
            ).fetchone()
        assert row == {"work_mem": "5MB", "timeout": "1234ms"}
    finally:
        database.close()


def test_the_asyncio_pool_is_open_and_filled_before_the_first_read(settings):
    async def scenario() -> tuple[dict, dict, dict, list[bool]]:
        database = AsyncDatabase(
            settings.database_url, min_size=2, max_size=4, timeout_s=5.0, statement_timeout_ms=1234
        )
        checks = record_checks(database)
        await database.start(fill=True)
        try:
            before = database.pool.get_stats()
            row = await database.fetch_one("SELECT current_setting('statement_timeout') AS timeout", ())
            return before, row, database.pool.get_stats(), checks
        finally:
            await database.close()

    before, row, after, checks = asyncio.run(scenario())
    # a connection for each of its slots (max_size), not only min_size: a fresh worker's first
    # reads come together under load, and none waits for a connection to be opened (issue 40)
    assert before["pool_available"] == 4
    assert before["pool_min"] == 2  # and the ones beyond min_size may close again when idle
    assert row == {"timeout": "1234ms"}
    assert after["connections_num"] == 4
    assert checks == [False]  # one checkout, of a connection opened a moment ago: not checked


def test_an_unreachable_database_does_not_stop_a_pool_from_starting(settings):
    """Filling is best effort: the worker serves (503 until ready) and its pools grow later."""
    unreachable = "postgresql://growler@127.0.0.1:9/growler"  # discard port: nothing listens
    database = Database(unreachable, min_size=1, max_size=2, deadline_s=1.0)
    database.open()
    try:
        assert database.fill() is False
        assert not database.pool.closed  # psycopg_pool's own wait() would have closed it
    finally:
        database.close()


def test_the_app_fills_its_pools_before_serving(settings, monkeypatch):
    from app.edge.factory import create_app

    started: list[bool] = []
    original = AsyncDatabase.start

    async def recorded(self, fill: bool) -> None:
        started.append(fill)
        await original(self, fill)

    monkeypatch.setattr(AsyncDatabase, "start", recorded)
    app = create_app(settings)
    assert started == []
    with app.test_client() as client:  # runs the lifespan, as uvicorn does before accepting
        assert started == [True]
        assert client.get("/healthz").status_code == 200
