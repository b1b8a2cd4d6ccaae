"""Creating tables: fresh ids, specs and orders renumbered, format versions, invalid definitions; and
staged creates (assert-create with the full table as updates), as PyIceberg and Spark send them."""

from __future__ import annotations

import json
import uuid

import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.metadata import new_table_metadata as pyiceberg_new_table_metadata
from pyiceberg.table.sorting import NullOrder, SortDirection, SortField, SortOrder
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSortOrderUpdate,
    AssertCreate,
    AssignUUIDUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSortOrderUpdate,
    SetDefaultSpecUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    UpgradeFormatVersionUpdate,
)
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType
from table_metadata_builders import (
    LOCATION,
    T0,
    TABLE_UUID,
    add_snapshot,
    as_json,
    commit,
    create_request,
    event_schema,
    new_table,
    new_table_metadata,
    set_ref,
    snapshot,
)

from app.ground.errors import BadRequest
from app.rules import table as tm

# -- new_table_metadata: fresh ids ----------------------------------------------------------


def test_columns_are_renumbered_in_java_order_through_map_list_struct():
    schema = new_table().schema()
    ids = {
        name: schema.find_field(name).field_id
        for name in (
            "id",
            "ts",
            "items",
            "geo",
            "items.key",
            "items.value",
            "items.value.element",
            "items.value.element.name",
            "items.value.element.qty",
            "geo.lat",
            "geo.country",
        )
    }
    assert ids == {
        "id": 1,
        "ts": 2,
        "items": 3,
        "geo": 4,
        "items.key": 5,
        "items.value": 6,
        "items.value.element": 7,
        "items.value.element.name": 8,
        "items.value.element.qty": 9,
        "geo.lat": 10,
        "geo.country": 11,
    }
    assert schema.schema_id == 0  # the client's 7 is not kept
    assert schema.identifier_field_ids == [1]  # was 10
    assert schema.find_field("ts").doc == "event time"


def test_create_records_last_ids_and_time():
    metadata = new_table()
    assert metadata.last_column_id == 11
    assert metadata.last_partition_id == 1001
    assert metadata.last_updated_ms == T0
    assert metadata.location == LOCATION  # the resolved location, not the request's
    assert str(metadata.table_uuid) == TABLE_UUID


def test_partition_spec_and_sort_order_follow_the_renumbered_columns():
    metadata = new_table()
    spec = as_json(metadata)["partition-specs"]
    assert spec == [
        {
            "spec-id": 0,
            "fields": [
                {"source-id": 2, "field-id": 1000, "transform": "day", "name": "ts_day"},
                {"source-id": 1, "field-id": 1001, "transform": "bucket[16]", "name": "id_bucket"},
            ],
        }
    ]
    orders = as_json(metadata)["sort-orders"]
    assert metadata.default_sort_order_id == 1
    assert orders == [
        {
            "order-id": 1,
            "fields": [
                {"source-id": 11, "transform": "identity", "direction": "asc", "null-order": "nulls-first"},
                {"source-id": 1, "transform": "identity", "direction": "desc", "null-order": "nulls-last"},
            ],
        }
    ]


def test_partition_field_ids_are_reassigned_from_1000_and_may_be_omitted():
    spec = {
        "fields": [
            {"source-id": 22, "field-id": 5000, "transform": "identity", "name": "country"},
            {"source-id": 11, "transform": "hour", "name": "ts_hour"},
        ]
    }
    metadata = new_table(**{"partition-spec": spec})
    assert [(f.source_id, f.field_id) for f in metadata.spec().fields] == [(11, 1000), (2, 1001)]


