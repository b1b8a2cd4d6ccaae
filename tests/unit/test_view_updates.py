"""The view rules (app.rules.view): each update, accepted and rejected; the version history; parsing."""

from __future__ import annotations

import json

import pytest
from view_metadata_support import (
    LOCATION,
    NOW,
    OTHER_SCHEMA,
    OTHER_UUID,
    SCHEMA,
    T0,
    VIEW_UUID,
    apply,
    bad,
    new_view,
    replace,
    sql,
    version,
    vm,
)

from app.ground.errors import BadRequest

# -- each update ------------------------------------------------------------------------------


def test_no_updates_return_the_base_itself():
    base = new_view()
    assert apply(base) is base
    assert apply(base, {"action": "set-properties", "updates": {"comment": "a view"}}) is base


@pytest.mark.parametrize(
    "update",
    [
        {"action": "add-spec", "spec": {"fields": []}},
        {"action": "set-current-schema", "schema-id": 0},
        {"action": "nonsense"},
        {"no-action": True},
    ],
)
def test_unknown_or_table_only_updates_are_400(update):
    assert "unknown action" in bad(new_view(), update)


def test_assign_uuid_same_is_a_no_op():
    base = new_view()
    assert apply(base, {"action": "assign-uuid", "uuid": VIEW_UUID}) is base


def test_assign_uuid_cannot_reassign():
    assert "Cannot reassign the uuid" in bad(new_view(), {"action": "assign-uuid", "uuid": OTHER_UUID})
    assert "not a UUID" in bad(new_view(), {"action": "assign-uuid", "uuid": "not-a-uuid"})


def test_upgrade_format_version_to_1_is_a_no_op():
    base = new_view()
    assert apply(base, {"action": "upgrade-format-version", "format-version": 1}) is base


@pytest.mark.parametrize(("target", "message"), [(2, "Unsupported view format version: v2"), (0, "downgrade")])
def test_upgrade_format_version_rejected(target, message):
    assert message in bad(new_view(), {"action": "upgrade-format-version", "format-version": target})


def test_add_schema_takes_the_next_id_and_does_not_change_the_version():
    base = new_view()
    new = apply(base, {"action": "add-schema", "schema": OTHER_SCHEMA, "last-column-id": 1})
    assert [s["schema-id"] for s in new["schemas"]] == [0, 1]
    assert new["schemas"][1]["fields"] == OTHER_SCHEMA["fields"]
    assert new["current-version-id"] == 1
    assert new["version-log"] == base["version-log"]


def test_add_schema_reuses_an_identical_schema():
    base = new_view()
    same = {**SCHEMA, "schema-id": 12}
    assert apply(base, {"action": "add-schema", "schema": same}) is base


def test_add_schema_rejects_an_invalid_schema():
    duplicate_ids = {
        "type": "struct",
        "fields": [
            {"id": 3, "name": "a", "type": "long", "required": True},
            {"id": 3, "name": "b", "type": "long", "required": True},
        ],
    }
    assert "duplicate field ids" in bad(new_view(), {"action": "add-schema", "schema": duplicate_ids})
    assert "schema must be an object" in bad(new_view(), {"action": "add-schema"})


def test_set_location():
    new = apply(new_view(), {"action": "set-location", "location": "s3://bucket/elsewhere"})
    assert new["location"] == "s3://bucket/elsewhere"
    assert "location must be a non-empty string" in bad(new_view(), {"action": "set-location", "location": ""})


def test_set_properties():
    new = apply(new_view(), {"action": "set-properties", "updates": {"owner": "ana", "comment": "new"}})
    assert new["properties"] == {"comment": "new", "owner": "ana"}


@pytest.mark.parametrize(
    ("updates", "message"),
    [
        ({"owner": 1}, "updates must be an object of strings"),
        ({vm.VERSION_HISTORY_SIZE: "-1"}, "must be positive"),
        ({"write.metadata.compression-codec": "lz4"}, "Unsupported write.metadata.compression-codec"),
    ],
)
def test_set_properties_rejected(updates, message):
    assert message in bad(new_view(), {"action": "set-properties", "updates": updates})


def test_remove_properties_ignores_missing_keys():
    new = apply(new_view(), {"action": "remove-properties", "removals": ["comment", "never-set"]})
    assert new["properties"] == {}
    assert "removals must be an array of strings" in bad(new_view(), {"action": "remove-properties", "removals": "x"})


def test_add_view_version_alone_does_not_change_the_current_version():
    new = apply(new_view(), {"action": "add-view-version", "view-version": version(sql("SELECT 2"), version_id=1)})
    assert [v["version-id"] for v in new["versions"]] == [1, 2]
    assert new["current-version-id"] == 1
    assert len(new["version-log"]) == 1


