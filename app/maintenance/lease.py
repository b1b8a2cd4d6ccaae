"""A maintenance runner's hold on one table: a lease row in PostgreSQL, renewed while it lives.

The lease is short (``LEASE_SECONDS``) and a thread renews it every third of that while the run
goes on, so it is the runner's liveness that decides, not a guess of how long a run may take: a
runner killed with SIGKILL (or a lost host) stops renewing, its lease runs out within a minute,
and the next runner to take the table marks the runs it left 'running' as failed
(``ABANDONED``); housekeeping's sweep does the same for tables nobody takes
(``MaintenanceRows.abandon_runs``).

A runner that is alive but lost its lease (the database was unreachable for longer than the
lease, or the table's row went: dropped) must not act on the table any more: ``check`` raises
``LeaseLost`` before each commit and each delete, so at most one runner acts on a table.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from types import TracebackType

from app.ground.errors import CatalogError
from storage.maintenance_rows import MaintenanceRows

log = logging.getLogger(__name__)

LEASE_SECONDS = 60.0
ABANDONED = "abandoned: runner died"


class LeaseLost(CatalogError):
    code, error_type = 409, "CommitFailedException"


def new_holder() -> str:
    """Unique per hold: two runs in one process are two holders (a stale one never renews the other's)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class TableLease:
    """Take with ``take()``; then ``with lease:`` renews it in the background and releases it."""

    def __init__(
        self, rows: MaintenanceRows, entry_id: int, lease_s: float = LEASE_SECONDS, *, holder: str | None = None
    ) -> None:
        self.rows = rows
        self.entry_id = entry_id
        self.lease_s = lease_s
        self.holder = holder or new_holder()  # given: a job's claim took the lease for it already
        self._lost = threading.Event()
        self._done = threading.Event()
        self._renewer: threading.Thread | None = None

    def take(self) -> bool:
        return self.rows.take_lease(self.entry_id, self.holder, self.lease_s, abandoned=ABANDONED)

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    @property
    def lost_signal(self) -> threading.Event:
        """Set when the lease is lost: what a long step (a Spark job) waits on to stop at once."""
        return self._lost

    def check(self) -> None:
        """Raise ``LeaseLost`` when this runner no longer holds the table (it must not act on it)."""
        if self._lost.is_set():
            raise LeaseLost("This runner's maintenance lease on the table ran out; another runner may hold it")

    def __enter__(self) -> TableLease:
        self._renewer = threading.Thread(target=self._renew, name="maintenance-lease", daemon=True)
        self._renewer.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._done.set()
        if self._renewer is not None:
            self._renewer.join()
        if not self._lost.is_set():
            self.rows.release_lease(self.entry_id, self.holder)

    def _renew(self) -> None:
        while not self._done.wait(self.lease_s / 3):
            try:
                held = self.rows.renew_lease(self.entry_id, self.holder, self.lease_s)
            except Exception as exc:  # noqa: BLE001 - the database is away: try again until the lease is out
                log.warning("cannot renew a maintenance lease: %s", type(exc).__name__)
                continue
            if not held:
                log.warning("maintenance lease on table %s lost; the run stops before its next change", self.entry_id)
                self._lost.set()
                return
