"""Request bodies the benchmark sends (the same shapes as tests/api/tables_support.py).

Everything random comes from a ``random.Random`` the caller seeds, so two runs send the same
names, ids and schemas. Timestamps are the wall clock: catalogs refuse a snapshot older than the
table's last update.
"""

from __future__ import annotations

import random
import time
from typing import Any

_TYPES = ["long", "int", "string", "double", "boolean", "date", "timestamptz", "decimal(18,2)", "float", "binary"]


def schema(columns: int) -> dict[str, Any]:
    """A struct with ``columns`` fields: id (required) then a fixed cycle of primitive types."""
    fields = [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "ts", "type": "timestamptz", "required": False},
    ]
    for field_id in range(3, columns + 1):
        fields.append(
            {"id": field_id, "name": f"c{field_id:03d}", "type": _TYPES[field_id % len(_TYPES)], "required": False}
        )
    return {"type": "struct", "schema-id": 0, "fields": fields[:columns]}


PARTITION_SPEC: dict[str, Any] = {
    "spec-id": 0,
    "fields": [{"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"}],
}


def create_table(name: str, columns: int = 3) -> dict[str, Any]:
    """createTable: a schema and a day partition on ``ts`` (tables_support.create_request)."""
    return {"name": name, "schema": schema(columns), "partition-spec": PARTITION_SPEC}


def now_ms() -> int:
    return int(time.time() * 1000)


def snapshot_id(rng: random.Random) -> int:
    return rng.randrange(1, 2**62)


def append(location: str, snapshot: int, sequence_number: int, parent: int | None) -> dict[str, Any]:
    """One fast append to main, the way PyIceberg and Java send it: add-snapshot +
    set-snapshot-ref, guarded by assert-ref-snapshot-id on the parent (tables_support.append)."""
    body: dict[str, Any] = {
        "snapshot-id": snapshot,
        "sequence-number": sequence_number,
        "timestamp-ms": now_ms(),
        "manifest-list": f"{location.rstrip('/')}/metadata/snap-{snapshot}-1-bench.avro",
        "summary": {"operation": "append", "added-data-files": "1", "added-records": "100"},
        "schema-id": 0,
    }
    if parent is not None:
        body["parent-snapshot-id"] = parent
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": [
            {"action": "add-snapshot", "snapshot": body},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot},
        ],
    }


def table_state(metadata: dict[str, Any]) -> tuple[str, int | None, int]:
    """(location, main's snapshot id, last sequence number) from a table metadata document."""
    main = (metadata.get("refs") or {}).get("main")
    current = main["snapshot-id"] if main else metadata.get("current-snapshot-id")
    if current is not None and current < 0:
        current = None
    return metadata["location"], current, metadata.get("last-sequence-number", 0)
