"""The table operations' request models (app/rules/requests/tables.py, scans.py): what each keeps
of a body the yaml accepted, and the refusals the rules word (the same messages as before the
bodies were parsed at the edge)."""

from __future__ import annotations

import pytest
from pyiceberg.table.update import AssertCreate, SetPropertiesUpdate
from table_metadata_builders import create_request, partition_spec

from app.ground.errors import BadRequest
from app.rules.requests import parse_request
from app.rules.requests.scans import FetchScanTasksRequest, PlanTableScanRequest
from app.rules.requests.tables import (
    CommitTableRequest,
    CommitTransactionRequest,
    CreateTableRequest,
    RegisterTableRequest,
    RemoteSignRequest,
    ReportMetricsRequest,
)


def test_create_table_parts_default_and_spec_fields_without_ids_get_placeholders():
    body = {
        **create_request(),
        "partition-spec": partition_spec({"source-id": 10, "transform": "identity", "name": "i"}),
    }
    del body["write-order"], body["location"]
    request = CreateTableRequest.from_body(body)
    assert (request.name, request.location, request.stage_create) == ("events", None, False)
    assert [f.field_id for f in request.partition_spec.fields] == [-1]  # assigned when the table is made
    assert request.write_order.is_unsorted
    assert request.properties == {"owner": "analytics", "write.parquet.compression-codec": "zstd"}


@pytest.mark.parametrize(
    ("change", "wording"),
    [
        ({"schema": {"type": "struct", "fields": [{"id": 1}]}}, "Invalid schema: "),
        ({"partition-spec": {"fields": [{"source-id": 1}]}}, "Invalid partition-spec: "),
        ({"write-order": {"order-id": 1, "fields": [{"source-id": "one"}]}}, "Invalid write-order: "),
        # a bad format-version is refused first, a bad schema with it notwithstanding
        ({"properties": {"format-version": "9"}, "schema": {"type": "struct", "fields": [{}]}}, "Unsupported format"),
    ],
)
def test_create_table_refusals_name_the_part(change, wording):
    with pytest.raises(BadRequest) as info:
        CreateTableRequest.from_body({**create_request(), **change})
    assert info.value.message.startswith(wording)


def test_register_table_overwrite_is_optional_as_in_the_spec():
    body = {"name": "t", "metadata-location": "s3://b/t/metadata/v1.metadata.json"}
    assert parse_request(RegisterTableRequest, body).overwrite is False
    assert parse_request(RegisterTableRequest, {**body, "overwrite": True}).overwrite is True


def test_a_commit_keeps_what_the_client_sent_for_the_change_feed():
    updates = [{"action": "set-properties", "updates": {"a": "1"}}]
    requirements = [{"type": "assert-create"}]
    commit = CommitTableRequest.from_body({"requirements": requirements, "updates": updates})
    assert [type(r) for r in commit.requirements] == [AssertCreate] and commit.creates
    assert isinstance(commit.updates[0], SetPropertiesUpdate)
    assert (commit.sent_requirements, commit.sent_updates) == (requirements, updates)
    assert commit.identifier is None and "sent_updates" not in commit.model_dump()


@pytest.mark.parametrize(
    ("body", "wording"),
    [
        ({"requirements": [], "updates": [{"action": "nope"}]}, "Invalid table update #0 (nope): "),
        (
            {"requirements": [{"type": "assert-nothing"}], "updates": []},
            "Invalid table requirement #0 (assert-nothing)",
        ),
    ],
)
def test_a_malformed_commit_is_refused_with_the_rules_wording(body, wording):
    with pytest.raises(BadRequest) as info:
        CommitTableRequest.from_body(body)
    assert info.value.message.startswith(wording)


def test_every_change_of_a_transaction_names_its_table_before_any_is_parsed():
    named = {"identifier": {"namespace": ["db"], "name": "a"}, "requirements": [], "updates": [{"action": "nope"}]}
    with pytest.raises(BadRequest, match="Every table change of a transaction needs an identifier"):
        CommitTransactionRequest.from_body({"table-changes": [named, {"requirements": [], "updates": []}]})
    changes = [{**named, "updates": []}]
    request = CommitTransactionRequest.from_body({"table-changes": changes})
    assert [(c.identifier.namespace, c.identifier.name) for c in request.table_changes] == [(("db",), "a")]


def test_a_metrics_report_is_kept_as_sent():
    body = {"report-type": "commit-report", "table-name": "db.t", "metrics": {}, "metadata": None}
    report = ReportMetricsRequest.from_body(body)
    assert (report.report_type, report.report) == ("commit-report", body)


def test_the_small_bodies():
    sign = {"region": "r", "uri": "http://h/b/k", "method": "GET", "headers": {"Range": ["bytes=0-1"]}}
    signed = parse_request(RemoteSignRequest, sign)
    assert (signed.method, signed.headers, signed.provider, signed.body) == (
        "GET",
        {"Range": ["bytes=0-1"]},
        None,
        None,
    )
    scan = parse_request(PlanTableScanRequest, {"snapshot-id": 3, "filter": {"type": "true"}, "case-sensitive": False})
    assert (scan.snapshot_id, scan.filter, scan.case_sensitive, scan.select) == (3, {"type": "true"}, False, None)
    assert PlanTableScanRequest().case_sensitive is True
    assert parse_request(FetchScanTasksRequest, {"plan-task": "p:1"}).plan_task == "p:1"
