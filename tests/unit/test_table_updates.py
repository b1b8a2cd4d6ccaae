"""Each of the spec's 23 table updates: applied as Java's TableMetadata.Builder does, rejected with a 400."""

from __future__ import annotations

import pytest
from table_metadata_builders import (
    LOCATION,
    OTHER_UUID,
    T0,
    TABLE_UUID,
    add_snapshot,
    append,
    apply,
    as_json,
    new_table,
    set_ref,
    snapshot,
    table_with_history,
)

from app.ground.errors import BadRequest
from app.rules import table as tm

# new_table(): id=1 ts=2 items=3 geo=4 items.key=5 items.value=6 element=7 name=8 qty=9 geo.lat=10
# geo.country=11; spec 0 = [day(ts) 1000, bucket[16](id) 1001]; sort order 1 = [country asc, id desc].


def bad(metadata: tm.TableMetadata | None, *updates: dict, requirements: list[dict] | None = None) -> str:
    with pytest.raises(BadRequest) as info:
        apply(metadata, *updates, requirements=requirements)
    assert info.value.code == 400
    return info.value.message


def schema_with(metadata: tm.TableMetadata, *extra: dict, schema_id: int = 0) -> dict:
    """The current schema's columns plus ``extra``, as a client's add-schema carries them."""
    columns = [f.model_dump(mode="json") for f in metadata.schema().fields]
    return {"type": "struct", "schema-id": schema_id, "identifier-field-ids": [1], "fields": [*columns, *extra]}


NOTE = {"id": 12, "name": "note", "type": "string", "required": False}
STATS = {
    "snapshot-id": 2,
    "statistics-path": f"{LOCATION}/metadata/stats-2.puffin",
    "file-size-in-bytes": 4096,
    "file-footer-size-in-bytes": 512,
    "blob-metadata": [
        {
            "type": "apache-datasketches-theta-v1",
            "snapshot-id": 2,
            "sequence-number": 2,
            "fields": [1],
            "properties": {"ndv": "42"},
        },
        {"type": "vendor-histogram-v7", "snapshot-id": 2, "sequence-number": 2, "fields": [2]},
    ],
}
PARTITION_STATS = {
    "snapshot-id": 2,
    "statistics-path": f"{LOCATION}/metadata/partition-stats-2.parquet",
    "file-size-in-bytes": 2048,
}
KEY = {
    "key-id": "k1",
    "encrypted-key-metadata": "c2VjcmV0LWtleS1tYXRlcmlhbA==",
    "encrypted-by-id": "kms-1",
    "properties": {"algorithm": "AES_GCM_256"},
}


# -- assign-uuid ----------------------------------------------------------------------------


def test_assign_uuid_with_the_same_uuid_changes_nothing():
    base = new_table()
    assert apply(base, {"action": "assign-uuid", "uuid": TABLE_UUID}) is base


def test_assign_uuid_cannot_change_an_existing_table():
    assert "Cannot change the UUID" in bad(new_table(), {"action": "assign-uuid", "uuid": OTHER_UUID})


# -- upgrade-format-version -----------------------------------------------------------------


def test_upgrade_v1_to_v2_drops_the_v1_only_fields():
    document = as_json(apply(new_table(1), {"action": "upgrade-format-version", "format-version": 2}))
    assert document["format-version"] == 2
    assert "schema" not in document and "partition-spec" not in document
    assert document["last-sequence-number"] == 0


def test_upgrade_v2_to_v3_starts_row_lineage_at_zero():
    upgraded = apply(table_with_history(2), {"action": "upgrade-format-version", "format-version": 3})
    document = as_json(upgraded)
    assert document["format-version"] == 3 and document["next-row-id"] == 0
    assert len(document["snapshots"]) == 3  # nothing lost on the way


def test_upgrade_to_the_current_version_changes_nothing():
    base = new_table(2)
    assert apply(base, {"action": "upgrade-format-version", "format-version": 2}) is base


def test_downgrade_is_a_bad_request():
    assert "Cannot downgrade v3 table to v2" in bad(
        new_table(3), {"action": "upgrade-format-version", "format-version": 2}
    )


def test_upgrade_to_an_unknown_version_is_a_bad_request():
    assert "unsupported format version: v4" in bad(
        new_table(), {"action": "upgrade-format-version", "format-version": 4}
    )


