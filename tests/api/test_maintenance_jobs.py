"""Maintenance runs as jobs (issue 49): a run asked for answers 202 and its URL, is claimed by a
job runner (the app's own, or any replica's), can be cancelled; a cancel, a protection mark, a
drop or a revoked policy stops a running job at its commit point, the commit not made; a job
whose runner died goes back to the queue and is taken over; the limits on concurrent runs hold
and a queued job is claimed once. The schedule's runs are jobs too: housekeeping's due-work pass
only queues them, once per table however many replicas' passes race, and they are followed and
cancelled at the same URL.

The commit point is forced with a barrier: the executor's ``planned`` hook, called between an
expiry's plan and its commit, blocks the runner until the test has acted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from app.composition.services import services_of
from app.housekeeping import Housekeeper
from app.maintenance.lease import ABANDONED, TableLease
from storage.maintenance_jobs import Limits
from tests.api.authz_support import securable_body
from tests.api.bin_support import protect
from tests.api.maintenance_jobs_support import finished_run, only_this_apps_runner, queue_run, wait_finished
from tests.api.tables_support import create_request, table_url
from tests.api.test_maintenance_runs import commit_snapshots, wait_for
from tests.conftest import app_loops

M = "/management/v1"
EXPIRY = "system.snapshot-expiry"
ORPHANS = "system.orphan-file-removal"


def runs_url(name: str) -> str:
    return f"{M}/maintenance/warehouses/test/namespaces/db/tables/{name}/runs"


@pytest.fixture
def service(app, client) -> Iterator:
    assert client.post("/v1/test/namespaces", json={"namespace": ["db"]}).status_code == 200
    for name in ("a", "b", "c"):
        assert client.post("/v1/test/namespaces/db/tables", json=create_request(name)).status_code == 200
    maintenance = services_of(app.app).maintenance
    only_this_apps_runner(maintenance)
    yield maintenance
    maintenance.executor.planned = lambda _plan: None


def expirable(client, service, name: str = "a") -> None:
    """Three snapshots from 2023 on ``name`` and an expiry policy on it: a run expires two. The
    schedule is put off the table for a day (only the jobs of the test run it)."""
    table = service.maintenance.table("test", ("db",), name)
    service.maintenance.schedule(table.entry_id, 86_400)
    commit_snapshots(client, name, 1, 3, None)
    body = {
        "policy-type": EXPIRY,
        "securable": securable_body("table", "test", ("db",), name),
        "content": {"enable": True},
    }
    assert client.put(f"{M}/maintenance/policies", json=body).status_code == 200


class CommitPoint:
    """The barrier at a run's commit point: the runner waits there until the test lets it go."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.go = threading.Event()

    def __call__(self, _plan: object) -> None:
        self.reached.set()
        assert self.go.wait(60), "the test never let the run go on"


def stopped_at_commit_point(client, service, act: Callable[[str], None]) -> dict:
    """Queue an expiry of a, hold it at its commit point, ``act`` (given the run's URL), let it go:
    the run as it finished."""
    point = CommitPoint()
    service.executor.planned = point
    location = queue_run(client, runs_url("a"), {"policy-type": EXPIRY})
    assert point.reached.wait(60), "the job never reached its commit point"
    running = client.get(location).json()
    assert running["status"] == "running", running
    try:
        act(location)
    finally:
        point.go.set()
    return location


def snapshots_of(client, name: str = "a") -> int:
    return len(client.get(table_url(name)).json()["metadata"]["snapshots"])


def test_a_run_is_a_job_answered_202_with_its_url_and_followed_there(client, service):
    expirable(client, service)
    response = client.post(runs_url("a"), json={"policy-type": EXPIRY})
    assert response.status_code == 202, response.text
    queued = response.json()
    assert (queued["status"], queued["trigger"], queued["requested-by"]) == ("queued", "request", "test-admin"), queued
    run = wait_finished(client, response.headers["Location"])
    assert (run["id"], run["status"], run["outcome"]["committed"]) == (queued["id"], "succeeded", True), run
    assert run["progress"] == {"file-groups-done": 0, "file-groups-total": 0, "bytes-done": 0, "bytes-total": 0}
    assert snapshots_of(client) == 1
    assert client.get(f"{runs_url('b')}/{run['id']}").status_code == 404  # a run is one table's
    assert client.get(f"{runs_url('a')}/999999").status_code == 404


