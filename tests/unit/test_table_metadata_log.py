"""The metadata and snapshot logs, last-updated-ms, sequence numbers, and metadata file names."""

from __future__ import annotations

import pytest
from table_metadata_builders import (
    LOCATION,
    T0,
    add_snapshot,
    append,
    apply,
    metadata_file,
    new_table,
    set_ref,
    snapshot,
    table_with_history,
)

from app.ground.errors import BadRequest
from app.rules import table as tm

# -- metadata log, last-updated-ms, snapshot log --------------------------------------------


def test_a_commit_appends_the_base_file_to_the_metadata_log():
    base = new_table()
    metadata = apply(
        base, {"action": "set-properties", "updates": {"a": "1"}}, base_location=metadata_file(0), now_ms=T0 + 5
    )
    assert [(e.metadata_file, e.timestamp_ms) for e in metadata.metadata_log] == [(metadata_file(0), T0)]
    assert metadata.last_updated_ms == T0 + 5


def test_no_metadata_log_entry_without_a_base_location():
    assert apply(new_table(), {"action": "set-properties", "updates": {"a": "1"}}).metadata_log == []


def commits(count: int, properties: dict[str, str]) -> list[tm.TableMetadata]:
    """``count`` property commits in a row, each with the previous file as base location."""
    history = [apply(new_table(), {"action": "set-properties", "updates": properties})]
    for version in range(1, count + 1):
        history.append(
            apply(
                history[-1],
                {"action": "set-properties", "updates": {"n": str(version)}},
                base_location=metadata_file(version),
                now_ms=T0 + 1000 * version,
            )
        )
    return history


def test_the_metadata_log_is_trimmed_to_previous_versions_max_dropping_the_oldest():
    history = commits(4, {"write.metadata.previous-versions-max": "2"})
    assert [e.metadata_file for e in history[-1].metadata_log] == [metadata_file(3), metadata_file(4)]
    assert len(commits(4, {})[-1].metadata_log) == 4  # default 100


def test_previous_versions_max_below_one_keeps_one():
    history = commits(3, {"write.metadata.previous-versions-max": "0"})
    assert [e.metadata_file for e in history[-1].metadata_log] == [metadata_file(3)]


def test_metadata_files_to_delete_follow_the_trim_when_enabled():
    history = commits(
        4, {"write.metadata.previous-versions-max": "2", "write.metadata.delete-after-commit.enabled": "true"}
    )
    assert tm.metadata_files_to_delete(history[-2], history[-1]) == [metadata_file(2)]
    assert tm.metadata_files_to_delete(history[-3], history[-2]) == [metadata_file(1)]


def test_metadata_files_are_kept_by_default():
    history = commits(4, {"write.metadata.previous-versions-max": "2"})
    assert tm.metadata_files_to_delete(history[-2], history[-1]) == []


def test_last_updated_ms_never_goes_back():
    base = new_table()
    earlier = apply(base, {"action": "set-properties", "updates": {"a": "1"}}, now_ms=T0 - 50_000)
    assert earlier.last_updated_ms == T0
    ahead = snapshot(1, sequence_number=1, timestamp_ms=T0 + 900_000)  # the writer's clock is ahead
    metadata = apply(base, add_snapshot(ahead), set_ref("main", 1), now_ms=T0 + 1)
    assert metadata.last_updated_ms == T0 + 900_000


def test_a_commit_that_changes_nothing_returns_the_base_unchanged():
    base = table_with_history()
    same = apply(
        base,
        {"action": "set-properties", "updates": dict(base.properties)},
        set_ref("main", 3),
        base_location=metadata_file(3),
        now_ms=T0 + 10**9,
    )
    assert same is base
    assert tm.to_json(same) == tm.to_json(base)  # the service compares the text


