"""The maintenance executor's safety around its runs (issue 37): a run whose runner died is marked
failed once its lease runs out, by the next runner or by housekeeping, and the table is maintained
again; a protected table (a mark on it, its namespace or its warehouse) is skipped by every policy
type, the run recorded as skipped with the reason; commits past a threshold make a table due and
housekeeping's next round queues it as a job, which the app's job runner runs.

The executor's runs on real data are in tests/integration/test_maintenance.py; policies in
test_maintenance_policies.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.composition.services import services_of
from app.maintenance.context import current_lease
from app.maintenance.lease import ABANDONED, LEASE_SECONDS
from app.maintenance.runs import MaintenanceBusy
from app.rules.maintenance import SNAPSHOTS_BEFORE_DUE
from tests.api.authz_support import securable_body
from tests.api.bin_support import protect, unprotect
from tests.api.maintenance_jobs_support import finished_run, only_this_apps_runner, wait_finished
from tests.api.tables_support import create_request, snapshot, table_url

ROOT = Path(__file__).resolve().parents[2]
M = "/management/v1"
EXPIRY = "system.snapshot-expiry"


def runs_url(name: str) -> str:
    return f"{M}/maintenance/warehouses/test/namespaces/db/tables/{name}/runs"


@pytest.fixture
def service(app, client):
    assert client.post("/v1/test/namespaces", json={"namespace": ["db"]}).status_code == 200
    for name in ("a", "b"):
        assert client.post("/v1/test/namespaces/db/tables", json=create_request(name)).status_code == 200
    maintenance = services_of(app.app).maintenance
    only_this_apps_runner(maintenance)
    return maintenance


def wait_for(condition, what: str, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        assert time.monotonic() < deadline, what
        threading.Event().wait(0.05)
    return result


def run_when_free(service, table, policy_type: str = EXPIRY):
    """A run on request, as soon as no other runner holds the table (its lease released or run out)."""

    def attempt():
        try:
            return service.executor.run(table, policy_type, dry_run=False)
        except MaintenanceBusy:
            return None

    return wait_for(attempt, "the table's maintenance lease never became free")


def run_of(client, name: str, run_id: int) -> dict:
    return next(r for r in client.get(runs_url(name)).json()["runs"] if r["id"] == run_id)


def test_a_killed_runners_runs_are_abandoned_and_its_tables_maintained_again(client, service, services, db):
    a, b = (service.maintenance.table("test", ("db",), name) for name in ("a", "b"))
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.api.maintenance_runner_driver",
            services.database_url,
            str(a.entry_id),
            str(b.entry_id),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        run_a, run_b = json.loads(runner.stdout.readline())
        # alive, the runner renews its one-second lease: the table stays its own past the first second
        first = db.execute("SELECT lease_until FROM maintenance_lease WHERE entry_id = %s", (a.entry_id,)).fetchone()
        wait_for(
            lambda: db.execute(
                "SELECT lease_until > %s FROM maintenance_lease WHERE entry_id = %s", (first[0], a.entry_id)
            ).fetchone()[0],
            "the live runner never renewed its lease",
        )
        with pytest.raises(MaintenanceBusy):
            service.executor.run(a, EXPIRY, dry_run=False)
        assert service.abandon_dead_runs() == 0  # a live runner's runs are not abandoned
        assert run_of(client, "a", run_a)["status"] == "running"
    finally:
        runner.kill()  # SIGKILL: no cleanup runs
        runner.wait()
        runner.stdout.close()

    # a: the next runner takes the lease once it ran out, and marks the dead runner's run failed
    again = run_when_free(service, a)
    assert again.status == "skipped"  # (no policy applies: the table was maintained, not refused)
    left = run_of(client, "a", run_a)
    assert (left["status"], left["error"]) == ("failed", ABANDONED) and "finished-at" in left

    # b: nobody takes it; housekeeping's sweep marks the run failed once the lease ran out
    wait_for(lambda: service.abandon_dead_runs() or run_of(client, "b", run_b)["status"] != "running", "never swept")
    left = run_of(client, "b", run_b)
    assert (left["status"], left["error"]) == ("failed", ABANDONED)
    assert run_when_free(service, b).status == "skipped"
    assert [r["status"] for r in client.get(runs_url("b")).json()["runs"]] == ["skipped", "failed"]


POLICY_TYPES = (
    "system.snapshot-expiry",
    "system.orphan-file-removal",
    "system.metadata-compaction",
    "system.data-compaction",
)


@pytest.mark.parametrize(
    ("mark", "reason"),
    [
        (("table", ["db"], "a"), "table db.a is protected"),
        (("namespace", ["db"], None), "namespace db is protected"),
        (("warehouse", None, None), "warehouse test is protected"),
    ],
)
def test_every_policy_type_skips_a_protected_table_and_says_why(client, service, mark, reason):
    for policy_type in POLICY_TYPES:
        body = {"policy-type": policy_type, "securable": {"type": "catalog"}, "content": {"enable": True}}
        assert client.put(f"{M}/maintenance/policies", json=body).status_code == 200
    assert protect(client, *mark).status_code == 204
    for policy_type in POLICY_TYPES:
        run = finished_run(client, runs_url("a"), {"policy-type": policy_type})
        assert (run["status"], run["files-removed"]) == ("skipped", 0), run
        assert run["outcome"]["reason"] == f"protected ({reason}): maintenance leaves protected entries alone"
    assert unprotect(client, *mark).status_code == 204
    run = finished_run(client, runs_url("a"), {"policy-type": "system.orphan-file-removal"})
    assert run["status"] == "succeeded", run


def commit_snapshots(client, name: str, first: int, count: int, parent: int | None) -> int:
    """One commit adding ``count`` snapshots in a chain to main (their manifest lists are never
    written: expiry finds nothing of theirs to delete); returns the new head."""
    location = client.get(table_url(name)).json()["metadata"]["location"]
    updates = []
    for snapshot_id in range(first, first + count):
        body = snapshot(snapshot_id, snapshot_id, parent, location=location)
        updates.append({"action": "add-snapshot", "snapshot": body})
        parent = snapshot_id
    updates.append({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": parent})
    body = {"requirements": [], "updates": updates}
    response = client.post(table_url(name), json=body)
    assert response.status_code == 200, response.text
    return parent


def test_commits_past_the_threshold_make_a_table_due_and_housekeeping_runs_it(client, service, db):
    a = service.maintenance.table("test", ("db",), "a")
    service.run_due()  # whatever earlier tests left due or counted
    policy = {"enable": True, "config": {"min_snapshot_to_keep": 100, "max_snapshot_age_days": 0}}
    body = {"policy-type": EXPIRY, "securable": securable_body("table", "test", ("db",), "a"), "content": policy}
    assert client.put(f"{M}/maintenance/policies", json=body).status_code == 200
    service.maintenance.schedule(a.entry_id, 86_400)  # the schedule would not look at it for a day

    head = commit_snapshots(client, "a", 1, SNAPSHOTS_BEFORE_DUE - 1, None)
    assert service.run_due(full=False) == 0  # below the threshold: nothing due, nothing run
    assert client.get(runs_url("a")).json()["runs"] == []
    commit_snapshots(client, "a", SNAPSHOTS_BEFORE_DUE, 1, head)  # the commit that crosses it

    # housekeeping's next round (not the minute's full one) queues it: this call, or the app's own
    # housekeeping thread when its round came first (the same step; one job either way)
    assert service.run_due(full=False) in (0, 1)
    (queued,) = wait_for(lambda: client.get(runs_url("a")).json()["runs"], "the table was never queued")
    run = wait_finished(client, f"{runs_url('a')}/{queued['id']}")  # a job runner runs it
    assert (run["trigger"], run["status"], run["outcome"]["committed"]) == ("commits", "succeeded", True), run
    assert len(run["plan"]["expired-snapshot-ids"]) == SNAPSHOTS_BEFORE_DUE - 100
    metadata = client.get(table_url("a")).json()["metadata"]
    assert len(metadata["snapshots"]) == 100  # what the policy keeps
    due_in = db.execute("SELECT extract(epoch FROM next_due_at - now()) FROM maintenance_lease").fetchone()[0]
    assert due_in > 3500  # back on the schedule
    assert service.run_due(full=False) == 0  # the expiry's own commit counts, far below the threshold


def test_a_runner_that_lost_its_lease_stops_before_its_commit(client, service, db):
    a = service.maintenance.table("test", ("db",), "a")
    commit_snapshots(client, "a", 1, 3, None)  # from 2023: expirable under Iceberg's defaults
    body = {
        "policy-type": EXPIRY,
        "securable": securable_body("table", "test", ("db",), "a"),
        "content": {"enable": True},
    }
    assert client.put(f"{M}/maintenance/policies", json=body).status_code == 200

    def steal_the_lease(_plan) -> None:
        """Another runner holds the table now (this one's lease ran out while it planned)."""
        db.execute(
            "UPDATE maintenance_lease SET holder = 'elsewhere', lease_until = now() + interval '1 hour'"
            " WHERE entry_id = %s",
            (a.entry_id,),
        )
        wait_for(
            lambda: current_lease() is not None and current_lease().lost, "the runner never noticed it lost its lease"
        )

    service.executor.planned, service.executor.lease_s = steal_the_lease, 0.3  # renewed every 0.1 s
    try:
        run = service.executor.run(a, EXPIRY, dry_run=False)
    finally:
        service.executor.planned, service.executor.lease_s = (lambda _plan: None), LEASE_SECONDS
    assert run.status == "failed" and run.error.startswith("LeaseLost"), run
    assert len(client.get(table_url("a")).json()["metadata"]["snapshots"]) == 3  # nothing committed
    holder = db.execute("SELECT holder FROM maintenance_lease WHERE entry_id = %s", (a.entry_id,)).fetchone()[0]
    assert holder == "elsewhere"  # and the lease it lost was not released from under the new holder
