"""Server-side scan planning against a running gunicorn, with a partitioned v2 table written by PyIceberg.

The oracle is PyIceberg itself: for every filter, the files Growler plans are exactly the files
PyIceberg plans on the client from the same snapshot, and reading through Growler's plan (a
PyIceberg client in ``scan-planning-mode=server``, which then reads the planned files) returns
the same rows as reading through the client's own plan.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime

import httpx
import psycopg
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestWriterV2
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.snapshots import Operation
from pyiceberg.table.update.snapshot import _FastAppendFiles
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType, TimestampType

from app.edge.context import PLANS
from app.plans import PlanningConfig
from tests.conftest import TEST_CREDENTIAL, TRUNCATE_CATALOG

NS = "planning"
TABLE = "events"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
    NestedField(4, "qty", IntegerType(), required=False),
    NestedField(5, "price", DoubleType(), required=False),
    NestedField(6, "name", StringType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"),
    PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"),
)
ARROW = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("category", pa.string()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.float64()),
        pa.field("name", pa.string()),
    ]
)
NAMES = ["alice", "albert", "bob", "carol", None]


def batch(ids: range) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "category": "abc"[i % 3],
                "ts": datetime(2024, 1, 1 + (i // 3) % 3, i % 24, 0, 0),
                "qty": None if i % 7 == 0 else i * 10,
                "price": math.nan if i % 11 == 0 else i + 0.25,
                "name": NAMES[i % len(NAMES)],
            }
            for i in ids
        ],
        schema=ARROW,
    )


# Each append holds ids of one band, so files have disjoint id ranges and metrics prune them.
BANDS = [range(0, 8), range(8, 16), range(16, 24), range(24, 32), range(32, 40), range(40, 48)]

FILTERS = [
    AlwaysTrue(),
    AlwaysFalse(),
    EqualTo("category", "a"),
    NotEqualTo("category", "a"),
    LessThan("id", 10),
    LessThanOrEqual("id", 16),
    GreaterThan("id", 40),
    GreaterThanOrEqual("qty", 300),
    EqualTo("id", 1000),
    In("category", {"a", "c"}),
    In("id", {3, 33, 45}),
    NotIn("id", {1, 2, 3}),
    IsNull("qty"),
    NotNull("qty"),
    IsNaN("price"),
    NotNaN("price"),
    StartsWith("name", "al"),
    NotStartsWith("name", "al"),
    And(EqualTo("category", "b"), GreaterThan("id", 20)),
    Or(EqualTo("category", "a"), LessThan("id", 5)),
    Not(EqualTo("category", "a")),
    GreaterThanOrEqual("ts", "2024-01-03T00:00:00"),
    And(LessThan("ts", "2024-01-02T00:00:00"), In("category", {"a", "b"})),
    Or(IsNull("name"), GreaterThan("price", 40.0)),
    And(Not(In("category", {"a"})), LessThanOrEqual("price", 12.5)),
]


def client_catalog(server) -> RestCatalog:
    return RestCatalog("client", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)


def server_catalog(server) -> RestCatalog:
    return RestCatalog(
        "server",
        uri=server.url,
        warehouse=server.warehouse,
        credential=TEST_CREDENTIAL,
        **{"scan-planning-mode": "server"},
    )


@pytest.fixture(scope="module")
def table(server, app, services):
    with psycopg.connect(services.database_url, autocommit=True) as conn:
        conn.execute(TRUNCATE_CATALOG)
    catalog = client_catalog(server)
    catalog.create_namespace(NS)
    created = catalog.create_table((NS, TABLE), schema=SCHEMA, partition_spec=SPEC)
    for band in BANDS:
        created.append(batch(band))
    created.delete(EqualTo("id", 5))  # copy-on-write: a data file replaced, an overwrite snapshot
    # merge-on-read deletes: rows 0 and 1 of two data files of the second append
    files = sorted((t.file for t in created.scan(row_filter=In("id", {9, 10})).plan_files()), key=lambda f: f.file_path)
    assert len(files) == 2
    add_position_deletes(created, [(files[0], [0]), (files[1], [0])])
    return catalog.load_table((NS, TABLE))


class _DeleteManifestWriter(ManifestWriterV2):
    """PyIceberg writes no delete files; its v2 manifest writer, labelled as a delete manifest, does."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}


