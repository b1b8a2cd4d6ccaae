"""Table updates, applied as Java's TableMetadata.Builder does or refused with a 400: location,
properties, statistics, removing specs and schemas, encryption keys; and parsing all 23 actions."""

from __future__ import annotations

import pytest
from table_metadata_builders import (
    LOCATION,
    TABLE_UUID,
    add_snapshot,
    apply,
    as_json,
    new_table,
    set_ref,
    snapshot,
    table_with_history,
)
from table_updates_support import (
    KEY,
    NOTE,
    PARTITION_STATS,
    STATS,
    bad,
    schema_with,
    tm,
)

from app.ground.errors import BadRequest

# -- set-location ---------------------------------------------------------------------------


def test_set_location():
    assert apply(new_table(), {"action": "set-location", "location": "s3://other/place"}).location == "s3://other/place"


def test_set_location_to_nothing_is_a_bad_request():
    assert "must not be empty" in bad(new_table(), {"action": "set-location", "location": " "})


# -- set-properties / remove-properties -----------------------------------------------------


def test_set_properties_merges():
    metadata = apply(new_table(), {"action": "set-properties", "updates": {"owner": "ops", "team": "data"}})
    assert metadata.properties["owner"] == "ops" and metadata.properties["team"] == "data"
    assert metadata.properties["write.parquet.compression-codec"] == "zstd"


def test_set_properties_with_an_unknown_metadata_codec_is_a_bad_request():
    message = bad(new_table(), {"action": "set-properties", "updates": {"write.metadata.compression-codec": "lz4"}})
    assert "write.metadata.compression-codec" in message


def test_remove_properties_ignores_missing_keys():
    metadata = apply(new_table(), {"action": "remove-properties", "removals": ["owner", "never-set"]})
    assert "owner" not in metadata.properties and "write.parquet.compression-codec" in metadata.properties


# -- statistics -----------------------------------------------------------------------------


def test_set_statistics_keeps_every_blob_type_and_replaces_per_snapshot():
    metadata = apply(table_with_history(), {"action": "set-statistics", "snapshot-id": 2, "statistics": STATS})
    assert [b["type"] for b in as_json(metadata)["statistics"][0]["blob-metadata"]] == [
        "apache-datasketches-theta-v1",
        "vendor-histogram-v7",
    ]
    replaced = apply(metadata, {"action": "set-statistics", "statistics": {**STATS, "file-size-in-bytes": 1}})
    assert [s.file_size_in_bytes for s in replaced.statistics] == [1]


def test_remove_statistics():
    metadata = apply(table_with_history(), {"action": "set-statistics", "statistics": STATS})
    assert apply(metadata, {"action": "remove-statistics", "snapshot-id": 2}).statistics == []


def test_removing_missing_statistics_changes_nothing():
    base = table_with_history()
    assert apply(base, {"action": "remove-statistics", "snapshot-id": 2}) is base


def test_set_and_remove_partition_statistics():
    metadata = apply(
        table_with_history(), {"action": "set-partition-statistics", "partition-statistics": PARTITION_STATS}
    )
    assert metadata.partition_statistics[0].statistics_path.endswith("partition-stats-2.parquet")
    removed = apply(metadata, {"action": "remove-partition-statistics", "snapshot-id": 2})
    assert removed.partition_statistics == []
    assert apply(removed, {"action": "remove-partition-statistics", "snapshot-id": 2}) is removed


def test_set_statistics_without_a_file_is_a_bad_request():
    assert "set-statistics" in bad(new_table(), {"action": "set-statistics", "snapshot-id": 1})


# -- remove-partition-specs / remove-schemas -----------------------------------------------


def evolved_spec_and_schema() -> tm.TableMetadata:
    spec = {"fields": [{"source-id": 11, "transform": "identity", "name": "country"}]}
    return apply(
        new_table(),
        {"action": "add-spec", "spec": spec},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-schema", "schema": schema_with(new_table(), NOTE)},
        {"action": "set-current-schema", "schema-id": -1},
    )


def test_remove_partition_specs():
    metadata = apply(evolved_spec_and_schema(), {"action": "remove-partition-specs", "spec-ids": [0, 8]})
    assert list(metadata.specs()) == [1]


def test_removing_the_default_spec_is_a_bad_request():
    message = bad(evolved_spec_and_schema(), {"action": "remove-partition-specs", "spec-ids": [1]})
    assert "Cannot remove the default partition spec: 1" in message


def test_remove_schemas():
    metadata = apply(evolved_spec_and_schema(), {"action": "remove-schemas", "schema-ids": [0, 8]})
    assert [s.schema_id for s in metadata.schemas] == [1]