# -- add-schema / set-current-schema --------------------------------------------------------


def test_add_schema_assigns_the_next_id_whatever_the_client_sent():
    metadata = apply(new_table(), {"action": "add-schema", "schema": schema_with(new_table(), NOTE, schema_id=42)})
    assert [s.schema_id for s in metadata.schemas] == [0, 1]
    assert metadata.last_column_id == 12
    assert metadata.current_schema_id == 0  # adding does not make it current


def test_add_schema_then_set_current_to_last_added():
    metadata = apply(
        new_table(),
        {"action": "add-schema", "schema": schema_with(new_table(), NOTE), "last-column-id": 12},
        {"action": "set-current-schema", "schema-id": -1},
    )
    assert metadata.current_schema_id == 1
    assert metadata.schema().find_field("note").field_id == 12


def test_re_adding_an_identical_schema_reuses_its_id():
    base = apply(new_table(), {"action": "add-schema", "schema": schema_with(new_table(), NOTE)})
    metadata = apply(
        base,
        {"action": "add-schema", "schema": schema_with(new_table(), NOTE, schema_id=5)},
        {"action": "set-current-schema", "schema-id": -1},
    )
    assert [s.schema_id for s in metadata.schemas] == [0, 1]
    assert metadata.current_schema_id == 1


def test_add_schema_with_duplicate_field_ids_is_a_bad_request():
    schema = schema_with(new_table(), {"id": 3, "name": "dup", "type": "string", "required": False})
    assert "duplicate field ids [3]" in bad(new_table(), {"action": "add-schema", "schema": schema})


def test_add_schema_with_an_unknown_type_is_a_bad_request():
    schema = schema_with(new_table(), {"id": 12, "name": "x", "type": "varchar(3)", "required": False})
    message = bad(new_table(), {"action": "add-schema", "schema": schema})
    assert "add-schema" in message and "varchar(3)" in message


def test_add_schema_with_a_v3_type_on_a_v2_table_is_a_bad_request():
    schema = schema_with(new_table(), {"id": 12, "name": "t", "type": "timestamp_ns", "required": False})
    assert "timestamp_ns" in bad(new_table(2), {"action": "add-schema", "schema": schema})
    assert apply(new_table(3), {"action": "add-schema", "schema": schema}).schemas[-1].find_field("t")


def test_initial_defaults_are_v3_only_and_kept():
    column = {
        "id": 12,
        "name": "region",
        "type": "string",
        "required": True,
        "initial-default": "emea",
        "write-default": "amer",
    }
    schema = schema_with(new_table(), column)
    assert "initial default" in bad(new_table(2), {"action": "add-schema", "schema": schema})
    document = as_json(apply(new_table(3), {"action": "add-schema", "schema": schema}))
    added = document["schemas"][1]["fields"][-1]
    assert (added["initial-default"], added["write-default"]) == ("emea", "amer")


def test_set_current_schema_to_an_existing_id():
    base = apply(
        new_table(),
        {"action": "add-schema", "schema": schema_with(new_table(), NOTE)},
        {"action": "set-current-schema", "schema-id": -1},
    )
    assert apply(base, {"action": "set-current-schema", "schema-id": 0}).current_schema_id == 0


def test_set_current_schema_to_an_unknown_id_is_a_bad_request():
    assert "unknown schema: 9" in bad(new_table(), {"action": "set-current-schema", "schema-id": 9})


def test_set_current_schema_to_last_added_without_an_add_is_a_bad_request():
    assert "no schema has been added" in bad(new_table(), {"action": "set-current-schema", "schema-id": -1})


# -- add-spec / set-default-spec ------------------------------------------------------------


def test_add_spec_gets_the_next_id_and_moves_last_partition_id():
    spec = {"spec-id": 7, "fields": [{"source-id": 11, "field-id": 1002, "transform": "identity", "name": "country"}]}
    metadata = apply(new_table(), {"action": "add-spec", "spec": spec}, {"action": "set-default-spec", "spec-id": -1})
    assert metadata.default_spec_id == 1
    assert metadata.last_partition_id == 1002
    assert [f.name for f in metadata.spec().fields] == ["country"]