class _AddDeleteFiles(_FastAppendFiles):
    def new_manifest_writer(self, spec):
        return _DeleteManifestWriter(
            spec, self.schema(), self.new_manifest_output(), self._snapshot_id, self._compression
        )


POS_FILE_PATH_ID, POS_POS_ID = 2147483546, 2147483545


def add_position_deletes(table, targets: list[tuple[DataFile, list[int]]]) -> list[str]:
    """Commit one position delete file per (data file, positions): a merge-on-read delete as Spark writes it."""
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={"PARQUET:field_id": str(POS_FILE_PATH_ID)}),
            pa.field("pos", pa.int64(), nullable=False, metadata={"PARQUET:field_id": str(POS_POS_ID)}),
        ]
    )
    written = []
    delete_files = []
    for number, (data_file, positions) in enumerate(targets):
        location = f"{table.location()}/data/pos-deletes-{number}-{time.monotonic_ns()}.parquet"
        rows = pa.Table.from_pylist([{"file_path": data_file.file_path, "pos": p} for p in positions], schema=schema)
        with table.io.new_output(location).create() as stream:
            pq.write_table(rows, stream)
        delete_files.append(
            DataFile.from_args(
                content=DataFileContent.POSITION_DELETES,
                file_path=location,
                file_format=FileFormat.PARQUET,
                partition=data_file.partition,
                record_count=len(positions),
                file_size_in_bytes=len(table.io.new_input(location)),
                spec_id=data_file.spec_id,
            )
        )
        written.append(location)
    with table.transaction() as transaction:
        with _AddDeleteFiles(Operation.OVERWRITE, transaction, table.io) as producer:
            for delete_file in delete_files:
                producer.append_data_file(delete_file)
    return written


def planned(tasks) -> set[tuple[str, frozenset[str]]]:
    return {(t.file.file_path, frozenset(d.file_path for d in t.delete_files)) for t in tasks}


def rows_of(arrow: pa.Table) -> list[dict]:
    """Rows by id, NaN spelled out (NaN != NaN would fail equal rows)."""
    rows = [
        {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()} for row in arrow.to_pylist()
    ]
    return sorted(rows, key=lambda r: r["id"])


def test_server_advertises_the_planning_endpoints(server):
    endpoints = httpx.get(f"{server.url}/v1/config", params={"warehouse": server.warehouse}).json()["endpoints"]
    for endpoint in (
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan",
        "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}/plan/{plan-id}",
        "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/tasks",
    ):
        assert endpoint in endpoints


@pytest.mark.parametrize("row_filter", FILTERS, ids=[str(i) for i in range(len(FILTERS))])
def test_server_plan_equals_client_plan_and_reads_the_same_rows(server, table, row_filter):
    remote = server_catalog(server).load_table((NS, TABLE))
    assert remote.scan()._should_use_server_side_planning()

    local_tasks = list(table.scan(row_filter=row_filter).plan_files())
    remote_tasks = list(remote.scan(row_filter=row_filter).plan_files())
    assert planned(remote_tasks) == planned(local_tasks)
    assert len(remote_tasks) == len(local_tasks)

    expected = rows_of(table.scan(row_filter=row_filter).to_arrow())
    assert rows_of(remote.scan(row_filter=row_filter).to_arrow()) == expected


def test_filters_prune_files(server, table):
    """The comparison above is not trivially "all files": the filters do prune, deletes apply."""
    everything = planned(table.scan().plan_files())
    # partition-scoped position deletes: every older data file of their partitions gets them
    with_deletes = {path for path, deletes in everything if deletes}
    targets = {t.file.file_path for t in table.scan(row_filter=In("id", {9, 10})).plan_files()}
    assert targets <= with_deletes and len(with_deletes) < len(everything)
    assert table.scan().to_arrow().num_rows == sum(len(b) for b in BANDS) - 1 - 2
    assert len(everything) > 20
    assert len(planned(table.scan(row_filter=EqualTo("category", "a")).plan_files())) < len(everything)
    assert len(planned(table.scan(row_filter=GreaterThan("id", 40)).plan_files())) < len(everything) / 3
    assert planned(table.scan(row_filter=EqualTo("id", 1000)).plan_files()) == set()


