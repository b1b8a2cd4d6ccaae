"""The spec's expression JSON <-> PyIceberg expressions, for server-side scan planning.

Pure: no I/O. ``parse_filter`` turns a ``Predicate`` of the request (every form the spec's
``Expression`` schema allows: bare booleans, ``true``/``false`` objects, and/or/not, null and
NaN tests, comparisons and starts-with, in/not-in; operands as ``left``/``right``/``child``
references or the deprecated ``term``/``value`` forms; literals bare, as literal objects with a
``data-type``, or as a ``literals`` object) into an unbound PyIceberg expression whose literals
are already converted to the column's type, following the spec's single-value encoding (dates
and timestamps as ISO strings, binary and fixed as hex, decimals as strings). Binding it to the
scan's schema here means an unknown column or a literal of the wrong type is the client's 400,
not a failure half-way through reading manifests.

``filter_json`` writes a PyIceberg expression back (residual filters) in the ``term``/``value``
form: the one PyIceberg's and Java's clients both read.
"""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import TypeAdapter, ValidationError
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    BooleanExpression,
    BoundPredicate,
    BoundSetPredicate,
    BoundTerm,
    BoundUnaryPredicate,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNaN,
    IsNull,
    LessThan,
    LessThanOrEqual,
    LiteralPredicate,
    Not,
    NotEqualTo,
    NotIn,
    NotNaN,
    NotNull,
    NotStartsWith,
    Or,
    Reference,
    SetPredicate,
    StartsWith,
    UnaryPredicate,
)
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
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
    LongType,
    PrimitiveType,
    StringType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from app.ground.errors import BadRequest

UNARY = {"is-null": IsNull, "not-null": NotNull, "is-nan": IsNaN, "not-nan": NotNaN}
COMPARISON = {
    "lt": LessThan,
    "lt-eq": LessThanOrEqual,
    "gt": GreaterThan,
    "gt-eq": GreaterThanOrEqual,
    "eq": EqualTo,
    "not-eq": NotEqualTo,
    "starts-with": StartsWith,
    "not-starts-with": NotStartsWith,
}
# ``5 < x`` is ``x > 5``: a comparison given with the literal on the left is turned around.
FLIPPED = {"lt": "gt", "lt-eq": "gt-eq", "gt": "lt", "gt-eq": "lt-eq", "eq": "eq", "not-eq": "not-eq"}
SETS = {"in": In, "not-in": NotIn}
MAX_DEPTH = 200
EPOCH_DATE = datetime.date(1970, 1, 1)
EPOCH = datetime.datetime(1970, 1, 1)
EPOCH_TZ = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_TYPES = TypeAdapter(IcebergType)


class FilterError(BadRequest):
    """A filter the scan cannot use: malformed, an unknown column, a literal of the wrong type."""


def parse_filter(node: Any, schema: Schema, case_sensitive: bool = True) -> BooleanExpression:
    """The request's ``filter`` as an unbound expression over ``schema``, checked by binding it."""
    expression = _Parser(schema, case_sensitive).predicate(node, 0)
    try:
        bind(schema, expression, case_sensitive)
    except (ValueError, TypeError, ArithmeticError) as exc:
        raise FilterError(f"Invalid filter: {exc}") from exc
    return expression


