"""Which Iceberg types each column action of the REST spec's read restrictions takes ("Applicable
to" in apache/iceberg PR 13879). Apart from ``actions`` so that deciding costs no pyarrow import:
the authorizer's path reads this, only the readers that transform data load Arrow."""

from __future__ import annotations

import datetime

from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

ACTIONS: tuple[str, ...] = (
    "mask-alphanum",
    "show-first-4",
    "show-last-4",
    "replace-with-null",
    "mask-to-default",
    "truncate-to-year",
    "truncate-to-month",
    "sha-256-global",
    "sha-256-query-local",
)

_STRING_ONLY = (StringType,)
_TEMPORAL = (DateType, TimestampType, TimestamptzType, TimestampNanoType, TimestamptzNanoType)
_HASHABLE = (StringType, IntegerType, LongType, BinaryType)
# mask-to-default's constants for the primitive types (decimal, fixed and the nested ones are built
# from the type). Dates and timestamps: the latest day each representation holds (ns ends in 2262).
UTC = datetime.UTC
MASK_DEFAULTS: dict[type[IcebergType], object] = {
    BooleanType: False,
    IntegerType: 999999999,
    LongType: 999999999,
    FloatType: 0.0,
    DoubleType: 0.0,
    StringType: "XXXXXXXX",
    DateType: datetime.date(9999, 12, 31),
    TimeType: datetime.time(0, 0),
    TimestampType: datetime.datetime(9999, 12, 31),
    TimestamptzType: datetime.datetime(9999, 12, 31, tzinfo=UTC),
    TimestampNanoType: datetime.datetime(2261, 12, 31),
    TimestamptzNanoType: datetime.datetime(2261, 12, 31, tzinfo=UTC),
    UUIDType: bytes(16),
    BinaryType: b"",
}


def _has_default(field_type: IcebergType) -> bool:
    if isinstance(field_type, StructType):  # each field its own default: every one needs one
        return all(_has_default(field.field_type) for field in field_type.fields)
    return isinstance(field_type, (DecimalType, FixedType, ListType, MapType)) or type(field_type) in MASK_DEFAULTS


def applicable(action: str, field_type: IcebergType) -> bool:
    """The spec's "Applicable to" for ``action``; False for actions Growler does not support."""
    if action in ("mask-alphanum", "show-first-4", "show-last-4"):
        return isinstance(field_type, _STRING_ONLY)
    if action == "replace-with-null":
        return True
    if action == "mask-to-default":
        return _has_default(field_type)
    if action in ("truncate-to-year", "truncate-to-month"):
        return isinstance(field_type, _TEMPORAL)
    if action in ("sha-256-global", "sha-256-query-local"):
        return isinstance(field_type, _HASHABLE)
    return False