def test_time_travel_and_incremental_append_plans(server, table):
    snapshots = table.snapshots()
    appends = [s for s in snapshots if s.summary.operation.value == "append"]
    first, third = appends[0], appends[2]
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"

    answer = httpx.post(url, json={"snapshot-id": first.snapshot_id}).json()
    assert answer["status"] == "completed"
    expected = {t.file.file_path for t in table.scan(snapshot_id=first.snapshot_id).plan_files()}
    assert {t["data-file"]["file-path"] for t in answer["file-scan-tasks"]} == expected

    incremental = httpx.post(
        url,
        json={
            "start-snapshot-id": first.snapshot_id,
            "end-snapshot-id": third.snapshot_id,
            "filter": {"type": "not-eq", "term": "category", "value": "b"},
        },
    ).json()
    oracle = table.incremental_append_scan(
        from_snapshot_id_exclusive=first.snapshot_id,
        to_snapshot_id_inclusive=third.snapshot_id,
        row_filter=NotEqualTo("category", "b"),
    )
    got = {t["data-file"]["file-path"] for t in incremental["file-scan-tasks"]}
    assert got == {t.file.file_path for t in oracle.plan_files()}
    # exactly the files the second and third appends added, less category b's
    added = {t.file.file_path for t in table.scan(snapshot_id=third.snapshot_id).plan_files()} - expected
    assert got and got < added
    assert all(t["data-file"]["partition"][0] != "b" for t in incremental["file-scan-tasks"])


def test_answer_shape_partition_values_residuals_and_stats(server, table):
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    answer = httpx.post(
        url,
        json={
            "filter": {
                "type": "and",
                "left": {"type": "eq", "term": "category", "value": "a"},
                "right": {"type": "lt", "term": "id", "value": 10},
            },
            "stats-fields": ["id"],
            "select": ["id", "name"],
        },
    ).json()
    assert answer["status"] == "completed" and answer["plan-id"]
    tasks = answer["file-scan-tasks"]
    assert tasks
    for task in tasks:
        data_file = task["data-file"]
        assert data_file["content"] == "data" and data_file["file-format"] == "parquet"
        category, day = data_file["partition"]
        assert category == "a" and day in ("2024-01-01", "2024-01-02", "2024-01-03")
        # the identity partition decides category = 'a'; what is left is the id predicate
        assert task["residual-filter"] == {"type": "lt", "term": "id", "value": 10}
        assert data_file["lower-bounds"]["keys"] == [1] and data_file["value-counts"]["keys"] == [1]
        assert isinstance(data_file["lower-bounds"]["values"][0], str)  # binary single value: hex
        assert int.from_bytes(bytes.fromhex(data_file["lower-bounds"]["values"][0]), "little") < 10
    # without stats-fields, no column statistics
    plain = httpx.post(url, json={"filter": {"type": "eq", "term": "category", "value": "a"}}).json()
    assert all("lower-bounds" not in t["data-file"] for t in plain["file-scan-tasks"])
    assert all(t["residual-filter"] is True for t in plain["file-scan-tasks"])


def _spec_filters():
    """The same predicates in the spec's preferred forms (left/right, child, literal objects)."""
    ref = {"type": "reference", "name": "id"}
    return [
        ({"type": "lt", "left": ref, "right": 10}, LessThan("id", 10)),
        ({"type": "gt", "left": 40, "right": ref}, LessThan("id", 40)),  # flipped: 40 > id
        ({"type": "eq", "left": {"type": "reference", "id": 2}, "right": "b"}, EqualTo("category", "b")),
        ({"type": "is-null", "child": {"type": "reference", "name": "qty"}}, IsNull("qty")),
        ({"type": "not-nan", "term": "price"}, NotNaN("price")),
        ({"type": "in", "child": ref, "values": [1, 20, {"type": "literal", "value": 30}]}, In("id", {1, 20, 30})),
        (
            {"type": "not-in", "child": ref, "values": {"type": "literals", "values": [1, 2], "data-type": "long"}},
            NotIn("id", {1, 2}),
        ),
        (
            {
                "type": "gt-eq",
                "left": {"type": "reference", "name": "ts"},
                "right": {"type": "literal", "value": "2024-01-03T00:00:00", "data-type": "timestamp"},
            },
            GreaterThanOrEqual("ts", "2024-01-03T00:00:00"),
        ),
        (
            {"type": "starts-with", "left": {"type": "reference", "name": "name"}, "right": "bo"},
            StartsWith("name", "bo"),
        ),
        ({"type": "not", "child": {"type": "true"}}, AlwaysFalse()),
        (True, AlwaysTrue()),
        ({"type": "or", "left": False, "right": {"type": "eq", "term": "ID", "value": 3}}, EqualTo("id", 3)),
    ]


