"""Snapshot updates with impossible ids or a manifest list outside the table's own locations (the
warehouse's, another table's): refused with a 400, the table's metadata and files as they were."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.composition.services import services_of
from tests.api.tables_support import (
    PREFIX,
    T_LOCATION,
    TextStore,
    create_request,
    snapshot,
    table_url,
    tables_url,
)
from tests.conftest import TEST_BUCKET

INT64_MIN = -(2**63)


@pytest.fixture
def s3(app) -> TextStore:
    return TextStore(services_of(app.app).namespaces.objects)


@pytest.fixture
def table(client) -> dict[str, Any]:
    """Table ``db.t`` (at ``db/t``) with one snapshot (id 1, sequence number 1) on main."""
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert client.post(tables_url(), json=create_request("t", location=T_LOCATION)).status_code == 200
    first = commit(client, add_snapshot(snapshot(1, 1)), set_main(1))
    assert first.status_code == 200, first.text
    return first.json()


def commit(client, *updates: dict[str, Any]):
    return client.post(table_url("t"), json={"requirements": [], "updates": list(updates)})


def add_snapshot(body: dict[str, Any]) -> dict[str, Any]:
    return {"action": "add-snapshot", "snapshot": body}


def set_main(snapshot_id: int) -> dict[str, Any]:
    return {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id}


def statistics(snapshot_id: int) -> dict[str, Any]:
    return {
        "snapshot-id": snapshot_id,
        "statistics-path": f"s3://{TEST_BUCKET}/db/t/metadata/stats-{snapshot_id}.puffin",
        "file-size-in-bytes": 10,
        "file-footer-size-in-bytes": 5,
        "blob-metadata": [],
    }


def state(client, s3, table: dict[str, Any]) -> tuple[str, dict[str, Any], set[str]]:
    """What a refused commit must leave alone: the metadata location, the metadata, the files."""
    loaded = client.get(table_url("t"))
    assert loaded.status_code == 200
    directory = table["metadata"]["location"] + "/metadata/"
    return loaded.json()["metadata-location"], loaded.json()["metadata"], set(s3.list(directory))


def assert_refused(response, message: str) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == 400
    assert error["type"] in ("BadRequestException", "IllegalArgumentException", "ValidationException")
    assert message in error["message"], error["message"]
    return error["message"]


NEGATIVE_UPDATES = {
    "add-snapshot snapshot-id": lambda n: [add_snapshot(snapshot(n, 2, parent=1))],
    "add-snapshot parent-snapshot-id": lambda n: [add_snapshot(snapshot(2, 2, parent=n))],
    "add-snapshot sequence-number": lambda n: [add_snapshot(snapshot(2, n))],
    "set-snapshot-ref": lambda n: [set_main(n)],
    "set-snapshot-ref of a tag": lambda n: [
        {"action": "set-snapshot-ref", "ref-name": "tag", "type": "tag", "snapshot-id": n}
    ],
    "remove-snapshots": lambda n: [{"action": "remove-snapshots", "snapshot-ids": [n]}],
    "remove-snapshots among known ids": lambda n: [{"action": "remove-snapshots", "snapshot-ids": [1, n]}],
    "set-statistics": lambda n: [{"action": "set-statistics", "snapshot-id": n, "statistics": statistics(n)}],
    "remove-statistics": lambda n: [{"action": "remove-statistics", "snapshot-id": n}],
    "set-partition-statistics": lambda n: [
        {
            "action": "set-partition-statistics",
            "partition-statistics": {
                "snapshot-id": n,
                "statistics-path": f"s3://{TEST_BUCKET}/db/t/metadata/partition-stats-{n}.parquet",
                "file-size-in-bytes": 10,
            },
        }
    ],
    "remove-partition-statistics": lambda n: [{"action": "remove-partition-statistics", "snapshot-id": n}],
}


@pytest.mark.parametrize("case", sorted(NEGATIVE_UPDATES))
@pytest.mark.parametrize("negative", [-1, -2, INT64_MIN])
def test_negative_snapshot_ids_and_sequence_numbers_are_refused(client, s3, table, case, negative):
    before = state(client, s3, table)
    response = commit(client, *NEGATIVE_UPDATES[case](negative))
    assert_refused(response, f"{negative} (must not be negative)")
    assert state(client, s3, table) == before


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], derandomize=True)
@given(case=st.sampled_from(sorted(NEGATIVE_UPDATES)), negative=st.integers(min_value=INT64_MIN, max_value=-1))
def test_no_negative_id_gets_into_a_table(client, s3, table, case, negative):
    before = state(client, s3, table)
    assert_refused(commit(client, *NEGATIVE_UPDATES[case](negative)), "must not be negative")
    assert state(client, s3, table) == before


def test_zero_ids_are_still_accepted(client, table):
    """0 is a valid snapshot id (Java's generator may make it) and the first sequence number."""
    response = commit(client, add_snapshot(snapshot(0, 2, parent=1)), set_main(0))
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["current-snapshot-id"] == 0


@pytest.mark.parametrize(
    "manifest_list",
    [
        "s3://growler-test-other/elsewhere/snap-2.avro",  # another bucket
        f"s3://{TEST_BUCKET}",  # the warehouse's root itself, not under it
        "file:/etc/passwd",
        "file:///var/lib/growler/snap-2.avro",
        "http://attacker.example/snap-2.avro",
        f"s3://{TEST_BUCKET}/db/t/../../../other/snap-2.avro",
        "",
    ],
)
def test_a_manifest_list_outside_the_warehouse_is_refused(client, s3, table, manifest_list):
    before = state(client, s3, table)
    body = snapshot(2, 2, parent=1)
    body["manifest-list"] = manifest_list
    response = commit(client, add_snapshot(body), set_main(2))
    assert response.status_code == 400, response.text
    assert response.json()["error"]["type"] == "BadRequestException"
    assert "manifest-list" in response.json()["error"]["message"]
    assert state(client, s3, table) == before


@pytest.mark.parametrize(
    "manifest_list",
    [
        f"s3://{TEST_BUCKET}/other_ns/victim-0123/metadata/snap-2.avro",  # another namespace's table
        f"s3://{TEST_BUCKET}/db/t2/metadata/snap-2.avro",  # a sibling sharing the table's prefix
        f"s3://{TEST_BUCKET}/db/snap-2.avro",  # the namespace's folder, no table's
        f"{T_LOCATION}",  # the table's location itself, no file in it
    ],
)
def test_a_manifest_list_in_the_warehouse_but_not_the_tables_is_refused(client, s3, table, manifest_list):
    """The warehouse's allowed locations are not enough: a snapshot names only the table's own
    manifest lists, as the readers on the server (planning, preview, maintenance) and signing
    serve only the table's own files. The message names the path and the table's location."""
    before = state(client, s3, table)
    body = snapshot(2, 2, parent=1)
    body["manifest-list"] = manifest_list
    response = commit(client, add_snapshot(body), set_main(2))
    message = assert_refused(response, "manifest-list")
    assert manifest_list in message and f"outside the table's locations ({T_LOCATION})" in message
    assert state(client, s3, table) == before


def test_a_manifest_list_outside_is_refused_in_a_transaction_too(client, s3, table):
    before = state(client, s3, table)
    body = snapshot(2, 2, parent=1)
    body["manifest-list"] = "s3://growler-test-other/elsewhere/snap-2.avro"
    change = {
        "identifier": {"namespace": ["db"], "name": "t"},
        "requirements": [],
        "updates": [add_snapshot(body), set_main(2)],
    }
    response = client.post(f"{PREFIX}/transactions/commit", json={"table-changes": [change]})
    assert_refused(response, "manifest-list")
    assert state(client, s3, table) == before


def test_manifest_lists_where_writers_put_them_are_accepted(client, table):
    """Spark and PyIceberg write ``<table location>/metadata/snap-....avro``; with
    ``write.metadata.path`` set, under that directory."""
    location = table["metadata"]["location"]
    body = snapshot(2, 2, parent=1)
    body["manifest-list"] = f"{location}/metadata/snap-2-1-0b7e1f0a-9c1e-4a53-8a0e-000000000002.avro"
    assert commit(client, add_snapshot(body), set_main(2)).status_code == 200

    elsewhere = f"s3://{TEST_BUCKET}/db/shared-metadata/t"  # in its namespace's home (issue 46)
    moved = commit(client, {"action": "set-properties", "updates": {"write.metadata.path": elsewhere}})
    assert moved.status_code == 200, moved.text
    body = snapshot(3, 3, parent=2)
    body["manifest-list"] = f"s3a://{TEST_BUCKET}/db/shared-metadata/t/snap-3.avro"  # s3a, as Hadoop writes it
    response = commit(client, add_snapshot(body), set_main(3))
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["current-snapshot-id"] == 3
