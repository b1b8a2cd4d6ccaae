"""The column actions of the Iceberg REST spec's read restrictions, applied to pyarrow arrays.

A catalog that answers ``loadTable`` with ``ReadRestrictions.required-column-projections``
(apache/iceberg PR #13879) relies on the engine to apply them. Growler's own readers (the
console's preview, exports) are such an engine: they apply the very same actions here, so what
a restricted principal sees in the console is what Spark or PyIceberg would show them. The
semantics are the spec's, action by action; ``applicable`` is its "Applicable to" table, which
the server consults before returning an action (the spec forbids any other pairing).

Pure: no I/O. Randomness stays with the caller too: ``sha-256-query-local`` takes its salt as an
argument (one ``secrets.token_bytes(16)`` per read), so the same salt gives the same output.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.expressions import And, BooleanExpression, Not, Or, UnboundPredicate
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import expression_to_pyarrow
from pyiceberg.schema import Schema
from pyiceberg.types import (
    DecimalType,
    FixedType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    StringType,
    StructType,
)

from app.rules.restrictions.applicability import ACTIONS, MASK_DEFAULTS, applicable

MIN_SALT_BYTES = 16  # the spec's lower bound for a query-local salt
_SHOWN = 4  # show-first-4 / show-last-4

# mask-alphanum in two passes: first everything that is neither a digit nor kept becomes 'x'
# (RE2 classes match code points, newlines included), then the digits become 'n'.
_NOT_DIGIT_NOR_KEPT = r"[^0-9(),.\-@]"
_DIGIT = r"[0-9]"


def _mask(array: pa.Array) -> pa.Array:
    return pc.replace_substring_regex(pc.replace_substring_regex(array, _NOT_DIGIT_NOR_KEPT, "x"), _DIGIT, "n")


def _show(array: pa.Array, *, first: bool) -> pa.Array:
    """Keep the first (last) four code points, mask the rest; four or fewer: unchanged."""
    if first:
        head, tail = pc.utf8_slice_codeunits(array, 0, _SHOWN), _mask(pc.utf8_slice_codeunits(array, _SHOWN))
    else:
        head, tail = _mask(pc.utf8_slice_codeunits(array, 0, -_SHOWN)), pc.utf8_slice_codeunits(array, -_SHOWN)
    shown = pc.binary_join_element_wise(head, tail, pa.scalar("", type=array.type))
    return pc.if_else(pc.less_equal(pc.utf8_length(array), _SHOWN), array, shown)


def _default_array(field_type: IcebergType, arrow_type: pa.DataType) -> pa.Array:
    """mask-to-default's constant as a one-element array of exactly ``arrow_type``."""
    if isinstance(arrow_type, pa.ExtensionType):  # arrow.uuid: the constant is its storage's
        storage = _default_array(field_type, arrow_type.storage_type)
        return pa.ExtensionArray.from_storage(arrow_type, storage)
    if isinstance(field_type, StructType):
        arrow_fields = list(arrow_type)
        children = [_default_array(f.field_type, a.type) for f, a in zip(field_type.fields, arrow_fields, strict=True)]
        return pa.StructArray.from_arrays(children, fields=arrow_fields)
    if isinstance(field_type, (ListType, MapType)):
        value: object = []
    elif isinstance(field_type, DecimalType):
        value = Decimal(0).scaleb(-field_type.scale)
    elif isinstance(field_type, FixedType):
        value = bytes(len(field_type))
    else:
        value = MASK_DEFAULTS[type(field_type)]
    return pa.array([value], type=arrow_type)


def _to_default(array: pa.Array, field_type: IcebergType) -> pa.Array:
    # Taking index 0 of the one-element constant for every valid row and a null index for every
    # null one keeps the nulls and works for every arrow type (nested and extension ones too).
    indices = pc.if_else(pc.is_valid(array), pa.scalar(0, pa.int32()), pa.scalar(None, pa.int32()))
    return _default_array(field_type, array.type).take(indices)


def _truncate(array: pa.Array, unit: str) -> pa.Array:
    """floor_temporal truncates in the zone of a zoned timestamp; the spec says UTC: drop the zone
    (the stored instants are UTC), truncate, put it back."""
    if pa.types.is_timestamp(array.type) and array.type.tz is not None:
        naive = array.cast(pa.timestamp(array.type.unit))
        return pc.floor_temporal(naive, unit=unit).cast(array.type)
    return pc.floor_temporal(array, unit=unit)