@pytest.mark.parametrize("index", range(len(_spec_filters())))
def test_spec_expression_forms(server, table, index):
    raw, equivalent = _spec_filters()[index]
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    body = {"filter": raw}
    if index == len(_spec_filters()) - 1:
        body["case-sensitive"] = False
    answer = httpx.post(url, json=body)
    assert answer.status_code == 200, answer.text
    got = {t["data-file"]["file-path"] for t in answer.json()["file-scan-tasks"]}
    assert got == {t.file.file_path for t in table.scan(row_filter=equivalent).plan_files()}


@pytest.mark.parametrize(
    ("body", "status", "error_type", "words"),
    [
        ({"snapshot-id": 12345}, 400, "IllegalArgumentException", "Cannot find snapshot with ID 12345"),
        (
            {"filter": {"type": "eq", "term": "nope", "value": 1}},
            400,
            "BadRequestException",
            "cannot find field 'nope'",
        ),
        ({"filter": {"type": "eq", "term": "id", "value": "x"}}, 400, "BadRequestException", "not a valid long"),
        ({"filter": {"type": "eq", "term": "id"}}, 400, "BadRequestException", "needs 'value'"),
        ({"filter": {"type": "frobnicate", "term": "id"}}, 400, "BadRequestException", "frobnicate"),
        ({"filter": {"type": "eq", "term": "ID", "value": 1}}, 400, "BadRequestException", "cannot find field 'ID'"),
        ({"select": ["nope"]}, 400, "BadRequestException", "Invalid select"),
        ({"stats-fields": ["nope"]}, 400, "BadRequestException", "nope"),
        ({"start-snapshot-id": 1}, 400, "IllegalArgumentException", "end-snapshot-id is required"),
        ({"snapshot-id": 1, "end-snapshot-id": 2}, 400, "IllegalArgumentException", "both"),
    ],
)
def test_bad_plan_requests(server, table, body, status, error_type, words):
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    answer = httpx.post(url, json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["type"] == error_type and error["code"] == status
    assert words in error["message"]


def test_unknown_table_plan_and_task(server, table):
    base = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables"
    missing = httpx.post(f"{base}/nope/plan", json={})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException"
    for plan_id in ("not-a-uuid", "2b0c5e0e-0d1c-4a8e-9d61-4f7c2f4a1d11"):
        for method in ("GET", "DELETE"):
            answer = httpx.request(method, f"{base}/{TABLE}/plan/{plan_id}")
            assert answer.status_code == 404, answer.text
            assert answer.json()["error"]["type"] == "NoSuchPlanIdException"
    for token in ("nope", "2b0c5e0e-0d1c-4a8e-9d61-4f7c2f4a1d11:1", ""):
        answer = httpx.post(f"{base}/{TABLE}/tasks", json={"plan-task": token})
        assert answer.status_code == 404, answer.text
        assert answer.json()["error"]["type"] == "NoSuchPlanTaskException"


def test_vended_credentials_come_with_the_plan(server, table, settings):
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/{TABLE}/plan"
    plain = httpx.post(url, json={}).json()
    assert "storage-credentials" not in plain
    vended = httpx.post(url, json={}, headers={"X-Iceberg-Access-Delegation": "vended-credentials"}).json()
    (credential,) = vended["storage-credentials"]
    assert credential["prefix"] == table.location()
    assert credential["config"]["s3.access-key-id"] != settings.s3.access_key  # temporary (sts, the default)
    assert credential["config"]["s3.session-token"]


def test_load_credentials_for_a_plan(server, table, settings):
    """loadCredentials with ``planId``: the table's credentials while the plan can be read;
    an unknown, cancelled, expired or other table's plan is 404 NoSuchPlanIdException."""
    base = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables"
    plan_id = httpx.post(f"{base}/{TABLE}/plan", json={}).json()["plan-id"]
    answer = httpx.get(f"{base}/{TABLE}/credentials", params={"planId": plan_id})
    assert answer.status_code == 200, answer.text
    (credential,) = answer.json()["storage-credentials"]
    assert credential["prefix"] == table.location()
    assert credential["config"]["s3.access-key-id"] != settings.s3.access_key  # temporary (sts, the default)
    (unplanned,) = httpx.get(f"{base}/{TABLE}/credentials").json()["storage-credentials"]
    assert unplanned["prefix"] == credential["prefix"]
    # a poll asking for delegation gets credentials for the same prefix with the plan's tasks
    vended = {"X-Iceberg-Access-Delegation": "vended-credentials"}
    polled = httpx.get(f"{base}/{TABLE}/plan/{plan_id}", headers=vended).json()
    assert polled["status"] == "completed"
    assert [c["prefix"] for c in polled["storage-credentials"]] == [credential["prefix"]]
    assert "storage-credentials" not in httpx.get(f"{base}/{TABLE}/plan/{plan_id}").json()

    client_catalog(server).create_table((NS, "creds_other"), schema=SCHEMA)
    try:
        for url, params in (
            (f"{base}/{TABLE}/credentials", {"planId": "2b0c5e0e-0d1c-4a8e-9d61-4f7c2f4a1d11"}),
            (f"{base}/{TABLE}/credentials", {"planId": "not-a-plan"}),
            (f"{base}/creds_other/credentials", {"planId": plan_id}),
        ):
            refused = httpx.get(url, params=params)
            assert refused.status_code == 404, refused.text
            assert refused.json()["error"]["type"] == "NoSuchPlanIdException"
    finally:
        client_catalog(server).drop_table((NS, "creds_other"))
    assert httpx.delete(f"{base}/{TABLE}/plan/{plan_id}").status_code == 204
    cancelled = httpx.get(f"{base}/{TABLE}/credentials", params={"planId": plan_id})
    assert cancelled.status_code == 404 and cancelled.json()["error"]["type"] == "NoSuchPlanIdException"
    missing = httpx.get(f"{base}/nope/credentials", params={"planId": plan_id})
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "NoSuchTableException"


# -- asynchronous plans: submitted here (the in-process app), polled by gunicorn's workers ---


@pytest.fixture
def async_planning(app):
    service = app.app.extensions[PLANS]
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
        with _AddDeleteFiles(Operation.OVERWRITE, transaction, eq_table.io) as producer:
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
    reader = app.app.extensions[PLANS].reader
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
    # a 200 FailedPlanningResult, status and error, as Java's and PyIceberg's clients read it (app/plans.py)
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

    def failing_entries(manifest, roots):
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
    deadline = time.monotonic() + 60
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


def test_use_snapshot_schema_binds_the_filter_to_the_snapshots_schema(server, table):
    catalog = client_catalog(server)
    evolving = catalog.create_table((NS, "evolving"), schema=SCHEMA, partition_spec=SPEC)
    evolving.append(batch(range(0, 6)))
    old = evolving.current_snapshot().snapshot_id
    with evolving.update_schema() as update:
        update.rename_column("name", "label")
    renamed = batch(range(6, 12))
    evolving.append(renamed.rename_columns([*renamed.column_names[:-1], "label"]))

    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/evolving/plan"
    by_old_name = {"snapshot-id": old, "filter": {"type": "starts-with", "term": "name", "value": "al"}}
    refused = httpx.post(url, json=by_old_name)
    assert refused.status_code == 400 and "cannot find field 'name'" in refused.json()["error"]["message"]
    answer = httpx.post(url, json={**by_old_name, "use-snapshot-schema": True})
    assert answer.status_code == 200, answer.text
    expected = {
        t.file.file_path for t in evolving.scan(snapshot_id=old, row_filter=StartsWith("label", "al")).plan_files()
    }
    assert {t["data-file"]["file-path"] for t in answer.json()["file-scan-tasks"]} == expected
    assert expected
    catalog.drop_table((NS, "evolving"))


REF_FILTERS = [
    AlwaysTrue(),
    EqualTo("category", "a"),
    GreaterThan("id", 10),
    In("id", {3, 17, 20}),
    And(NotEqualTo("category", "c"), LessThan("id", 20)),
    Or(IsNull("qty"), StartsWith("name", "al")),
]


@pytest.fixture(scope="module")
def refs_table(server, table):
    """main: two appends; tag v1 at the first; branch dev from it with its own append and a
    copy-on-write delete; then a column added on main (the tag's snapshot keeps the old schema)."""
    catalog = client_catalog(server)
    created = catalog.create_table((NS, "refs"), schema=SCHEMA, partition_spec=SPEC)
    created.append(batch(range(0, 8)))
    first = created.current_snapshot().snapshot_id
    created.append(batch(range(8, 16)))
    created.manage_snapshots().create_tag(first, "v1").create_branch(first, "dev").commit()
    created.append(batch(range(16, 24)), branch="dev")
    created.delete(EqualTo("id", 17), branch="dev")
    with created.update_schema() as update:
        update.add_column("extra", LongType())
    yield catalog.load_table((NS, "refs"))
    catalog.drop_table((NS, "refs"))


@pytest.mark.parametrize("ref", ["dev", "v1", "main"])
@pytest.mark.parametrize("row_filter", REF_FILTERS, ids=[str(i) for i in range(len(REF_FILTERS))])
def test_branch_and_tag_plans_equal_client_plans(server, refs_table, ref, row_filter):
    """The spec's PlanTableScanRequest names no ref: a client scans a branch or tag by sending its
    snapshot-id (Java's RESTTableScan.useRef, PyIceberg's use_ref both do), and the server plans that
    snapshot. The server's plan equals PyIceberg's client-side plan of the ref, rows included."""
    remote = server_catalog(server).load_table((NS, "refs"))
    local_tasks = list(refs_table.scan(row_filter=row_filter).use_ref(ref).plan_files())
    remote_tasks = list(remote.scan(row_filter=row_filter).use_ref(ref).plan_files())
    assert planned(remote_tasks) == planned(local_tasks)
    expected = rows_of(refs_table.scan(row_filter=row_filter).use_ref(ref).to_arrow())
    assert rows_of(remote.scan(row_filter=row_filter).use_ref(ref).to_arrow()) == expected
    ids = {row["id"] for row in rows_of(refs_table.scan().use_ref(ref).to_arrow())}
    expected_ids = {"dev": set(range(0, 8)) | set(range(16, 24)) - {17}, "v1": set(range(8)), "main": set(range(16))}
    assert ids == expected_ids[ref]


def test_branch_scans_the_table_schema_and_tag_its_snapshots(server, refs_table):
    """``use-snapshot-schema`` is how the request tells the two apart (the spec: false when
    scanning a branch, true when time travelling): a column added after the tag binds on the
    branch's scan, and is unknown to the tag's."""
    url = f"{server.url}/v1/{server.warehouse}/namespaces/{NS}/tables/refs/plan"
    refs = refs_table.metadata.refs
    by_extra = {"type": "is-null", "term": "extra"}
    branch = httpx.post(url, json={"snapshot-id": refs["dev"].snapshot_id, "filter": by_extra})
    assert branch.status_code == 200, branch.text
    expected = {t.file.file_path for t in refs_table.scan().use_ref("dev").plan_files()}
    assert {t["data-file"]["file-path"] for t in branch.json()["file-scan-tasks"]} == expected
    tag = httpx.post(url, json={"snapshot-id": refs["v1"].snapshot_id, "use-snapshot-schema": True, "filter": by_extra})
    assert tag.status_code == 400 and "cannot find field 'extra'" in tag.json()["error"]["message"]
    by_id = {"type": "lt", "term": "id", "value": 4}
    tag = httpx.post(url, json={"snapshot-id": refs["v1"].snapshot_id, "use-snapshot-schema": True, "filter": by_id})
    assert {t["data-file"]["file-path"] for t in tag.json()["file-scan-tasks"]} == {
        t.file.file_path for t in refs_table.scan(row_filter=LessThan("id", 4)).use_ref("v1").plan_files()
    }


def test_background_planning_is_bounded(server, table, app, async_planning):
    """With every planning thread held, a worker queues a bounded number of plans, then says 503."""
    from app.plans import MAX_QUEUED_PER_THREAD

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
