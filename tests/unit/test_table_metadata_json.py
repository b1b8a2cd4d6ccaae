"""Loading with snapshots=refs, (de)serialisation round trips, and the rules' purity (no file I/O,
no PyIceberg configuration)."""

from __future__ import annotations

import builtins
import json

import pytest
from pyiceberg.table.metadata import TableMetadataUtil
from table_metadata_builders import (
    LOCATION,
    apply,
    as_json,
    metadata_file,
    new_table,
    set_ref,
    table_with_history,
)

from app.ground.errors import BadRequest
from app.rules import table as tm

# -- snapshots=refs -------------------------------------------------------------------------


def test_refs_only_keeps_the_snapshots_refs_point_to():
    document = as_json(apply(table_with_history(), set_ref("v1", 1, "tag")))
    original = json.loads(json.dumps(document))
    trimmed = tm.refs_only(document)
    assert [s["snapshot-id"] for s in trimmed["snapshots"]] == [1, 3]
    assert trimmed["snapshot-log"] == document["snapshot-log"] and trimmed["refs"] == document["refs"]
    assert document == original  # the input is not modified


def test_refs_only_on_a_table_without_snapshots():
    document = as_json(new_table())
    assert tm.refs_only(document) == document


# -- serialisation --------------------------------------------------------------------------


def rich_table(format_version: int) -> tm.TableMetadata:
    metadata = apply(
        table_with_history(format_version),
        set_ref("v1", 1, "tag"),
        {
            "action": "set-statistics",
            "statistics": {
                "snapshot-id": 3,
                "statistics-path": f"{LOCATION}/metadata/s.puffin",
                "file-size-in-bytes": 10,
                "file-footer-size-in-bytes": 4,
                "blob-metadata": [
                    {"type": "apache-datasketches-theta-v1", "snapshot-id": 3, "sequence-number": 3, "fields": [1]}
                ],
            },
        },
        {
            "action": "set-partition-statistics",
            "partition-statistics": {
                "snapshot-id": 3,
                "statistics-path": f"{LOCATION}/metadata/p.parquet",
                "file-size-in-bytes": 5,
            },
        },
        base_location=metadata_file(3),
    )
    if format_version == 3:
        metadata = apply(
            metadata,
            {"action": "add-encryption-key", "encryption-key": {"key-id": "k", "encrypted-key-metadata": "a2V5"}},
        )
    return metadata


def walk(value):
    if isinstance(value, dict):
        for item in value.values():
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)
    yield value


@pytest.mark.parametrize("format_version", [1, 2, 3])
def test_to_json_round_trips_through_parse_metadata(format_version):
    metadata = rich_table(format_version)
    text = tm.to_json(metadata)
    assert tm.to_json(tm.parse_metadata(text)) == text
    assert tm.parse_metadata(text) == metadata
    document = json.loads(text)
    assert None not in list(walk(document))
    assert list(document)[:3] == ["format-version", "table-uuid", "location"]
    assert len(document["snapshots"]) == 3 and document["refs"]["v1"] == {"snapshot-id": 1, "type": "tag"}


def test_v3_metadata_can_be_dumped_with_pydantic_too():
    assert json.loads(rich_table(3).model_dump_json())["format-version"] == 3


def test_parse_metadata_reads_java_v1_conventions():
    document = as_json(new_table(1))
    document["current-snapshot-id"] = -1
    del document["schemas"], document["partition-specs"], document["refs"]
    metadata = tm.parse_metadata(json.dumps(document))
    assert metadata.current_snapshot_id is None and metadata.schema().find_field("id").field_id == 1


def test_a_plain_pyiceberg_base_is_accepted():
    base = TableMetadataUtil.parse_raw(tm.to_json(table_with_history()))
    metadata = apply(base, {"action": "set-properties", "updates": {"a": "1"}})
    assert metadata.properties["a"] == "1" and len(metadata.snapshots) == 3


@pytest.mark.parametrize(
    "mutate, wording",
    [
        (lambda d: "{not json", "not valid table metadata"),
        (lambda d: "[]", "expected a JSON object"),
        (lambda d: json.dumps({**d, "format-version": 4}), "format-version 4"),
        (lambda d: json.dumps({k: v for k, v in d.items() if k != "location"}), "location"),
        (lambda d: json.dumps({**d, "current-schema-id": 9}), "current-schema-id 9"),
        (lambda d: json.dumps({**d, "refs": {"dev": {"snapshot-id": 99, "type": "branch"}}}), "unknown snapshot 99"),
        (lambda d: json.dumps({**d, "current-snapshot-id": 1}), "does not match main"),
        (lambda d: json.dumps({**d, "snapshots": [{"snapshot-id": "x"}]}), "snapshots.0"),
    ],
)
def test_invalid_metadata_text_is_a_bad_request(mutate, wording):
    with pytest.raises(BadRequest) as info:
        tm.parse_metadata(mutate(as_json(table_with_history())))
    assert info.value.message.startswith("not valid table metadata")
    assert wording in info.value.message


# -- purity ---------------------------------------------------------------------------------


def test_no_file_io_and_no_pyiceberg_config(monkeypatch):
    import pyiceberg.utils.config as config

    def refuse(*args, **kwargs):
        raise AssertionError("the rules must not do I/O")

    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(config.Config, "__init__", refuse)
    metadata = table_with_history(3)
    text = tm.to_json(apply(metadata, {"action": "remove-snapshot-ref", "ref-name": "main"}))
    assert "current-snapshot-id" not in json.loads(text)
    assert tm.parse_metadata(text).format_version == 3


def test_transforms_pyiceberg_does_not_know_survive_a_round_trip():
    document = as_json(table_with_history())
    document["partition-specs"].append(
        {"spec-id": 1, "fields": [{"source-id": 1, "field-id": 1002, "transform": "zorder[3]", "name": "z"}]}
    )
    document["last-partition-id"] = 1002
    text = tm.to_json(
        apply(tm.parse_metadata(json.dumps(document)), {"action": "set-properties", "updates": {"a": "b"}})
    )
    assert json.loads(text)["partition-specs"][1]["fields"][0]["transform"] == "zorder[3]"
