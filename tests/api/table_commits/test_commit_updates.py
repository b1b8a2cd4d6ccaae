"""updateTable: every update action that is accepted, and its effect in the response, the metadata
file and a following loadTable."""

from __future__ import annotations

import json
import uuid

import pytest

from tests.api.table_commits.commits_support import (
    ADD_ORDER,
    ADD_SCHEMA,
    ADD_SPEC,
    CREATE_UPDATES,
    EXTRA_COLUMN,
    SET_LAST_ORDER,
    SET_LAST_SCHEMA,
    SET_LAST_SPEC,
    WAREHOUSE,
    T,
    accept,
    accept_no_change,
    add_snapshot,
    append,
    encryption_key,
    ids,
    load,
    new_table,
    partition_statistics,
    post_commit,
    reject,
    schema_with,
    set_ref,
    statistics,
)
from tests.api.tables_support import (
    SORT_ORDER,
)

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


def test_set_properties_moves_metadata_files_inside_the_namespaces_home(client, ns, s3):
    """Anywhere inside the table's namespace's location (issue 46: not into another's folder)."""
    new_table(client)
    directory = f"{WAREHOUSE}/{ns}/metadata-elsewhere/{uuid.uuid4().hex}"
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
