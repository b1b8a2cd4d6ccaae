"""What the table and view pages show, computed from the metadata document (pure: no I/O).

A table's metadata JSON holds its whole life: schemas, specs, sort orders, snapshots with their
summaries, refs, the snapshot and metadata logs. These functions turn it into rows the templates
render: the schema as an indented tree, the differences between schema versions, the chart
series (one point per snapshot), a comparison of two snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

# Snapshot summary counters charted over time, and the ones the snapshot list shows.
CHARTED = [
    ("total-records", "Records"),
    ("total-data-files", "Data files"),
    ("total-files-size", "Size (bytes)"),
    ("added-records", "Added records"),
    ("deleted-records", "Deleted records"),
]


@dataclass(frozen=True)
class TablePage:
    """Everything the table page shows that follows from one metadata file (which never changes:
    the console keeps it per metadata location, app/console/tables.py)."""

    metadata: dict[str, Any]
    schema: list[FieldRow]
    history: list[SchemaVersion]
    specs: list[dict[str, Any]]
    orders: list[dict[str, Any]]
    snapshots: list[dict[str, Any]]
    chart: dict[str, Any]
    graph: dict[str, Any]
    metadata_log: list[tuple[str, str]]

    @classmethod
    def of(cls, metadata: dict[str, Any]) -> TablePage:
        names = field_names(metadata)
        return cls(
            metadata,
            schema_rows(current_schema(metadata)),
            schema_history(metadata),
            partition_specs(metadata, names),
            sort_orders(metadata, names),
            snapshots(metadata),
            chart_series(metadata),
            ref_graph(metadata),
            metadata_log(metadata),
        )


@dataclass(frozen=True)
class FieldRow:
    """One field of a schema tree: ``depth`` indents it under its parent."""

    id: int
    name: str
    type: str
    required: bool
    doc: str | None
    depth: int
    path: str


@dataclass(frozen=True)
class FieldChange:
    kind: str  # added, removed, renamed, type, required, doc
    id: int
    path: str
    before: str = ""
    after: str = ""


@dataclass(frozen=True)
class SchemaVersion:
    schema_id: int
    fields: list[FieldRow]
    changes: list[FieldChange] = field(default_factory=list)  # against the version before it
    current: bool = False


def when(ms: Any) -> str:
    if not isinstance(ms, int):
        return ""
    return datetime.fromtimestamp(ms // 1000, UTC).isoformat(" ")[:19] + " UTC"  # (strftime is slower)


def type_text(kind: Any) -> str:
    """A type as one line: primitives as they are, nested types by their shape."""
    if isinstance(kind, str):
        return kind
    if isinstance(kind, dict):
        if kind.get("type") == "struct":
            return "struct"
        if kind.get("type") == "list":
            return f"list<{type_text(kind.get('element'))}>"
        if kind.get("type") == "map":
            return f"map<{type_text(kind.get('key'))}, {type_text(kind.get('value'))}>"
    return str(kind)


def schema_rows(schema: dict[str, Any]) -> list[FieldRow]:
    rows: list[FieldRow] = []
    _struct(schema.get("fields") or [], 0, "", rows)
    return rows


def _struct(fields: list[dict[str, Any]], depth: int, parent: str, rows: list[FieldRow]) -> None:
    for item in fields:
        path = f"{parent}{item.get('name')}"
        kind = item.get("type")
        rows.append(
            FieldRow(
                int(item.get("id", 0)),
                str(item.get("name")),
                type_text(kind),
                bool(item.get("required")),
                item.get("doc"),
                depth,
                path,
            )
        )
        _nested(kind, depth + 1, path + ".", rows)


def _nested(kind: Any, depth: int, parent: str, rows: list[FieldRow]) -> None:
    if not isinstance(kind, dict):
        return
    if kind.get("type") == "struct":
        _struct(kind.get("fields") or [], depth, parent, rows)
    elif kind.get("type") == "list":
        element = kind.get("element")
        rows.append(
            FieldRow(
                int(kind.get("element-id", 0)),
                "element",
                type_text(element),
                bool(kind.get("element-required")),
                None,
                depth,
                parent + "element",
            )
        )
        _nested(element, depth + 1, parent + "element.", rows)
    elif kind.get("type") == "map":
        rows.append(
            FieldRow(int(kind.get("key-id", 0)), "key", type_text(kind.get("key")), True, None, depth, parent + "key")
        )
        _nested(kind.get("key"), depth + 1, parent + "key.", rows)
        value = kind.get("value")
        rows.append(
            FieldRow(
                int(kind.get("value-id", 0)),
                "value",
                type_text(value),
                bool(kind.get("value-required")),
                None,
                depth,
                parent + "value",
            )
        )
        _nested(value, depth + 1, parent + "value.", rows)


def schema_changes(before: list[FieldRow], after: list[FieldRow]) -> list[FieldChange]:
    """What changed between two versions, field by field id (Iceberg tracks columns by id)."""
    old = {row.id: row for row in before}
    new = {row.id: row for row in after}
    changes: list[FieldChange] = []
    for row in after:
        was = old.get(row.id)
        if was is None:
            changes.append(FieldChange("added", row.id, row.path, after=row.type))
            continue
        if was.path != row.path:
            changes.append(FieldChange("renamed", row.id, row.path, was.path, row.path))
        if was.type != row.type:
            changes.append(FieldChange("type", row.id, row.path, was.type, row.type))
        if was.required != row.required:
            changes.append(FieldChange("required", row.id, row.path, str(was.required), str(row.required)))
        if (was.doc or "") != (row.doc or ""):
            changes.append(FieldChange("doc", row.id, row.path, was.doc or "", row.doc or ""))
    changes += [FieldChange("removed", row.id, row.path, before=row.type) for row in before if row.id not in new]
    return changes


def schema_history(metadata: dict[str, Any]) -> list[SchemaVersion]:
    """Every schema version, newest first, each with its changes against the one before."""
    current = metadata.get("current-schema-id")
    ordered = sorted(metadata.get("schemas") or [], key=lambda s: s.get("schema-id", 0))
    versions: list[SchemaVersion] = []
    previous: list[FieldRow] | None = None
    for schema in ordered:
        rows = schema_rows(schema)
        changes = schema_changes(previous, rows) if previous is not None else []
        versions.append(SchemaVersion(schema.get("schema-id", 0), rows, changes, schema.get("schema-id") == current))
        previous = rows
    return list(reversed(versions))


def current_schema(metadata: dict[str, Any]) -> dict[str, Any]:
    wanted = metadata.get("current-schema-id")
    for schema in metadata.get("schemas") or []:
        if schema.get("schema-id") == wanted:
            return schema
    return (metadata.get("schemas") or [{}])[-1]


def field_names(metadata: dict[str, Any]) -> dict[int, str]:
    """Field id -> dotted name over every schema (partition specs and sort orders name source ids)."""
    names: dict[int, str] = {}
    for schema in metadata.get("schemas") or []:
        for row in schema_rows(schema):
            names.setdefault(row.id, row.path)
    return names


def snapshots(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """The snapshots newest first, each with its time as text and the refs pointing at it."""
    refs: dict[int, list[str]] = {}
    for name, ref in sorted((metadata.get("refs") or {}).items()):
        refs.setdefault(ref.get("snapshot-id"), []).append(name)
    ordered = _by_time(metadata)
    current = metadata.get("current-snapshot-id")
    return [
        {
            "id": snap.get("snapshot-id"),
            "parent": snap.get("parent-snapshot-id"),
            "sequence": snap.get("sequence-number"),
            "when": when(snap.get("timestamp-ms")),
            "operation": (snap.get("summary") or {}).get("operation", ""),
            "summary": snap.get("summary") or {},
            "schema_id": snap.get("schema-id"),
            "refs": refs.get(snap.get("snapshot-id"), []),
            "current": snap.get("snapshot-id") == current,
        }
        for snap in reversed(ordered)
    ]


def _by_time(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    return sorted(
        metadata.get("snapshots") or [], key=lambda s: (s.get("timestamp-ms", 0), s.get("sequence-number", 0))
    )


def chart_series(metadata: dict[str, Any]) -> dict[str, Any]:
    """One point per snapshot, oldest first: x in seconds, a series per charted counter."""
    ordered = _by_time(metadata)
    xs = [snap.get("timestamp-ms", 0) / 1000 for snap in ordered]
    series = []
    for key, label in CHARTED:
        values = [_number((snap.get("summary") or {}).get(key)) for snap in ordered]
        series.append({"key": key, "label": label, "values": values})
    return {"x": xs, "series": series, "points": len(xs)}


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def compare(metadata: dict[str, Any], first: int, second: int) -> dict[str, Any] | None:
    """Two snapshots side by side: their summaries key by key, and the schema changes between them."""
    by_id = {snap.get("snapshot-id"): snap for snap in metadata.get("snapshots") or []}
    a, b = by_id.get(first), by_id.get(second)
    if a is None or b is None:
        return None
    summary_a, summary_b = a.get("summary") or {}, b.get("summary") or {}
    keys = sorted(set(summary_a) | set(summary_b))
    rows = [
        (key, summary_a.get(key, ""), summary_b.get(key, ""), summary_a.get(key) != summary_b.get(key)) for key in keys
    ]
    schemas = {schema.get("schema-id"): schema for schema in metadata.get("schemas") or []}
    schema_a, schema_b = schemas.get(a.get("schema-id")), schemas.get(b.get("schema-id"))
    changes: list[FieldChange] = []
    if schema_a is not None and schema_b is not None:
        changes = schema_changes(schema_rows(schema_a), schema_rows(schema_b))
    return {
        "a": {"id": first, "when": when(a.get("timestamp-ms")), "schema_id": a.get("schema-id")},
        "b": {"id": second, "when": when(b.get("timestamp-ms")), "schema_id": b.get("schema-id")},
        "rows": rows,
        "schema_changes": changes,
    }


def partition_specs(metadata: dict[str, Any], names: dict[int, str]) -> list[dict[str, Any]]:
    default = metadata.get("default-spec-id")
    return [
        {
            "id": spec.get("spec-id"),
            "default": spec.get("spec-id") == default,
            "fields": [
                {
                    "name": f.get("name"),
                    "source": names.get(f.get("source-id"), str(f.get("source-id"))),
                    "transform": f.get("transform"),
                    "field_id": f.get("field-id"),
                }
                for f in spec.get("fields") or []
            ],
        }
        for spec in metadata.get("partition-specs") or []
    ]


def sort_orders(metadata: dict[str, Any], names: dict[int, str]) -> list[dict[str, Any]]:
    default = metadata.get("default-sort-order-id")
    return [
        {
            "id": order.get("order-id"),
            "default": order.get("order-id") == default,
            "fields": [
                {
                    "source": names.get(f.get("source-id"), str(f.get("source-id"))),
                    "transform": f.get("transform"),
                    "direction": f.get("direction"),
                    "nulls": f.get("null-order"),
                }
                for f in order.get("fields") or []
            ],
        }
        for order in metadata.get("sort-orders") or []
    ]


GRAPH_SNAPSHOTS = 200  # the refs graph draws the newest ones only
GRAPH_STEP, GRAPH_LANE, GRAPH_MARGIN = 28, 34, 24


def ref_graph(metadata: dict[str, Any]) -> dict[str, Any]:
    """Branches and tags drawn over the snapshots: each snapshot a dot in time order, a line to its
    parent, a lane per branch (main first, then each branch's own snapshots), refs as labels."""
    ordered = _by_time(metadata)[-GRAPH_SNAPSHOTS:]
    index = {snap.get("snapshot-id"): i for i, snap in enumerate(ordered)}
    parents = {snap.get("snapshot-id"): snap.get("parent-snapshot-id") for snap in ordered}
    refs = metadata.get("refs") or {}
    branches = sorted((name for name, ref in refs.items() if ref.get("type") == "branch"), key=lambda n: n != "main")
    lane: dict[Any, int] = {}
    for number, name in enumerate(branches):
        node = refs[name].get("snapshot-id")
        while node in index and node not in lane:
            lane[node] = number
            node = parents.get(node)
    lanes = max([0, *lane.values()]) + 1

    def at(snapshot_id: Any) -> tuple[int, int]:
        return GRAPH_MARGIN + index[snapshot_id] * GRAPH_STEP, GRAPH_MARGIN + 14 + lane.get(snapshot_id, 0) * GRAPH_LANE

    nodes = [(*at(snap.get("snapshot-id")), snap.get("snapshot-id")) for snap in ordered]
    edges = [(*at(child), *at(parent)) for child, parent in parents.items() if parent in index]
    labels = []
    for name, ref in sorted(refs.items()):
        if ref.get("snapshot-id") in index:
            x, y = at(ref.get("snapshot-id"))
            labels.append((x, y - 10, name, ref.get("type")))
    return {
        "width": GRAPH_MARGIN * 2 + max(len(ordered) - 1, 0) * GRAPH_STEP + 80,
        "height": GRAPH_MARGIN * 2 + lanes * GRAPH_LANE,
        "nodes": nodes,
        "edges": edges,
        "labels": labels,
        "shown": len(ordered),
    }


def metadata_log(metadata: dict[str, Any]) -> list[tuple[str, str]]:
    """The earlier metadata files, newest first."""
    entries = reversed(metadata.get("metadata-log") or [])
    return [(when(e.get("timestamp-ms")), e.get("metadata-file", "")) for e in entries]


def view_versions(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """A view's versions, newest first, each with its SQL per dialect."""
    current = metadata.get("current-version-id")
    versions = sorted(metadata.get("versions") or [], key=lambda v: v.get("version-id", 0), reverse=True)
    return [
        {
            "id": version.get("version-id"),
            "when": when(version.get("timestamp-ms")),
            "schema_id": version.get("schema-id"),
            "summary": version.get("summary") or {},
            "current": version.get("version-id") == current,
            "sql": [
                (rep.get("dialect", ""), rep.get("sql", ""))
                for rep in version.get("representations") or []
                if rep.get("type") == "sql"
            ],
            "namespace": version.get("default-namespace") or [],
        }
        for version in versions
    ]


def view_schema(metadata: dict[str, Any]) -> list[FieldRow]:
    versions = {v.get("version-id"): v for v in metadata.get("versions") or []}
    version = versions.get(metadata.get("current-version-id")) or {}
    schemas = {s.get("schema-id"): s for s in metadata.get("schemas") or []}
    return schema_rows(schemas.get(version.get("schema-id")) or {})