def test_add_spec_without_field_ids_assigns_them_after_last_partition_id():
    spec = {
        "fields": [
            {"source-id": 11, "transform": "identity", "name": "country"},
            {"source-id": 2, "transform": "hour", "name": "ts_hour"},
        ]
    }
    metadata = apply(new_table(), {"action": "add-spec", "spec": spec})
    assert [f.field_id for f in metadata.specs()[1].fields] == [1002, 1003]
    assert metadata.last_partition_id == 1003


def test_re_adding_a_compatible_spec_reuses_its_id():
    same_as_spec_0 = {
        "fields": [
            {"source-id": 2, "field-id": 1000, "transform": "day", "name": "ts_day"},
            {"source-id": 1, "field-id": 1001, "transform": "bucket[16]", "name": "id_bucket"},
        ]
    }
    base = new_table()
    assert (
        apply(base, {"action": "add-spec", "spec": same_as_spec_0}, {"action": "set-default-spec", "spec-id": -1})
        is base
    )


@pytest.mark.parametrize(
    "field, wording",
    [
        ({"source-id": 99, "field-id": 1002, "transform": "identity", "name": "x"}, "Cannot find source column"),
        ({"source-id": 10, "field-id": 1002, "transform": "bucket[4]", "name": "lat_bucket"}, "Invalid source field"),
        ({"source-id": 3, "field-id": 1002, "transform": "identity", "name": "items"}, "non-primitive"),
        ({"source-id": 11, "field-id": 1002, "transform": "identity", "name": "ts_day"}, "more than once"),
        ({"source-id": 11, "field-id": 1002, "transform": "wobble", "name": "w"}, "Invalid source field"),
    ],
)
def test_add_spec_rejects_specs_that_do_not_bind(field, wording):
    spec = {"fields": [{"source-id": 2, "field-id": 1000, "transform": "day", "name": "ts_day"}, field]}
    assert wording in bad(new_table(), {"action": "add-spec", "spec": spec})


def test_v1_specs_must_use_sequential_field_ids():
    spec = {"fields": [{"source-id": 11, "field-id": 1005, "transform": "identity", "name": "country"}]}
    assert "sequential IDs" in bad(new_table(1), {"action": "add-spec", "spec": spec})


def test_set_default_spec_to_an_unknown_id_is_a_bad_request():
    assert "unknown spec: 3" in bad(new_table(), {"action": "set-default-spec", "spec-id": 3})


def test_set_default_spec_to_last_added_without_an_add_is_a_bad_request():
    assert "no partition spec has been added" in bad(new_table(), {"action": "set-default-spec", "spec-id": -1})


# -- add-sort-order / set-default-sort-order -----------------------------------------------


def test_add_sort_order_gets_the_next_id():
    order = {
        "order-id": 1,
        "fields": [{"source-id": 2, "transform": "hour", "direction": "desc", "null-order": "nulls-last"}],
    }
    metadata = apply(
        new_table(),
        {"action": "add-sort-order", "sort-order": order},
        {"action": "set-default-sort-order", "sort-order-id": -1},
    )
    assert metadata.default_sort_order_id == 2
    assert str(metadata.sort_order().fields[0].transform) == "hour"


def test_unsorted_is_order_zero_and_reused():
    unsorted = {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}}
    metadata = apply(new_table(), unsorted, {"action": "set-default-sort-order", "sort-order-id": -1})
    assert metadata.default_sort_order_id == 0
    assert apply(metadata, unsorted, {"action": "set-default-sort-order", "sort-order-id": -1}) is metadata


def test_re_adding_an_existing_sort_order_reuses_its_id():
    base = new_table()
    same = {
        "order-id": 9,
        "fields": [
            {"source-id": 11, "transform": "identity", "direction": "asc", "null-order": "nulls-first"},
            {"source-id": 1, "transform": "identity", "direction": "desc", "null-order": "nulls-last"},
        ],
    }
    assert (
        apply(
            base,
            {"action": "add-sort-order", "sort-order": same},
            {"action": "set-default-sort-order", "sort-order-id": -1},
        )
        is base
    )


def test_add_sort_order_on_an_unknown_column_is_a_bad_request():
    order = {
        "order-id": 1,
        "fields": [{"source-id": 77, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}],
    }
    assert "Cannot find source column" in bad(new_table(), {"action": "add-sort-order", "sort-order": order})


