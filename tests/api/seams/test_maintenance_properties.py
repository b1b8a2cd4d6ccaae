"""Where maintenance's commit trigger (issue 37) meets a table's own ``history.expire.*``
properties: the shared state is the table's metadata, whose properties count as its snapshot-expiry
policy, and maintenance's schedule row (``maintenance_lease``), which the trigger makes due.

A table configured by those properties alone - no policy attached anywhere, never looked at by
maintenance before - is queued by the round after the commit that crosses the threshold (and
expired by a job runner), as a
table with an attached policy is (tests/api/test_maintenance_runs.py), not at the schedule's
hourly discovery of such tables.
"""

from __future__ import annotations

import pytest

from app.composition.services import services_of
from app.rules.maintenance import SNAPSHOTS_BEFORE_DUE
from tests.api.maintenance_jobs_support import wait_finished
from tests.api.tables_support import create_request, snapshot, table_url, tables_url
from tests.api.test_maintenance_runs import wait_for

M = "/management/v1"
EXPIRY_PROPERTIES = {"history.expire.min-snapshots-to-keep": "100", "history.expire.max-snapshot-age-ms": "0"}


@pytest.fixture
def service(app, client, ns):
    maintenance = services_of(app.app).maintenance
    maintenance.run_due()  # what earlier tests left due or counted; the hourly discovery done now
    return maintenance


def _runs(client, name: str) -> list[dict]:
    return client.get(f"{M}/maintenance/warehouses/test/namespaces/db/tables/{name}/runs").json()["runs"]


def _commit_snapshots(client, name: str, first: int, count: int, parent: int | None) -> int:
    """One commit adding ``count`` snapshots in a chain to main (from 2023: past any age)."""
    location = client.get(table_url(name)).json()["metadata"]["location"]  # its manifest lists go there
    updates = []
    for snapshot_id in range(first, first + count):
        updates.append(
            {"action": "add-snapshot", "snapshot": snapshot(snapshot_id, snapshot_id, parent, location=location)}
        )
        parent = snapshot_id
    updates.append({"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": parent})
    response = client.post(table_url(name), json={"requirements": [], "updates": updates})
    assert response.status_code == 200, response.text
    return parent


@pytest.mark.parametrize("full", [False, True], ids=["next-round", "minute-round"])
def test_a_table_configured_by_its_properties_is_expired_after_the_commits_that_cross_the_threshold(
    client, service, db, full
):
    created = client.post(tables_url(), json=create_request("props", properties=EXPIRY_PROPERTIES))
    assert created.status_code == 200, created.text
    assert client.post(tables_url(), json=create_request("plain")).status_code == 200  # no policy: left alone
    entry_id = service.maintenance.table("test", ("db",), "props").entry_id
    assert db.execute("SELECT count(*) FROM maintenance_lease").fetchone()[0] == 0  # unknown to maintenance

    head = _commit_snapshots(client, "props", 1, SNAPSHOTS_BEFORE_DUE - 1, None)
    _commit_snapshots(client, "plain", 1, SNAPSHOTS_BEFORE_DUE, None)
    assert service.run_due(full=full) == 0  # props below the threshold; plain past it, but without a policy
    assert _runs(client, "props") == []
    _commit_snapshots(client, "props", SNAPSHOTS_BEFORE_DUE, 1, head)  # the commit that crosses it

    # the next housekeeping round queues it, within the hour's discovery: this call, or the app's own
    # housekeeping thread when its round came first (the same step; one job either way)
    assert service.run_due(full=full) in (0, 1)
    (queued,) = wait_for(lambda: _runs(client, "props"), "the table was never queued")
    run = wait_finished(client, f"{M}/maintenance/warehouses/test/namespaces/db/tables/props/runs/{queued['id']}")
    assert (run["trigger"], run["status"], run["outcome"]["committed"]) == ("commits", "succeeded", True), run
    assert run["plan"]["settings"]["min-snapshots-to-keep"] == 100  # the properties' policy
    assert len(run["plan"]["expired-snapshot-ids"]) == SNAPSHOTS_BEFORE_DUE - 100
    assert len(client.get(table_url("props")).json()["metadata"]["snapshots"]) == 100  # what the properties keep
    assert _runs(client, "plain") == []
    due_in = db.execute(
        "SELECT extract(epoch FROM next_due_at - now()) FROM maintenance_lease WHERE entry_id = %s", (entry_id,)
    ).fetchone()[0]
    assert due_in > 3500  # known to maintenance now, and back on the schedule
