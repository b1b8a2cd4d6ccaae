"""What the table-update tests share: a refused update's message, a client's add-schema, and the
statistics, partition statistics and key they add."""

from __future__ import annotations

import pytest
from table_metadata_builders import (
    LOCATION,
    apply,
)

from app.ground.errors import BadRequest
from app.rules import table as tm

# new_table(): id=1 ts=2 items=3 geo=4 items.key=5 items.value=6 element=7 name=8 qty=9 geo.lat=10
# geo.country=11; spec 0 = [day(ts) 1000, bucket[16](id) 1001]; sort order 1 = [country asc, id desc].


def bad(metadata: tm.TableMetadata | None, *updates: dict, requirements: list[dict] | None = None) -> str:
    with pytest.raises(BadRequest) as info:
        apply(metadata, *updates, requirements=requirements)
    assert info.value.code == 400
    return info.value.message


def schema_with(metadata: tm.TableMetadata, *extra: dict, schema_id: int = 0) -> dict:
    """The current schema's columns plus ``extra``, as a client's add-schema carries them."""
    columns = [f.model_dump(mode="json") for f in metadata.schema().fields]
    return {"type": "struct", "schema-id": schema_id, "identifier-field-ids": [1], "fields": [*columns, *extra]}


NOTE = {"id": 12, "name": "note", "type": "string", "required": False}
STATS = {
    "snapshot-id": 2,
    "statistics-path": f"{LOCATION}/metadata/stats-2.puffin",
    "file-size-in-bytes": 4096,
    "file-footer-size-in-bytes": 512,
    "blob-metadata": [
        {
            "type": "apache-datasketches-theta-v1",
            "snapshot-id": 2,
            "sequence-number": 2,
            "fields": [1],
            "properties": {"ndv": "42"},
        },
        {"type": "vendor-histogram-v7", "snapshot-id": 2, "sequence-number": 2, "fields": [2]},
    ],
}
PARTITION_STATS = {
    "snapshot-id": 2,
    "statistics-path": f"{LOCATION}/metadata/partition-stats-2.parquet",
    "file-size-in-bytes": 2048,
}
KEY = {
    "key-id": "k1",
    "encrypted-key-metadata": "c2VjcmV0LWtleS1tYXRlcmlhbA==",
    "encrypted-by-id": "kms-1",
    "properties": {"algorithm": "AES_GCM_256"},
}
