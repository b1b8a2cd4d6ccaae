"""The audit trail's writer: a per-worker group commit on the event loop (docs/audit.md "Durability").

Every response waits, before it starts, for its record to be committed: no decision is served
without its record. A commit per request would cost every request a round trip and a WAL flush
of its own, so records are grouped: a request queues its record and awaits a future; one task per
worker writes whatever is queued as one statement (one commit), then resolves every future of
that batch. While a batch commits the next one gathers, so under load a commit covers many
requests and the cost per request falls; alone, a request pays one round trip.

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
    def __init__(self, rows: AuditRows, async_database: AsyncDatabase) -> None:
        self.rows = rows  # the sync pool's writes (a loop the asyncio pool does not serve)
        self.async_database = async_database  # the worker loop's: the group commit
        self._queue: list[tuple[AuditRecord, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def write(self, record: AuditRecord) -> None:
        """Return once ``record`` is committed; ``AuditUnavailable`` if it could not be."""
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
        await done

    async def _flush(self) -> None:
        """Write the queue, batch after batch, until it is empty (then the next record starts a task)."""
        try:
            # one turn of the loop first: the requests whose responses start in this turn join the
            # batch (under load many do), instead of each starting a commit of its own
            await asyncio.sleep(0)
            while self._queue:
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


def _unavailable(exc: BaseException) -> AuditUnavailable:
    log.warning("audit record not written, answering 503: %s", type(exc).__name__)
    metrics.AUDIT_FAILURES.inc()
    return AuditUnavailable("The audit trail cannot be written now; retry later", retry_after=RETRY_AFTER_S)