class _Parser:
    def __init__(self, schema: Schema, case_sensitive: bool) -> None:
        self.schema = schema
        self.case_sensitive = case_sensitive

    def predicate(self, node: Any, depth: int) -> BooleanExpression:
        if depth > MAX_DEPTH:
            raise FilterError("Invalid filter: nested too deeply")
        if isinstance(node, bool):
            return AlwaysTrue() if node else AlwaysFalse()
        if not isinstance(node, dict) or not isinstance(node.get("type"), str):
            raise FilterError(f"Invalid filter: not a predicate: {_short(node)}")
        kind = node["type"].lower()
        if kind == "true":
            return AlwaysTrue()
        if kind == "false":
            return AlwaysFalse()
        if kind in ("and", "or"):
            left = self.predicate(_required(node, "left"), depth + 1)
            right = self.predicate(_required(node, "right"), depth + 1)
            return And(left, right) if kind == "and" else Or(left, right)
        if kind == "not":
            return Not(self.predicate(_required(node, "child"), depth + 1))
        if kind in UNARY:
            name, _ = self.column(_operand(node, "child"))
            return UNARY[kind](Reference(name))
        if kind in SETS:
            name, column_type = self.column(_operand(node, "child"))
            values = self.literals(_required(node, "values"), column_type)
            return SETS[kind](Reference(name), values)
        if kind in COMPARISON:
            return self.comparison(kind, node)
        raise FilterError(f"Invalid filter: unknown predicate type {node['type']!r}")

    def comparison(self, kind: str, node: dict[str, Any]) -> BooleanExpression:
        if "term" in node or "value" in node:
            term, value = _required(node, "term"), _required(node, "value")
        else:
            term, value = _required(node, "left"), _required(node, "right")
            if _is_literal_node(term) and _is_reference(value):
                if kind not in FLIPPED:
                    raise FilterError(f"Invalid filter: {kind} needs the column on the left")
                kind, term, value = FLIPPED[kind], value, term
        name, column_type = self.column(term)
        if _is_reference(value):
            raise FilterError("Invalid filter: comparing two columns is not supported")
        literal = self.literal(value, column_type)
        if kind in ("starts-with", "not-starts-with") and not isinstance(literal, str):
            raise FilterError(f"Invalid filter: {kind} needs a string column and value")
        return COMPARISON[kind](Reference(name), literal)

    def column(self, term: Any) -> tuple[str, IcebergType]:
        """The full name and type of a referenced column (by name or by field id)."""
        if isinstance(term, str):
            name: str | None = term
        elif isinstance(term, dict) and term.get("type") == "reference":
            if "id" in term:
                field_id = term["id"]
                name = self.schema.find_column_name(field_id) if isinstance(field_id, int) else None
                if name is None:
                    raise FilterError(f"Invalid filter: no column with field id {field_id!r}")
            else:
                name = term.get("name")
        elif isinstance(term, dict) and term.get("type") in ("transform", "apply"):
            raise FilterError("Invalid filter: transforms and function calls in filters are not supported")
        else:
            raise FilterError(f"Invalid filter: not a column reference: {_short(term)}")
        if not isinstance(name, str) or not name:
            raise FilterError(f"Invalid filter: not a column reference: {_short(term)}")
        try:
            field = self.schema.find_field(name, self.case_sensitive)
        except ValueError as exc:
            raise FilterError(f"Invalid filter: cannot find field '{name}' in the table schema") from exc
        if not isinstance(field.field_type, PrimitiveType):
            raise FilterError(f"Invalid filter: '{name}' is not a primitive column")
        return self.schema.find_column_name(field.field_id) or name, field.field_type

    def literals(self, node: Any, column_type: IcebergType) -> list[Any]:
        if isinstance(node, dict) and node.get("type") == "literals":
            declared = _declared_type(node.get("data-type"))
            values = node.get("values")
            if not isinstance(values, list):
                raise FilterError("Invalid filter: literals need a list of values")
            return [_value(v, declared or column_type) for v in values]
        if not isinstance(node, list):
            raise FilterError(f"Invalid filter: not a list of literals: {_short(node)}")
        return [self.literal(v, column_type) for v in node]

    def literal(self, node: Any, column_type: IcebergType) -> Any:
        if isinstance(node, dict):
            if node.get("type") != "literal" or "value" not in node:
                raise FilterError(f"Invalid filter: not a literal: {_short(node)}")
            declared = _declared_type(node.get("data-type"))
            return _value(node["value"], declared or column_type)
        return _value(node, column_type)


def _required(node: dict[str, Any], key: str) -> Any:
    if key not in node:
        raise FilterError(f"Invalid filter: {node['type']} needs '{key}'")
    return node[key]


def _operand(node: dict[str, Any], key: str) -> Any:
    return node["term"] if "term" in node else _required(node, key)


def _is_reference(node: Any) -> bool:
    return isinstance(node, dict) and node.get("type") == "reference"


def _is_literal_node(node: Any) -> bool:
    return not isinstance(node, dict) or node.get("type") == "literal"


def _declared_type(raw: Any) -> IcebergType | None:
    if raw is None:
        return None
    try:
        declared = _TYPES.validate_python(raw)
    except (ValidationError, ValueError) as exc:
        raise FilterError(f"Invalid filter: unknown data-type {raw!r}") from exc
    if not isinstance(declared, PrimitiveType):
        raise FilterError(f"Invalid filter: data-type {raw!r} is not primitive")
    return declared


def _value(raw: Any, column_type: IcebergType) -> Any:
    """A JSON value of the spec's single-value encoding as the Python value PyIceberg binds."""
    try:
        return _convert(raw, column_type)
    except (ValueError, TypeError, ArithmeticError, InvalidOperation) as exc:
        raise FilterError(f"Invalid filter: {_short(raw)} is not a valid {column_type} value") from exc


def _convert(raw: Any, column_type: IcebergType) -> Any:  # noqa: C901, PLR0911 - one case per type
    if raw is None or isinstance(raw, list | dict):
        raise ValueError("not a primitive value")
    if isinstance(column_type, BooleanType):
        if not isinstance(raw, bool):
            raise ValueError("not a boolean")
        return raw
    if isinstance(raw, bool):
        raise ValueError("a boolean")
    if isinstance(column_type, IntegerType | LongType):
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        if not isinstance(raw, int):
            raise ValueError("not an integer")
        return raw
    if isinstance(column_type, FloatType | DoubleType):
        if isinstance(raw, str) and raw in ("NaN", "Infinity", "-Infinity"):
            return float(raw)
        if not isinstance(raw, int | float):
            raise ValueError("not a number")
        return float(raw)
    if isinstance(column_type, DecimalType):
        return Decimal(str(raw))
    if isinstance(column_type, StringType):
        if not isinstance(raw, str):
            raise ValueError("not a string")
        return raw
    if isinstance(column_type, UUIDType):
        return uuid.UUID(str(raw))
    if isinstance(column_type, BinaryType | FixedType):
        return bytes.fromhex(str(raw))
    if isinstance(raw, int):  # dates, times and timestamps also come as their integer form
        return raw
    if isinstance(column_type, DateType):
        return datetime.date.fromisoformat(str(raw))
    if isinstance(column_type, TimeType | TimestampType | TimestamptzType | TimestampNanoType | TimestamptzNanoType):
        return str(raw)  # PyIceberg parses ISO strings when binding (and refuses bad ones there)
    raise ValueError(f"unsupported type {column_type}")