def test_add_view_version_keeps_a_higher_requested_id():
    new = apply(new_view(), {"action": "add-view-version", "view-version": version(sql("SELECT 2"), version_id=7)})
    assert [v["version-id"] for v in new["versions"]] == [1, 7]


def test_replace_with_last_added_schema_and_version():
    new = replace(new_view(), "SELECT sum(x) AS total FROM db.t")
    assert [s["schema-id"] for s in new["schemas"]] == [0, 1]
    current = vm.current_version(new)
    assert current["version-id"] == 2
    assert current["schema-id"] == 1
    assert current["representations"] == [sql("SELECT sum(x) AS total FROM db.t")]
    # the version was added in this commit: the log entry carries its timestamp
    assert new["version-log"] == [{"timestamp-ms": T0, "version-id": 1}, {"timestamp-ms": T0, "version-id": 2}]


def test_re_adding_an_equal_version_reuses_its_id():
    base = replace(new_view(), "SELECT 2")
    first = base["versions"][0]
    again = {**first, "version-id": 99, "timestamp-ms": T0 + 5}
    new = apply(
        base,
        {"action": "add-view-version", "view-version": again},
        {"action": "set-current-view-version", "view-version-id": -1},
    )
    assert [v["version-id"] for v in new["versions"]] == [1, 2]
    assert new["current-version-id"] == 1
    # not added in this commit: the log entry is timed by the commit
    assert new["version-log"][-1] == {"timestamp-ms": NOW, "version-id": 1}


def test_re_adding_an_equal_version_as_the_current_one_changes_nothing():
    base = new_view()
    again = {**vm.current_version(base), "version-id": 5, "timestamp-ms": NOW}
    assert apply(base, {"action": "add-view-version", "view-version": again}) is base


def test_a_different_summary_is_a_different_version():
    base = new_view()
    changed = {**vm.current_version(base), "summary": {"engine-name": "trino"}}
    new = apply(base, {"action": "add-view-version", "view-version": changed})
    assert [v["version-id"] for v in new["versions"]] == [1, 2]


def test_schema_id_minus_one_also_means_a_reused_schema():
    base = new_view()
    new = apply(
        base,
        {"action": "add-schema", "schema": SCHEMA},  # identical to schema 0: reused
        {"action": "add-view-version", "view-version": version(sql("SELECT 3"), schema_id=-1)},
    )
    assert new["versions"][-1]["schema-id"] == 0


@pytest.mark.parametrize(
    ("view_version", "message"),
    [
        (version(sql("SELECT 1"), schema_id=-1), "no schema has been added"),
        (version(sql("SELECT 1"), schema_id=5), "Cannot add version with unknown schema: 5"),
        (version(sql("SELECT 1"), sql("SELECT 2", "SPARK")), "Cannot add multiple queries for dialect spark"),
        (version(representations=[]), "at least one SQL representation"),
        ({"version-id": 2, "schema-id": 0}, "timestamp-ms must be an integer"),
    ],
)
def test_add_view_version_rejected(view_version, message):
    view_version.setdefault("representations", [])
    assert message in bad(new_view(), {"action": "add-view-version", "view-version": view_version})


def test_set_current_view_version_to_an_existing_version():
    base = apply(new_view(), {"action": "add-view-version", "view-version": version(sql("SELECT 2"))})
    new = apply(base, {"action": "set-current-view-version", "view-version-id": 2})
    assert new["current-version-id"] == 2
    assert new["version-log"][-1] == {"timestamp-ms": NOW, "version-id": 2}
    assert apply(new, {"action": "set-current-view-version", "view-version-id": 2}) is new


@pytest.mark.parametrize(("version_id", "message"), [(7, "unknown version: 7"), (-1, "no view version has been added")])
def test_set_current_view_version_rejected(version_id, message):
    assert message in bad(new_view(), {"action": "set-current-view-version", "view-version-id": version_id})


def test_dropping_a_dialect_is_refused_unless_allowed():
    base = apply(
        new_view(),
        {"action": "add-view-version", "view-version": version(sql("SELECT 1"), sql("SELECT 1", "trino"))},
        {"action": "set-current-view-version", "view-version-id": -1},
    )
    assert "loss of view dialects" in bad(
        base,
        {"action": "add-view-version", "view-version": version(sql("SELECT 2"))},
        {"action": "set-current-view-version", "view-version-id": -1},
    )
    allowed = apply(
        base,
        {"action": "set-properties", "updates": {vm.REPLACE_DROP_DIALECT_ALLOWED: "true"}},
        {"action": "add-view-version", "view-version": version(sql("SELECT 2"))},
        {"action": "set-current-view-version", "view-version-id": -1},
    )
    assert [r["dialect"] for r in vm.current_version(allowed)["representations"]] == ["spark"]


