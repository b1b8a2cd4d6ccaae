"""updateTable: updates the rules refuse (400 with the reference catalog's exception type and
wording), and that a refused commit writes nothing: no row, no object, the table as it was."""

from __future__ import annotations

import uuid

import pytest

from tests.api.table_commits.commits_support import (
    ADD_ORDER,
    ADD_SCHEMA,
    ADD_SPEC,
    EXTRA_COLUMN,
    SET_LAST_SCHEMA,
    SET_LAST_SPEC,
    WAREHOUSE,
    add_snapshot,
    append,
    bucket_objects,
    encryption_key,
    new_table,
    post_commit,
    reject,
    schema_with,
    set_ref,
    statistics,
    writable_objects,
    written_under,
)
from tests.api.tables_support import (
    SCHEMA,
    table_url,
)

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
