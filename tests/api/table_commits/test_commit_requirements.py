"""updateTable: every requirement, holding and failing (see commits_support.py for how a commit is
checked: response, metadata file and loadTable agree; a refusal writes nothing)."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.api.table_commits.commits_support import (
    ADD_ORDER,
    ADD_SCHEMA,
    ADD_SPEC,
    CREATE_UPDATES,
    METADATA_VERSION,
    SET_LAST_ORDER,
    SET_LAST_SCHEMA,
    SET_LAST_SPEC,
    WAREHOUSE,
    accept,
    append,
    load,
    new_table,
    post_commit,
    reject,
    set_ref,
    written_under,
)

# --------------------------------------------------------------------------------------------
# Requirements
# --------------------------------------------------------------------------------------------

# (requirement type, field, updates that move the table on, value now, stale value before them,
# Java's wording: UpdateRequirement's "Requirement failed: <what>: expected id <stale> != <now>")
MOVING_REQUIREMENTS = [
    ("assert-last-assigned-field-id", "last-assigned-field-id", [ADD_SCHEMA], 4, 3, "last assigned field id changed"),
    ("assert-current-schema-id", "current-schema-id", [ADD_SCHEMA, SET_LAST_SCHEMA], 1, 0, "current schema changed"),
    (
        "assert-last-assigned-partition-id",
        "last-assigned-partition-id",
        [ADD_SPEC],
        1001,
        1000,
        "last assigned partition id changed",
    ),
    ("assert-default-spec-id", "default-spec-id", [ADD_SPEC, SET_LAST_SPEC], 1, 0, "default partition spec changed"),
    (
        "assert-default-sort-order-id",
        "default-sort-order-id",
        [ADD_ORDER, SET_LAST_ORDER],
        1,
        0,
        "default sort order changed",
    ),
]


@pytest.mark.parametrize(
    ("kind", "field", "moves", "now", "stale", "wording"),
    MOVING_REQUIREMENTS,
    ids=[case[0] for case in MOVING_REQUIREMENTS],
)
def test_requirement_fails_when_stale_and_holds_when_current(client, ns, s3, kind, field, moves, now, stale, wording):
    new_table(client, moves)
    update = [{"action": "set-properties", "updates": {"checked": kind}}]
    message = reject(client, s3, update, [{"type": kind, field: stale}], status=409, error_type="CommitFailedException")
    assert message == f"Requirement failed: {wording}: expected id {stale} != {now}", message
    committed = accept(client, s3, update, [{"type": kind, field: now}])
    assert committed.metadata["properties"]["checked"] == kind


def test_assert_table_uuid(client, ns, s3):
    table_uuid = new_table(client)["metadata"]["table-uuid"]
    committed = accept(
        client,
        s3,
        [{"action": "set-properties", "updates": {"k": "v"}}],
        [{"type": "assert-table-uuid", "uuid": table_uuid}],
    )
    assert committed.metadata["properties"]["k"] == "v"
    other = str(uuid.uuid4())
    message = reject(
        client,
        s3,
        [{"action": "set-properties", "updates": {"k": "w"}}],
        [{"type": "assert-table-uuid", "uuid": other}],
        status=409,
        error_type="CommitFailedException",
    )
    # Java's order: the table's uuid first, then the one the client asserted
    assert message == f"Requirement failed: UUID does not match: expected {table_uuid} != {other}", message


# A table with snapshots 1 <- 2, main at 2 and tag "v1" at 1.
REF_SETUP = [append(1, 1), append(2, 2, 1), [set_ref("v1", 1, "tag")]]


@pytest.mark.parametrize(
    ("ref", "snapshot_id"),
    [("main", 2), ("v1", 1), ("dev", None)],
    ids=["branch-at-snapshot", "tag-at-snapshot", "absent-ref-null"],
)
def test_assert_ref_snapshot_id_holds(client, ns, s3, ref, snapshot_id):
    new_table(client, *REF_SETUP)
    committed = accept(
        client,
        s3,
        [{"action": "set-properties", "updates": {"ref": ref}}],
        [{"type": "assert-ref-snapshot-id", "ref": ref, "snapshot-id": snapshot_id}],
    )
    assert committed.metadata["properties"]["ref"] == ref


@pytest.mark.parametrize(
    ("ref", "snapshot_id", "wording"),
    [
        ("main", 1, "branch main has changed: expected id 1 != 2"),  # main moved on
        ("v1", 2, "tag v1 has changed: expected id 2 != 1"),  # tags are checked too
        ("main", None, "branch main was created concurrently"),
        ("dev", 2, "branch or tag dev is missing, expected 2"),  # the branch is gone
    ],
    ids=["branch-moved", "tag-differs", "ref-created-concurrently", "ref-missing"],
)
def test_assert_ref_snapshot_id_fails(client, ns, s3, ref, snapshot_id, wording):
    new_table(client, *REF_SETUP)
    message = reject(
        client,
        s3,
        append(3, 3, 2),
        [{"type": "assert-ref-snapshot-id", "ref": ref, "snapshot-id": snapshot_id}],
        status=409,
        error_type="CommitFailedException",
    )
    assert message == f"Requirement failed: {wording}", message


def test_every_requirement_is_checked_not_only_the_first(client, ns, s3):
    metadata = new_table(client)["metadata"]
    holding = [
        {"type": "assert-table-uuid", "uuid": metadata["table-uuid"]},
        {"type": "assert-current-schema-id", "current-schema-id": 0},
        {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None},
    ]
    message = reject(
        client,
        s3,
        [{"action": "set-properties", "updates": {"k": "v"}}],
        [*holding, {"type": "assert-default-sort-order-id", "default-sort-order-id": 3}],
        status=409,
        error_type="CommitFailedException",
    )
    assert message == "Requirement failed: default sort order changed: expected id 3 != 0", message


def test_assert_create_holds_for_a_missing_table(client, ns, s3, db):
    objects = written_under(s3, f"{WAREHOUSE}/db")
    response = post_commit(client, "fresh", CREATE_UPDATES, [{"type": "assert-create"}])
    assert response.status_code == 200, response.text
    body = response.json()
    metadata = body["metadata"]
    assert metadata["properties"] == {"created-by": "commit"}
    assert metadata["location"].startswith(f"{WAREHOUSE}/db/fresh")
    assert METADATA_VERSION.search(body["metadata-location"]).group(1) == "00000"
    assert written_under(s3, f"{WAREHOUSE}/db") - objects == {body["metadata-location"]}
    assert json.loads(s3.read(body["metadata-location"])) == metadata
    loaded = load(client, "fresh")
    assert (loaded["metadata-location"], loaded["metadata"]) == (body["metadata-location"], metadata)
    row = db.execute("SELECT uuid::text, metadata_location FROM catalog_entry WHERE name = 'fresh'").fetchone()
    assert row == (metadata["table-uuid"], body["metadata-location"])


def test_assert_create_fails_for_an_existing_table(client, ns, s3):
    new_table(client)
    message = reject(
        client, s3, CREATE_UPDATES, [{"type": "assert-create"}], status=409, error_type="CommitFailedException"
    )
    assert "already exists" in message


def test_commit_to_a_missing_table_without_assert_create_is_404(client, ns, s3, db):
    objects = written_under(s3, f"{WAREHOUSE}/db/ghost-")
    response = post_commit(client, "ghost", CREATE_UPDATES)
    assert response.status_code == 404, response.text
    assert response.json()["error"]["type"] == "NoSuchTableException"
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0
    assert written_under(s3, f"{WAREHOUSE}/db/ghost-") == objects