def test_set_default_sort_order_to_an_unknown_id_is_a_bad_request():
    assert "unknown sort order: 4" in bad(new_table(), {"action": "set-default-sort-order", "sort-order-id": 4})


# -- add-snapshot ---------------------------------------------------------------------------


def test_add_snapshot_records_it_and_the_sequence_number():
    metadata = apply(new_table(), add_snapshot(snapshot(1, sequence_number=1)))
    assert metadata.snapshot_by_id(1).manifest_list.endswith("snap-1-1-abc.avro")
    assert metadata.last_sequence_number == 1
    assert metadata.current_snapshot_id is None  # only set-snapshot-ref moves a branch


def test_add_snapshot_twice_is_a_bad_request():
    assert "already exists for id: 3" in bad(
        table_with_history(), add_snapshot(snapshot(3, parent=2, sequence_number=9))
    )


def test_add_snapshot_with_an_unknown_parent_is_a_bad_request():
    assert "Parent snapshot 77" in bad(table_with_history(), add_snapshot(snapshot(4, parent=77, sequence_number=4)))


def test_add_snapshot_that_is_its_own_parent_is_a_bad_request():
    assert "own parent" in bad(table_with_history(), add_snapshot(snapshot(4, parent=4, sequence_number=4)))


@pytest.mark.parametrize("format_version", [2, 3])
def test_add_snapshot_with_a_stale_sequence_number_is_a_bad_request(format_version):
    extra = {"first-row-id": 10_000, "added-rows": 1} if format_version == 3 else {}
    message = bad(table_with_history(format_version), add_snapshot(snapshot(4, parent=3, sequence_number=3, **extra)))
    assert "sequence number 3 older than last sequence number 3" in message


def test_a_parentless_snapshot_never_lowers_last_sequence_number():
    metadata = apply(table_with_history(), add_snapshot(snapshot(9, sequence_number=1)))
    assert metadata.last_sequence_number == 3


def test_v1_snapshots_carry_no_sequence_numbers():
    document = as_json(append(new_table(1), 1))
    assert "sequence-number" not in document["snapshots"][0]
    assert "last-sequence-number" not in document


def test_v3_snapshot_advances_next_row_id_by_added_rows():
    metadata = append(new_table(3), 1, **{"first-row-id": 0, "added-rows": 25})
    metadata = append(metadata, 2, parent=1, **{"first-row-id": 25, "added-rows": 5})
    assert metadata.next_row_id == 30
    assert [s.first_row_id for s in metadata.snapshots] == [0, 25]


def test_v3_snapshot_without_first_row_id_gets_next_row_id():
    metadata = append(new_table(3), 1, **{"first-row-id": 0, "added-rows": 25})
    metadata = apply(metadata, add_snapshot(snapshot(2, parent=1, sequence_number=2, **{"added-rows": 4})))
    assert metadata.snapshot_by_id(2).first_row_id == 25
    assert metadata.next_row_id == 29


def test_v3_snapshot_behind_next_row_id_is_a_bad_request():
    metadata = append(new_table(3), 1, **{"first-row-id": 0, "added-rows": 25})
    message = bad(
        metadata, add_snapshot(snapshot(2, parent=1, sequence_number=2, **{"first-row-id": 20, "added-rows": 1}))
    )
    assert "first-row-id is behind table next-row-id: 20 < 25" in message


def test_v3_snapshot_without_added_rows_is_a_bad_request():
    assert "added-rows" in bad(new_table(3), add_snapshot(snapshot(1, sequence_number=1, **{"first-row-id": 0})))


def test_snapshot_key_id_is_kept():
    metadata = apply(
        new_table(3),
        {"action": "add-encryption-key", "encryption-key": KEY},
        add_snapshot(snapshot(1, sequence_number=1, **{"first-row-id": 0, "added-rows": 1, "key-id": "k1"})),
    )
    assert as_json(metadata)["snapshots"][0]["key-id"] == "k1"


# -- set-snapshot-ref -----------------------------------------------------------------------


def test_moving_main_to_an_added_snapshot_logs_the_snapshot_time():
    snap = snapshot(1, sequence_number=1, timestamp_ms=T0 + 500)
    metadata = apply(new_table(), add_snapshot(snap), set_ref("main", 1), now_ms=T0 + 9_000)
    assert metadata.current_snapshot_id == 1
    assert [(e.snapshot_id, e.timestamp_ms) for e in metadata.snapshot_log] == [(1, T0 + 500)]


