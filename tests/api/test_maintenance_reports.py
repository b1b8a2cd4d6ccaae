"""A Spark job's reports of its run (reportMaintenanceRun, issue 49): the channel of a job whose
driver runs on the cluster (cluster deploy mode, app/maintenance/spark.py), where Growler reads
nothing the driver prints. A report is taken only from the job's principal (write on the table)
with the token issued for that run; a refusal writes nothing; a run no longer running answers 409;
a cancel or a protection mark answers ``stop``. The real job's use of it runs on a real cluster in
tests/integration/test_maintenance_cluster_mode.py."""

from __future__ import annotations

import pytest

from app.composition.services import services_of
from app.maintenance.spark import report_token_hash
from tests.api.bin_support import protect
from tests.api.maintenance_jobs_support import only_this_apps_runner
from tests.api.tables_support import create_request

M = "/management/v1"
TOKEN = "run-token-" + "a" * 30
PROGRESS = {"file-groups-done": 1, "file-groups-total": 4, "bytes-done": 100, "bytes-total": 400}


@pytest.fixture
def running(app, client):
    """A data compaction run of db.t, running (as a runner records it), with a report token issued."""
    assert client.post("/v1/test/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert client.post("/v1/test/namespaces/db/tables", json=create_request("t")).status_code == 200
    service = services_of(app.app).maintenance
    only_this_apps_runner(service)
    table = service.maintenance.table("test", ("db",), "t")
    run_id = service.maintenance.start_run(table.entry_id, "system.data-compaction", "request", False, "a-runner")
    service.jobs.issue_report_token(run_id, report_token_hash(TOKEN))
    return service, table, f"{M}/maintenance/warehouses/test/namespaces/db/tables/t/runs/{run_id}"


def report(client, url: str, body: dict, token: str = TOKEN):
    return client.post(f"{url}/report", json=body, headers={"X-Growler-Run-Token": token})


def test_the_jobs_progress_and_result_reach_the_run_with_its_token_only(client, principals, running):
    service, table, url = running
    answer = report(client, url, {"progress": PROGRESS})
    assert answer.status_code == 200 and answer.json() == {"stop": False}, answer.text
    assert client.get(url).json()["progress"] == PROGRESS

    # another token, or none: refused, and nothing written
    wrong = report(client, url, {"progress": {**PROGRESS, "file-groups-done": 4}}, token="b" * 40)
    assert wrong.status_code == 403 and "report token" in wrong.json()["error"]["message"], wrong.text
    missing = client.post(f"{url}/report", json={"progress": PROGRESS})
    assert missing.status_code == 400, missing.text
    # a principal who may not write the table: refused before its token is looked at
    reader = principals.new("reader")
    principals.grant(reader, "read", "table", "test", ("db",), "t")
    denied = report(reader.client, url, {"result": {"rewritten_data_files_count": 9}})
    assert denied.status_code == 403 and "write" in denied.json()["error"]["message"], denied.text
    assert client.get(url).json()["progress"] == PROGRESS
    run_id = int(url.rsplit("/", 1)[1])
    assert service.jobs.job_result(run_id) is None

    # a token issued again (the job submitted anew) retires the first
    service.jobs.issue_report_token(run_id, report_token_hash("second-" + "c" * 30))
    assert report(client, url, {"progress": PROGRESS}).status_code == 403
    assert report(client, url, {"result": {"rewritten_data_files_count": 9}}, token="second-" + "c" * 30).json() == {
        "stop": False
    }
    assert service.jobs.job_result(run_id) == {"result": {"rewritten_data_files_count": 9}}

    # bad bodies: the contract's 400, nothing written
    for body in ({}, {"progress": {"file-groups-done": "x"}}, {"error": "e" * 2001}, {"other": 1}):
        bad = report(client, url, body, token="second-" + "c" * 30)
        assert bad.status_code == 400, (body, bad.text)
    assert service.jobs.job_result(run_id) == {"result": {"rewritten_data_files_count": 9}}


def test_a_cancel_or_a_protection_mark_answers_stop_and_an_ended_run_409(client, running):
    service, _table, url = running
    assert client.post(f"{url}/cancel").status_code == 200
    assert report(client, url, {"progress": PROGRESS}).json() == {"stop": True}
    run_id = int(url.rsplit("/", 1)[1])
    service.maintenance.finish_run(run_id, "cancelled", {}, {}, 0, None, "a-runner")
    ended = report(client, url, {"progress": PROGRESS})
    assert ended.status_code == 409 and "no longer running" in ended.json()["error"]["message"], ended.text
    assert report(client, f"{url.rsplit('/', 1)[0]}/{run_id + 1000}", {"progress": PROGRESS}).status_code == 404


def test_a_protection_mark_on_the_table_answers_stop(client, running):
    _service, _table, url = running
    assert report(client, url, {"progress": PROGRESS}).json() == {"stop": False}
    assert protect(client, "table", ["db"], "t").status_code in (200, 201, 204)
    assert report(client, url, {"progress": PROGRESS}).json() == {"stop": True}


def test_a_dropped_tables_run_refuses_the_jobs_report(client, running):
    """A drop (into the recycle bin, the default) ends the table's runs as far as a job is told:
    the report is refused (404) and the job stops before its next commit; nothing is written."""
    service, table, url = running
    assert client.delete("/v1/test/namespaces/db/tables/t").status_code == 204
    gone = report(client, url, {"progress": PROGRESS})
    assert gone.status_code == 404, gone.text
    assert service.jobs.get(table.entry_id, int(url.rsplit("/", 1)[1])).progress != PROGRESS
