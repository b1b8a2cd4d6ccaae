"""A commit's CPU does not grow with the table's history: what a commit reuses from its base.

Each reuse is checked two ways: the result is the same as without it (text, lookups), and the
work it saves is not done (how many snapshots are serialised, how many are indexed).
"""

from __future__ import annotations

import pytest

from app.rules import table as tm
from app.rules.table import serialisation
from tests.unit.table_metadata_builders import append, apply, new_table


@pytest.fixture
def serialised(monkeypatch) -> list[int]:
    """The ids of the snapshots serialised from their models, in order."""
    seen: list[int] = []
    original = serialisation._snapshot_dict

    def counting(snapshot, format_version):
        seen.append(snapshot.snapshot_id)
        return original(snapshot, format_version)

    monkeypatch.setattr(serialisation, "_snapshot_dict", counting)
    return seen


def grown(count: int) -> tm.TableMetadata:
    metadata = append(new_table(), 1)
    for snapshot_id in range(2, count + 1):
        metadata = append(metadata, snapshot_id, parent=snapshot_id - 1)
    return metadata


def test_an_append_serialises_only_the_new_snapshot_whatever_the_history(serialised):
    cache = tm.SnapshotJson(capacity=4)  # far fewer entries than snapshots: per-snapshot reuse cannot help
    base = grown(30)
    assert tm.to_json(base, cache) == tm.to_json(base)
    serialised.clear()
    new = append(base, 31, parent=30)
    serialised.clear()  # append() itself checks the text against a cache shared by the unit tests
    assert tm.to_json(new, cache) == tm.to_json(new)
    assert serialised == [31]
    assert tm.to_json(new, tm.SnapshotJson(capacity=4)) == tm.to_json(new)
    assert len(serialised) == 1 + 31  # a cache that has not seen the base serialises every snapshot


def test_an_array_that_is_no_extension_is_serialised_anew_and_right(serialised):
    cache = tm.SnapshotJson(capacity=4)
    base = grown(10)
    tm.to_json(base, cache)
    expired = apply(base, {"action": "remove-snapshots", "snapshot-ids": [1, 2]})
    assert [s.snapshot_id for s in expired.snapshots] == list(range(3, 11))
    assert tm.to_json(expired, cache) == tm.to_json(expired)
    reparsed = tm.parse_metadata(tm.to_json(base))  # equal snapshots, other objects
    assert tm.to_json(reparsed, cache) == tm.to_json(base)


def test_snapshot_lookups_answer_as_pyiceberg_scan():
    """The index behind ``snapshot_by_id``: built for the base, extended for an append, rebuilt
    for a list that is no extension (expired snapshots), never shared by equal lists."""
    base = grown(20)
    new = append(base, 21, parent=20)
    expired = apply(new, {"action": "remove-snapshots", "snapshot-ids": [1, 2, 3]})
    reparsed = tm.parse_metadata(tm.to_json(new))
    for metadata in (base, new, expired, reparsed, base):
        for snapshot_id in (1, 4, 20, 21, 99):
            expected = next((s for s in metadata.snapshots if s.snapshot_id == snapshot_id), None)
            assert metadata.snapshot_by_id(snapshot_id) is expected


def test_a_version_another_worker_wrote_reuses_the_snapshots_this_one_holds(serialised):
    """Parsing a newer version of a table: the snapshots whose text is exactly what this cache
    made for a parsed snapshot are that object, so only the new ones are built and serialised."""
    cache = tm.SnapshotJson()
    held = tm.parse_metadata(tm.to_json(grown(20)), snapshot_json=cache)  # this worker's version
    tm.to_json(held, cache)
    written_elsewhere = append(append(held, 21, parent=20), 22, parent=21)
    text = tm.to_json(written_elsewhere)
    serialised.clear()
    parsed = tm.parse_metadata(text, snapshot_json=cache)
    assert [a is b for a, b in zip(parsed.snapshots, held.snapshots, strict=False)] == [True] * 20
    assert parsed.snapshot_by_id(21) is not written_elsewhere.snapshot_by_id(21)  # built from its text
    assert tm.to_json(parsed, cache) == text
    assert serialised == [21, 22]
    assert parsed == tm.parse_metadata(text)


def test_a_snapshot_whose_text_changed_is_built_from_the_text(serialised):
    cache = tm.SnapshotJson()
    held = tm.parse_metadata(tm.to_json(grown(3)), snapshot_json=cache)
    tm.to_json(held, cache)
    text = tm.to_json(held).replace('"snapshot-id":2,', '"snapshot-id":2,"key-id":"k",')
    parsed = tm.parse_metadata(text, snapshot_json=cache)
    assert parsed.snapshots[0] is held.snapshots[0] and parsed.snapshots[2] is held.snapshots[2]
    assert parsed.snapshots[1] is not held.snapshots[1] and parsed.snapshots[1].key_id == "k"
    assert tm.to_json(parsed, cache) == tm.to_json(parsed)