def test_unpartitioned_and_unsorted_by_default():
    metadata = new_table(**{"partition-spec": None, "write-order": None})
    assert metadata.spec().fields == () and metadata.last_partition_id == 999
    assert metadata.default_sort_order_id == 0 and metadata.sort_order().is_unsorted


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_format_versions(format_version):
    document = as_json(new_table(format_version))
    assert document["format-version"] == format_version
    assert "format-version" not in document["properties"]
    assert document["properties"]["owner"] == "analytics"
    assert ("schema" in document) == (format_version == 1)
    assert ("partition-spec" in document) == (format_version == 1)
    assert ("last-sequence-number" in document) == (format_version >= 2)
    assert ("next-row-id" in document) == (format_version == 3)


def test_v1_carries_the_current_schema_and_spec_in_legacy_fields():
    document = as_json(new_table(1))
    assert document["schema"] == document["schemas"][0]
    assert document["partition-spec"] == document["partition-specs"][0]["fields"]


def test_format_version_defaults_to_2():
    assert new_table(format_version=None).format_version == 2  # type: ignore[arg-type]


def test_reserved_properties_are_not_stored():
    request = create_request(3)
    request["properties"].update({"uuid": "x", "current-snapshot-id": "5", "snapshot-count": "9"})
    metadata = new_table_metadata(request, location=LOCATION, now_ms=T0)
    assert set(metadata.properties) == {"owner", "write.parquet.compression-codec"}


@pytest.mark.parametrize("version", ["4", "0", "two", "-1"])
def test_invalid_format_versions_are_bad_requests(version):
    with pytest.raises(BadRequest) as info:
        new_table_metadata(create_request(version), location=LOCATION, now_ms=T0)
    assert "format-version" in info.value.message


def schema_variant(*fields: dict) -> dict:
    return {"type": "struct", "fields": list(fields)}


ID = {"id": 1, "name": "id", "type": "long", "required": True}


@pytest.mark.parametrize(
    "overrides, wording",
    [
        ({"schema": schema_variant({"id": 1, "name": "a", "type": "varchar", "required": True})}, "varchar"),
        (
            {"schema": schema_variant(ID, {"id": 2, "name": "id", "type": "string", "required": False})},
            "multiple fields for name id",
        ),
        (
            {"schema": schema_variant(ID, {"id": 1, "name": "b", "type": "string", "required": False})},
            "duplicate field ids [1]",
        ),
        (
            {"schema": schema_variant(ID, {"id": 2, "name": "t", "type": "timestamp_ns", "required": False})},
            "timestamp_ns",
        ),
        ({"schema": schema_variant({**ID, "initial-default": 5})}, "initial default"),
        ({"schema": {**event_schema(), "identifier-field-ids": [11]}}, "not a required field"),
        ({"schema": None}, "schema"),
        (
            {"partition-spec": {"fields": [{"source-id": 99, "transform": "identity", "name": "x"}]}},
            "Could not find in old schema",
        ),
        (
            {"partition-spec": {"fields": [{"source-id": 21, "transform": "bucket[8]", "name": "lat_b"}]}},
            "Invalid source field",
        ),
        (
            {"partition-spec": {"fields": [{"source-id": 12, "transform": "identity", "name": "items"}]}},
            "non-primitive",
        ),
        (
            {
                "partition-spec": {
                    "fields": [
                        {"source-id": 10, "transform": "identity", "name": "p"},
                        {"source-id": 11, "transform": "day", "name": "p"},
                    ]
                }
            },
            "more than once",
        ),
        ({"partition-spec": {"fields": [{"source-id": 11, "transform": "day", "name": "id"}]}}, "exists in schema"),
        (
            {
                "write-order": {
                    "order-id": 1,
                    "fields": [
                        {"source-id": 99, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}
                    ],
                }
            },
            "Could not find in old schema",
        ),
        (
            {
                "write-order": {
                    "order-id": 1,
                    "fields": [{"source-id": 22, "transform": "year", "direction": "asc", "null-order": "nulls-first"}],
                }
            },
            "Invalid source field",
        ),
        ({"properties": {"write.metadata.compression-codec": "zstd"}}, "compression-codec"),
    ],
)
def test_invalid_table_definitions_are_bad_requests(overrides, wording):
    request = create_request(2, **overrides) if "properties" not in overrides else {**create_request(), **overrides}
    with pytest.raises(BadRequest) as info:
        new_table_metadata(request, location=LOCATION, now_ms=T0)
    assert info.value.code == 400
    assert wording in info.value.message


