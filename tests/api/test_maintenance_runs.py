"""The maintenance executor's safety around its runs (issue 37): a run whose runner died is marked
failed once its lease runs out, by the next runner or by housekeeping, and the table is maintained
again; a protected table (a mark on it, its namespace or its warehouse) is skipped by every policy
type, the run recorded as skipped with the reason.

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

from app.edge.context import MAINTENANCE
from app.maintenance_lease import ABANDONED
from app.maintenance_runs import MaintenanceBusy
from tests.api.bin_support import protect, unprotect
from tests.api.tables_support import create_request

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
    return app.app.extensions[MAINTENANCE]


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
        run = client.post(runs_url("a"), json={"policy-type": policy_type}).json()
        assert (run["status"], run["files-removed"]) == ("skipped", 0), run
        assert run["outcome"]["reason"] == f"protected ({reason}): maintenance leaves protected entries alone"
    assert unprotect(client, *mark).status_code == 204
    run = client.post(runs_url("a"), json={"policy-type": "system.orphan-file-removal"}).json()
    assert run["status"] == "succeeded", run
