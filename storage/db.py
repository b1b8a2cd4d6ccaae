"""The PostgreSQL connection pool and the boundary where psycopg errors become catalog errors.

Nothing above ``storage/`` imports psycopg: every database failure leaves this module as a
``CatalogError`` (``ServiceUnavailable`` when the server cannot be reached, so clients get
503 + Retry-After and try again; the pool re-validates a connection that sat idle before handing
it out, and drops a broken one when it comes back, so the service recovers by itself when
PostgreSQL returns).

Every wait on PostgreSQL has a deadline. A frozen server (SIGSTOP, a hung host behind a live
kernel) still accepts TCP and acknowledges what is sent, so no TCP timeout fires and libpq would
wait forever; ``statement_timeout`` is enforced by that same frozen server. So connections are
opened with ``connect_timeout`` and every round trip afterwards is bounded on our side (see
``DeadlineConnection``): past the deadline the connection is closed - never handed out again -
and the caller gets ``ServiceUnavailable`` (or, for a commit already sent, an unknown outcome).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, ClassVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.abc import PQGen
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import set_json_dumps
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolClosed, PoolTimeout

from app.ground.errors import AlreadyExists, BadRequest, CatalogError, ServiceUnavailable, TableMoved
from app.ground.limits import dumps

log = logging.getLogger(__name__)

# Jsonb parameters (namespace properties, ...): a large one is encoded so that the event loop
# gets its turn meanwhile (app.ground.limits.dumps).
set_json_dumps(dumps)

Connection = psycopg.Connection

# A connection back in the pool for longer than this is checked before reuse (see _IdleCheck).
CHECK_IDLE_AFTER_S = 1.0
# The default deadline of one round trip (and of opening a connection); GROWLER_DB_TIMEOUT_S.
DEFAULT_TIMEOUT_S = 5.0
# /readyz opens a fresh connection and gives it this long (psycopg's connect_timeout minimum is 2 s).
PROBE_TIMEOUT_S = 2.0
_WAIT_INTERVAL = 0.1  # psycopg's own polling interval
# How often a worker about to serve looks whether its pools hold their first connections.
FILL_POLL_S = 0.005


class DeadlineExceeded(psycopg.OperationalError):
    """PostgreSQL did not answer within the deadline; the connection was closed."""


class DeadlineConnection(psycopg.Connection):
    """A connection whose every round trip gives up after ``deadline_s``, closing the connection.

    psycopg runs each query, commit and rollback through ``wait()``; bounding it here bounds them
    all. The connection is closed on timeout because its protocol state is unknown (a query may
    be half-answered): the pool discards a closed connection when it comes back.
    """

    deadline_s: float = DEFAULT_TIMEOUT_S

    def wait(self, gen: PQGen[Any], interval: float = _WAIT_INTERVAL, timeout: float | None = None) -> Any:
        try:
            return super().wait(gen, interval, self.deadline_s if timeout is None else timeout)
        except pg_errors._WaitTimeout:
            self.pgconn.finish()
            raise DeadlineExceeded(f"PostgreSQL did not answer within {self.deadline_s:g} s") from None


class AsyncDeadlineConnection(psycopg.AsyncConnection):
    """``DeadlineConnection`` for the asyncio pool."""

    deadline_s: float = DEFAULT_TIMEOUT_S

    async def wait(self, gen: PQGen[Any], interval: float = _WAIT_INTERVAL, timeout: float | None = None) -> Any:
        try:
            return await super().wait(gen, interval, self.deadline_s if timeout is None else timeout)
        except pg_errors._WaitTimeout:
            self.pgconn.finish()
            raise DeadlineExceeded(f"PostgreSQL did not answer within {self.deadline_s:g} s") from None


def connect_timeout(timeout_s: float) -> int:
    """libpq's ``connect_timeout``: whole seconds, and psycopg treats less than 2 as 2."""
    return max(2, math.ceil(timeout_s))


def effective_statement_timeout_ms(statement_timeout_ms: int, timeout_s: float) -> int:
    """Below our own deadline, so the server stops a slow statement before we drop its connection."""
    return max(100, min(int(statement_timeout_ms), int(timeout_s * 1000) - 500))