def test_v3_create_keeps_default_values():
    schema = schema_variant(
        ID,
        {
            "id": 2,
            "name": "region",
            "type": "string",
            "required": False,
            "initial-default": "emea",
            "write-default": "amer",
        },
    )
    metadata = new_table_metadata(
        create_request(3, schema=schema, **{"partition-spec": None, "write-order": None}), location=LOCATION, now_ms=T0
    )
    field = as_json(metadata)["schemas"][0]["fields"][1]
    assert (field["initial-default"], field["write-default"]) == ("emea", "amer")


def test_a_table_uuid_is_generated_when_not_given():
    first = new_table_metadata(create_request(), location=LOCATION, now_ms=T0)
    second = new_table_metadata(create_request(), location=LOCATION, now_ms=T0)
    assert first.table_uuid != second.table_uuid
    assert uuid.UUID(tm.table_uuid(first)).version == 4


# -- staged creates (assert-create + the full table as updates) ------------------------------


def pyiceberg_create_transaction_updates(format_version: int) -> list[dict]:
    """Exactly what PyIceberg's ``create_table_transaction`` sends (``_initial_changes``)."""
    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "ts", TimestamptzType(), required=False),
        NestedField(3, "country", StringType(), required=False),
        identifier_field_ids=[1],
    )
    spec = PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day"))
    order = SortOrder(SortField(3, IdentityTransform(), SortDirection.ASC, NullOrder.NULLS_FIRST))
    staged = pyiceberg_new_table_metadata(
        schema,
        spec,
        order,
        LOCATION,
        {"format-version": str(format_version), "owner": "py"},
        table_uuid=uuid.UUID(TABLE_UUID),
    )
    updates = (
        AssignUUIDUpdate(uuid=staged.table_uuid),
        UpgradeFormatVersionUpdate(format_version=staged.format_version),
        AddSchemaUpdate(schema_=staged.schema()),
        SetCurrentSchemaUpdate(schema_id=-1),
        AddPartitionSpecUpdate(spec=staged.spec()),
        SetDefaultSpecUpdate(spec_id=-1),
        AddSortOrderUpdate(sort_order=staged.sort_order()),
        SetDefaultSortOrderUpdate(sort_order_id=-1),
        SetLocationUpdate(location=staged.location),
        SetPropertiesUpdate(updates=staged.properties),
    )
    return [json.loads(update.model_dump_json()) for update in updates]


@pytest.mark.parametrize("format_version", [1, 2])
def test_pyiceberg_create_table_transaction(format_version):
    requirements = [json.loads(AssertCreate().model_dump_json())]
    metadata = commit(
        None, requirements, pyiceberg_create_transaction_updates(format_version), base_location=None, now_ms=T0
    )
    assert tm.table_uuid(metadata) == TABLE_UUID
    assert metadata.format_version == format_version
    assert (metadata.current_schema_id, metadata.default_spec_id, metadata.default_sort_order_id) == (0, 0, 1)
    assert [f.name for f in metadata.schema().fields] == ["id", "ts", "country"]
    assert [(f.source_id, f.field_id, str(f.transform)) for f in metadata.spec().fields] == [(2, 1000, "day")]
    assert metadata.last_partition_id == 1000 and metadata.last_column_id == 3
    assert metadata.properties == {"owner": "py"}
    assert metadata.location == LOCATION and metadata.last_updated_ms == T0
    assert metadata.metadata_log == [] and metadata.snapshots == []


