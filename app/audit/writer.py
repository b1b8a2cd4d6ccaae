"""The audit trail's writer: a per-worker group commit on the event loop (docs/audit.md "Durability").

Every response waits, before it starts, for its record to be committed: no decision is served
without its record. A commit per request would cost every request a round trip and a WAL flush
of its own, so records are grouped: a request queues its record and awaits a future; one task per
worker writes whatever is queued as one statement (one commit), then resolves every future of
that batch. While a batch commits the next one gathers, so under load a commit covers many
requests and the cost per request falls; alone, a request pays one round trip.

A batch's statement and commit cost far more than a record in it (about 0.2 ms of app and
PostgreSQL CPU per batch against 0.03 ms per record), so the writer also waits, briefly, for the
requests still being served: it knows how many began and have not queued their record yet
(``begin``/``abandon``), and holds a batch until all of them have queued or ``gather_s`` passed,
whichever comes first (``GROWLER_AUDIT_GATHER_MS``, 1 ms by default). Alone, a request waits for
nobody; under the cheapest reads at 16 connections a batch holds every request in flight instead
of two or three of them.

If the batch fails (PostgreSQL down, a timeout), every request of it hears ``AuditUnavailable``
and is answered 503 with Retry-After instead of its response: a decision unrecorded is not
served. (A change the request made stands - it was committed before the response - and is in the
change feed; a retry with an ``Idempotency-Key`` is safe.)

Where the asyncio pool does not serve the running loop (a test client runs each request in a
loop of its own) the record is written in a thread on the sync pool, one commit per request: the
same guarantee, without the grouping.
"""

from __future__ import annotations

import asyncio
import logging

from app.ground import metrics
from app.ground.errors import ServiceUnavailable
from storage.audit import AuditRecord, AuditRows
from storage.db import AsyncDatabase

log = logging.getLogger(__name__)

MAX_BATCH = 500  # records per statement: a larger backlog is written as several batches, in turn
RETRY_AFTER_S = 1


class AuditUnavailable(ServiceUnavailable):
    """The record could not be committed: the request is answered 503, not served unrecorded."""


class AuditWriter:
    def __init__(self, rows: AuditRows, async_database: AsyncDatabase, *, gather_s: float = 0.0) -> None:
        self.rows = rows  # the sync pool's writes (a loop the asyncio pool does not serve)
        self.async_database = async_database  # the worker loop's: the group commit
        self.gather_s = gather_s
        self._queue: list[tuple[AuditRecord, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None
        self._unqueued = 0  # requests begun on this loop whose record is not queued yet
        self._gathered: asyncio.Future[None] | None = None  # a batch waiting for them

    def begin(self) -> None:
        """A request began that will queue a record (``write``) or give up on it (``abandon``)."""
        self._unqueued += 1

    def abandon(self) -> None:
        """A begun request ends without a record (it never started a response)."""
        self._unqueued -= 1
        self._wake_if_gathered()

    async def write(self, record: AuditRecord) -> None:
        """Return once ``record`` is committed; ``AuditUnavailable`` if it could not be.

        The request must have called ``begin`` (its count of requests in flight ends here)."""
        self._unqueued -= 1
        if not self.async_database.serves_running_loop():
            try:
                await asyncio.to_thread(self.rows.insert, [record])
            except Exception as exc:
                raise _unavailable(exc) from exc
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((record, done))
        if self._flushing is None:
            self._flushing = asyncio.get_running_loop().create_task(self._flush())
        else:
            self._wake_if_gathered()
        await done

    def holding(self) -> bool:
        """A batch is waiting for the requests in flight (``gather_s`` not over, one not queued yet)."""
        return self._gathered is not None and not self._gathered.done()

    def _wake_if_gathered(self) -> None:
        gathered = self._gathered
        if gathered is not None and not gathered.done() and (self._unqueued <= 0 or len(self._queue) >= MAX_BATCH):
            gathered.set_result(None)

    async def _gather(self) -> None:
        """Hold the next batch until every request in flight queued its record, ``gather_s`` at most."""
        if self.gather_s <= 0 or self._unqueued <= 0 or len(self._queue) >= MAX_BATCH:
            return
        loop = asyncio.get_running_loop()
        gathered = self._gathered = loop.create_future()
        timer = loop.call_later(self.gather_s, _settle, gathered)
        try:
            await gathered
        finally:
            timer.cancel()
            self._gathered = None

    async def _flush(self) -> None:
        """Write the queue, batch after batch, until it is empty (then the next record starts a task)."""
        try:
            # one turn of the loop first: the requests whose responses start in this turn join the
            # batch (under load many do), instead of each starting a commit of its own
            await asyncio.sleep(0)
            while self._queue:
                await self._gather()
                batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
                try:
                    await self._commit([record for record, _ in batch])
                except Exception as exc:  # noqa: BLE001 - whatever failed, the batch's requests get 503
                    failure = _unavailable(exc)
                    for _, done in batch:
                        if not done.done():
                            done.set_exception(failure)
                else:
                    for _, done in batch:
                        if not done.done():
                            done.set_result(None)
        finally:
            self._flushing = None

    async def _commit(self, records: list[AuditRecord]) -> None:
        await self.rows.insert_async(self.async_database, records)
        metrics.AUDIT_BATCHES.observe(len(records))


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _unavailable(exc: BaseException) -> AuditUnavailable:
    log.warning("audit record not written, answering 503: %s", type(exc).__name__)
    metrics.AUDIT_FAILURES.inc()
    return AuditUnavailable("The audit trail cannot be written now; retry later", retry_after=RETRY_AFTER_S)
