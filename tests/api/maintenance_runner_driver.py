"""A maintenance runner the test kills with SIGKILL (``test_maintenance_runs.py``).

``python -m tests.api.maintenance_runner_driver <database url> <entry id>...``: takes each table's
maintenance lease as the executor does (``app/maintenance_lease.TableLease``, a one-second lease
renewed in the background), records a run 'running' under it, prints the run ids (one JSON line)
and then blocks until it is killed: what a runner leaves behind when its process dies mid-run.
"""

from __future__ import annotations

import json
import sys
import threading

from app.maintenance.lease import TableLease
from storage.db import Database
from storage.maintenance_rows import MaintenanceRows

LEASE_S = 1.0


def main() -> None:
    database = Database(sys.argv[1], min_size=1, max_size=2)
    database.open()
    rows = MaintenanceRows(database)
    runs = []
    for entry_id in map(int, sys.argv[2:]):
        lease = TableLease(rows, entry_id, LEASE_S)
        if not lease.take():
            raise SystemExit(f"table {entry_id} is held by another runner")
        lease.__enter__()  # renewed until the process dies
        runs.append(rows.start_run(entry_id, "system.snapshot-expiry", "request", False, lease.holder))
    print(json.dumps(runs), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
