"""The console's table page model (app/console/table_model.py): pure functions of the metadata."""

from __future__ import annotations

from app.console import table_model as model

NESTED = {
    "schema-id": 0,
    "type": "struct",
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True, "doc": "key"},
        {
            "id": 2,
            "name": "point",
            "type": {"type": "struct", "fields": [{"id": 3, "name": "x", "type": "double", "required": False}]},
            "required": False,
        },
        {
            "id": 4,
            "name": "tags",
            "type": {"type": "list", "element-id": 5, "element": "string", "element-required": False},
            "required": False,
        },
        {
            "id": 6,
            "name": "attrs",
            "type": {
                "type": "map",
                "key-id": 7,
                "key": "string",
                "value-id": 8,
                "value": "int",
                "value-required": True,
            },
            "required": False,
        },
    ],
}


def test_the_schema_tree_holds_every_nested_field_with_its_depth() -> None:
    rows = model.schema_rows(NESTED)
    assert [(r.id, r.path, r.type, r.depth) for r in rows] == [
        (1, "id", "long", 0),
        (2, "point", "struct", 0),
        (3, "point.x", "double", 1),
        (4, "tags", "list<string>", 0),
        (5, "tags.element", "string", 1),
        (6, "attrs", "map<string, int>", 0),
        (7, "attrs.key", "string", 1),
        (8, "attrs.value", "int", 1),
    ]
    assert rows[0].required and rows[0].doc == "key" and rows[7].required


def test_schema_changes_are_found_by_field_id() -> None:
    before = model.schema_rows(NESTED)
    changed = {
        "schema-id": 1,
        "type": "struct",
        "fields": [
            {"id": 1, "name": "key", "type": "long", "required": True, "doc": "the key"},
            {"id": 4, "name": "tags", "type": {"type": "list", "element-id": 5, "element": "string"}, "required": True},
            {"id": 9, "name": "added", "type": "date", "required": False},
        ],
    }
    kinds = {(c.kind, c.id) for c in model.schema_changes(before, model.schema_rows(changed))}
    assert {("renamed", 1), ("doc", 1), ("required", 4), ("added", 9)} <= kinds
    assert {("removed", 2), ("removed", 3), ("removed", 6)} <= kinds


def _metadata(count: int) -> dict:
    snapshots = [
        {
            "snapshot-id": i,
            "parent-snapshot-id": i - 1 if i > 1 else None,
            "sequence-number": i,
            "timestamp-ms": 1_700_000_000_000 + i,
            "summary": {"operation": "append", "total-records": str(i * 10)},
            "schema-id": 0,
        }
        for i in range(1, count + 1)
    ]
    snapshots.append(
        {
            "snapshot-id": 99,
            "parent-snapshot-id": 2,
            "sequence-number": count + 1,
            "timestamp-ms": 1_800_000_000_000,
            "summary": {"operation": "append"},
            "schema-id": 0,
        }
    )
    refs = {
        "main": {"snapshot-id": count, "type": "branch"},
        "audit": {"snapshot-id": 99, "type": "branch"},
        "v1": {"snapshot-id": 1, "type": "tag"},
    }
    return {
        "schemas": [NESTED],
        "current-schema-id": 0,
        "snapshots": snapshots,
        "refs": refs,
        "current-snapshot-id": count,
    }


def test_one_chart_point_per_snapshot_and_refs_on_their_lanes() -> None:
    metadata = _metadata(5)
    chart = model.chart_series(metadata)
    assert chart["points"] == 6 and chart["series"][0]["values"][:5] == [10.0, 20.0, 30.0, 40.0, 50.0]
    graph = model.ref_graph(metadata)
    assert len(graph["nodes"]) == 6 and len(graph["edges"]) == 5
    lanes = {sid: y for _, y, sid in graph["nodes"]}
    assert lanes[99] > lanes[5] == lanes[1]  # the audit branch's own snapshot on a lane of its own
    assert {label for _, _, label, _ in graph["labels"]} == {"main", "audit", "v1"}
    listed = model.snapshots(metadata)
    assert listed[0]["id"] == 99 and "audit" in listed[0]["refs"] and listed[1]["current"]


def test_comparing_two_snapshots_marks_what_differs() -> None:
    compared = model.compare(_metadata(3), 1, 3)
    assert compared is not None
    rows = {key: differs for key, _, _, differs in compared["rows"]}
    assert rows == {"operation": False, "total-records": True}
    assert model.compare(_metadata(3), 1, 12345) is None
