"""Server-side scan planning against a running gunicorn: asynchronous plans (submitted, polled elsewhere,
paginated, cancelled, expired, failed, bounded), equality deletes, the manifest cache, idempotent plans."""

from __future__ import annotations

import threading
import time

import httpx
import psycopg
import pyarrow as pa
import pytest
from pyiceberg.expressions import (
    NotEqualTo,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.table.snapshots import Operation
from pyiceberg.types import LongType

from app.composition.services import services_of
from app.planning.service import PlanningConfig
from tests.integration.scan_planning.scan_planning_support import (
    NS,
    SCHEMA,
    SPEC,
    TABLE,
    AddDeleteFiles,
    batch,
    client_catalog,
)

# -- asynchronous plans: submitted here (the in-process app), polled by gunicorn's workers ---


@pytest.fixture
def async_planning(app):
    service = services_of(app.app).planning
    original = service.config
    service.config = PlanningConfig(async_min_files=1, page_size=4, lifetime_s=600)
    yield service
    service.config = original


def test_submitted_then_completed_on_another_process_with_paginated_tasks(server, table, app, async_planning):
    client = app.test_client()
    path = f"/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    submitted = client.post(path, json={"filter": {"type": "not-eq", "term": "category", "value": "c"}})
    assert submitted.status_code == 200, submitted.text
    assert submitted.json()["status"] == "submitted"
    plan_id = submitted.json()["plan-id"]

    deadline = time.monotonic() + 30
    while True:  # polled on gunicorn's workers: another process than the one planning
        result = httpx.get(f"{server.url}{path}/{plan_id}").json()
        if result["status"] != "submitted" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert result["status"] == "completed", result
    assert "plan-id" not in result

    files = [t["data-file"]["file-path"] for t in result["file-scan-tasks"]]
    assert len(files) == 4 and result["plan-tasks"]
    pending = list(result["plan-tasks"])
    while pending:
        page = httpx.post(
            f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/tasks",
            json={"plan-task": pending.pop(0)},
        )
        assert page.status_code == 200, page.text
        assert len(page.json()["file-scan-tasks"]) <= 4
        files += [t["data-file"]["file-path"] for t in page.json()["file-scan-tasks"]]
        pending += page.json().get("plan-tasks", [])
    assert len(files) == len(set(files))
    assert set(files) == {t.file.file_path for t in table.scan(row_filter=NotEqualTo("category", "c")).plan_files()}

    # cancelling a completed plan forgets its tasks
    assert httpx.delete(f"{server.url}{path}/{plan_id}").status_code == 204
    assert httpx.get(f"{server.url}{path}/{plan_id}").json() == {"status": "cancelled"}
    gone = httpx.post(
        f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/tasks",
        json={"plan-task": result["plan-tasks"][0]},
    )
    assert gone.status_code == 404 and gone.json()["error"]["type"] == "NoSuchPlanTaskException"


def test_cancel_stops_a_running_plan(server, table, app, async_planning, services):
    """The planning thread is held inside its first manifest read; another process cancels."""
    entered, release = threading.Event(), threading.Event()
    reader = async_planning.reader
    original_entries = reader.entries

    def held_entries(manifest, roots):
        entered.set()
        assert release.wait(30)
        return original_entries(manifest, roots)

    reader.entries = held_entries
    try:
        client = app.test_client()
        path = f"/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
        plan_id = client.post(path, json={}).json()["plan-id"]
        assert entered.wait(30)
        assert httpx.get(f"{server.url}{path}/{plan_id}").json() == {"status": "submitted"}
        assert httpx.delete(f"{server.url}{path}/{plan_id}").status_code == 204
    finally:
        release.set()
        reader.entries = original_entries
    deadline = time.monotonic() + 30
    while async_planning._running and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not async_planning._running
    assert httpx.get(f"{server.url}{path}/{plan_id}").json() == {"status": "cancelled"}
    with psycopg.connect(services.database_url, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM scan_plan_page WHERE plan_id = %s", (plan_id,)).fetchone()[0] == 0


def test_expired_plan_is_unknown(server, table, services):
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    plan_id = httpx.post(url, json={}).json()["plan-id"]
    assert httpx.get(f"{url}/{plan_id}").json()["status"] == "completed"
    with psycopg.connect(services.database_url, autocommit=True) as conn:
        conn.execute("UPDATE scan_plan SET expires_at = now() - interval '1 second' WHERE id = %s", (plan_id,))
    answer = httpx.get(f"{url}/{plan_id}")
    assert answer.status_code == 404 and answer.json()["error"]["type"] == "NoSuchPlanIdException"


def test_plan_id_of_another_table_is_unknown(server, table):
    catalog = client_catalog(server)
    other = catalog.create_table((NS, "other"), schema=SCHEMA)
    base = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables"
    plan_id = httpx.post(f"{base}/{TABLE}/plan", json={}).json()["plan-id"]
    answer = httpx.get(f"{base}/other/plan/{plan_id}")
    assert answer.status_code == 404 and answer.json()["error"]["type"] == "NoSuchPlanIdException"
    empty = httpx.post(f"{base}/other/plan", json={}).json()
    assert empty["status"] == "completed" and empty["file-scan-tasks"] == []
    catalog.drop_table((NS, "other"))
    assert other.metadata is not None


def test_equality_deletes_apply_to_older_data_files_of_their_partition(server, table):
    """PyIceberg plans no equality deletes (it refuses them), so the rule is checked directly:
    an equality delete applies to data files of its partition with a smaller sequence number."""
    import pyarrow.parquet as pq

    catalog = client_catalog(server)
    eq_table = catalog.create_table((NS, "eq_deletes"), schema=SCHEMA, partition_spec=SPEC)
    eq_table.append(batch(range(0, 9)))
    older = {t.file.file_path: t.file for t in eq_table.scan().plan_files()}
    target = next(iter(sorted(older.values(), key=lambda f: f.file_path)))

    location = f"{eq_table.location()}/data/eq-deletes-{time.monotonic_ns()}.parquet"
    rows = pa.Table.from_pylist(
        [{"id": 3}], schema=pa.schema([pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1"})])
    )
    with eq_table.io.new_output(location).create() as stream:
        pq.write_table(rows, stream)
    delete_file = DataFile.from_args(
        content=DataFileContent.EQUALITY_DELETES,
        file_path=location,
        file_format=FileFormat.PARQUET,
        partition=target.partition,
        record_count=1,
        file_size_in_bytes=len(eq_table.io.new_input(location)),
        equality_ids=[1],
        spec_id=target.spec_id,
    )
    with eq_table.transaction() as transaction:
        with AddDeleteFiles(Operation.OVERWRITE, transaction, eq_table.io) as producer:
            producer.append_data_file(delete_file)
    eq_table = catalog.load_table((NS, "eq_deletes"))
    eq_table.append(batch(range(0, 9)))  # newer files in the same partitions: the delete is older

    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/eq_deletes/plan"
    answer = httpx.post(url, json={})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    (delete,) = body["delete-files"]
    assert delete["content"] == "equality-deletes" and delete["equality-ids"] == [1]
    assert delete["file-path"] == location and delete["partition"][0] == target.partition[0]
    referencing = {t["data-file"]["file-path"] for t in body["file-scan-tasks"] if t.get("delete-file-references")}
    assert referencing == {target.file_path}
    assert len(body["file-scan-tasks"]) == 2 * len(older)
    catalog.drop_table((NS, "eq_deletes"))


def test_manifests_are_read_once_then_served_from_the_cache(server, table, app):
    client = app.test_client()
    path = f"/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    reader = services_of(app.app).planning.reader
    first = client.post(path, json={"filter": {"type": "eq", "term": "category", "value": "b"}})
    assert first.status_code == 200
    reads = reader.reads
    second = client.post(path, json={"filter": {"type": "eq", "term": "category", "value": "b"}})
    assert reader.reads == reads
    assert [t["data-file"] for t in second.json()["file-scan-tasks"]] == [
        t["data-file"] for t in first.json()["file-scan-tasks"]
    ]


def test_idempotent_plan_replays_with_fresh_credentials(server, table):
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    headers = {
        "Idempotency-Key": "0190f4a1-7c2b-7d3e-9f00-0123456789ab",
        "X-Iceberg-Access-Delegation": "vended-credentials",
    }
    first = httpx.post(url, json={}, headers=headers)
    again = httpx.post(url, json={}, headers=headers)
    assert first.status_code == again.status_code == 200, again.text
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json()["plan-id"] == first.json()["plan-id"]
    # the kept answer holds no secret: the replay vends fresh credentials for the same prefix
    (kept,), (fresh,) = first.json()["storage-credentials"], again.json()["storage-credentials"]
    assert fresh["prefix"] == kept["prefix"]
    assert fresh["config"]["s3.access-key-id"] != kept["config"]["s3.access-key-id"]


def test_submitted_plan_of_a_dead_worker_is_reported_failed(server, table, services):
    """A submitted plan nobody works on any more (its worker died) does not stay submitted forever."""
    import uuid

    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    live_id, dead_id = str(uuid.uuid4()), str(uuid.uuid4())
    with psycopg.connect(services.database_url, autocommit=True) as conn:
        (entry_id,) = conn.execute("SELECT id FROM catalog_entry WHERE name = %s", (TABLE,)).fetchone()
        for plan_id, age in ((live_id, "1 second"), (dead_id, "5 minutes")):
            conn.execute(
                "INSERT INTO scan_plan (id, entry_id, status, heartbeat_at, expires_at)"
                " VALUES (%s, %s, 'submitted', now() - %s::interval, now() + interval '1 hour')",
                (plan_id, entry_id, age),
            )
    assert httpx.get(f"{url}/{live_id}").json() == {"status": "submitted"}
    # a 200 FailedPlanningResult, status and error, as Java's and PyIceberg's clients read it (app/planning/service.py)
    for _ in range(2):
        failed = httpx.get(f"{url}/{dead_id}")
        assert failed.status_code == 200, failed.text
        assert failed.json()["status"] == "failed"
        assert failed.json()["error"]["type"] == "ServiceUnavailableException"
        assert failed.json()["error"]["code"] == 503
        assert "interrupted" in failed.json()["error"]["message"]


def test_background_failure_is_a_failed_plan_with_its_error(server, table, app, async_planning):
    from app.ground.errors import ServiceUnavailable

    reader = async_planning.reader
    original_entries = reader.entries

    def failing_entries(manifest, io):
        raise ServiceUnavailable("Object storage unreachable: read s3://...")

    reader.entries = failing_entries
    try:
        path = f"/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
        plan_id = app.test_client().post(path, json={}).json()["plan-id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            answer = httpx.get(f"{server.url}{path}/{plan_id}")
            assert answer.status_code == 200, answer.text
            if answer.json() != {"status": "submitted"}:
                break
            time.sleep(0.05)
    finally:
        reader.entries = original_entries
    assert answer.json() == {
        "status": "failed",
        "error": {
            "message": "Object storage unreachable: read s3://...",
            "type": "ServiceUnavailableException",
            "code": 503,
        },
    }
    # PyIceberg reads it as its PlanFailed
    from pydantic import TypeAdapter
    from pyiceberg.catalog.rest.scan_planning import PlanFailed, PlanningResponse

    parsed = TypeAdapter(PlanningResponse).validate_python(answer.json())
    assert isinstance(parsed, PlanFailed) and parsed.error.type == "ServiceUnavailableException"


def test_thousands_of_files_submitted_polled_elsewhere_paginated(server, table, app):
    """3,000 data files (manifest entries; planning never opens data files) under the default
    settings: submitted, completed on a poll answered by another process, 500 tasks a page."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.typedef import Record

    catalog = client_catalog(server)
    big = catalog.create_table((NS, "big"), schema=SCHEMA, partition_spec=SPEC)
    count = 3000
    with big.transaction() as transaction:
        with transaction.update_snapshot().fast_append() as append:
            for i in range(count):
                append.append_data_file(
                    DataFile.from_args(
                        content=DataFileContent.DATA,
                        file_path=f"{big.location()}/data/f-{i:05d}.parquet",
                        file_format=FileFormat.PARQUET,
                        partition=Record("abc"[i % 3], 19723 + i % 3),
                        record_count=10,
                        file_size_in_bytes=1000,
                        lower_bounds={1: to_bytes(LongType(), i * 10)},
                        upper_bounds={1: to_bytes(LongType(), i * 10 + 9)},
                        spec_id=0,
                    )
                )
    assert PlanningConfig().async_min_files <= count
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/big"
    submitted = httpx.post(f"{url}/plan", json={"filter": {"type": "not-eq", "term": "category", "value": "c"}})
    assert submitted.status_code == 200 and submitted.json()["status"] == "submitted", submitted.text
    plan_id = submitted.json()["plan-id"]

    client = app.test_client()  # this process: not the gunicorn worker that plans
    path = f"/v1/{server.warehouse}/namespaces/{NS}/tables/big/plan/{plan_id}"
    deadline = time.monotonic() + 600  # a hang guard: planning 2,000 files may be slow on a busy machine
    while (result := client.get(path).json())["status"] == "submitted" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert result["status"] == "completed", result
    files = [t["data-file"]["file-path"] for t in result["file-scan-tasks"]]
    assert len(files) == PlanningConfig().page_size
    for plan_task in result["plan-tasks"]:
        page = client.post(f"/v1/{server.warehouse}/namespaces/{NS}/tables/big/tasks", json={"plan-task": plan_task})
        assert page.status_code == 200
        files += [t["data-file"]["file-path"] for t in page.json()["file-scan-tasks"]]
    assert len(files) == len(set(files)) == 2000
    assert set(files) == {t.file.file_path for t in big.scan(row_filter=NotEqualTo("category", "c")).plan_files()}

    # the size estimate is the snapshot summary's, before any pruning: a selective filter on the
    # same table is submitted too; cancelling it is how a client lets it go
    narrow = httpx.post(f"{url}/plan", json={"filter": {"type": "lt", "term": "id", "value": 25}})
    assert narrow.json()["status"] == "submitted"
    assert (
        client.delete(f"/v1/{server.warehouse}/namespaces/{NS}/tables/big/plan/{narrow.json()['plan-id']}").status_code
        == 204
    )
    catalog.drop_table((NS, "big"))


def test_background_planning_is_bounded(server, table, app, async_planning):
    """With every planning thread held, a worker queues a bounded number of plans, then says 503."""
    from app.planning.service import MAX_QUEUED_PER_THREAD

    async_planning.config = PlanningConfig(async_min_files=1, page_size=4, threads=1)
    limit = MAX_QUEUED_PER_THREAD
    release = threading.Event()
    reader = async_planning.reader
    original_entries = reader.entries

    def held_entries(manifest, roots):
        assert release.wait(30)
        return original_entries(manifest, roots)

    reader.entries = held_entries
    client = app.test_client()
    path = f"/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    plan_ids = []
    try:
        for _ in range(limit):
            answer = client.post(path, json={})
            assert answer.status_code == 200 and answer.json()["status"] == "submitted", answer.text
            plan_ids.append(answer.json()["plan-id"])
        refused = client.post(path, json={})
        assert refused.status_code == 503, refused.text
        assert refused.headers["Retry-After"] == "1"
        assert refused.json()["error"]["type"] == "ServiceUnavailableException"
        for plan_id in plan_ids:  # the queued ones are answered (and cancelled) like any other
            assert httpx.get(f"{server.url}{path}/{plan_id}").json() == {"status": "submitted"}
            assert httpx.delete(f"{server.url}{path}/{plan_id}").status_code == 204
    finally:
        release.set()
        reader.entries = original_entries
    deadline = time.monotonic() + 30
    while (async_planning._running or async_planning._queued) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not async_planning._running and not async_planning._queued
    assert all(httpx.get(f"{server.url}{path}/{p}").json() == {"status": "cancelled"} for p in plan_ids)