def test_a_cancel_stops_a_running_job_at_its_commit_point_and_nothing_is_committed(client, service):
    expirable(client, service)

    def cancel(location: str) -> None:
        answer = client.post(f"{location}/cancel")
        assert answer.status_code == 200, answer.text
        assert (answer.json()["status"], answer.json()["cancel-requested"]) == ("running", True)

    location = stopped_at_commit_point(client, service, cancel)
    run = wait_finished(client, location)
    assert (run["status"], run["outcome"]["reason"]) == ("cancelled", "cancelled on request"), run
    assert snapshots_of(client) == 3  # the commit it had not made is not made
    again = client.post(f"{location}/cancel").json()  # a finished run stays as it is
    assert again["status"] == "cancelled"


@pytest.mark.parametrize("stop", ["protect", "revoke"])
def test_a_protection_mark_or_a_revoked_policy_stops_a_running_job_before_its_commit(client, service, stop):
    expirable(client, service)

    def act(_location: str) -> None:
        if stop == "protect":
            assert protect(client, "table", ["db"], "a").status_code == 204
        else:
            body = {"policy-type": EXPIRY, "securable": securable_body("table", "test", ("db",), "a")}
            assert client.post(f"{M}/maintenance/policies/detach", json=body).status_code == 204

    run = wait_finished(client, stopped_at_commit_point(client, service, act))
    assert run["status"] == "skipped", run
    reason = run["outcome"]["reason"]
    if stop == "protect":
        assert reason.startswith("protected (table db.a is protected)"), reason
    else:
        assert reason == f"the {EXPIRY} policy was revoked during the run", reason
    assert run["outcome"]["committed"] is False
    assert snapshots_of(client) == 3


def test_a_drop_stops_a_running_job_before_its_commit(client, service, db):
    expirable(client, service)

    def drop(_location: str) -> None:
        assert client.delete(table_url("a")).status_code == 204

    location = stopped_at_commit_point(client, service, drop)
    run_id = int(location.rsplit("/", 1)[1])
    finished = wait_for(
        lambda: (
            (row := db.execute("SELECT status, outcome FROM maintenance_run WHERE id = %s", (run_id,)).fetchone())
            and row[0] not in ("queued", "running")
            and row
        ),
        "the run never finished",
    )
    assert finished[0] == "skipped", finished
    assert finished[1]["reason"] in (
        "the table was dropped",
        "the table is in the recycle bin: maintenance never touches a dropped table's files",
    ), finished


def test_a_queued_job_is_cancelled_at_once_and_never_runs(client, service, db):
    expirable(client, service)
    a = service.maintenance.table("test", ("db",), "a")
    held = TableLease(service.maintenance, a.entry_id, 600)  # another runner holds the table: the job waits
    assert held.take()
    try:
        location = queue_run(client, runs_url("a"), {"policy-type": EXPIRY})
        cancelled = client.post(f"{location}/cancel").json()
        assert (cancelled["status"], cancelled["outcome"]["reason"]) == ("cancelled", "cancelled before it started")
    finally:
        service.maintenance.release_lease(a.entry_id, held.holder)
    # another job on the table runs (the queue moved on), and the cancelled one stayed cancelled
    assert finished_run(client, runs_url("a"), {"policy-type": EXPIRY})["status"] == "succeeded"
    assert client.get(location).json()["status"] == "cancelled"


@contextmanager
def busy_warehouse(service, db, names=("b", "c")) -> Iterator[None]:
    """Two live runs (their leases held) in warehouse test: the app's runner, two per warehouse by
    default, claims nothing there until they end."""
    leases = []
    try:
        for name in names:
            table = service.maintenance.table("test", ("db",), name)
            service.maintenance.schedule(table.entry_id, 86_400)
            lease = TableLease(service.maintenance, table.entry_id, 600)
            assert lease.take()
            leases.append(lease)
            service.maintenance.start_run(table.entry_id, EXPIRY, "schedule", True, lease.holder)
        yield
    finally:
        for lease in leases:
            db.execute("UPDATE maintenance_run SET status = 'failed' WHERE holder = %s", (lease.holder,))
            service.maintenance.release_lease(lease.entry_id, lease.holder)