def test_rolling_main_back_logs_now():
    metadata = apply(table_with_history(), set_ref("main", 1), now_ms=T0 + 99_000)
    assert metadata.current_snapshot_id == 1
    assert metadata.snapshot_log[-1].snapshot_id == 1
    assert metadata.snapshot_log[-1].timestamp_ms == T0 + 99_000


def test_creating_a_tag_and_a_branch_leaves_main_alone():
    base = table_with_history()
    metadata = apply(
        base,
        set_ref("v1", 1, "tag", **{"max-ref-age-ms": 86_400_000}),
        set_ref("dev", 2, "branch", **{"min-snapshots-to-keep": 3}),
    )
    assert metadata.refs["v1"].snapshot_ref_type.value == "tag"
    assert metadata.refs["dev"].min_snapshots_to_keep == 3
    assert metadata.current_snapshot_id == 3 and metadata.snapshot_log == base.snapshot_log


def test_setting_a_ref_to_what_it_is_changes_nothing():
    base = table_with_history()
    assert apply(base, set_ref("main", 3)) is base


def test_setting_a_ref_to_an_unknown_snapshot_is_a_bad_request():
    assert "Cannot set dev to unknown snapshot: 42" in bad(table_with_history(), set_ref("dev", 42))


def test_tags_cannot_keep_snapshots():
    assert "minSnapshotsToKeep" in bad(table_with_history(), set_ref("v1", 1, "tag", **{"min-snapshots-to-keep": 1}))


def test_main_cannot_be_a_tag():
    assert "main must be a branch" in bad(table_with_history(), set_ref("main", 2, "tag"))


# -- remove-snapshots -----------------------------------------------------------------------


def test_remove_snapshots_takes_their_refs_statistics_and_history_along():
    base = apply(
        table_with_history(),
        set_ref("old", 1, "tag"),
        {"action": "set-statistics", "statistics": {**STATS, "snapshot-id": 1}},
        {"action": "set-partition-statistics", "partition-statistics": {**PARTITION_STATS, "snapshot-id": 1}},
    )
    metadata = apply(base, {"action": "remove-snapshots", "snapshot-ids": [1]})
    assert [s.snapshot_id for s in metadata.snapshots] == [2, 3]
    assert "old" not in metadata.refs and metadata.statistics == [] and metadata.partition_statistics == []
    assert [e.snapshot_id for e in metadata.snapshot_log] == [2, 3]
    assert metadata.snapshot_by_id(2).parent_snapshot_id == 1  # lineage is not rewritten (Java)


def test_removing_a_snapshot_in_the_middle_of_history_drops_everything_before_it():
    metadata = apply(table_with_history(), {"action": "remove-snapshots", "snapshot-ids": [2]})
    assert [e.snapshot_id for e in metadata.snapshot_log] == [3]


def test_removing_the_current_snapshot_clears_main():
    metadata = apply(table_with_history(), {"action": "remove-snapshots", "snapshot-ids": [3]})
    assert metadata.current_snapshot_id is None and "main" not in metadata.refs


def test_removing_unknown_snapshots_changes_nothing():
    base = table_with_history()
    assert apply(base, {"action": "remove-snapshots", "snapshot-ids": [404]}) is base


# -- remove-snapshot-ref --------------------------------------------------------------------


def test_remove_a_branch():
    metadata = apply(
        apply(table_with_history(), set_ref("dev", 2)), {"action": "remove-snapshot-ref", "ref-name": "dev"}
    )
    assert set(metadata.refs) == {"main"}


def test_removing_main_clears_the_current_snapshot():
    metadata = apply(table_with_history(), {"action": "remove-snapshot-ref", "ref-name": "main"})
    assert metadata.current_snapshot_id is None and [s.snapshot_id for s in metadata.snapshots] == [1, 2, 3]
    assert "current-snapshot-id" not in as_json(metadata)


def test_removing_an_unknown_ref_changes_nothing():
    base = table_with_history()
    assert apply(base, {"action": "remove-snapshot-ref", "ref-name": "nope"}) is base


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
