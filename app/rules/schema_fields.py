"""Field ids of a schema, for the check tables and views both make: no id used twice."""

from __future__ import annotations

from collections import Counter

from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, ListType, MapType, StructType


def field_ids(field_type: IcebergType) -> list[int]:
    """Every field id in a type, nested ones included (struct fields, list elements, map keys and values)."""
    if isinstance(field_type, StructType):
        return [i for f in field_type.fields for i in (f.field_id, *field_ids(f.field_type))]
    if isinstance(field_type, ListType):
        return [field_type.element_id, *field_ids(field_type.element_type)]
    if isinstance(field_type, MapType):
        return [
            field_type.key_id,
            field_type.value_id,
            *field_ids(field_type.key_type),
            *field_ids(field_type.value_type),
        ]
    return []


def duplicate_field_ids(schema: Schema) -> list[int]:
    """The ids used more than once in the schema, sorted."""
    return sorted(field_id for field_id, count in Counter(field_ids(schema.as_struct())).items() if count > 1)
