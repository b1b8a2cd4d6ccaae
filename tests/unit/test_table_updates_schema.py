"""Table updates, applied as Java's TableMetadata.Builder does or refused with a 400: assign-uuid,
upgrade-format-version, schemas, partition specs, sort orders."""

from __future__ import annotations

import pytest
from table_metadata_builders import (
    OTHER_UUID,
    TABLE_UUID,
    apply,
    as_json,
    new_table,
    table_with_history,
)
from table_updates_support import (
    NOTE,
    bad,
    schema_with,
)

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
