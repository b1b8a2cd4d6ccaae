"""Committing, dropping, renaming and registering tables through the HTTP API on real PostgreSQL and S3,
and metrics reports: new metadata versions and their logs, refusals that write nothing, purges."""

from __future__ import annotations

import gzip
import json
import time

import pytest

from tests.api.tables_support import (
    METADATA_FILE,
    PREFIX,
    SORT_ORDER,
    append,
    bucket_objects,
    create_request,
    error_type,
    objects_under,
    set_properties,
    table_url,
    tables_url,
)
from tests.conftest import TEST_BUCKET


def test_commit_rejects_failed_requirement_and_writes_nothing(client, ns, s3):
    client.post(tables_url(), json=create_request("guarded"))
    before = bucket_objects(s3)
    response = client.post(
        table_url("guarded"),
        json={
            "requirements": [{"type": "assert-current-schema-id", "current-schema-id": 5}],
            "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
        },
    )
    assert response.status_code == 409
    assert error_type(response) == "CommitFailedException"
    message = response.json()["error"]["message"]
    assert "5" in message and "0" in message
    assert bucket_objects(s3) == before
    assert "k" not in client.get(table_url("guarded")).json()["metadata"]["properties"]


@pytest.mark.parametrize(
    "update",
    [
        {"action": "set-current-schema", "schema-id": 42},
        {"action": "set-default-spec", "spec-id": 42},
        {"action": "set-default-sort-order", "sort-order-id": 42},
        {"action": "remove-schemas", "schema-ids": [0]},
        {"action": "upgrade-format-version", "format-version": 1},
    ],
)
def test_invalid_update_is_400_and_writes_nothing(client, ns, s3, update):
    created = client.post(tables_url(), json=create_request("strict")).json()
    before = bucket_objects(s3)
    response = client.post(table_url("strict"), json={"requirements": [], "updates": [update]})
    assert response.status_code == 400, response.text
    assert error_type(response) == "IllegalArgumentException"  # what the Java client maps to its own
    assert bucket_objects(s3) == before
    assert client.get(table_url("strict")).json()["metadata-location"] == created["metadata-location"]


def test_commit_writes_a_new_version_and_keeps_the_log(client, ns, s3):
    created = client.post(tables_url(), json=create_request("versions")).json()
    first = created["metadata-location"]
    committed = client.post(
        table_url("versions"),
        json={
            "requirements": [{"type": "assert-table-uuid", "uuid": created["metadata"]["table-uuid"]}],
            "updates": [
                {"action": "add-sort-order", "sort-order": SORT_ORDER},
                {"action": "set-default-sort-order", "sort-order-id": -1},
            ],
        },
    )
    assert committed.status_code == 200, committed.text
    body = committed.json()
    assert body["metadata-location"] != first
    assert (
        int(METADATA_FILE.search(body["metadata-location"]).group(0)[10:15])
        == int(METADATA_FILE.search(first).group(0)[10:15]) + 1
    )
    assert body["metadata"]["metadata-log"][-1]["metadata-file"] == first
    assert s3.exists(first) and s3.exists(body["metadata-location"])
    assert json.loads(s3.read(body["metadata-location"])) == body["metadata"]


def test_appends_maintain_snapshot_log_and_sequence_numbers(client, ns):
    client.post(tables_url(), json=create_request("appends"))
    parent = None
    for i in range(1, 4):
        response = append(client, table_url("appends"), i, i, parent)
        assert response.status_code == 200, response.text
        parent = i
    metadata = client.get(table_url("appends")).json()["metadata"]
    assert metadata["current-snapshot-id"] == 3
    assert metadata["last-sequence-number"] == 3
    assert [entry["snapshot-id"] for entry in metadata["snapshot-log"]] == [1, 2, 3]
    stale = append(client, table_url("appends"), 9, 4, 1)
    assert stale.status_code == 409
    assert error_type(stale) == "CommitFailedException"


def test_gzip_metadata_files(client, ns, s3):
    request = create_request("zipped", properties={"write.metadata.compression-codec": "gzip"})
    body = client.post(tables_url(), json=request).json()
    assert body["metadata-location"].endswith(".gz.metadata.json")
    assert json.loads(gzip.decompress(s3.read(body["metadata-location"]))) == body["metadata"]
    assert client.get(table_url("zipped")).json()["metadata"] == body["metadata"]