def database_endpoints(url: str) -> list[tuple[str, int]]:
    """The hosts and ports a connection string names (libpq's lists: ``host=a,b port=5432,5433``
    or ``postgresql://a:5432,b:5433/db``); a Unix socket's directory is no network endpoint and is
    left out. For the webhook rule (app/publisher/webhooks.py): no webhook may target the database."""
    params = conninfo_to_dict(url)
    hosts = [h.strip() for h in str(params.get("hostaddr") or params.get("host") or "").split(",")]
    ports = [p.strip() for p in str(params.get("port") or "").split(",")]
    found = []
    for index, host in enumerate(hosts):
        if not host or host.startswith("/") or host.startswith("@"):
            continue
        port = ports[index] if len(ports) == len(hosts) else ports[0]
        found.append((host, int(port) if port.isdigit() else 5432))
    return found


def connection_kwargs(url: str, statement_timeout_ms: int, deadline_s: float) -> dict[str, Any]:
    """How every pooled connection is opened: its session settings travel in the start-up packet.

    ``statement_timeout`` and ``application_name`` as connection parameters cost nothing; as
    ``SET`` statements after connecting they were two more round trips for every new connection,
    paid by the request that waited for it (the pools grow under load: the cold-start tail, W10).
    ``options`` the database URL gives (``-c search_path=...``) are kept, ours after them.
    """
    try:
        given = conninfo_to_dict(url).get("options") or ""
    except psycopg.ProgrammingError:  # an unparsable URL: connecting will say what is wrong with it
        given = ""
    timeout = f"-c statement_timeout={effective_statement_timeout_ms(statement_timeout_ms, deadline_s)}"
    return {
        "row_factory": dict_row,
        "autocommit": True,
        "connect_timeout": connect_timeout(deadline_s),
        "application_name": "growler",
        "options": f"{given} {timeout}".strip(),
    }


class _IdleCheck:
    """Check a pooled connection (one round trip) only when it sat idle before being handed out.

    A connection that was just used worked a moment ago: checking it on every checkout would
    double the round trips of the one-query requests (loadTable) for nothing.
    """

    def __init__(self) -> None:
        self._returned_at: dict[int, float] = {}  # id(connection) -> when it came back to the pool

    def returned(self, conn: Any) -> None:
        """Also called when a connection was just opened: a new connection needs no check."""
        self._returned_at[id(conn)] = time.monotonic()

    def due(self, conn: Any) -> bool:
        returned = self._returned_at.pop(id(conn), None)
        return returned is None or time.monotonic() - returned > CHECK_IDLE_AFTER_S