def test_removing_the_current_schema_is_a_bad_request():
    assert "Cannot remove the current schema: 1" in bad(
        evolved_spec_and_schema(), {"action": "remove-schemas", "schema-ids": [1]}
    )


# -- encryption keys ------------------------------------------------------------------------


def test_add_encryption_key_is_stored_and_idempotent():
    metadata = apply(new_table(3), {"action": "add-encryption-key", "encryption-key": KEY})
    assert as_json(metadata)["encryption-keys"] == [KEY]
    assert apply(metadata, {"action": "add-encryption-key", "encryption-key": KEY}) is metadata


def test_add_a_different_key_under_a_used_id_is_a_bad_request():
    metadata = apply(new_table(3), {"action": "add-encryption-key", "encryption-key": KEY})
    other = {**KEY, "encrypted-key-metadata": "b3RoZXI="}
    assert "already exists" in bad(metadata, {"action": "add-encryption-key", "encryption-key": other})


def test_add_encryption_key_that_is_not_base64_is_a_bad_request():
    key = {**KEY, "encrypted-key-metadata": "not base64!"}
    assert "not base64" in bad(new_table(3), {"action": "add-encryption-key", "encryption-key": key})


def test_remove_encryption_key():
    metadata = apply(
        new_table(3),
        {"action": "add-encryption-key", "encryption-key": KEY},
        {"action": "add-encryption-key", "encryption-key": {**KEY, "key-id": "k2"}},
    )
    removed = apply(metadata, {"action": "remove-encryption-key", "key-id": "k1"})
    assert [k["key-id"] for k in as_json(removed)["encryption-keys"]] == ["k2"]
    assert apply(removed, {"action": "remove-encryption-key", "key-id": "k1"}) is removed


def test_a_key_in_use_by_a_snapshot_cannot_be_removed():
    metadata = apply(
        new_table(3),
        {"action": "add-encryption-key", "encryption-key": KEY},
        add_snapshot(snapshot(1, sequence_number=1, **{"first-row-id": 0, "added-rows": 1, "key-id": "k1"})),
    )
    assert "used by snapshots [1]" in bad(metadata, {"action": "remove-encryption-key", "key-id": "k1"})


# -- parsing --------------------------------------------------------------------------------


def test_parse_updates_covers_all_23_actions():
    raw = [
        {"action": "assign-uuid", "uuid": TABLE_UUID},
        {"action": "upgrade-format-version", "format-version": 3},
        {"action": "add-schema", "schema": schema_with(new_table(), NOTE)},
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        add_snapshot(snapshot(1)),
        set_ref("main", 1),
        {"action": "remove-snapshots", "snapshot-ids": [1]},
        {"action": "remove-snapshot-ref", "ref-name": "main"},
        {"action": "set-location", "location": LOCATION},
        {"action": "set-properties", "updates": {"a": "b"}},
        {"action": "remove-properties", "removals": ["a"]},
        {"action": "set-statistics", "statistics": STATS},
        {"action": "remove-statistics", "snapshot-id": 2},
        {"action": "set-partition-statistics", "partition-statistics": PARTITION_STATS},
        {"action": "remove-partition-statistics", "snapshot-id": 2},
        {"action": "remove-partition-specs", "spec-ids": [0]},
        {"action": "remove-schemas", "schema-ids": [0]},
        {"action": "add-encryption-key", "encryption-key": KEY},
        {"action": "remove-encryption-key", "key-id": "k1"},
    ]
    parsed = tm.parse_updates(raw)
    assert [u.action for u in parsed] == [r["action"] for r in raw]
    assert len({u.action for u in parsed}) == 23


@pytest.mark.parametrize(
    "raw, wording",
    [
        ({"action": "add-view-version", "view-version": {}}, "add-view-version"),
        ({"action": "explode"}, "explode"),
        ({"action": "set-current-schema", "schema-id": "latest"}, "schema-id"),
        ({"action": "add-schema", "schema": {"type": "struct", "fields": [{"id": 1, "name": "a"}]}}, "add-schema"),
        ({"action": "set-snapshot-ref", "ref-name": "main", "type": "leaf", "snapshot-id": 1}, "type"),
        ({"action": "remove-snapshots", "snapshot-ids": "all"}, "snapshot-ids"),
        ({"action": "set-statistics"}, "statistics"),
        ({"updates": {}}, "action"),
    ],
)
def test_bad_updates_are_bad_requests(raw, wording):
    with pytest.raises(BadRequest) as info:
        tm.parse_updates([raw])
    assert wording in info.value.message


def test_the_failing_update_is_named():
    message = bad(
        new_table(),
        {"action": "set-properties", "updates": {"a": "b"}},
        {"action": "set-current-schema", "schema-id": 9},
    )
    assert message.startswith("Invalid table update #1 (set-current-schema)")
