"""Small builders of realistic Iceberg REST JSON for the table-metadata rule tests.

The schema deliberately uses client-side ids that are neither sequential nor starting at 1, and
nests a struct in a list in a map, so that fresh-id assignment has something to get wrong.
"""

from __future__ import annotations

import json
from typing import Any

from app.rules import table as tm
from app.rules.requests.tables import CommitTableRequest, CreateTableRequest

TABLE_UUID = "9c12d441-03fe-4693-9a96-a0705ddf69c1"
OTHER_UUID = "1b4e28ba-2fa1-11d2-883f-0016d3cca427"
LOCATION = "s3://warehouse/analytics/events"
T0 = 1_700_000_000_000  # creation time of every table built here


def metadata_file(version: int) -> str:
    return f"{LOCATION}/metadata/{version:05d}-0d6c2a1e-3c2b-4b5e-9d0f-6c8a1f2e3d4b.metadata.json"


def event_schema(**overrides: Any) -> dict[str, Any]:
    """id, ts, a map<string, list<struct<name, qty>>>, a struct<lat, lon>; client ids 10..."""
    schema = {
        "type": "struct",
        "schema-id": 7,
        "identifier-field-ids": [10],
        "fields": [
            {"id": 10, "name": "id", "type": "long", "required": True},
            {"id": 11, "name": "ts", "type": "timestamptz", "required": False, "doc": "event time"},
            {
                "id": 12,
                "name": "items",
                "required": False,
                "type": {
                    "type": "map",
                    "key-id": 13,
                    "key": "string",
                    "value-id": 14,
                    "value-required": False,
                    "value": {
                        "type": "list",
                        "element-id": 15,
                        "element-required": True,
                        "element": {
                            "type": "struct",
                            "fields": [
                                {"id": 16, "name": "name", "type": "string", "required": True},
                                {"id": 17, "name": "qty", "type": "int", "required": False},
                            ],
                        },
                    },
                },
            },
            {
                "id": 20,
                "name": "geo",
                "required": True,
                "type": {
                    "type": "struct",
                    "fields": [
                        {"id": 21, "name": "lat", "type": "double", "required": False},
                        {"id": 22, "name": "country", "type": "string", "required": True},
                    ],
                },
            },
        ],
    }
    schema.update(overrides)
    return schema


def partition_spec(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"spec-id": 0, "fields": list(fields)}


def sort_order(*fields: dict[str, Any], order_id: int = 1) -> dict[str, Any]:
    return {"order-id": order_id, "fields": list(fields)}


def sort_field(source_id: int, transform: str = "identity", direction: str = "asc") -> dict[str, Any]:
    null_order = "nulls-first" if direction == "asc" else "nulls-last"
    return {"source-id": source_id, "transform": transform, "direction": direction, "null-order": null_order}


def create_request(format_version: int | str | None = None, **overrides: Any) -> dict[str, Any]:
    """A CreateTableRequest partitioned by day(ts) and bucket(id), sorted by geo.country."""
    properties = {"owner": "analytics", "write.parquet.compression-codec": "zstd"}
    if format_version is not None:
        properties["format-version"] = str(format_version)
    request = {
        "name": "events",
        "location": "s3://ignored/by/new_table_metadata",
        "schema": event_schema(),
        "partition-spec": partition_spec(
            {"source-id": 11, "field-id": 1000, "transform": "day", "name": "ts_day"},
            {"source-id": 10, "field-id": 1001, "transform": "bucket[16]", "name": "id_bucket"},
        ),
        "write-order": sort_order(sort_field(22), sort_field(10, direction="desc")),
        "stage-create": False,
        "properties": properties,
    }
    request.update(overrides)
    return request


def new_table_metadata(request: dict[str, Any], **arguments: Any) -> tm.TableMetadata:
    """``tm.new_table_metadata`` on a createTable body, parsed as the edge parses it."""
    return tm.new_table_metadata(CreateTableRequest.from_body(request), **arguments)


