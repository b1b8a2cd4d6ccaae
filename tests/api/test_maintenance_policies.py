"""Maintenance policies through the management API (issue 37): attach, detach, list; the nearest
attachment wins per type; table properties count as a table-level expiry policy; content checked
against the Polaris schemas; manage-maintenance decides who may attach and run; health and runs.

The executor's runs on real data are in tests/integration/test_maintenance.py.
"""

from __future__ import annotations

import pytest

from app.composition.services import services_of
from tests.api.authz_support import securable_body
from tests.api.maintenance_jobs_support import finished_run, wait_finished
from tests.api.tables_support import create_request

M = "/management/v1"
EXPIRY = "system.snapshot-expiry"
ORPHANS = "system.orphan-file-removal"
TABLE = f"{M}/maintenance/warehouses/test/namespaces/db%1Fsub/tables/t"


def _attach(client, policy_type: str, securable: dict, content: dict, status: int = 200):
    response = client.put(
        f"{M}/maintenance/policies", json={"policy-type": policy_type, "securable": securable, "content": content}
    )
    assert response.status_code == status, response.text
    return response


def _effective(client) -> dict:
    response = client.get(f"{TABLE}/policies")
    assert response.status_code == 200, response.text
    return {p["policy-type"]: p for p in response.json()["policies"]}


