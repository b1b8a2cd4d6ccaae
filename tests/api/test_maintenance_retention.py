"""The retention of recorded maintenance runs: old finished runs are forgotten, a running one
never is (its runner finishes it later, and a finish of a deleted run would fail)."""

from __future__ import annotations

from app.composition.services import services_of
from tests.api.tables_support import create_request

EXPIRY = "system.snapshot-expiry"


def test_forgetting_old_runs_keeps_the_running_ones(app, client, db):
    assert client.post("/v1/test/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert client.post("/v1/test/namespaces/db/tables", json=create_request("t")).status_code == 200
    rows = services_of(app.app).maintenance.maintenance
    entry_id = rows.table("test", ("db",), "t").entry_id
    running = rows.start_run(entry_id, EXPIRY, "request", False, "runner-a")
    finished = rows.start_run(entry_id, EXPIRY, "request", False, "runner-b")
    rows.finish_run(finished, "succeeded", {}, {}, 0, None)
    db.execute("UPDATE maintenance_run SET started_at = now() - interval '40 days' WHERE entry_id = %s", (entry_id,))

    assert rows.forget_runs(30 * 86_400) == 1
    kept = [row[0] for row in db.execute("SELECT id FROM maintenance_run WHERE entry_id = %s", (entry_id,))]
    assert kept == [running]
    assert rows.finish_run(running, "succeeded", {}, {}, 0, None).status == "succeeded"
    assert rows.forget_runs(30 * 86_400) == 1
