"""updateTable through the HTTP API: every requirement and every update action, accepted and rejected.

A commit that is accepted must show its effect three times, identically: in the response, in the
metadata file written to the bucket, and in a following loadTable. A commit that is refused must
leave everything as it was: the same metadata-location and metadata on loadTable, no new object,
and (for a create through a commit) no row.

"No new object" is checked where a commit can write: the only object a commit writes is its
metadata file, under the table location (every table has its own ``<ns>/<name>-<uuid>``) or
under a location or ``write.metadata.path`` the commit names; all of these are listed. Listing
the whole shared test bucket instead costs ~70 ms a time and would double this file's runtime;
one test (the long commit failing on its last update) still compares the whole bucket.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from app.ground.locations import InvalidLocation
from storage.objects import ObjectNotFound
from tests.api.tables_support import (
    PREFIX,
    SCHEMA,
    SORT_ORDER,
    TextStore,
    create_request,
    snapshot,
    table_url,
    tables_url,
)
from tests.conftest import TEST_BUCKET

WAREHOUSE = f"s3://{TEST_BUCKET}"
METADATA_VERSION = re.compile(r"/(\d{5})-[0-9a-f-]{36}(?:\.gz)?\.metadata\.json$")
T = "t"  # the table every test works on


# --------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    return "db"


@pytest.fixture
def s3(app):
    return TextStore(app.app.extensions["growler.catalog"].objects)


def bucket_objects(s3) -> set[str]:
    return set(s3.list(f"{WAREHOUSE}/"))


def written_under(s3, prefix: str) -> set[str]:
    """Objects under a location the catalog could write to (this bucket, another one, file://)."""
    try:
        return set(s3.list(prefix))
    except InvalidLocation:  # the location model refuses it: nothing can be written there
        return set()
    except ObjectNotFound:  # no such bucket
        return set()


def named_locations(updates: list[dict[str, Any]]) -> list[str]:
    """Where the updates of a commit would send its metadata file, besides the table location."""
    named = []
    for update in updates:
        if update.get("action") == "set-location":
            named.append(update.get("location"))
        if update.get("action") == "set-properties" and isinstance(update.get("updates"), dict):
            named.append(update["updates"].get("write.metadata.path"))
    return [location for location in named if isinstance(location, str) and location]


def writable_objects(s3, table_prefix: str, updates: list[dict[str, Any]]) -> set[str]:
    """Every object under ``table_prefix`` and under the locations the updates name."""
    prefixes = [table_prefix, *(location.rstrip("/") + "/" for location in named_locations(updates))]
    return set().union(*(written_under(s3, prefix) for prefix in prefixes))


def read_metadata_file(s3, location: str) -> dict[str, Any]:
    data = s3.read(location)
    return json.loads(gzip.decompress(data) if location.endswith(".gz.metadata.json") else data)


def post_commit(client, name: str, updates: list[dict[str, Any]], requirements: list[dict[str, Any]] | None = None):
    return client.post(table_url(name), json={"requirements": requirements or [], "updates": updates})


def load(client, name: str = T) -> dict[str, Any]:
    response = client.get(table_url(name))
    assert response.status_code == 200, response.text
    return response.json()


def new_table(client, *setup: list[dict[str, Any]], version: int = 2, name: str = T) -> dict[str, Any]:
    """Create the test table (schema 0 with ids 1-3, spec 0 = day(ts) as 1000, unsorted), then
    commit each list of ``setup`` updates. Returns the loadTable body."""
    request = create_request(name, properties={"format-version": str(version)})
    response = client.post(tables_url(), json=request)
    assert response.status_code == 200, response.text
    for updates in setup:
        response = post_commit(client, name, updates)
        assert response.status_code == 200, response.text
    return load(client, name)


@dataclass
class Committed:
    metadata: dict[str, Any]  # the response's metadata = the file's = loadTable's (checked)
    location: str
    base: dict[str, Any]  # the metadata before the commit
    base_location: str


def accept(
    client, s3, updates: list[dict[str, Any]], requirements: list[dict[str, Any]] | None = None, name: str = T
) -> Committed:
    """Commit, expect 200 and a new metadata file whose content the response and loadTable repeat."""
    before = load(client, name)
    started_ms = int(time.time() * 1000)
    response = post_commit(client, name, updates, requirements)
    finished_ms = int(time.time() * 1000)
    assert response.status_code == 200, response.text
    body = response.json()
    location, metadata = body["metadata-location"], body["metadata"]
    assert location != before["metadata-location"]
    directory = metadata["properties"].get("write.metadata.path", metadata["location"] + "/metadata")
    assert location.startswith(directory + "/")
    assert int(METADATA_VERSION.search(location).group(1)) == (
        int(METADATA_VERSION.search(before["metadata-location"]).group(1)) + 1
    )
    assert read_metadata_file(s3, location) == metadata, "the file written is not what the response says"
    loaded = load(client, name)
    assert loaded["metadata-location"] == location
    assert loaded["metadata"] == metadata, "loadTable does not show the committed metadata"
    # Bookkeeping every commit does: the previous file is logged, the time moves on.
    assert metadata["metadata-log"] == [
        *before["metadata"].get("metadata-log", []),
        {"metadata-file": before["metadata-location"], "timestamp-ms": before["metadata"]["last-updated-ms"]},
    ]
    assert max(started_ms, before["metadata"]["last-updated-ms"]) <= metadata["last-updated-ms"] <= finished_ms
    return Committed(metadata, location, before["metadata"], before["metadata-location"])


def accept_no_change(client, s3, updates: list[dict[str, Any]], name: str = T) -> None:
    """A valid commit that changes nothing: 200 with the current metadata, and no new file."""
    before = load(client, name)
    objects = writable_objects(s3, before["metadata"]["location"] + "/", updates)
    assert before["metadata-location"] in objects  # the listing sees the table's files
    response = post_commit(client, name, updates)
    assert response.status_code == 200, response.text
    assert response.json()["metadata-location"] == before["metadata-location"]
    assert response.json()["metadata"] == before["metadata"]
    assert writable_objects(s3, before["metadata"]["location"] + "/", updates) == objects
    assert load(client, name) == before


def reject(
    client,
    s3,
    updates: list[dict[str, Any]],
    requirements: list[dict[str, Any]] | None = None,
    *,
    status: int = 400,
    error_type: str = "BadRequestException",
    name: str = T,
) -> str:
    """Commit, expect the error, and that the table and the bucket are exactly as before."""
    before = load(client, name)
    objects = writable_objects(s3, before["metadata"]["location"] + "/", updates)
    assert before["metadata-location"] in objects  # the listing sees the table's files
    response = post_commit(client, name, updates, requirements)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == (error_type, status)
    assert load(client, name) == before, "a refused commit changed the table"
    assert writable_objects(s3, before["metadata"]["location"] + "/", updates) == objects, "a refused commit wrote"
    return error["message"]


def ids(items: list[dict[str, Any]], key: str) -> list[int]:
    return [item[key] for item in items]


# Request pieces ------------------------------------------------------------------------------

EXTRA_COLUMN = {"id": 4, "name": "extra", "type": "string", "required": False}


def schema_with(*extra: dict[str, Any], schema_id: int = 0) -> dict[str, Any]:
    schema = copy.deepcopy(SCHEMA)
    schema["schema-id"] = schema_id
    schema["fields"] += [copy.deepcopy(field) for field in extra]
    return schema


ADD_SCHEMA = {"action": "add-schema", "schema": schema_with(EXTRA_COLUMN, schema_id=9)}
SET_LAST_SCHEMA = {"action": "set-current-schema", "schema-id": -1}
# A second spec: bucket(id) without a field-id, so the server assigns 1001.
BUCKET_SPEC = {"fields": [{"source-id": 1, "name": "id_bucket", "transform": "bucket[4]"}]}
ADD_SPEC = {"action": "add-spec", "spec": BUCKET_SPEC}
SET_LAST_SPEC = {"action": "set-default-spec", "spec-id": -1}
ADD_ORDER = {"action": "add-sort-order", "sort-order": {**SORT_ORDER, "order-id": 5}}
SET_LAST_ORDER = {"action": "set-default-sort-order", "sort-order-id": -1}


def add_snapshot(snapshot_id: int, sequence_number: int, parent: int | None = None, **fields: Any) -> dict[str, Any]:
    return {"action": "add-snapshot", "snapshot": {**snapshot(snapshot_id, sequence_number, parent), **fields}}


def set_ref(name: str, snapshot_id: int, ref_type: str = "branch", **retention: int) -> dict[str, Any]:
    return {"action": "set-snapshot-ref", "ref-name": name, "type": ref_type, "snapshot-id": snapshot_id, **retention}


def append(snapshot_id: int, sequence_number: int, parent: int | None = None) -> list[dict[str, Any]]:
    return [add_snapshot(snapshot_id, sequence_number, parent), set_ref("main", snapshot_id)]


def statistics(snapshot_id: int, path: str = "stats-a.puffin") -> dict[str, Any]:
    return {
        "snapshot-id": snapshot_id,
        "statistics-path": f"{WAREHOUSE}/db/t/metadata/{path}",
        "file-size-in-bytes": 413,
        "file-footer-size-in-bytes": 42,
        "blob-metadata": [
            {
                "type": "apache-datasketches-theta-v1",
                "snapshot-id": snapshot_id,
                "sequence-number": 1,
                "fields": [1],
                "properties": {"ndv": "3"},
            },
            # Any blob type is allowed by the Puffin spec; it must survive the round trip.
            {"type": "engine-specific-blob-v7", "snapshot-id": snapshot_id, "sequence-number": 1, "fields": [2, 3]},
        ],
    }


def partition_statistics(snapshot_id: int, path: str = "partition-stats-a.parquet") -> dict[str, Any]:
    return {
        "snapshot-id": snapshot_id,
        "statistics-path": f"{WAREHOUSE}/db/t/metadata/{path}",
        "file-size-in-bytes": 1024,
    }


def encryption_key(key_id: str, secret: bytes = b"wrapped key bytes") -> dict[str, Any]:
    return {
        "key-id": key_id,
        "encrypted-key-metadata": base64.b64encode(secret).decode(),
        "encrypted-by-id": "kms-master",
        "properties": {"algorithm": "AES_GCM_256"},
    }


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


CREATE_UPDATES = [
    {"action": "upgrade-format-version", "format-version": 2},
    {"action": "add-schema", "schema": schema_with()},
    SET_LAST_SCHEMA,
    {"action": "set-properties", "updates": {"created-by": "commit"}},
]


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


# --------------------------------------------------------------------------------------------
# Updates that are accepted: their effect
# --------------------------------------------------------------------------------------------


def test_assign_uuid_on_create(client, ns, s3, db):
    chosen = str(uuid.uuid4())
    updates = [{"action": "assign-uuid", "uuid": chosen}, *CREATE_UPDATES]
    response = post_commit(client, "fresh", updates, [{"type": "assert-create"}])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["metadata"]["table-uuid"] == chosen
    assert json.loads(s3.read(body["metadata-location"]))["table-uuid"] == chosen
    assert load(client, "fresh")["metadata"]["table-uuid"] == chosen
    assert db.execute("SELECT uuid::text FROM catalog_entry WHERE name = 'fresh'").fetchone()[0] == chosen


def test_assign_the_same_uuid_changes_nothing(client, ns, s3):
    table_uuid = new_table(client)["metadata"]["table-uuid"]
    accept_no_change(client, s3, [{"action": "assign-uuid", "uuid": table_uuid}])


@pytest.mark.parametrize(("start", "target"), [(1, 2), (2, 3), (1, 3)])
def test_upgrade_format_version(client, ns, s3, start, target):
    new_table(client, version=start)
    committed = accept(client, s3, [{"action": "upgrade-format-version", "format-version": target}])
    metadata, base = committed.metadata, committed.base
    assert metadata["format-version"] == target
    assert metadata["last-sequence-number"] == 0
    assert ("next-row-id" in metadata) == (target >= 3)
    if target >= 3:
        assert metadata["next-row-id"] == 0
    for key in ("table-uuid", "location", "schemas", "partition-specs", "sort-orders", "properties"):
        assert metadata[key] == base[key], key


def test_upgrade_to_the_current_version_changes_nothing(client, ns, s3):
    new_table(client)
    accept_no_change(client, s3, [{"action": "upgrade-format-version", "format-version": 2}])


def test_add_schema(client, ns, s3):
    new_table(client)
    metadata = accept(client, s3, [ADD_SCHEMA]).metadata
    assert ids(metadata["schemas"], "schema-id") == [0, 1]  # the server numbers it, not the client (9)
    assert metadata["schemas"][1]["fields"] == schema_with(EXTRA_COLUMN)["fields"]
    assert metadata["last-column-id"] == 4
    assert metadata["current-schema-id"] == 0


def test_v1_single_schema_and_spec_follow_the_current_ones(client, ns, s3):
    new_table(client, version=1)
    two_field_spec = {
        "fields": [
            {"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"},
            {"source-id": 1, "field-id": 1001, "name": "id_bucket", "transform": "bucket[4]"},
        ]
    }
    metadata = accept(
        client,
        s3,
        [
            ADD_SCHEMA,
            SET_LAST_SCHEMA,
            {"action": "add-spec", "spec": two_field_spec},
            SET_LAST_SPEC,
            *append(1, 1),
        ],
    ).metadata
    assert metadata["format-version"] == 1
    assert metadata["schema"] == metadata["schemas"][1]  # v1 readers read "schema" and "partition-spec"
    assert metadata["partition-spec"] == metadata["partition-specs"][1]["fields"]
    assert "sequence-number" not in metadata["snapshots"][0]  # no sequence numbers in v1
    assert "last-sequence-number" not in metadata


def test_add_schema_with_defaults_on_v3(client, ns, s3):
    new_table(client, version=3)
    column = {**EXTRA_COLUMN, "initial-default": "n/a", "write-default": "none"}
    metadata = accept(client, s3, [{"action": "add-schema", "schema": schema_with(column)}]).metadata
    assert metadata["schemas"][1]["fields"][3] == column


def test_add_an_identical_schema_changes_nothing(client, ns, s3):
    new_table(client)
    accept_no_change(client, s3, [{"action": "add-schema", "schema": schema_with(schema_id=3)}])


def test_set_current_schema(client, ns, s3):
    new_table(client, [ADD_SCHEMA])
    metadata = accept(client, s3, [{"action": "set-current-schema", "schema-id": 1}]).metadata
    assert metadata["current-schema-id"] == 1
    assert len(metadata["schemas"]) == 2


def test_set_current_schema_to_the_last_added(client, ns, s3):
    new_table(client)
    metadata = accept(client, s3, [ADD_SCHEMA, SET_LAST_SCHEMA]).metadata
    assert metadata["current-schema-id"] == 1
    assert metadata["schemas"][1]["fields"][-1]["name"] == "extra"


def test_add_spec(client, ns, s3):
    new_table(client)
    metadata = accept(client, s3, [ADD_SPEC]).metadata
    assert metadata["partition-specs"][1] == {
        "spec-id": 1,
        "fields": [{"source-id": 1, "field-id": 1001, "name": "id_bucket", "transform": "bucket[4]"}],
    }
    assert metadata["last-partition-id"] == 1001
    assert metadata["default-spec-id"] == 0


def test_set_default_spec(client, ns, s3):
    new_table(client, [ADD_SPEC])
    metadata = accept(client, s3, [{"action": "set-default-spec", "spec-id": 1}]).metadata
    assert metadata["default-spec-id"] == 1
    assert ids(metadata["partition-specs"], "spec-id") == [0, 1]


def test_set_default_spec_to_the_last_added(client, ns, s3):
    new_table(client)
    metadata = accept(client, s3, [ADD_SPEC, SET_LAST_SPEC]).metadata
    assert metadata["default-spec-id"] == 1


def test_add_sort_order(client, ns, s3):
    new_table(client)
    metadata = accept(client, s3, [ADD_ORDER]).metadata
    assert metadata["sort-orders"] == [{"order-id": 0, "fields": []}, {**SORT_ORDER, "order-id": 1}]
    assert metadata["default-sort-order-id"] == 0


def test_set_default_sort_order(client, ns, s3):
    new_table(client, [ADD_ORDER])
    metadata = accept(client, s3, [{"action": "set-default-sort-order", "sort-order-id": 1}]).metadata
    assert metadata["default-sort-order-id"] == 1


def test_set_default_sort_order_to_the_last_added(client, ns, s3):
    new_table(client)
    metadata = accept(client, s3, [ADD_ORDER, SET_LAST_ORDER]).metadata
    assert metadata["default-sort-order-id"] == 1


def test_add_snapshot(client, ns, s3):
    new_table(client, append(1, 1))
    added = add_snapshot(2, 7, 1)
    metadata = accept(client, s3, [added]).metadata
    assert metadata["snapshots"][-1] == added["snapshot"]
    assert ids(metadata["snapshots"], "snapshot-id") == [1, 2]
    assert metadata["last-sequence-number"] == 7
    # Adding is not committing to a branch: main, the current snapshot and its log stay.
    assert metadata["current-snapshot-id"] == 1
    assert metadata["refs"] == {"main": {"type": "branch", "snapshot-id": 1}}
    assert ids(metadata["snapshot-log"], "snapshot-id") == [1]


def test_add_snapshot_to_v3_assigns_row_ids(client, ns, s3):
    new_table(client, version=3)
    first = accept(client, s3, [add_snapshot(1, 1, **{"added-rows": 10}), set_ref("main", 1)]).metadata
    assert first["snapshots"][0]["first-row-id"] == 0  # assigned from the table's next-row-id
    assert first["next-row-id"] == 10
    second = accept(client, s3, [add_snapshot(2, 2, 1, **{"first-row-id": 10, "added-rows": 5})]).metadata
    assert second["snapshots"][1]["first-row-id"] == 10
    assert second["next-row-id"] == 15
    third = accept(client, s3, [add_snapshot(3, 3, 2, **{"first-row-id": 40, "added-rows": 2})]).metadata
    assert third["next-row-id"] == 42  # a gap in row ids is allowed; they only never go back
    assert third["snapshots"][0]["first-row-id"] == 0


def test_set_snapshot_ref_main(client, ns, s3):
    new_table(client, [add_snapshot(1, 1)])
    committed = accept(client, s3, [set_ref("main", 1)])
    metadata = committed.metadata
    assert metadata["current-snapshot-id"] == 1
    assert metadata["refs"] == {"main": {"type": "branch", "snapshot-id": 1}}
    # Made current in a later commit than it was added: logged at the commit's time.
    assert metadata["snapshot-log"] == [{"snapshot-id": 1, "timestamp-ms": metadata["last-updated-ms"]}]


def test_set_snapshot_ref_tag_and_branch_with_retention(client, ns, s3):
    new_table(client, append(1, 1), append(2, 2, 1))
    metadata = accept(
        client,
        s3,
        [
            set_ref("v1", 1, "tag", **{"max-ref-age-ms": 86_400_000}),
            set_ref("dev", 1, "branch", **{"min-snapshots-to-keep": 3, "max-snapshot-age-ms": 3_600_000}),
        ],
    ).metadata
    assert metadata["refs"] == {
        "main": {"type": "branch", "snapshot-id": 2},
        "v1": {"type": "tag", "snapshot-id": 1, "max-ref-age-ms": 86_400_000},
        "dev": {"type": "branch", "snapshot-id": 1, "min-snapshots-to-keep": 3, "max-snapshot-age-ms": 3_600_000},
    }
    assert metadata["current-snapshot-id"] == 2
    assert ids(metadata["snapshot-log"], "snapshot-id") == [1, 2]


def test_remove_snapshots(client, ns, s3):
    new_table(
        client,
        append(1, 1),
        append(2, 2, 1),
        [
            set_ref("v1", 1, "tag"),
            {"action": "set-statistics", "statistics": statistics(1)},
            {"action": "set-statistics", "statistics": statistics(2, "stats-b.puffin")},
            {"action": "set-partition-statistics", "partition-statistics": partition_statistics(1)},
        ],
    )
    metadata = accept(client, s3, [{"action": "remove-snapshots", "snapshot-ids": [1, 99]}]).metadata
    assert ids(metadata["snapshots"], "snapshot-id") == [2]
    assert metadata["snapshots"][0]["parent-snapshot-id"] == 1  # lineage is kept
    assert metadata["refs"] == {"main": {"type": "branch", "snapshot-id": 2}}  # the tag on 1 went with it
    assert ids(metadata["statistics"], "snapshot-id") == [2]
    assert metadata.get("partition-statistics", []) == []
    assert ids(metadata["snapshot-log"], "snapshot-id") == [2]
    assert metadata["current-snapshot-id"] == 2


def test_remove_the_current_snapshot_removes_main(client, ns, s3):
    new_table(client, append(1, 1))
    metadata = accept(client, s3, [{"action": "remove-snapshots", "snapshot-ids": [1]}]).metadata
    assert metadata["snapshots"] == []
    assert metadata["refs"] == {}
    assert metadata.get("current-snapshot-id", -1) in (None, -1)
    assert metadata["snapshot-log"] == []


def test_remove_unknown_snapshots_changes_nothing(client, ns, s3):
    new_table(client, append(1, 1))
    accept_no_change(client, s3, [{"action": "remove-snapshots", "snapshot-ids": [99]}])


def test_remove_snapshot_ref(client, ns, s3):
    new_table(client, append(1, 1), [set_ref("v1", 1, "tag")])
    metadata = accept(client, s3, [{"action": "remove-snapshot-ref", "ref-name": "v1"}]).metadata
    assert metadata["refs"] == {"main": {"type": "branch", "snapshot-id": 1}}
    assert ids(metadata["snapshots"], "snapshot-id") == [1]  # the snapshot stays
    main_removed = accept(client, s3, [{"action": "remove-snapshot-ref", "ref-name": "main"}]).metadata
    assert main_removed["refs"] == {}
    assert main_removed.get("current-snapshot-id", -1) in (None, -1)
    assert ids(main_removed["snapshots"], "snapshot-id") == [1]


def test_remove_an_unknown_ref_changes_nothing(client, ns, s3):
    new_table(client, append(1, 1))
    accept_no_change(client, s3, [{"action": "remove-snapshot-ref", "ref-name": "nope"}])


def test_set_location_inside_its_namespace(client, ns, s3, db):
    new_table(client)
    message = reject(client, s3, [{"action": "set-location", "location": f"{WAREHOUSE}/moved/t-{uuid.uuid4().hex}"}])
    assert "outside its namespace's location" in message  # another folder than its namespace's
    moved = f"{WAREHOUSE}/{ns}/moved/t-{uuid.uuid4().hex}"
    committed = accept(client, s3, [{"action": "set-location", "location": moved}])
    assert committed.metadata["location"] == moved
    assert committed.location.startswith(moved + "/metadata/")  # the new file goes to the new place
    assert s3.exists(committed.base_location)  # the old one stays (it is in the log)
    # The row's location (credentials are vended for it, purge deletes under it) follows.
    assert db.execute("SELECT location FROM catalog_entry WHERE name = %s", (T,)).fetchone()[0] == moved


def test_set_properties(client, ns, s3):
    new_table(client, [{"action": "set-properties", "updates": {"keep": "1", "change": "old"}}])
    metadata = accept(client, s3, [{"action": "set-properties", "updates": {"change": "new", "add": "x"}}]).metadata
    assert metadata["properties"] == {"keep": "1", "change": "new", "add": "x"}


def test_set_properties_switches_metadata_files_to_gzip(client, ns, s3):
    new_table(client)
    committed = accept(
        client, s3, [{"action": "set-properties", "updates": {"write.metadata.compression-codec": "gzip"}}]
    )
    assert committed.location.endswith(".gz.metadata.json")
    assert s3.read(committed.location)[:2] == b"\x1f\x8b"


def test_set_properties_moves_metadata_files_inside_the_warehouse(client, ns, s3):
    new_table(client)
    directory = f"{WAREHOUSE}/metadata-elsewhere/{uuid.uuid4().hex}"
    committed = accept(client, s3, [{"action": "set-properties", "updates": {"write.metadata.path": directory}}])
    assert committed.location.startswith(directory + "/")


def test_set_the_same_properties_changes_nothing(client, ns, s3):
    new_table(client, [{"action": "set-properties", "updates": {"k": "v"}}])
    accept_no_change(client, s3, [{"action": "set-properties", "updates": {"k": "v"}}])


def test_remove_properties(client, ns, s3):
    new_table(client, [{"action": "set-properties", "updates": {"a": "1", "b": "2"}}])
    metadata = accept(client, s3, [{"action": "remove-properties", "removals": ["a", "never-set"]}]).metadata
    assert metadata["properties"] == {"b": "2"}


def test_remove_absent_properties_changes_nothing(client, ns, s3):
    new_table(client)
    accept_no_change(client, s3, [{"action": "remove-properties", "removals": ["never-set"]}])


def test_set_statistics(client, ns, s3):
    new_table(client, append(1, 1), append(2, 2, 1))
    first = accept(client, s3, [{"action": "set-statistics", "statistics": statistics(1)}]).metadata
    assert first["statistics"] == [statistics(1)]  # both blobs, the unknown type included
    both = accept(client, s3, [{"action": "set-statistics", "statistics": statistics(2)}]).metadata
    assert both["statistics"] == [statistics(1), statistics(2)]
    replaced = accept(client, s3, [{"action": "set-statistics", "statistics": statistics(1, "stats-c.puffin")}])
    assert sorted(replaced.metadata["statistics"], key=lambda s: s["snapshot-id"]) == [
        statistics(1, "stats-c.puffin"),
        statistics(2),
    ]


def test_remove_statistics(client, ns, s3):
    new_table(
        client,
        append(1, 1),
        append(2, 2, 1),
        [
            {"action": "set-statistics", "statistics": statistics(1)},
            {"action": "set-statistics", "statistics": statistics(2)},
        ],
    )
    metadata = accept(client, s3, [{"action": "remove-statistics", "snapshot-id": 1}]).metadata
    assert metadata["statistics"] == [statistics(2)]
    assert ids(metadata["snapshots"], "snapshot-id") == [1, 2]


def test_remove_absent_statistics_changes_nothing(client, ns, s3):
    new_table(client, append(1, 1))
    accept_no_change(client, s3, [{"action": "remove-statistics", "snapshot-id": 1}])


def test_set_partition_statistics(client, ns, s3):
    new_table(client, append(1, 1), append(2, 2, 1))
    first = accept(
        client,
        s3,
        [
            {"action": "set-partition-statistics", "partition-statistics": partition_statistics(1)},
            {"action": "set-partition-statistics", "partition-statistics": partition_statistics(2)},
        ],
    ).metadata
    assert first["partition-statistics"] == [partition_statistics(1), partition_statistics(2)]
    replaced = accept(
        client,
        s3,
        [
            {"action": "set-partition-statistics", "partition-statistics": partition_statistics(1, "b.parquet")},
        ],
    ).metadata
    assert sorted(replaced["partition-statistics"], key=lambda s: s["snapshot-id"]) == [
        partition_statistics(1, "b.parquet"),
        partition_statistics(2),
    ]


def test_remove_partition_statistics(client, ns, s3):
    new_table(
        client,
        append(1, 1),
        append(2, 2, 1),
        [
            {"action": "set-partition-statistics", "partition-statistics": partition_statistics(1)},
            {"action": "set-partition-statistics", "partition-statistics": partition_statistics(2)},
        ],
    )
    metadata = accept(client, s3, [{"action": "remove-partition-statistics", "snapshot-id": 2}]).metadata
    assert metadata["partition-statistics"] == [partition_statistics(1)]


def test_remove_absent_partition_statistics_changes_nothing(client, ns, s3):
    new_table(client, append(1, 1))
    accept_no_change(client, s3, [{"action": "remove-partition-statistics", "snapshot-id": 1}])


def test_remove_partition_specs(client, ns, s3):
    new_table(client, [ADD_SPEC, SET_LAST_SPEC])
    metadata = accept(client, s3, [{"action": "remove-partition-specs", "spec-ids": [0, 42]}]).metadata
    assert ids(metadata["partition-specs"], "spec-id") == [1]
    assert metadata["default-spec-id"] == 1
    assert metadata["last-partition-id"] == 1001  # ids are never reused


def test_remove_schemas(client, ns, s3):
    new_table(client, [ADD_SCHEMA, SET_LAST_SCHEMA])
    metadata = accept(client, s3, [{"action": "remove-schemas", "schema-ids": [0, 42]}]).metadata
    assert ids(metadata["schemas"], "schema-id") == [1]
    assert metadata["current-schema-id"] == 1
    assert metadata["last-column-id"] == 4


def test_add_encryption_key(client, ns, s3):
    new_table(client, version=3)
    first = accept(client, s3, [{"action": "add-encryption-key", "encryption-key": encryption_key("k1")}]).metadata
    assert first["encryption-keys"] == [encryption_key("k1")]
    second = accept(client, s3, [{"action": "add-encryption-key", "encryption-key": encryption_key("k2", b"x")}])
    assert second.metadata["encryption-keys"] == [encryption_key("k1"), encryption_key("k2", b"x")]


def test_add_the_same_encryption_key_changes_nothing(client, ns, s3):
    new_table(client, [{"action": "add-encryption-key", "encryption-key": encryption_key("k1")}], version=3)
    accept_no_change(client, s3, [{"action": "add-encryption-key", "encryption-key": encryption_key("k1")}])


def test_remove_encryption_key(client, ns, s3):
    new_table(
        client,
        [
            {"action": "add-encryption-key", "encryption-key": encryption_key("k1")},
            {"action": "add-encryption-key", "encryption-key": encryption_key("k2")},
        ],
        version=3,
    )
    metadata = accept(client, s3, [{"action": "remove-encryption-key", "key-id": "k1"}]).metadata
    assert metadata["encryption-keys"] == [encryption_key("k2")]
    emptied = accept(client, s3, [{"action": "remove-encryption-key", "key-id": "k2"}]).metadata
    assert emptied.get("encryption-keys", []) == []


def test_snapshot_key_id_survives_commits(client, ns, s3):
    new_table(client, [{"action": "add-encryption-key", "encryption-key": encryption_key("k1")}], version=3)
    added = add_snapshot(1, 1, **{"added-rows": 1, "key-id": "k1"})
    metadata = accept(client, s3, [added, set_ref("main", 1)]).metadata
    assert metadata["snapshots"][0]["key-id"] == "k1"
    later = accept(client, s3, [{"action": "set-properties", "updates": {"k": "v"}}]).metadata
    assert later["snapshots"][0]["key-id"] == "k1"


# --------------------------------------------------------------------------------------------
# Updates that are refused: 400, nothing written
# --------------------------------------------------------------------------------------------

DUPLICATE_IDS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "a", "type": "int", "required": True},
        {"id": 1, "name": "b", "type": "int", "required": True},
    ],
}
NESTED_DUPLICATE_IDS = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "a", "type": "int", "required": True},
        {
            "id": 2,
            "name": "s",
            "required": False,
            "type": {"type": "struct", "fields": [{"id": 1, "name": "x", "type": "int", "required": False}]},
        },
    ],
}
UNKNOWN_TYPE = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "a", "type": "no-such-type", "required": True},
    ],
}