def commit(
    base: tm.TableMetadata | None, requirements: list[dict[str, Any]], updates: list[dict[str, Any]], **arguments: Any
) -> tm.TableMetadata:
    """``tm.commit`` on a commit body's requirements and updates, parsed as the edge parses them."""
    request = CommitTableRequest.from_body({"requirements": requirements, "updates": updates})
    return tm.commit(base, request.requirements, request.updates, **arguments)


def new_table(format_version: int = 2, **overrides: Any) -> tm.TableMetadata:
    """A freshly created table (no snapshots) of the given format version."""
    request = create_request(format_version, **overrides)
    return new_table_metadata(request, location=LOCATION, now_ms=T0, table_uuid=TABLE_UUID)


def snapshot(
    snapshot_id: int,
    parent: int | None = None,
    sequence_number: int | None = None,
    timestamp_ms: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A snapshot as a writer sends it in add-snapshot."""
    data: dict[str, Any] = {
        "snapshot-id": snapshot_id,
        "timestamp-ms": timestamp_ms if timestamp_ms is not None else T0 + snapshot_id * 1000,
        "manifest-list": f"{LOCATION}/metadata/snap-{snapshot_id}-1-abc.avro",
        "summary": {"operation": "append", "added-data-files": "1", "added-records": "10"},
        "schema-id": 0,
    }
    if parent is not None:
        data["parent-snapshot-id"] = parent
    if sequence_number is not None:
        data["sequence-number"] = sequence_number
    data.update(extra)
    return data


def add_snapshot(snap: dict[str, Any]) -> dict[str, Any]:
    return {"action": "add-snapshot", "snapshot": snap}


def set_ref(name: str, snapshot_id: int, ref_type: str = "branch", **extra: Any) -> dict[str, Any]:
    return {"action": "set-snapshot-ref", "ref-name": name, "type": ref_type, "snapshot-id": snapshot_id, **extra}


SNAPSHOT_JSON = tm.SnapshotJson()  # shared by every commit of the unit tests, as in the service


def apply(
    metadata: tm.TableMetadata | None,
    *updates: dict[str, Any],
    now_ms: int = T0 + 60_000,
    base_location: str | None = None,
    requirements: list[dict[str, Any]] | None = None,
) -> tm.TableMetadata:
    """Commit ``updates`` (and optional requirements) as the service does.

    Every result must also be what a full parse of its own file gives: commits skip re-validating
    the whole document, so this is where a model that only a re-parse would correct shows up.
    """
    result = commit(metadata, requirements or [], list(updates), base_location=base_location, now_ms=now_ms)
    text = tm.to_json(result)
    assert tm.to_json(result, SNAPSHOT_JSON) == text  # reusing the base's snapshots' JSON changes nothing
    assert tm.to_json(tm.parse_metadata(text)) == text
    assert tm.parse_metadata(text) == result
    return result


def append(
    metadata: tm.TableMetadata, snapshot_id: int, *, parent: int | None = None, now_ms: int | None = None, **extra: Any
) -> tm.TableMetadata:
    """A writer's append: a snapshot with the next sequence number (and row ids on v3), made current."""
    sequence_number = getattr(metadata, "last_sequence_number", 0) + 1
    if metadata.format_version >= 3:
        extra.setdefault("first-row-id", metadata.next_row_id)
        extra.setdefault("added-rows", 10)
    snap = snapshot(snapshot_id, parent=parent, sequence_number=sequence_number, **extra)
    return apply(
        metadata,
        add_snapshot(snap),
        set_ref("main", snapshot_id),
        now_ms=now_ms if now_ms is not None else snap["timestamp-ms"] + 5,
    )


def table_with_history(format_version: int = 2) -> tm.TableMetadata:
    """Three appends 1 <- 2 <- 3 on main."""
    metadata = new_table(format_version)
    metadata = append(metadata, 1)
    metadata = append(metadata, 2, parent=1)
    return append(metadata, 3, parent=2)


def as_json(metadata: tm.TableMetadata) -> dict[str, Any]:
    return json.loads(tm.to_json(metadata))