def test_delete_after_commit_keeps_previous_versions_max(client, ns, s3):
    request = create_request(
        "trimmed",
        properties={"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "2"},
    )
    locations = [client.post(tables_url(), json=request).json()["metadata-location"]]
    for i in range(4):
        body = set_properties(client, "trimmed", n=str(i)).json()
        locations.append(body["metadata-location"])
    assert [entry["metadata-file"] for entry in body["metadata"]["metadata-log"]] == locations[-3:-1]
    assert [s3.exists(location) for location in locations] == [False, False, True, True, True]


def test_drop_table_keeps_files_without_purge(client, ns, s3):
    body = client.post(tables_url(), json=create_request("keep")).json()
    assert client.delete(table_url("keep")).status_code == 204
    assert client.head(table_url("keep")).status_code == 404
    assert s3.exists(body["metadata-location"])
    assert error_type(client.delete(table_url("keep"))) == "NoSuchTableException"


def test_drop_table_with_purge_deletes_every_object(client, ns, s3, app, hard_policy):
    body = client.post(tables_url(), json=create_request("purged")).json()
    location = body["metadata"]["location"]
    s3.write_new(f"{location}/data/part-0.parquet", b"data")
    set_properties(client, "purged", a="b")
    neighbour = client.post(tables_url(), json=create_request("neighbour")).json()
    assert len(objects_under(s3, location)) == 3
    assert client.delete(table_url("purged"), params={"purgeRequested": "true"}).status_code == 204
    deadline = time.monotonic() + 30
    while objects_under(s3, location) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert objects_under(s3, location) == []
    assert s3.exists(neighbour["metadata-location"])


def test_rename_table(client, ns):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["other"]})
    client.post(tables_url(), json=create_request("old"))
    rename = {"source": {"namespace": ["db"], "name": "old"}, "destination": {"namespace": ["db"], "name": "new"}}
    assert client.post(f"{PREFIX}/tables/rename", json=rename).status_code == 204
    assert client.head(table_url("new")).status_code == 204
    assert client.head(table_url("old")).status_code == 404
    across = {"source": {"namespace": ["db"], "name": "new"}, "destination": {"namespace": ["other"], "name": "moved"}}
    assert client.post(f"{PREFIX}/tables/rename", json=across).status_code == 204
    assert client.head(table_url("moved", "other")).status_code == 204


def test_rename_errors(client, ns):
    client.post(tables_url(), json=create_request("a"))
    client.post(tables_url(), json=create_request("b"))

    def rename(src_ns, src, dst_ns, dst):
        return client.post(
            f"{PREFIX}/tables/rename",
            json={"source": {"namespace": src_ns, "name": src}, "destination": {"namespace": dst_ns, "name": dst}},
        )

    missing = rename(["db"], "zzz", ["db"], "c")
    assert (missing.status_code, error_type(missing)) == (404, "NoSuchTableException")
    no_src_ns = rename(["nons"], "a", ["db"], "c")
    assert (no_src_ns.status_code, error_type(no_src_ns)) == (404, "NoSuchNamespaceException")
    no_dst_ns = rename(["db"], "a", ["nons"], "c")
    assert (no_dst_ns.status_code, error_type(no_dst_ns)) == (404, "NoSuchNamespaceException")
    taken = rename(["db"], "a", ["db"], "b")
    assert (taken.status_code, error_type(taken)) == (409, "AlreadyExistsException")
    assert client.head(table_url("a")).status_code == 204


def test_register_table(client, ns):
    created = client.post(tables_url(), json=create_request("orig")).json()
    assert client.delete(table_url("orig")).status_code == 204
    register = {"name": "back", "metadata-location": created["metadata-location"]}
    response = client.post(f"{PREFIX}/namespaces/db/register", json=register)
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["table-uuid"] == created["metadata"]["table-uuid"]
    assert client.get(table_url("back")).json()["metadata-location"] == created["metadata-location"]
    again = client.post(f"{PREFIX}/namespaces/db/register", json=register)
    assert (again.status_code, error_type(again)) == (409, "AlreadyExistsException")
    overwritten = client.post(f"{PREFIX}/namespaces/db/register", json={**register, "overwrite": True})
    assert overwritten.status_code == 200


def test_register_missing_or_invalid_file_is_400(client, ns, s3, db):
    missing = client.post(
        f"{PREFIX}/namespaces/db/register",
        json={"name": "x", "metadata-location": f"s3://{TEST_BUCKET}/nothing/here.metadata.json"},
    )
    assert (missing.status_code, error_type(missing)) == (400, "BadRequestException")
    junk_location = f"s3://{TEST_BUCKET}/junk/00001-junk.metadata.json"
    s3.write_new(junk_location, b'{"not": "metadata"}')
    junk = client.post(f"{PREFIX}/namespaces/db/register", json={"name": "x", "metadata-location": junk_location})
    assert (junk.status_code, error_type(junk)) == (400, "IllegalArgumentException")
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0


def test_report_metrics(client, ns, db):
    client.post(tables_url(), json=create_request("measured"))
    report = {
        "report-type": "commit-report",
        "table-name": "db.measured",
        "snapshot-id": 1,
        "sequence-number": 1,
        "operation": "append",
        "metrics": {"total-duration": {"count": 1, "time-unit": "nanoseconds", "total-duration": 100}},
    }
    assert client.post(f"{table_url('measured')}/metrics", json=report).status_code == 204
    stored = db.execute("SELECT report_type, report FROM metrics_report").fetchall()
    assert stored == [("commit-report", report)]
    assert client.post(f"{table_url('ghost')}/metrics", json=report).status_code == 404
    bad = client.post(f"{table_url('measured')}/metrics", json={"report-type": "commit-report"})
    assert bad.status_code == 400