# (case id, table format version, setup commits, updates, fragment of the message or None)
REFUSED_UPDATES = [
    (
        "assign-uuid-replaces",
        2,
        [],
        [{"action": "assign-uuid", "uuid": "9f0b4f4e-3c38-4e1c-9a58-2a58f1d1d3b1"}],
        "UUID",
    ),
    ("assign-uuid-not-a-uuid", 2, [], [{"action": "assign-uuid", "uuid": "not-a-uuid"}], "valid UUID"),
    (
        "upgrade-format-version-downgrade",
        2,
        [],
        [{"action": "upgrade-format-version", "format-version": 1}],
        "downgrade",
    ),
    (
        "upgrade-format-version-unsupported",
        2,
        [],
        [{"action": "upgrade-format-version", "format-version": 4}],
        "unsupported format version",
    ),
    ("add-schema-duplicate-ids", 2, [], [{"action": "add-schema", "schema": DUPLICATE_IDS}], "duplicate"),
    ("add-schema-nested-duplicate-ids", 2, [], [{"action": "add-schema", "schema": NESTED_DUPLICATE_IDS}], "duplicate"),
    ("add-schema-unknown-type", 2, [], [{"action": "add-schema", "schema": UNKNOWN_TYPE}], "no-such-type"),
    (
        "add-schema-v3-type-on-v2",
        2,
        [],
        [
            {
                "action": "add-schema",
                "schema": schema_with({"id": 4, "name": "ns", "type": "timestamp_ns", "required": False}),
            }
        ],
        "timestamp_ns",
    ),
    (
        "add-schema-initial-default-on-v2",
        2,
        [],
        [{"action": "add-schema", "schema": schema_with({**EXTRA_COLUMN, "initial-default": "x"})}],
        "default",
    ),
    (
        "add-schema-optional-identifier-field",
        2,
        [],
        [{"action": "add-schema", "schema": {**schema_with(), "identifier-field-ids": [3]}}],
        "not a required field",
    ),
    (
        "add-schema-unknown-identifier-field",
        2,
        [],
        [{"action": "add-schema", "schema": {**schema_with(), "identifier-field-ids": [42]}}],
        "42",
    ),
    (
        "set-current-schema-without-partition-source",
        2,
        [],
        [{"action": "add-schema", "schema": {"type": "struct", "fields": [SCHEMA["fields"][0]]}}, SET_LAST_SCHEMA],
        "source column",
    ),
    ("set-current-schema-unknown", 2, [], [{"action": "set-current-schema", "schema-id": 42}], "42"),
    ("set-current-schema-none-added", 2, [], [SET_LAST_SCHEMA], "no schema has been added"),
    (
        "add-spec-unknown-source",
        2,
        [],
        [{"action": "add-spec", "spec": {"fields": [{"source-id": 99, "name": "x", "transform": "identity"}]}}],
        "source column",
    ),
    (
        "add-spec-incompatible-transform",
        2,
        [],
        [{"action": "add-spec", "spec": {"fields": [{"source-id": 1, "name": "x", "transform": "day"}]}}],
        "type long for transform: day",
    ),
    (
        "add-spec-duplicate-names",
        2,
        [],
        [
            {
                "action": "add-spec",
                "spec": {
                    "fields": [
                        {"source-id": 1, "name": "x", "transform": "bucket[2]"},
                        {"source-id": 3, "name": "x", "transform": "truncate[2]"},
                    ]
                },
            }
        ],
        "more than once",
    ),
    ("set-default-spec-unknown", 2, [], [{"action": "set-default-spec", "spec-id": 42}], "42"),
    ("set-default-spec-none-added", 2, [], [SET_LAST_SPEC], "no partition spec has been added"),
    (
        "add-sort-order-unknown-source",
        2,
        [],
        [
            {
                "action": "add-sort-order",
                "sort-order": {
                    "order-id": 1,
                    "fields": [
                        {"source-id": 99, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
                    ],
                },
            }
        ],
        "source column",
    ),
    (
        "add-sort-order-incompatible-transform",
        2,
        [],
        [
            {
                "action": "add-sort-order",
                "sort-order": {
                    "order-id": 1,
                    "fields": [{"source-id": 1, "transform": "day", "direction": "asc", "null-order": "nulls-first"}],
                },
            }
        ],
        "type long for transform: day",
    ),
    ("set-default-sort-order-unknown", 2, [], [{"action": "set-default-sort-order", "sort-order-id": 42}], "42"),
    ("add-snapshot-duplicate-id", 2, [append(1, 1)], [add_snapshot(1, 2)], "already exists"),
    ("add-snapshot-unknown-parent", 2, [append(1, 1)], [add_snapshot(2, 2, 77)], "77"),
    ("add-snapshot-stale-sequence-number", 2, [append(1, 5)], [add_snapshot(2, 5, 1)], "sequence number"),
    ("add-snapshot-v3-without-added-rows", 3, [], [add_snapshot(1, 1)], "added-rows"),
    (
        "add-snapshot-v3-first-row-id-behind",
        3,
        [[add_snapshot(1, 1, **{"added-rows": 10})]],
        [add_snapshot(2, 2, 1, **{"first-row-id": 5, "added-rows": 1})],
        "first-row-id",
    ),
    ("set-snapshot-ref-unknown-snapshot", 2, [append(1, 1)], [set_ref("main", 99)], "99"),
    ("set-snapshot-ref-main-as-tag", 2, [append(1, 1)], [set_ref("main", 1, "tag")], "main"),
    (
        "set-snapshot-ref-tag-with-min-snapshots",
        2,
        [append(1, 1)],
        [set_ref("v1", 1, "tag", **{"min-snapshots-to-keep": 2})],
        "Tags do not support",
    ),
    (
        "set-snapshot-ref-zero-min-snapshots",
        2,
        [append(1, 1)],
        [set_ref("dev", 1, **{"min-snapshots-to-keep": 0})],
        "greater than 0",
    ),
    ("set-snapshot-ref-bad-type", 2, [append(1, 1)], [set_ref("dev", 1, "twig")], "twig"),
    (
        "remove-snapshots-malformed",
        2,
        [append(1, 1)],
        [{"action": "remove-snapshots", "snapshot-ids": "1"}],
        "remove-snapshots",
    ),
    ("remove-snapshot-ref-malformed", 2, [append(1, 1)], [{"action": "remove-snapshot-ref"}], "remove-snapshot-ref"),
    (
        "set-location-other-bucket",
        2,
        [],
        [{"action": "set-location", "location": "s3://other-bucket/t"}],
        "outside the warehouse",
    ),
    (
        "set-location-bucket-name-prefix",
        2,
        [],
        [{"action": "set-location", "location": f"{WAREHOUSE}-evil/t"}],
        "outside the warehouse",
    ),
    (
        "set-location-dot-dot",
        2,
        [],
        [{"action": "set-location", "location": f"{WAREHOUSE}/db/../../elsewhere"}],
        "'..' path segment",
    ),
    ("set-location-empty", 2, [], [{"action": "set-location", "location": ""}], "must not be empty"),
    (
        "set-properties-bad-codec",
        2,
        [],
        [{"action": "set-properties", "updates": {"write.metadata.compression-codec": "lz4"}}],
        "compression-codec",
    ),
    (
        "set-properties-bad-previous-versions-max",
        2,
        [],
        [{"action": "set-properties", "updates": {"write.metadata.previous-versions-max": "many"}}],
        "previous-versions-max",
    ),
    ("set-properties-not-strings", 2, [], [{"action": "set-properties", "updates": {"n": 1}}], "set-properties"),
    ("remove-properties-malformed", 2, [], [{"action": "remove-properties", "removals": "a"}], "remove-properties"),
    (
        "set-statistics-missing-blobs",
        2,
        [append(1, 1)],
        [{"action": "set-statistics", "statistics": {k: v for k, v in statistics(1).items() if k != "blob-metadata"}}],
        "set-statistics",
    ),
    (
        "remove-statistics-malformed",
        2,
        [append(1, 1)],
        [{"action": "remove-statistics", "snapshot-id": "one"}],
        "remove-statistics",
    ),
    (
        "set-partition-statistics-missing-size",
        2,
        [append(1, 1)],
        [{"action": "set-partition-statistics", "partition-statistics": {"snapshot-id": 1, "statistics-path": "x"}}],
        "set-partition-statistics",
    ),
    (
        "remove-partition-statistics-malformed",
        2,
        [append(1, 1)],
        [{"action": "remove-partition-statistics"}],
        "remove-partition-statistics",
    ),
    ("remove-partition-specs-default", 2, [], [{"action": "remove-partition-specs", "spec-ids": [0]}], "default"),
    ("remove-schemas-current", 2, [], [{"action": "remove-schemas", "schema-ids": [0]}], "current"),
    (
        "add-encryption-key-not-base64",
        3,
        [],
        [{"action": "add-encryption-key", "encryption-key": {**encryption_key("k1"), "encrypted-key-metadata": "%%%"}}],
        "not base64",
    ),
    (
        "add-encryption-key-conflicting",
        3,
        [[{"action": "add-encryption-key", "encryption-key": encryption_key("k1")}]],
        [{"action": "add-encryption-key", "encryption-key": encryption_key("k1", b"another key")}],
        "k1",
    ),
    (
        "remove-encryption-key-in-use",
        3,
        [
            [
                {"action": "add-encryption-key", "encryption-key": encryption_key("k1")},
                add_snapshot(1, 1, **{"added-rows": 1, "key-id": "k1"}),
            ]
        ],
        [{"action": "remove-encryption-key", "key-id": "k1"}],
        "used by",
    ),
    ("remove-encryption-key-malformed", 3, [], [{"action": "remove-encryption-key"}], "remove-encryption-key"),
    ("unknown-action", 2, [], [{"action": "set-mood", "mood": "happy"}], "set-mood"),
]


# Metadata the rules refuse is typed as Iceberg's reference catalog types it (the Java client maps
# the 400 to that exception): IllegalArgumentException for the builders' argument checks,
# ValidationException for a spec/order/ref that fails its validation; a malformed request stays
# BadRequestException.
VALIDATION_FAILURES = {
    "set-current-schema-without-partition-source",
    "add-spec-unknown-source",
    "add-spec-incompatible-transform",
    "add-sort-order-unknown-source",
    "add-sort-order-incompatible-transform",
    "set-snapshot-ref-tag-with-min-snapshots",
}
MALFORMED_UPDATES = {
    "assign-uuid-not-a-uuid",
    "set-properties-not-strings",
    "remove-properties-malformed",
    "remove-encryption-key-malformed",
    "unknown-action",
    "add-schema-unknown-type",
    "add-schema-optional-identifier-field",
    "add-schema-unknown-identifier-field",
    "set-snapshot-ref-bad-type",
    "remove-snapshots-malformed",
    "remove-snapshot-ref-malformed",
    "set-statistics-missing-blobs",
    "remove-statistics-malformed",
    "set-partition-statistics-missing-size",
    "remove-partition-statistics-malformed",
    # locations: Growler's own rule (the warehouse boundary), not a metadata builder's
    "set-location-other-bucket",
    "set-location-bucket-name-prefix",
    "set-location-dot-dot",
}


def refused_type(case_id: str) -> str:
    if case_id in VALIDATION_FAILURES:
        return "ValidationException"
    return "BadRequestException" if case_id in MALFORMED_UPDATES else "IllegalArgumentException"


@pytest.mark.parametrize(
    ("case_id", "version", "setup", "updates", "fragment"),
    REFUSED_UPDATES,
    ids=[case[0] for case in REFUSED_UPDATES],
)
def test_refused_update(client, ns, s3, case_id, version, setup, updates, fragment):
    new_table(client, *setup, version=version)
    message = reject(client, s3, updates, error_type=refused_type(case_id))
    if fragment:
        assert fragment.lower() in message.lower(), message


@pytest.mark.parametrize(
    "directory",
    ["s3://other-bucket/{key}", "file://{tmp}/{key}", WAREHOUSE + "/db/../../{key}"],
    ids=["other-bucket", "local-filesystem", "dot-dot"],
)
def test_metadata_path_outside_the_warehouse_is_refused(client, ns, s3, tmp_path, directory):
    """write.metadata.path decides where the next metadata file is written, like the location."""
    directory = directory.format(key=f"growler-escape-{uuid.uuid4().hex}", tmp=tmp_path)
    new_table(client)
    message = reject(client, s3, [{"action": "set-properties", "updates": {"write.metadata.path": directory}}])
    assert ("'..' path segment" if "/../" in directory else "outside the warehouse") in message, message
    assert written_under(s3, directory + "/") == set()  # (reject() compared before and after, too)


def test_a_commit_failing_on_its_last_update_applies_nothing(client, ns, s3):
    new_table(client, append(1, 1))
    everything = bucket_objects(s3)
    message = reject(
        client,
        s3,
        [
            {"action": "set-properties", "updates": {"applied": "no"}},
            ADD_SCHEMA,
            SET_LAST_SCHEMA,
            ADD_SPEC,
            ADD_ORDER,
            {"action": "set-location", "location": f"{WAREHOUSE}/moved/nowhere"},
            *append(2, 2, 1),
            {"action": "set-default-sort-order", "sort-order-id": 42},
        ],
        error_type="IllegalArgumentException",
    )
    assert "#8" in message and "42" in message, message  # zero-based: the ninth update
    assert bucket_objects(s3) == everything


def test_a_commit_moving_the_table_outside_the_warehouse_after_valid_updates(client, ns, s3):
    new_table(client)
    reject(
        client,
        s3,
        [
            {"action": "set-properties", "updates": {"applied": "no"}},
            {"action": "set-location", "location": "s3://other-bucket/escaped"},
        ],
    )


@pytest.mark.parametrize(
    "updates",
    [
        [{"action": "add-schema", "schema": DUPLICATE_IDS}, SET_LAST_SCHEMA],
        [{"action": "add-schema", "schema": UNKNOWN_TYPE}, SET_LAST_SCHEMA],
        [{"action": "add-schema", "schema": schema_with()}, {"action": "set-current-schema", "schema-id": 5}],
        [
            {"action": "add-schema", "schema": schema_with()},
            SET_LAST_SCHEMA,
            {"action": "set-default-spec", "spec-id": 3},
        ],
        [
            {"action": "add-schema", "schema": schema_with()},
            SET_LAST_SCHEMA,
            {"action": "set-location", "location": "s3://other-bucket/t"},
        ],
        [
            {"action": "add-schema", "schema": schema_with()},
            SET_LAST_SCHEMA,
            {"action": "set-properties", "updates": {"write.metadata.path": "s3://other-bucket/growler-escape"}},
        ],
        [{"action": "set-properties", "updates": {"no": "schema"}}],
    ],
    ids=[
        "duplicate-ids",
        "unknown-type",
        "unknown-schema-id",
        "unknown-spec-id",
        "outside-warehouse",
        "metadata-path-outside-warehouse",
        "no-schema",
    ],
)
def test_refused_create_through_commit_leaves_no_row_and_no_object(client, ns, s3, db, request, updates):
    objects = writable_objects(s3, f"{WAREHOUSE}/db/fresh-", updates)
    response = post_commit(client, "fresh", updates, [{"type": "assert-create"}])
    assert response.status_code == 400, response.text
    refused_by_the_rules = {"duplicate-ids", "unknown-schema-id", "unknown-spec-id"}
    expected = "IllegalArgumentException" if request.node.callspec.id in refused_by_the_rules else "BadRequestException"
    assert response.json()["error"]["type"] == expected
    assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0
    assert writable_objects(s3, f"{WAREHOUSE}/db/fresh-", updates) == objects
    assert client.head(table_url("fresh")).status_code == 404


# --------------------------------------------------------------------------------------------
# Logs, timestamps, sequence numbers, row ids
# --------------------------------------------------------------------------------------------


def test_metadata_log_grows_by_the_previous_file(client, ns, s3):
    created = new_table(client)
    locations = [created["metadata-location"]]
    stamps = [created["metadata"]["last-updated-ms"]]
    for i in range(3):
        committed = accept(client, s3, [{"action": "set-properties", "updates": {"n": str(i)}}])
        locations.append(committed.location)
        stamps.append(committed.metadata["last-updated-ms"])
    log = committed.metadata["metadata-log"]
    assert [entry["metadata-file"] for entry in log] == locations[:-1]
    assert [entry["timestamp-ms"] for entry in log] == stamps[:-1]
    assert stamps == sorted(stamps)


def test_snapshot_log_and_sequence_numbers(client, ns, s3):
    new_table(client)
    first = accept(client, s3, append(1, 1), [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}])
    ts = snapshot(1, 1)["timestamp-ms"]
    assert first.metadata["snapshot-log"] == [{"snapshot-id": 1, "timestamp-ms": ts}]  # added and made current
    assert first.metadata["last-sequence-number"] == 1
    second = accept(client, s3, [add_snapshot(2, 2, 1, **{"timestamp-ms": ts + 1000}), set_ref("main", 2)])
    assert second.metadata["snapshot-log"][-1] == {"snapshot-id": 2, "timestamp-ms": ts + 1000}
    assert second.metadata["last-sequence-number"] == 2
    rollback = accept(
        client, s3, [set_ref("main", 1)], [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 2}]
    ).metadata
    assert rollback["current-snapshot-id"] == 1
    assert rollback["snapshot-log"][-1] == {"snapshot-id": 1, "timestamp-ms": rollback["last-updated-ms"]}
    assert ids(rollback["snapshot-log"], "snapshot-id") == [1, 2, 1]
    assert rollback["last-sequence-number"] == 2  # a rollback does not move the sequence number


def test_intermediate_snapshot_of_one_commit_is_not_logged(client, ns, s3):
    new_table(client, append(1, 1))
    metadata = accept(client, s3, [*append(2, 2, 1), *append(3, 3, 2)]).metadata
    assert metadata["current-snapshot-id"] == 3
    assert ids(metadata["snapshot-log"], "snapshot-id") == [1, 3]
    assert metadata["last-sequence-number"] == 3


def test_a_parentless_snapshot_never_lowers_the_sequence_number(client, ns, s3):
    new_table(client, append(1, 6))
    metadata = accept(client, s3, [add_snapshot(2, 3)]).metadata
    assert metadata["last-sequence-number"] == 6