def test_a_job_whose_runner_died_goes_back_to_the_queue_and_is_taken_over(client, service, db):
    """A runner claimed the job and died (its lease not renewed): the sweep puts the job back in
    the queue, the app's runner takes it over and finishes it: the job survived its runner."""
    expirable(client, service)
    with busy_warehouse(service, db):
        location = queue_run(client, runs_url("a"), {"policy-type": EXPIRY})
        dead = service.jobs.claim("dead-runner", 0.2, Limits(100, 100), ABANDONED)  # and never renews
        assert dead is not None and location.endswith(f"/{dead.run_id}")
        assert client.get(location).json()["status"] == "running"

        def swept() -> bool:  # by this call, or by the app's own housekeeping before it: the same sweep
            service.abandon_dead_runs()
            return client.get(location).json()["status"] == "queued"

        wait_for(swept, "not swept")
    run = wait_finished(client, location)  # the app's runner took it over
    assert (run["status"], run["outcome"]["committed"]) == ("succeeded", True), run
    attempts = db.execute("SELECT attempts FROM maintenance_run WHERE id = %s", (dead.run_id,)).fetchone()[0]
    assert attempts == 2
    assert snapshots_of(client) == 1  # committed once


def test_the_limits_on_concurrent_runs_and_a_job_is_claimed_once(client, service, db):
    with busy_warehouse(service, db, ("a", "b")):
        c = service.maintenance.table("test", ("db",), "c")
        service.maintenance.schedule(c.entry_id, 86_400)
        queued = service.jobs.enqueue(c, EXPIRY, True, None, 10)
        assert service.jobs.claim("x", 60, Limits(2, 2), ABANDONED) is None  # overall
        assert service.jobs.claim("x", 60, Limits(10, 2), ABANDONED) is None  # per warehouse
        claims: list = []
        barrier = threading.Barrier(2)

        def claim(holder: str) -> None:
            barrier.wait()
            claims.append(service.jobs.claim(holder, 60, Limits(10, 3), ABANDONED))

        racers = [threading.Thread(target=claim, args=(f"racer-{i}",)) for i in range(2)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        won = [job for job in claims if job is not None]
        assert [job.run_id for job in won] == [queued.id]  # once, whoever won
        db.execute("UPDATE maintenance_run SET status = 'failed' WHERE id = %s", (queued.id,))
        db.execute(
            "UPDATE maintenance_lease SET holder = NULL, lease_until = '-infinity' WHERE entry_id = %s", (c.entry_id,)
        )


def test_a_table_holds_at_most_ten_queued_jobs(client, service):
    a = service.maintenance.table("test", ("db",), "a")
    held = TableLease(service.maintenance, a.entry_id, 600)
    assert held.take()
    try:
        for _ in range(10):
            queue_run(client, runs_url("a"), {"policy-type": EXPIRY, "dry-run": True})
        refused = client.post(runs_url("a"), json={"policy-type": EXPIRY, "dry-run": True})
        assert refused.status_code == 409, refused.text
    finally:
        service.maintenance.release_lease(a.entry_id, held.holder)


def _service_of(loop: object) -> object | None:
    """The maintenance service whose due-work pass a housekeeper runs (None: another loop)."""
    step = getattr(loop, "maintenance", None) if isinstance(loop, Housekeeper) else None
    return getattr(step, "__self__", None)


def test_two_due_work_passes_racing_on_two_apps_queue_one_job(client, service, settings, db):
    """Two replicas (two apps on one database) whose housekeeping both see table a due at the same
    moment: each pass is held between seeing it due and queueing its jobs until both are there,
    then let go together - one job results, whoever wins (enforced in SQL: the table's turn taken
    under its schedule row's lock, and one scheduled job per table and type at a time)."""
    from app.edge.factory import create_app

    other = services_of(create_app(settings).app).maintenance
    a = service.maintenance.table("test", ("db",), "a")
    arrived: list[str] = []
    seen = threading.Condition()
    release = threading.Event()

    def held(name: str) -> Callable[[object], None]:
        def hook(table) -> None:
            if table.entry_id == a.entry_id:  # (another app's housekeeping may be one of the passes)
                with seen:
                    arrived.append(name)
                    seen.notify_all()
                assert release.wait(60), "the test never let the passes go on"

        return hook

    # every due-work pass of this process is held, the housekeeping of apps other tests built
    # included: none may queue the table before the two passes of the test have both seen it due
    everyone = {id(m): m for m in [service, other, *map(_service_of, app_loops())] if m is not None}
    for maintenance in everyone.values():
        maintenance.due_seen = held({id(service): "this", id(other): "other"}.get(id(maintenance), "another"))
    try:
        body = {"policy-type": ORPHANS, "securable": securable_body("table", "test", ("db",), "a")}
        assert client.put(f"{M}/maintenance/policies", json={**body, "content": {"enable": True}}).status_code == 200
        passes = [threading.Thread(target=maintenance.run_due) for maintenance in (service, other)]
        for due_pass in passes:
            due_pass.start()
        with seen:
            assert seen.wait_for(lambda: {"this", "other"} <= set(arrived), 60), arrived
        release.set()
        for due_pass in passes:
            due_pass.join()
    finally:
        release.set()
        for maintenance in everyone.values():
            maintenance.due_seen = lambda _table: None
    jobs = db.execute("SELECT policy_type, trigger FROM maintenance_run WHERE entry_id = %s", (a.entry_id,)).fetchall()
    assert jobs == [(ORPHANS, "schedule")]
    assert service.run_due() == 0  # and the table is not due again before its interval
    due_in = db.execute(
        "SELECT extract(epoch FROM next_due_at - now()) FROM maintenance_lease WHERE entry_id = %s", (a.entry_id,)
    ).fetchone()[0]
    assert due_in > 60


def scheduled_run(client, service, table, after: int = 0) -> str:
    """Make the table due, run the due-work pass (or let the app's housekeeping beat it to it):
    the URL of the scheduled run queued, newer than run ``after``."""
    service.maintenance.schedule(table.entry_id, 0)
    service.run_due()
    runs = wait_for(
        lambda: [r for r in client.get(runs_url(table.name)).json()["runs"] if r["id"] > after],
        "the due table was never queued",
    )
    (run,) = runs
    assert (run["trigger"], run["policy-type"], "requested-by" in run) == ("schedule", EXPIRY, False), run
    return f"{runs_url(table.name)}/{run['id']}"


def test_a_scheduled_run_is_a_job_with_progress_that_can_be_cancelled(client, service):
    expirable(client, service)
    a = service.maintenance.table("test", ("db",), "a")
    point = CommitPoint()
    service.executor.planned = point
    location = scheduled_run(client, service, a)
    assert point.reached.wait(60), "the scheduled job never reached its commit point"
    try:
        running = client.get(location).json()  # a job runner runs it, at the run's URL
        assert (running["status"], running["trigger"]) == ("running", "schedule"), running
        answer = client.post(f"{location}/cancel")
        assert answer.status_code == 200, answer.text
        assert (answer.json()["status"], answer.json()["cancel-requested"]) == ("running", True)
    finally:
        point.go.set()
    run = wait_finished(client, location)
    assert (run["status"], run["outcome"]["reason"]) == ("cancelled", "cancelled on request"), run
    assert snapshots_of(client) == 3  # the commit it had not made is not made

    service.executor.planned = lambda _plan: None
    again = wait_finished(client, scheduled_run(client, service, a, int(location.rsplit("/", 1)[1])))
    assert (again["status"], again["outcome"]["committed"]) == ("succeeded", True), again
    assert again["progress"] == {"file-groups-done": 0, "file-groups-total": 0, "bytes-done": 0, "bytes-total": 0}
    assert snapshots_of(client) == 1
