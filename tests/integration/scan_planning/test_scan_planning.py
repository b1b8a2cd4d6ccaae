"""Server-side scan planning against a running gunicorn: plans equal PyIceberg's client plans (filters,
time travel, incremental appends, branches and tags), the answer's shape, bad requests, credentials."""

from __future__ import annotations

import httpx
import pytest
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    NotEqualTo,
    NotIn,
    NotNaN,
    Or,
    StartsWith,
)

from tests.integration.scan_planning.scan_planning_support import (
    BANDS,
    FILTERS,
    NS,
    SCHEMA,
    SPEC,
    TABLE,
    batch,
    client_catalog,
    planned,
    rows_of,
    server_catalog,
)


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