def spark_ctas_updates(format_version: int = 2) -> list[dict]:
    """Java's RESTSessionCatalog create transaction with data (CTAS), as it goes over the wire."""
    snap = snapshot(8271, sequence_number=1, timestamp_ms=T0 + 1234)
    if format_version >= 3:
        snap.update({"first-row-id": 0, "added-rows": 100})
    return [
        {"action": "assign-uuid", "uuid": TABLE_UUID},
        {"action": "upgrade-format-version", "format-version": format_version},
        {
            "action": "add-schema",
            "schema": {
                "type": "struct",
                "schema-id": 0,
                "fields": [
                    {"id": 1, "name": "id", "type": "long", "required": False},
                    {"id": 2, "name": "data", "type": "string", "required": False},
                ],
            },
            "last-column-id": 2,
        },
        {"action": "set-current-schema", "schema-id": -1},
        {"action": "add-spec", "spec": {"spec-id": 0, "fields": []}},
        {"action": "set-default-spec", "spec-id": -1},
        {"action": "add-sort-order", "sort-order": {"order-id": 0, "fields": []}},
        {"action": "set-default-sort-order", "sort-order-id": -1},
        {"action": "set-location", "location": LOCATION},
        {"action": "set-properties", "updates": {"write.parquet.compression-codec": "zstd"}},
        add_snapshot(snap),
        set_ref("main", 8271),
    ]


@pytest.mark.parametrize("format_version", [2, 3])
def test_spark_ctas_staged_create_with_a_snapshot(format_version):
    metadata = commit(
        None, [{"type": "assert-create"}], spark_ctas_updates(format_version), base_location=None, now_ms=T0 + 2000
    )
    assert metadata.format_version == format_version
    assert metadata.current_snapshot_id == 8271
    assert [(e.snapshot_id, e.timestamp_ms) for e in metadata.snapshot_log] == [(8271, T0 + 1234)]
    assert metadata.last_sequence_number == 1
    assert metadata.spec().fields == () and metadata.default_sort_order_id == 0
    if format_version == 3:
        assert metadata.next_row_id == 100
    assert tm.parse_metadata(tm.to_json(metadata)) == metadata


def test_staged_create_without_a_location_uses_the_default_or_fails():
    updates = [u for u in spark_ctas_updates() if u["action"] != "set-location"]
    with pytest.raises(BadRequest, match="location"):
        commit(None, [{"type": "assert-create"}], updates, base_location=None, now_ms=T0)
    metadata = commit(
        None,
        [{"type": "assert-create"}],
        updates,
        base_location=None,
        now_ms=T0,
        default_location="s3://warehouse/staged",
    )
    assert metadata.location == "s3://warehouse/staged"


def test_staged_create_without_a_schema_is_a_bad_request():
    with pytest.raises(BadRequest, match="schema"):
        commit(
            None,
            [{"type": "assert-create"}],
            [{"action": "set-location", "location": LOCATION}],
            base_location=None,
            now_ms=T0,
        )


def test_staged_create_without_assign_uuid_gets_a_fresh_uuid():
    updates = [u for u in spark_ctas_updates() if u["action"] != "assign-uuid"]
    metadata = commit(None, [{"type": "assert-create"}], updates, base_location=None, now_ms=T0)
    assert tm.table_uuid(metadata) != TABLE_UUID and uuid.UUID(tm.table_uuid(metadata))


def test_staged_create_adds_unpartitioned_unsorted_when_left_out():
    kept = ("assign-uuid", "add-schema", "set-current-schema", "set-location")
    updates = [u for u in spark_ctas_updates() if u["action"] in kept]
    metadata = commit(None, [{"type": "assert-create"}], updates, base_location=None, now_ms=T0)
    assert metadata.spec().spec_id == 0 and metadata.spec().fields == ()
    assert metadata.default_sort_order_id == 0
    with pytest.raises(BadRequest, match="before a partition spec"):  # as Java: a snapshot needs a spec
        commit(None, [{"type": "assert-create"}], [*updates, add_snapshot(snapshot(1))], base_location=None, now_ms=T0)
