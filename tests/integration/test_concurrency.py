"""Commits that never lose data: many writers against a real gunicorn, with and without faults.

Every writer is a thread with its own httpx client, talking to a gunicorn started for this module
(so killing its workers disturbs no other test). Three workloads run at the same time:

- **appends**: ``GROWLER_STRESS_WRITERS`` writers each need ``GROWLER_STRESS_APPENDS`` acknowledged
  appends to one table. An append is what clients send: add-snapshot (a globally unique id,
  parent = current main, sequence number = last + 1, the writer and append number in the summary)
  + set-snapshot-ref main, guarded by assert-ref-snapshot-id. A 409 means "not applied": the writer
  reloads and tries again with a new snapshot id (the server cannot rebase an append: the client's
  manifest list embeds its parent).
- **properties** (server-side retry): ``GROWLER_STRESS_PROPERTY_WRITERS`` writers set a property with
  a unique key on the appends' table, guarded only by assert-table-uuid. Their requirement holds
  whatever the appenders do, so a lost compare-and-set must be re-applied by the server: no 409.
- **transactions**: ``GROWLER_STRESS_TX_WRITERS`` writers each need ``GROWLER_STRESS_TX_COMMITS``
  acknowledged multi-table commits, each appending one snapshot to 2-4 of 4 tables.

Every attempt is acknowledged (2xx), rejected (409) or unknown (5xx, connection error, timeout -
only the fault runs may have those). On the final state: walking parent ids from main gives a chain
with every acknowledged snapshot exactly once and no rejected one, nothing that was never sent,
sequence numbers last..1; a transaction is in all its tables or in none; every acknowledged property
is there; the object at ``metadata-location`` is exactly what loadTable returns; and every
``*.metadata.json`` under a table's location is its current file or in its metadata-log (the
tables keep the whole log: ``write.metadata.previous-versions-max`` is set beyond the number of
commits, so "not in the log" means "orphan" rather than "trimmed"; delete-after-commit is left off
because its deletions are best-effort by design, which would blur what this test is about).

Fault runs: the same load (fewer appends and transactions per writer) while gunicorn workers are
SIGKILLed twice, and while PostgreSQL is restarted and later stopped for longer than the pool waits
(GROWLER_STRESS_PG_OUTAGE_S, 6 s). Afterwards the same invariants hold (unknown attempts may be
present or absent, never twice; a transaction still all or nothing), the sweeper (``python -m
app.housekeeping --grace-seconds 0``) leaves no orphan, and the same gunicorn master serves a load
and a commit at the first try.

Sizes: GROWLER_STRESS_WRITERS (16), GROWLER_STRESS_APPENDS (50), GROWLER_STRESS_TX_WRITERS (8),
GROWLER_STRESS_TX_COMMITS (20), GROWLER_STRESS_PROPERTY_WRITERS (4), GROWLER_STRESS_PROPERTY_COMMITS
(25); the fault runs use GROWLER_STRESS_FAULT_APPENDS (15) and GROWLER_STRESS_FAULT_TX_COMMITS (6)
per writer. After a 409 a writer backs off like Iceberg's clients (full jitter, from
GROWLER_STRESS_BACKOFF_BASE_S = 0.1 doubling up to GROWLER_STRESS_BACKOFF_CAP_S = 3). A run fails as
a hang when no commit is acknowledged for GROWLER_STRESS_STALL_S (60) or it lasts longer than
GROWLER_STRESS_TIMEOUT_S (3600): hang guards only, no run has to finish within a time (the
assertions are on what was acknowledged, refused and stored). GROWLER_TEST_WORKERS sets the
gunicorn workers (at least 2 here).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Iterator

import pytest

from storage.objects import S3ObjectStore
from tests.integration.conftest import Server, start_server, stop_server
from tests.integration.stress_checks import (
    drop,
    still_serving,
    sweep,
    verify,
    wait_for_workers,
)
from tests.integration.stress_load import (
    ACK,
    FULL,
    PG_OUTAGE_S,
    REJECTED,
    UNDER_FAULTS,
    Load,
    _env_int,
    worker_pids,
)

# a CPU-bound burst: never beside another session's (cpu_alone, tests/conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("cpu_alone")]

# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stress_server(settings, app, tmp_path_factory) -> Iterator[Server]:
    """A gunicorn of its own (the fault runs kill its workers), configured as in production.

    Unlike the other test servers it does not validate its responses against the yaml: that
    costs far more than the commit itself once the metadata holds hundreds of snapshots, and
    the api and conformance tests cover it.
    """
    workers = max(2, _env_int("GROWLER_TEST_WORKERS", 2))
    running = start_server(
        settings,
        tmp_path_factory.mktemp("stress-gunicorn"),
        {"GROWLER_VALIDATE_RESPONSES": "false", "GROWLER_WORKERS": str(workers)},
    )
    try:
        yield running
    finally:
        stop_server(running)


@pytest.fixture(scope="module")
def store(settings) -> S3ObjectStore:
    return S3ObjectStore(settings.s3)


# -- the runs -------------------------------------------------------------------------------


def test_no_acknowledged_commit_is_lost(stress_server, store, services):
    load = Load(stress_server, FULL)
    load.create_tables()
    load.run("no faults")
    verify(load, store, services, strict=True)
    # The server re-applies what a lost race did not invalidate, so these commits - racing 16
    # appenders on one table - mostly succeed without a client retry (the "mostly"):
    # the server's retries are bounded, and a commit that loses every race gets a clean 409
    # (verify() has checked that no refused property was applied).
    properties = [a for a in load.attempts if a.kind == "property"]
    refused = [a.detail for a in properties if a.outcome == REJECTED]
    assert len(refused) <= 0.1 * len(properties), f"{len(refused)} property commits refused: {refused[:3]}"
    drop(load)


def test_killed_workers_lose_nothing(stress_server, store, services, settings):
    expected_workers = len(worker_pids(stress_server))
    killed: list[tuple[int, float]] = []

    def kill_workers(load: Load) -> None:
        for fraction in (0.3, 0.6):
            load.wait_progress(fraction)
            victim = random.choice(sorted(worker_pids(stress_server)))
            os.kill(victim, signal.SIGKILL)
            killed.append((victim, time.monotonic()))

    load = Load(stress_server, UNDER_FAULTS)
    load.create_tables()
    load.run("SIGKILL of workers", kill_workers)
    print(f"[stress SIGKILL] killed workers {[pid for pid, _ in killed]}")

    assert len(killed) == 2 and stress_server.process.poll() is None
    pids = wait_for_workers(stress_server, expected_workers)
    assert len(pids) == expected_workers and not pids & {pid for pid, _ in killed}
    after = [a for a in load.attempts if a.outcome == ACK and a.at > killed[-1][1]]
    assert after, "nothing was acknowledged after the last kill"
    still_serving(load)
    print(f"[stress SIGKILL] sweeper: {sweep(settings, stress_server)}")
    verify(load, store, services, strict=False)
    drop(load)


def test_postgres_restart_loses_nothing(stress_server, store, services, settings):
    """A quick restart (the pool reconnects) and an outage longer than the pool's timeout (503s)."""
    if services.postgres is None:
        pytest.skip("PostgreSQL is external: it cannot be restarted by the tests")
    postgres = services.postgres
    back: list[float] = []

    def restart_postgres(load: Load) -> None:
        load.wait_progress(0.3)
        postgres.restart()
        back.append(time.monotonic())
        load.wait_progress(0.6)
        postgres.stop()
        time.sleep(PG_OUTAGE_S)
        postgres.start()
        back.append(time.monotonic())

    load = Load(stress_server, UNDER_FAULTS)
    load.create_tables()
    try:
        load.run(f"PostgreSQL restarted, then down {PG_OUTAGE_S:g} s", restart_postgres)
    finally:
        if not postgres.running:
            postgres.start()

    assert len(back) == 2 and stress_server.process.poll() is None
    after = [a for a in load.attempts if a.outcome == ACK and a.at > back[-1]]
    assert after, "nothing was acknowledged after PostgreSQL came back"
    still_serving(load)
    print(f"[stress PostgreSQL] sweeper: {sweep(settings, stress_server)}")
    verify(load, store, services, strict=False)
    drop(load)
