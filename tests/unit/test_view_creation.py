"""The view rules (app.rules.view): creating a view, and its requirements."""

from __future__ import annotations

import json

import pytest
from view_metadata_support import (
    LOCATION,
    OTHER_UUID,
    SCHEMA,
    T0,
    VIEW_UUID,
    apply,
    bad,
    create_request,
    created,
    new_view,
    sql,
    version,
    vm,
)

from app.ground.errors import BadRequest, CommitFailed

# -- creating ---------------------------------------------------------------------------------


def test_new_view_metadata_assigns_fresh_ids():
    metadata = new_view()
    assert metadata["view-uuid"] == VIEW_UUID
    assert metadata["format-version"] == 1
    assert metadata["location"] == LOCATION
    assert metadata["properties"] == {"comment": "a view"}
    assert [s["schema-id"] for s in metadata["schemas"]] == [0]
    assert metadata["schemas"][0]["fields"] == SCHEMA["fields"]  # field ids are the client's
    assert metadata["current-version-id"] == 1
    (only,) = metadata["versions"]
    assert only["version-id"] == 1
    assert only["schema-id"] == 0
    assert only["timestamp-ms"] == T0  # the server's clock, as Java's server does
    assert only["summary"] == {"engine-name": "spark"}
    assert only["default-namespace"] == ["db"]
    assert "default-catalog" not in only
    assert metadata["version-log"] == [{"timestamp-ms": T0, "version-id": 1}]


def test_new_view_keeps_default_catalog_and_several_dialects():
    request = create_request()
    request["view-version"] = version(sql("SELECT 1"), sql("SELECT 1", "trino"), **{"default-catalog": "prod"})
    metadata = created(request)
    current = vm.current_version(metadata)
    assert current["default-catalog"] == "prod"
    assert [r["dialect"] for r in current["representations"]] == ["spark", "trino"]


def test_to_json_uses_spec_names_in_java_order_and_round_trips():
    metadata = new_view()
    text = vm.to_json(metadata)
    assert list(json.loads(text)) == [
        "view-uuid",
        "format-version",
        "location",
        "properties",
        "schemas",
        "current-version-id",
        "versions",
        "version-log",
    ]
    assert list(json.loads(text)["versions"][0])[:3] == ["version-id", "timestamp-ms", "schema-id"]
    assert vm.parse_view_metadata(text) == metadata
    assert vm.to_json(vm.parse_view_metadata(text)) == text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"view-version": version(sql("SELECT 1"), sql("SELECT 2"))}, "multiple queries for dialect spark"),
        ({"view-version": version(sql("SELECT 1", "Trino"), sql("SELECT 2", "trino"))}, "dialect trino"),
        ({"view-version": version(representations=[])}, "at least one SQL representation"),
        ({"view-version": version({"type": "substrait", "plan": "..."})}, "Unsupported view representation"),
        ({"view-version": version(sql("SELECT 1"), **{"default-namespace": "db"})}, "default-namespace"),
        (
            {"schema": {"type": "struct", "fields": [{"id": 1, "name": "a", "type": "nope", "required": True}]}},
            "Unsupported field type",
        ),
        (
            {
                "schema": {
                    "type": "struct",
                    "fields": [
                        {"id": 1, "name": "a", "type": "long", "required": True},
                        {"id": 1, "name": "b", "type": "long", "required": True},
                    ],
                }
            },
            "duplicate field ids [1]",
        ),
        ({"properties": {vm.VERSION_HISTORY_SIZE: "0"}}, "must be positive"),
        ({"properties": {vm.VERSION_HISTORY_SIZE: "ten"}}, "must be an integer"),
        ({"properties": {"write.metadata.compression-codec": "zstd"}}, "Unsupported write.metadata.compression-codec"),
    ],
)
def test_invalid_create_requests_are_400(change, message):
    with pytest.raises(BadRequest) as info:
        created(create_request(**change))
    assert message in info.value.message


# -- requirements ---------------------------------------------------------------------------


def test_assert_view_uuid_holds():
    base = new_view()
    new = apply(
        base,
        {"action": "set-properties", "updates": {"a": "1"}},
        requirements=[{"type": "assert-view-uuid", "uuid": VIEW_UUID.upper()}],
    )
    assert new["properties"]["a"] == "1"


def test_assert_view_uuid_fails_with_409_naming_both():
    with pytest.raises(CommitFailed) as info:
        apply(new_view(), requirements=[{"type": "assert-view-uuid", "uuid": OTHER_UUID}])
    assert info.value.code == 409
    assert OTHER_UUID in info.value.message and VIEW_UUID in info.value.message


@pytest.mark.parametrize(
    "requirement",
    [{"type": "assert-table-uuid", "uuid": VIEW_UUID}, {"type": "assert-view-uuid"}, "assert-view-uuid"],
)
def test_malformed_or_table_requirements_are_400(requirement):
    assert "requirement #0" in bad(new_view(), requirements=[requirement])


def test_a_malformed_update_is_400_before_a_failing_requirement_is_409():
    message = bad(
        new_view(),
        {"action": "set-properties"},
        requirements=[{"type": "assert-view-uuid", "uuid": OTHER_UUID}],
    )
    assert "update #0 (set-properties)" in message