def test_snapshots_replaced_within_one_commit_are_not_logged():
    base = append(new_table(), 1)
    metadata = apply(
        base,
        add_snapshot(snapshot(2, parent=1, sequence_number=2)),
        set_ref("main", 2),
        add_snapshot(snapshot(3, parent=2, sequence_number=3)),
        set_ref("main", 3),
    )
    assert [e.snapshot_id for e in metadata.snapshot_log] == [1, 3]
    assert metadata.current_snapshot_id == 3 and metadata.last_sequence_number == 3


def test_snapshot_log_stays_sorted_when_a_writer_clock_is_behind():
    base = append(new_table(), 1, timestamp_ms=T0 + 10_000)
    late = snapshot(2, parent=1, sequence_number=2, timestamp_ms=T0 + 1)
    metadata = apply(base, add_snapshot(late), set_ref("main", 2))
    times = [e.timestamp_ms for e in metadata.snapshot_log]
    assert times == sorted(times) and times[-1] == T0 + 10_000


def test_sequence_numbers_count_commits():
    assert table_with_history().last_sequence_number == 3
    assert [s.sequence_number for s in table_with_history().snapshots] == [1, 2, 3]


def test_commit_is_deterministic():
    def run() -> str:
        return tm.to_json(
            apply(
                table_with_history(3),
                add_snapshot(snapshot(4, parent=3, sequence_number=4, **{"first-row-id": 30, "added-rows": 7})),
                set_ref("main", 4),
                base_location=metadata_file(3),
                now_ms=T0 + 77_000,
            )
        )

    assert run() == run()


# -- metadata files -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "properties, name",
    [
        ({}, "00001-abc.metadata.json"),
        ({"write.metadata.compression-codec": "none"}, "00001-abc.metadata.json"),
        ({"write.metadata.compression-codec": "NONE"}, "00001-abc.metadata.json"),
        ({"write.metadata.compression-codec": "gzip"}, "00001-abc.gz.metadata.json"),
        ({"write.metadata.compression-codec": "GZip"}, "00001-abc.gz.metadata.json"),
    ],
)
def test_metadata_file_name(properties, name):
    assert tm.metadata_file_name(1, properties, "abc") == name


def test_metadata_file_versions_are_zero_padded_to_five_digits_and_can_grow():
    assert tm.metadata_file_name(0, {}, "u").startswith("00000-")
    assert tm.metadata_file_name(123456, {}, "u").startswith("123456-")


def test_metadata_file_name_with_an_unknown_codec_is_a_bad_request():
    with pytest.raises(BadRequest, match="compression-codec"):
        tm.metadata_file_name(1, {"write.metadata.compression-codec": "snappy"}, "abc")


@pytest.mark.parametrize(
    "location, version",
    [
        (f"{LOCATION}/metadata/00042-6c97e413-d51b-4538-ac70-12fe2a85cb83.metadata.json", 42),
        ("00007-6c97e413-d51b-4538-ac70-12fe2a85cb83.gz.metadata.json", 7),
        (f"{LOCATION}/metadata/v3.metadata.json", -1),
        (f"{LOCATION}/metadata/metadata.json", -1),
        ("s3://bucket/00012-dir/v3.metadata.json", -1),
    ],
)
def test_parse_metadata_version(location, version):
    assert tm.parse_metadata_version(location) == version


def test_next_metadata_version_starts_at_zero_like_java():
    assert tm.next_metadata_version(None) == 0
    assert tm.next_metadata_version(f"{LOCATION}/metadata/00041-x.metadata.json") == 42
    assert tm.next_metadata_version(f"{LOCATION}/metadata/v3.metadata.json") == 0


def test_metadata_directory():
    assert tm.metadata_directory(new_table()) == f"{LOCATION}/metadata"
    custom = apply(new_table(), {"action": "set-properties", "updates": {"write.metadata.path": "s3://m/x/"}})
    assert tm.metadata_directory(custom) == "s3://m/x"
    assert tm.current_location(custom) == LOCATION
