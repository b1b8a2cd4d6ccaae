"""updateTable: the metadata and snapshot logs, timestamps, sequence numbers and row ids."""

from __future__ import annotations

from tests.api.table_commits.commits_support import (
    accept,
    add_snapshot,
    append,
    ids,
    new_table,
    set_ref,
)
from tests.api.tables_support import (
    snapshot,
)

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