def _canonical(field_type: IcebergType) -> Callable[[object], bytes]:
    if isinstance(field_type, StringType):
        return lambda value: str(value).encode("utf-8")
    if isinstance(field_type, IntegerType):
        return lambda value: struct.pack("<i", value)
    if isinstance(field_type, LongType):
        return lambda value: struct.pack("<q", value)
    return lambda value: bytes(value)  # type: ignore[call-overload]


def _from_digest(field_type: IcebergType) -> Callable[[bytes], object]:
    if isinstance(field_type, StringType):
        return lambda digest: digest.hex()
    if isinstance(field_type, IntegerType):
        return lambda digest: struct.unpack("<i", digest[:4])[0]
    if isinstance(field_type, LongType):
        return lambda digest: struct.unpack("<q", digest[:8])[0]
    return lambda digest: digest


def _sha256(array: pa.Array, field_type: IcebergType, salt: bytes) -> pa.Array:
    """No pyarrow kernel hashes with SHA-256: one hashlib call per value (nulls stay null)."""
    encode, decode = _canonical(field_type), _from_digest(field_type)
    values = [None if v is None else decode(hashlib.sha256(salt + encode(v)).digest()) for v in array.to_pylist()]
    return pa.array(values, type=array.type)


def _apply(action: str, array: pa.Array, field_type: IcebergType, salt: bytes) -> pa.Array:
    """One action on one (non-chunked) array, after the checks."""
    if action == "replace-with-null":
        return pa.nulls(len(array), type=array.type)
    if isinstance(array, pa.DictionaryArray):  # each action maps value to value: the dictionary's
        values = _apply(action, array.dictionary, field_type, salt)
        return pa.DictionaryArray.from_arrays(array.indices, values)
    if pa.types.is_string_view(array.type) or pa.types.is_binary_view(array.type):  # no kernels
        wide = pa.large_string() if pa.types.is_string_view(array.type) else pa.large_binary()
        return _apply(action, array.cast(wide), field_type, salt).cast(array.type)
    if action == "mask-alphanum":
        return _mask(array)
    if action in ("show-first-4", "show-last-4"):
        return _show(array, first=action == "show-first-4")
    if action == "mask-to-default":
        return _to_default(array, field_type)
    if action in ("truncate-to-year", "truncate-to-month"):
        return _truncate(array, action.removeprefix("truncate-to-"))
    return _sha256(array, field_type, salt if action == "sha-256-query-local" else b"")


def apply_action(
    action: str, array: pa.Array | pa.ChunkedArray, field_type: IcebergType, *, salt: bytes = b""
) -> pa.Array | pa.ChunkedArray:
    """``array`` (a column of ``field_type``) with ``action`` applied; the same arrow type out.

    Refused (ValueError): ``apply-expression`` (Growler never returns it, so it does not evaluate
    one), unknown actions, a type outside the action's "Applicable to", and a query-local hash
    without a salt of at least 16 bytes.
    """
    if action == "apply-expression":
        raise ValueError("the apply-expression action is not supported")
    if action not in ACTIONS:
        raise ValueError(f"unknown column action {action!r}")
    if not applicable(action, field_type):
        raise ValueError(f"the {action} action does not apply to a column of type {field_type}")
    if action == "sha-256-query-local" and len(salt) < MIN_SALT_BYTES:
        raise ValueError(f"the sha-256-query-local action needs a salt of at least {MIN_SALT_BYTES} bytes")
    if isinstance(array, pa.ChunkedArray):
        return pa.chunked_array([_apply(action, chunk, field_type, salt) for chunk in array.chunks], type=array.type)
    return _apply(action, array, field_type, salt)


def _has_unbound(expression: BooleanExpression) -> bool:
    if isinstance(expression, (And, Or)):
        return _has_unbound(expression.left) or _has_unbound(expression.right)
    if isinstance(expression, Not):
        return _has_unbound(expression.child)
    return isinstance(expression, UnboundPredicate)


def filter_rows(table: pa.Table, row_filter: BooleanExpression, schema: Schema) -> pa.Table:
    """The rows of ``table`` for which ``row_filter`` is true: false and null both drop the row,
    as the spec's row filter is a condition a row must meet to be seen.

    An unbound filter is bound to ``schema`` (case-sensitively: restrictions name columns
    exactly); PyIceberg's own translation to a pyarrow expression does the rest, so the filter
    means here what it means to PyIceberg's reader.
    """
    bound = bind(schema, row_filter, case_sensitive=True) if _has_unbound(row_filter) else row_filter
    return table.filter(expression_to_pyarrow(bound, schema))