# -- version history --------------------------------------------------------------------------


def test_history_is_capped_keeping_the_newest_versions():
    metadata = new_view(properties={vm.VERSION_HISTORY_SIZE: "2"})
    for n in range(2, 5):
        metadata = replace(metadata, f"SELECT {n}")
    assert [v["version-id"] for v in metadata["versions"]] == [3, 4]
    assert [e["version-id"] for e in metadata["version-log"]] == [3, 4]
    assert metadata["current-version-id"] == 4


def test_history_keeps_an_old_current_version():
    metadata = new_view(properties={vm.VERSION_HISTORY_SIZE: "2"})
    metadata = replace(metadata, "SELECT 2")
    metadata = apply(metadata, {"action": "set-current-view-version", "view-version-id": 1})
    metadata = apply(metadata, {"action": "add-view-version", "view-version": version(sql("SELECT 3"))})
    assert [v["version-id"] for v in metadata["versions"]] == [1, 3]
    assert metadata["current-version-id"] == 1
    # version 2 expired: log entries up to and including it go
    assert [e["version-id"] for e in metadata["version-log"]] == [1]


def test_versions_added_in_one_commit_are_all_kept():
    metadata = new_view(properties={vm.VERSION_HISTORY_SIZE: "1"})
    metadata = apply(
        metadata,
        {"action": "add-view-version", "view-version": version(sql("SELECT 2"))},
        {"action": "add-view-version", "view-version": version(sql("SELECT 3"))},
        {"action": "set-current-view-version", "view-version-id": -1},
    )
    assert [v["version-id"] for v in metadata["versions"]] == [2, 3]
    assert metadata["current-version-id"] == 3


def test_lowering_the_cap_trims_on_the_next_commit():
    metadata = new_view()
    for n in range(2, 6):
        metadata = replace(metadata, f"SELECT {n}")
    assert len(metadata["versions"]) == 5
    metadata = apply(metadata, {"action": "set-properties", "updates": {vm.VERSION_HISTORY_SIZE: "3"}})
    assert [v["version-id"] for v in metadata["versions"]] == [3, 4, 5]


# -- parsing stored and registered files --------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format-version": 2}, "unsupported format-version 2"),
        ({"view-uuid": "nope"}, "view-uuid is not a UUID"),
        ({"current-version-id": 9}, "current version 9 is not among the versions"),
        ({"schemas": []}, "schemas must be a non-empty array"),
        ({"versions": "x"}, "versions must be a non-empty array"),
        ({"version-log": None}, "version-log must be an array"),
    ],
)
def test_parse_rejects_invalid_metadata(change, message):
    data = {**json.loads(vm.to_json(new_view())), **change}
    with pytest.raises(BadRequest) as info:
        vm.parse_view_metadata(json.dumps(data))
    assert message in info.value.message


def test_parse_rejects_a_version_on_an_unknown_schema_and_non_json():
    data = json.loads(vm.to_json(new_view()))
    data["versions"][0]["schema-id"] = 3
    with pytest.raises(BadRequest, match="unknown schema 3"):
        vm.parse_view_metadata(json.dumps(data))
    with pytest.raises(BadRequest, match="Not valid view metadata"):
        vm.parse_view_metadata("{not json")


def test_parse_keeps_representations_of_unknown_types():
    data = json.loads(vm.to_json(new_view()))
    data["versions"][0]["representations"].append({"type": "substrait", "plan": "AAEC"})
    parsed = vm.parse_view_metadata(json.dumps(data))
    assert parsed["versions"][0]["representations"][-1] == {"type": "substrait", "plan": "AAEC"}


def test_metadata_directory_and_file_names():
    metadata = new_view()
    assert vm.metadata_directory(metadata) == f"{LOCATION}/metadata"
    metadata["properties"][vm.METADATA_PATH] = "s3://bucket/meta/"
    assert vm.metadata_directory(metadata) == "s3://bucket/meta"
    assert vm.metadata_file_name(vm.next_metadata_version(None), {}, "u") == "00000-u.metadata.json"
    gz = {"write.metadata.compression-codec": "gzip"}
    assert vm.metadata_file_name(vm.next_metadata_version("s3://b/00004-x.metadata.json"), gz, "u") == (
        "00005-u.gz.metadata.json"
    )