@pytest.fixture
def table(client):
    assert client.post("/v1/test/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert client.post("/v1/test/namespaces", json={"namespace": ["db", "sub"]}).status_code == 200
    assert client.post("/v1/test/namespaces/db%1Fsub/tables", json=create_request("t")).status_code == 200


def test_nearest_attachment_wins_and_detach_falls_back(client, table):
    assert _effective(client) == {}  # nothing attached, no properties: nothing runs
    _attach(client, EXPIRY, {"type": "catalog"}, {"enable": True, "config": {"max_snapshot_age_days": 30}})
    _attach(
        client, EXPIRY, securable_body("warehouse", "test"), {"enable": True, "config": {"min_snapshot_to_keep": 5}}
    )
    _attach(client, EXPIRY, securable_body("namespace", "test", ("db",)), {"enable": False})
    _attach(client, ORPHANS, securable_body("namespace", "test", ("db",)), {"enable": True})
    effective = _effective(client)
    assert effective[EXPIRY] == {"policy-type": EXPIRY, "content": {"enable": False}, "inherited-from": "namespace"}
    assert effective[ORPHANS]["inherited-from"] == "namespace"

    nested = {"enable": True, "config": {"min_snapshot_to_keep": 2}}
    _attach(client, EXPIRY, securable_body("namespace", "test", ("db", "sub")), nested)
    assert _effective(client)[EXPIRY]["content"] == nested  # the deeper namespace is nearer
    own = {"enable": True, "version": "2025-02-03", "config": {"max_snapshot_age_days": 1}}
    _attach(client, EXPIRY, securable_body("table", "test", ("db", "sub"), "t"), own)
    assert _effective(client)[EXPIRY]["content"] == own
    assert _effective(client)[EXPIRY]["inherited-from"] == "table"

    listed = client.get(f"{M}/maintenance/policies?type=namespace&warehouse=test&namespace=db")
    assert sorted(p["policy-type"] for p in listed.json()["policies"]) == sorted([EXPIRY, ORPHANS])

    for securable in (
        securable_body("table", "test", ("db", "sub"), "t"),
        securable_body("namespace", "test", ("db", "sub")),
    ):
        body = {"policy-type": EXPIRY, "securable": securable}
        assert client.post(f"{M}/maintenance/policies/detach", json=body).status_code == 204
    assert _effective(client)[EXPIRY]["content"] == {"enable": False}
    body = {"policy-type": EXPIRY, "securable": securable_body("table", "test", ("db", "sub"), "t")}
    assert client.post(f"{M}/maintenance/policies/detach", json=body).status_code == 404


def test_table_properties_are_a_table_level_expiry_policy(client, table):
    _attach(client, EXPIRY, {"type": "catalog"}, {"enable": False})
    update = {"action": "set-properties", "updates": {"history.expire.max-snapshot-age-ms": "60000"}}
    response = client.post("/v1/test/namespaces/db%1Fsub/tables/t", json={"requirements": [], "updates": [update]})
    assert response.status_code == 200, response.text
    effective = _effective(client)[EXPIRY]
    assert effective["inherited-from"] == "table-properties"
    assert effective["content"] == {"enable": True, "config": {"max_snapshot_age_ms": 60000}}
    # a policy attached to the table itself still wins over its properties
    _attach(client, EXPIRY, securable_body("table", "test", ("db", "sub"), "t"), {"enable": False})
    assert _effective(client)[EXPIRY]["inherited-from"] == "table"


@pytest.mark.parametrize(
    "policy_type, content",
    [
        (EXPIRY, {}),  # enable is required
        (EXPIRY, {"enable": True, "config": {"min_snapshot_to_keep": 0}}),
        (EXPIRY, {"enable": True, "version": "2024-01-01"}),
        (EXPIRY, {"enable": True, "older_than": 5}),  # an orphan-removal field
        (ORPHANS, {"enable": True, "config": {"min_file_age_days": 0}}),  # below the 1-day floor
        (ORPHANS, {"enable": True, "older_than": "yesterday"}),
        ("system.data-compaction", {"enable": True, "target_file_size_bytes": 1}),
    ],
)
def test_invalid_content_is_refused_and_nothing_written(client, table, db, policy_type, content):
    response = _attach(client, policy_type, {"type": "catalog"}, content, status=400)
    assert response.json()["error"]["type"] == "BadRequestException"
    assert db.execute("SELECT count(*) FROM maintenance_policy").fetchone()[0] == 0


def test_unknown_targets_are_404_and_views_400(client, table):
    _attach(client, EXPIRY, securable_body("namespace", "test", ("nope",)), {"enable": True}, status=404)
    _attach(
        client,
        EXPIRY,
        {"type": "view", "warehouse": "test", "namespace": ["db"], "name": "v"},
        {"enable": True},
        status=400,
    )
    assert client.get(f"{M}/maintenance/warehouses/test/namespaces/db/tables/nope/health").status_code == 404


def test_manage_maintenance_decides_who_attaches_and_runs(client, table, principals):
    caller = principals.new("maint")
    securable = securable_body("namespace", "test", ("db",))
    body = {"policy-type": EXPIRY, "securable": securable, "content": {"enable": True}}
    response = caller.client.put(f"{M}/maintenance/policies", json=body)
    assert response.status_code == 403 and "manage-maintenance" in response.json()["error"]["message"]
    assert caller.client.get(f"{TABLE}/health").status_code == 403

    principals.grant(caller, "read", "namespace", "test", ("db",))
    assert caller.client.get(f"{TABLE}/health").status_code == 200  # a reader sees the report ...
    run = {"policy-type": EXPIRY, "dry-run": True}
    assert caller.client.post(f"{TABLE}/runs", json=run).status_code == 403  # ... and runs nothing
    assert caller.client.put(f"{M}/maintenance/policies", json=body).status_code == 403

    principals.grant(caller, "manage-maintenance", "namespace", "test", ("db",))
    assert caller.client.put(f"{M}/maintenance/policies", json=body).status_code == 200
    assert caller.client.post(f"{TABLE}/runs", json=run).status_code == 202
    # held on the namespace only: not on the warehouse above it
    above = {**body, "securable": securable_body("warehouse", "test")}
    assert caller.client.put(f"{M}/maintenance/policies", json=above).status_code == 403


def test_health_and_runs_of_an_empty_table(client, table):
    response = client.get(f"{TABLE}/health")
    assert response.status_code == 200, response.text
    health = response.json()
    assert health["snapshots"] == {"count": 0, "oldest-age-ms": None, "newest-age-ms": None, "expirable": 0}
    assert health["data-files"] == 0 and health["partitions"] == [] and health["last-runs"] == []
    assert set(health["recommendations"]) == {EXPIRY, ORPHANS, "system.metadata-compaction", "system.data-compaction"}

    # without a policy a run is recorded as skipped, and listed
    run = finished_run(client, f"{TABLE}/runs", {"policy-type": EXPIRY})
    assert run["status"] == "skipped" and run["trigger"] == "request" and run["files-removed"] == 0
    _attach(client, "system.data-compaction", {"type": "catalog"}, {"enable": True})
    compaction = finished_run(client, f"{TABLE}/runs", {"policy-type": "system.data-compaction"})
    assert compaction["status"] == "succeeded" and compaction["outcome"]["reason"] == "nothing to compact"
    runs = [r for r in client.get(f"{TABLE}/runs").json()["runs"] if r["trigger"] == "request"]
    assert [r["id"] for r in runs] == [compaction["id"], run["id"]]  # (the schedule may have run it too)


def test_the_schedule_runs_enabled_policies_once_per_interval(client, table, app, db):
    service = services_of(app.app).maintenance
    service.run_due()  # whatever an earlier test left due
    _attach(client, ORPHANS, securable_body("table", "test", ("db", "sub"), "t"), {"enable": True})
    service.run_due()  # (or the app's own housekeeping thread, if it came first: the same step)
    (queued,) = client.get(f"{TABLE}/runs").json()["runs"]  # a job, run by a job runner
    wait_finished(client, f"{TABLE}/runs/{queued['id']}")
    runs = client.get(f"{TABLE}/runs").json()["runs"]
    assert [(r["policy-type"], r["trigger"], r["status"]) for r in runs] == [(ORPHANS, "schedule", "succeeded")]
    assert runs[0]["files-removed"] == 0  # a fresh table has nothing older than the floor
    due_in = db.execute("SELECT extract(epoch FROM next_due_at - now()) FROM maintenance_lease").fetchone()[0]
    assert 3500 < due_in <= 3600
    service.run_due()  # not due again for an hour
    assert len(client.get(f"{TABLE}/runs").json()["runs"]) == 1


def test_a_data_compaction_policy_with_a_config_that_cannot_run_is_refused(client, table):
    catalog = {"type": "catalog"}
    for config, key in (
        ({"strategy": "shuffle"}, "strategy"),
        ({"strategy": "z-order"}, "z-order-columns"),
        ({"min-input-files": 0}, "min-input-files"),
        ({"spark.executor-memory": "lots"}, "spark.executor-memory"),
    ):
        response = _attach(client, "system.data-compaction", catalog, {"enable": True, "config": config}, 400)
        assert key in response.json()["error"]["message"], response.text
    good = {"strategy": "sort", "sort-order": "id DESC", "min-input-files": 5, "spark.executor-memory": "2g"}
    _attach(client, "system.data-compaction", catalog, {"enable": True, "config": good})