class Database:
    """A psycopg pool sized to the app's thread pool, with an explicit ``transaction()``."""

    # Every pool of this process, so that whoever is about to stop PostgreSQL under them (the
    # test suite's end) can close them first rather than have them log failed reconnections.
    _opened: ClassVar[weakref.WeakSet[Database]] = weakref.WeakSet()

    @classmethod
    def opened(cls) -> list[Database]:
        return list(cls._opened)

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        timeout_s: float = 5.0,
        statement_timeout_ms: int = 15_000,
        deadline_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.url = url
        self.deadline_s = deadline_s
        self._idle = _IdleCheck()
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            timeout=timeout_s,
            connection_class=DeadlineConnection,
            kwargs=connection_kwargs(url, statement_timeout_ms, deadline_s),
            configure=self._configure,
            # No ``check`` callback: ``_pooled`` checks (see there). No ``reset`` callback: with
            # one, psycopg_pool hands every returned connection to a worker thread (a queue hop
            # and a wake-up per request); the return stamp is taken in ``_pooled`` instead.
            # Give up background reconnection at once; a request that needs a connection opens one,
            # so the pool grows back as soon as PostgreSQL returns (the fault tests prove it).
            reconnect_timeout=0,
            open=False,
            name="growler",
        )

    def _configure(self, conn: DeadlineConnection) -> None:
        conn.deadline_s = self.deadline_s
        self._idle.returned(conn)

    def open(self) -> None:
        self.pool.open(wait=False)
        Database._opened.add(self)

    def fill(self) -> bool:
        """Wait (up to the deadline) until the pool holds its ``min_size`` connections.

        Called before a worker serves, so its first requests find connections instead of each
        waiting for one to be opened. False when PostgreSQL did not let it fill: the pool goes on
        growing on demand, as it always does.
        """
        deadline = time.monotonic() + self.deadline_s
        while not _filled(self.pool):  # not pool.wait(): on a timeout it closes the pool
            if time.monotonic() > deadline:
                return False
            time.sleep(FILL_POLL_S)
        return True

    def close(self) -> None:
        self.pool.close()
        Database._opened.discard(self)

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A pooled autocommit connection; each statement is its own transaction."""
        with translate_errors():
            with self._pooled() as conn:
                yield conn

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """One connection and one transaction, so a check and its update see the same state."""
        with translate_errors():
            with self._pooled() as conn:
                with conn.transaction():
                    yield conn

    @contextmanager
    def _pooled(self) -> Iterator[psycopg.Connection]:
        """A connection of the pool, checked first when it sat idle (see ``_IdleCheck``).

        Checked here, not by psycopg_pool's ``check`` callback: after a failed check the pool
        sleeps a backoff (1 s, 2 s, ...) before it tries its next connection, so when a failover
        or a restart had left every pooled connection dead, a request spent its whole timeout
        discarding them and answered 503 (issue 39). One connection the server dropped says the
        others of its age are gone too: the pool is drained (each replaced by a new connection)
        and the request takes a fresh one. The same when a connection breaks in use.
        """
        conn = self.pool.getconn()
        if self._idle.due(conn):
            try:
                ConnectionPool.check_connection(conn)
            except psycopg.Error:
                self.pool.putconn(conn)  # broken: the pool discards it
                self.pool.drain()
                conn = self.pool.getconn()
        try:
            with conn:  # psycopg_pool's ``connection()``: rollback on error, never close
                yield conn
        finally:
            self._idle.returned(conn)
            if conn.broken:
                self.pool.drain()
            self.pool.putconn(conn)

    def ping(self) -> None:
        """Readiness: a fresh connection and one round trip, within ``PROBE_TIMEOUT_S`` each.

        Not a pooled connection: the pool may hold connections that still work while no new one
        can be opened (max_connections reached, authentication broken, server restarting).
        """
        timeout = min(self.deadline_s, PROBE_TIMEOUT_S)
        with translate_errors():
            with DeadlineConnection.connect(
                self.url, autocommit=True, connect_timeout=connect_timeout(timeout), application_name="growler-probe"
            ) as conn:
                conn.deadline_s = timeout
                conn.execute("SELECT 1")


class AsyncDatabase:
    """A small asyncio pool for the reads served on the event loop (app/edge/fast_path.py).

    Bound to the worker's event loop and opened by the app's lifespan (``start``), and configured
    and checked like ``Database``. A server has one loop per worker; a test client
    without lifespan runs each request in a loop of its own, and there ``serves_running_loop``
    tells the caller to read another way.
    """

    def __init__(
        self,
        url: str,
        *,
        max_size: int,
        timeout_s: float,
        min_size: int = 1,
        statement_timeout_ms: int,
        deadline_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.deadline_s = deadline_s
        self.timeout_s = timeout_s
        self.min_size, self.max_size = min(min_size, max_size), max_size
        self._idle = _IdleCheck()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._opened = False
        # One slot per connection the pool may hold: reads beyond that wait here (see _fetch).
        self._slots = asyncio.Semaphore(max_size)
        self.pool = AsyncConnectionPool(
            url,
            min_size=min(min_size, max_size),
            max_size=max_size,
            timeout=timeout_s,
            connection_class=AsyncDeadlineConnection,
            kwargs=connection_kwargs(url, statement_timeout_ms, deadline_s),
            configure=self._configure,
            # no ``check`` nor ``reset``, as in ``Database`` (see ``_pooled`` there)
            reconnect_timeout=0,
            open=False,
            name="growler-async",
        )

    async def _configure(self, conn: AsyncDeadlineConnection) -> None:
        conn.deadline_s = self.deadline_s
        self._idle.returned(conn)

    async def start(self, fill: bool) -> None:
        """Called by the app's lifespan startup: the pool will serve this (the server's) loop.

        Only a loop that runs the lifespan gets the pool, because only there is it closed before
        the loop ends. A loop that ends without closing it (a test client's per-request loop)
        would cancel the pool's worker tasks mid-connection, and psycopg_pool's workers swallow
        that cancellation and wait forever: the loop's shutdown hung.

        The pool opens here, before the worker accepts connections; with ``fill`` (PostgreSQL is
        reachable) it also opens a connection for each of its slots and waits, up to the deadline,
        until they are open, so the worker's first reads do not queue behind their opening. Under
        load a fresh worker's first reads come all at once: with one connection open and the rest
        opened on demand, one at a time (each a password exchange with PostgreSQL), its first
        second had tens of milliseconds of tail (issue 40). The connections beyond ``min_size``
        close again after psycopg_pool's idle time (10 minutes) if the worker has no use for them.
        """
        self._loop = asyncio.get_running_loop()
        self._opened = True
        await self.pool.open(wait=False)
        if not fill:
            return
        if self.max_size > self.min_size:
            await self.pool.resize(self.max_size, self.max_size)  # opened side by side by the pool's workers
        deadline = time.monotonic() + self.deadline_s
        while not _filled(self.pool):  # not pool.wait(): on a timeout it closes the pool
            if time.monotonic() > deadline:
                log.info("the asyncio pool is not full yet: it goes on growing on demand")
                break
            await asyncio.sleep(FILL_POLL_S)
        if self.max_size > self.min_size:
            await self.pool.resize(self.min_size, self.max_size)  # idle connections may close again

    def serves_running_loop(self) -> bool:
        """True when the pool belongs to the running loop (see ``start``)."""
        return self._loop is not None and self._loop is asyncio.get_running_loop()

    async def fetch_one(self, query: str, params: Any) -> dict[str, Any] | None:
        """One row of one autocommit statement; psycopg errors leave as catalog errors."""
        return await self._read(query, params, every_row=False)

    async def fetch_all(self, query: str, params: Any) -> list[tuple[Any, ...]]:
        """Every row of one autocommit statement, as tuples (psycopg builds tuples in C, dicts in Python)."""
        return await self._read(query, params, every_row=True)

    async def execute(self, query: str, params: Any) -> None:
        """One autocommit statement that writes (committed when this returns), tried once: a write
        is not repeated on another connection, as a read is (the audit trail's batches)."""
        if not self.serves_running_loop():
            raise RuntimeError("the asyncio pool belongs to another event loop")
        with translate_errors():
            async with asyncio.timeout(self.timeout_s):
                await self._slots.acquire()
            try:
                async with self._pooled() as conn:
                    await conn.execute(query, params)
            finally:
                self._slots.release()

    async def _read(self, query: str, params: Any, every_row: bool) -> Any:
        if not self.serves_running_loop():
            raise RuntimeError("the asyncio pool belongs to another event loop")
        with translate_errors():
            try:
                return await self._fetch(query, params, every_row)
            except DeadlineExceeded:
                raise  # a frozen server: a second try would only double the wait
            except psycopg.OperationalError:
                # A pooled connection the server dropped (it restarted): the pool has discarded
                # it; this read is idempotent, so one more try on another connection.
                return await self._fetch(query, params, every_row)

    async def _fetch(self, query: str, params: Any, every_row: bool) -> Any:
        """Wait for a slot, then take a connection: the pool's queue is not where reads wait.

        When more reads run than the pool has connections, psycopg_pool queues each in a
        ``WaitingClient`` (an asyncio Condition and a Task per wait): W1 at 64 connections spent
        0.08 ms more CPU per request waiting there than with a connection for everyone. A
        semaphore's wait is one future. The wait is bounded by the pool's timeout as before
        (PoolTimeout, which callers answer with 503).
        """
        slots = self._slots
        if slots.locked():
            try:
                async with asyncio.timeout(self.timeout_s):
                    await slots.acquire()
            except TimeoutError:
                raise PoolTimeout(f"no connection free in {self.timeout_s:g} s") from None
        else:
            await slots.acquire()  # a free slot: taken without waiting
        try:
            async with self._pooled() as conn:
                if every_row:
                    cursor = conn.cursor(row_factory=tuple_row)
                    await cursor.execute(query, params)
                    return await cursor.fetchall()
                cursor = await conn.execute(query, params)
                return await cursor.fetchone()
        finally:
            slots.release()

    @asynccontextmanager
    async def _pooled(self) -> AsyncIterator[psycopg.AsyncConnection]:
        """``Database._pooled`` for the asyncio pool: checked when idle, drained when one is dead."""
        conn = await self.pool.getconn()
        if self._idle.due(conn):
            try:
                await AsyncConnectionPool.check_connection(conn)
            except psycopg.Error:
                await self.pool.putconn(conn)
                await self.pool.drain()
                conn = await self.pool.getconn()
        try:
            # Not ``async with conn``: its exit commits, which for these autocommit connections does
            # nothing but take the connection's lock (a visible share of a loop read's CPU); a
            # statement that failed leaves no transaction open, and the pool rolls back any
            # connection it gets back inside one.
            yield conn
        finally:
            self._idle.returned(conn)
            if conn.broken:
                await self.pool.drain()
            await self.pool.putconn(conn)

    async def close(self) -> None:
        if self._opened and self._loop is asyncio.get_running_loop():
            await self.pool.close()


def _filled(pool: ConnectionPool | AsyncConnectionPool) -> bool:
    return pool.get_stats()["pool_available"] >= pool.min_size


@contextmanager
def pipelined(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    """One transaction on a pooled (autocommit) connection in pipeline mode: each statement is sent
    at once and its result read only when the caller fetches one, so BEGIN travels with the first
    statement, COMMIT with the last, and the statements between with each other. A create's
    transaction is three round trips instead of seven, an append's two instead of five (issue 47):
    every round trip the thread waits for costs a GIL hand-over and the server a wake-up.

    Not psycopg's ``transaction()``, which in pipeline mode syncs when it starts and twice when it
    ends. Whatever leaves the block (an error of a statement, a refusal raised by the caller) rolls
    back here: nothing of a refused write is committed, even when the caller catches the refusal
    before the connection goes back to the pool."""
    try:
        with conn.pipeline() as pipeline:
            conn.execute("BEGIN")
            try:
                yield conn
            except BaseException:
                # read what is still in flight (the statements after a failed one, aborted), so
                # that leaving the pipeline does not log their errors as psycopg does
                with suppress(psycopg.Error):
                    pipeline.sync()
                raise
            conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.pgconn.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            try:
                conn.rollback()
            except psycopg.Error as exc:  # broken meanwhile: the pool discards it
                log.warning("rollback after a failed pipelined transaction: %s", exc)
        raise


@contextmanager
def translate_errors() -> Iterator[None]:
    """Map psycopg failures onto the catalog's error model at the storage boundary."""
    try:
        yield
    except CatalogError:
        raise
    except pg_errors.ForeignKeyViolation as exc:
        if exc.diag.constraint_name != "table_move_entry":
            raise
        # a drop or unregister of a table moved home whose remote copy is still there (migration 0035)
        raise TableMoved(
            "The table was moved home from a federated warehouse whose remote catalog still holds its copy,"
            " which reads the same files: finish the move (moveTableHome with remote drop) or undo it"
            " (undoTableMove) first"
        ) from exc
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
    except PoolClosed as exc:  # this process is shutting down: nothing for an operator to act on
        raise ServiceUnavailable("The catalog database is unavailable, retry later") from exc
    except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
        log.warning("database unavailable: %s", exc if isinstance(exc, DeadlineExceeded) else type(exc).__name__)
        raise ServiceUnavailable("The catalog database is unavailable, retry later") from exc


_DATA_ERRORS = {
    "22021": "text contains characters that are not valid UTF-8",  # character_not_in_repertoire
    "22P05": "text contains characters that cannot be stored",  # untranslatable_character
    "22P02": "a value is not valid JSON or not of the expected type",  # invalid_text_representation
    "22003": "a number is out of range",  # numeric_value_out_of_range
    "22001": "a value is too long",  # string_data_right_truncation
}