def _short(node: Any) -> str:
    text = repr(node)
    return text if len(text) <= 80 else text[:77] + "..."


# -- writing expressions (residual filters) ---------------------------------------------


def filter_json(expression: BooleanExpression, schema: Schema) -> Any:
    """A PyIceberg expression (bound or unbound) as the spec's expression JSON."""
    if isinstance(expression, AlwaysTrue):
        return True
    if isinstance(expression, AlwaysFalse):
        return False
    if isinstance(expression, And):
        return {
            "type": "and",
            "left": filter_json(expression.left, schema),
            "right": filter_json(expression.right, schema),
        }
    if isinstance(expression, Or):
        return {
            "type": "or",
            "left": filter_json(expression.left, schema),
            "right": filter_json(expression.right, schema),
        }
    if isinstance(expression, Not):
        return {"type": "not", "child": filter_json(expression.child, schema)}
    if isinstance(expression, BoundPredicate | UnaryPredicate | SetPredicate | LiteralPredicate):
        return _predicate_json(expression, schema)
    raise ValueError(f"cannot serialise expression {expression!r}")


def _predicate_json(predicate: Any, schema: Schema) -> dict[str, Any]:
    term = predicate.term
    if isinstance(term, BoundTerm):
        field = term.ref().field
        name, field_type = schema.find_column_name(field.field_id) or field.name, field.field_type
    else:
        name = term.name
        field_type = schema.find_field(name, case_sensitive=False).field_type if _has(schema, name) else None
    kind = _kind_of(predicate)
    body: dict[str, Any] = {"type": kind, "term": name}
    if isinstance(predicate, BoundUnaryPredicate | UnaryPredicate):
        return body
    if isinstance(predicate, BoundSetPredicate | SetPredicate):
        body["values"] = sorted((value_json(lit.value, field_type) for lit in predicate.literals), key=repr)
        return body
    body["value"] = value_json(predicate.literal.value, field_type)
    return body


_KINDS = {
    "IsNull": "is-null",
    "NotNull": "not-null",
    "IsNaN": "is-nan",
    "NotNaN": "not-nan",
    "In": "in",
    "NotIn": "not-in",
    "LessThan": "lt",
    "LessThanOrEqual": "lt-eq",
    "GreaterThan": "gt",
    "GreaterThanOrEqual": "gt-eq",
    "EqualTo": "eq",
    "NotEqualTo": "not-eq",
    "StartsWith": "starts-with",
    "NotStartsWith": "not-starts-with",
}


def _kind_of(predicate: Any) -> str:
    name = type(predicate).__name__.removeprefix("Bound")
    if name not in _KINDS:
        raise ValueError(f"cannot serialise predicate {predicate!r}")
    return _KINDS[name]


def _has(schema: Schema, name: str) -> bool:
    try:
        schema.find_field(name, case_sensitive=False)
    except ValueError:
        return False
    return True


def value_json(value: Any, field_type: IcebergType | None) -> Any:  # noqa: C901, PLR0911 - one case per type
    """A Python value of an Iceberg type (PyIceberg's internal form) in the spec's JSON encoding."""
    if value is None:
        return None
    if isinstance(value, bool | str):
        return value
    if isinstance(value, bytes):
        if isinstance(field_type, UUIDType) and len(value) == 16:
            return str(uuid.UUID(bytes=value))
        return value.hex().upper()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, int):
        if isinstance(field_type, DateType):
            return (EPOCH_DATE + datetime.timedelta(days=value)).isoformat()
        if isinstance(field_type, TimeType):
            return (
                (datetime.datetime.min + datetime.timedelta(microseconds=value))
                .time()
                .isoformat(timespec="microseconds")
            )
        if isinstance(field_type, TimestampType):
            return (EPOCH + datetime.timedelta(microseconds=value)).isoformat(timespec="microseconds")
        if isinstance(field_type, TimestamptzType):
            return (EPOCH_TZ + datetime.timedelta(microseconds=value)).isoformat(timespec="microseconds")
        if isinstance(field_type, TimestampNanoType | TimestamptzNanoType):
            seconds, nanos = divmod(value, 1_000_000_000)
            base = EPOCH_TZ if isinstance(field_type, TimestamptzNanoType) else EPOCH
            moment = base + datetime.timedelta(seconds=seconds)
            text = moment.replace(tzinfo=None).isoformat(timespec="seconds") + f".{nanos:09d}"
            return text + ("+00:00" if isinstance(field_type, TimestamptzNanoType) else "")
        return value
    return str(value)
