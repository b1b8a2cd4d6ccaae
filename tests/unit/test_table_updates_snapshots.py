"""Table updates, applied as Java's TableMetadata.Builder does or refused with a 400: snapshots and
refs (add-snapshot, set-snapshot-ref, remove-snapshots, remove-snapshot-ref)."""

from __future__ import annotations

import pytest
from table_metadata_builders import (
    T0,
    add_snapshot,
    append,
    apply,
    as_json,
    new_table,
    set_ref,
    snapshot,
    table_with_history,
)
from table_updates_support import (
    KEY,
    PARTITION_STATS,
    STATS,
    bad,
)

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
