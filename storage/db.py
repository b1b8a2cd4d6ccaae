"""The PostgreSQL connection pool and the boundary where psycopg errors become catalog errors.

Nothing above ``storage/`` imports psycopg: every database failure leaves this module as a
``CatalogError`` (``ServiceUnavailable`` when the server cannot be reached, so clients get
503 + Retry-After and try again; the pool re-validates a connection that sat idle before handing
it out, and drops a broken one when it comes back, so the service recovers by itself when
PostgreSQL returns).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg.types.json import set_json_dumps
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from app.errors import AlreadyExists, BadRequest, CatalogError, ServiceUnavailable
from app.limits import dumps

log = logging.getLogger(__name__)

# Jsonb parameters (namespace properties, ...): a large one is encoded so that the event loop
# gets its turn meanwhile (app.limits.dumps).
set_json_dumps(dumps)

Connection = psycopg.Connection

# A connection back in the pool for longer than this is checked before reuse (see _IdleCheck).
CHECK_IDLE_AFTER_S = 1.0


class _IdleCheck:
    """Check a pooled connection (one round trip) only when it sat idle before being handed out.

    A connection that was just used worked a moment ago: checking it on every checkout would
    double the round trips of the one-query requests (loadTable) for nothing.
    """

    def __init__(self) -> None:
        self._returned_at: dict[int, float] = {}  # id(connection) -> when it came back to the pool

    def returned(self, conn: Any) -> None:
        self._returned_at[id(conn)] = time.monotonic()

    def due(self, conn: Any) -> bool:
        returned = self._returned_at.pop(id(conn), None)
        return returned is None or time.monotonic() - returned > CHECK_IDLE_AFTER_S


class Database:
    """A psycopg pool sized to the app's thread pool, with an explicit ``transaction()``."""

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout_s: float = 5.0,
        statement_timeout_ms: int = 15_000,
    ) -> None:
        self.url = url
        self._statement_timeout_ms = statement_timeout_ms
        self._idle = _IdleCheck()
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout_s,
            kwargs={"row_factory": dict_row, "autocommit": True, "connect_timeout": 5},
            configure=self._configure,
            check=self._check_if_idle,
            reset=self._idle.returned,
            # Give up background reconnection at once; a request that needs a connection opens one,
            # so the pool grows back as soon as PostgreSQL returns (the fault tests prove it).
            reconnect_timeout=0,
            open=False,
            name="growler",
        )

    def _check_if_idle(self, conn: psycopg.Connection) -> None:
        if self._idle.due(conn):
            ConnectionPool.check_connection(conn)

    def _configure(self, conn: psycopg.Connection) -> None:
        conn.execute(f"SET statement_timeout = {int(self._statement_timeout_ms)}")
        conn.execute("SET application_name = 'growler'")

    def open(self) -> None:
        self.pool.open(wait=False)

    def close(self) -> None:
        self.pool.close()

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled autocommit connection; each statement is its own transaction."""
        with translate_errors():
            with self.pool.connection() as conn:
                yield conn

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One connection and one transaction, so a check and its update see the same state."""
        with translate_errors():
            with self.pool.connection() as conn:
                with conn.transaction():
                    yield conn

    def ping(self) -> None:
        with self.connection() as conn:
            conn.execute("SELECT 1")


class AsyncDatabase:
    """A small asyncio pool for the reads served on the event loop (app/fast_path.py).

    Opened on first use, inside the worker's event loop, and bound to it; configured and checked
    like ``Database``. A server has one loop per worker; a test client may run each request in a
    loop of its own, and there ``serves_running_loop`` tells the caller to read another way.
    """

    def __init__(self, url: str, *, max_size: int, timeout_s: float, statement_timeout_ms: int) -> None:
        self._statement_timeout_ms = statement_timeout_ms
        self._idle = _IdleCheck()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opened = False
        self.pool = AsyncConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            timeout=timeout_s,
            kwargs={"row_factory": dict_row, "autocommit": True, "connect_timeout": 5},
            configure=self._configure,
            check=self._check_if_idle,
            reset=self._returned,
            reconnect_timeout=0,
            open=False,
            name="growler-async",
        )

    async def _configure(self, conn: psycopg.AsyncConnection) -> None:
        await conn.execute(f"SET statement_timeout = {int(self._statement_timeout_ms)}")
        await conn.execute("SET application_name = 'growler'")

    async def _returned(self, conn: psycopg.AsyncConnection) -> None:
        self._idle.returned(conn)

    async def _check_if_idle(self, conn: psycopg.AsyncConnection) -> None:
        if self._idle.due(conn):
            await AsyncConnectionPool.check_connection(conn)

    def serves_running_loop(self) -> bool:
        """True when the pool belongs (or, first used now, will belong) to the running loop."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        return self._loop is loop

    async def fetch_one(self, query: str, params: tuple[Any, ...]) -> dict[str, Any] | None:
        """One row of one autocommit statement; psycopg errors leave as catalog errors."""
        if not self.serves_running_loop():
            raise RuntimeError("the asyncio pool belongs to another event loop")
        with translate_errors():
            if not self._opened:
                self._opened = True
                await self.pool.open(wait=False)
            async with self.pool.connection() as conn:
                cursor = await conn.execute(query, params)
                return await cursor.fetchone()

    async def close(self) -> None:
        if self._opened and self._loop is asyncio.get_running_loop():
            await self.pool.close()


@contextmanager
def translate_errors() -> Iterator[None]:
    """Map psycopg failures onto the catalog's error model at the storage boundary."""
    try:
        yield
    except CatalogError:
        raise
    except pg_errors.UniqueViolation as exc:
        # Not the server's detail: it quotes the table and key columns of the catalog's schema.
        raise AlreadyExists("The name or object already exists") from exc
    except psycopg.DataError as exc:  # NUL in text, untranslatable characters, out-of-range values
        # The client hears which kind of value, never PostgreSQL's text (it names columns,
        # types and positions); the log keeps the SQLSTATE.
        log.info("database refused a value: SQLSTATE %s", exc.sqlstate)
        raise BadRequest(f"Invalid value: {_DATA_ERRORS.get(exc.sqlstate or '', 'a value cannot be stored')}") from exc
    except PoolTimeout as exc:
        log.warning("database pool exhausted or unreachable: %s", exc)
        raise ServiceUnavailable("The catalog database is unavailable, retry later") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        log.warning("database unavailable: %s", type(exc).__name__)
        raise ServiceUnavailable("The catalog database is unavailable, retry later") from exc


_DATA_ERRORS = {
    "22021": "text contains characters that are not valid UTF-8",  # character_not_in_repertoire
    "22P05": "text contains characters that cannot be stored",  # untranslatable_character
    "22P02": "a value is not valid JSON or not of the expected type",  # invalid_text_representation
    "22003": "a number is out of range",  # numeric_value_out_of_range
    "22001": "a value is too long",  # string_data_right_truncation
}
