"""The spec's expression JSON to PyIceberg and back (residual filters), and value encodings."""

from __future__ import annotations

import datetime
import uuid
from decimal import Decimal

import pytest
from pyiceberg.expressions import (
    AlwaysFalse,
    AlwaysTrue,
    And,
    EqualTo,
    GreaterThan,
    In,
    IsNaN,
    IsNull,
    LessThan,
    Not,
    NotIn,
    NotNull,
    NotStartsWith,
    Or,
    StartsWith,
)
from pyiceberg.expressions.visitors import bind
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from app.rules.scan.filter import FilterError, filter_json, parse_filter, value_json

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "day", DateType(), required=False),
    NestedField(4, "price", DoubleType(), required=False),
    NestedField(5, "amount", DecimalType(9, 2), required=False),
    NestedField(6, "blob", BinaryType(), required=False),
    NestedField(7, "ref", UUIDType(), required=False),
    NestedField(8, "ts", TimestampType(), required=False),
    NestedField(9, "point", StructType(NestedField(10, "x", LongType(), required=False)), required=False),
)
ID = {"type": "reference", "name": "id"}


@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (True, AlwaysTrue()),
        (False, AlwaysFalse()),
        ({"type": "true"}, AlwaysTrue()),
        ({"type": "false"}, AlwaysFalse()),
        ({"type": "lt", "term": "id", "value": 5}, LessThan("id", 5)),
        ({"type": "lt", "left": ID, "right": 5}, LessThan("id", 5)),
        ({"type": "lt", "left": 5, "right": ID}, GreaterThan("id", 5)),
        ({"type": "eq", "left": {"type": "reference", "id": 10}, "right": 3}, EqualTo("point.x", 3)),
        ({"type": "is-null", "child": ID}, IsNull("id")),
        ({"type": "not-null", "term": "id"}, NotNull("id")),
        ({"type": "is-nan", "term": "price"}, IsNaN("price")),
        ({"type": "in", "child": ID, "values": [1, 2]}, In("id", {1, 2})),
        (
            {"type": "not-in", "term": "id", "values": {"type": "literals", "values": [1], "data-type": "long"}},
            NotIn("id", {1}),
        ),
        ({"type": "starts-with", "term": "name", "value": "ab"}, StartsWith("name", "ab")),
        ({"type": "not-starts-with", "term": "name", "value": "ab"}, NotStartsWith("name", "ab")),
        (
            {"type": "and", "left": {"type": "eq", "term": "id", "value": 1}, "right": {"type": "not", "child": True}},
            And(EqualTo("id", 1), Not(AlwaysTrue())),
        ),
        (
            {"type": "or", "left": {"type": "eq", "term": "id", "value": 1}, "right": False},
            Or(EqualTo("id", 1), AlwaysFalse()),
        ),
    ],
)
def test_parses_every_predicate_form(node, expected):
    assert bind(SCHEMA, parse_filter(node, SCHEMA), True) == bind(SCHEMA, expected, True)


@pytest.mark.parametrize(
    ("column", "raw", "bound_value"),
    [
        ("day", "2024-02-29", 19782),
        ("day", {"type": "literal", "value": "2024-02-29", "data-type": "date"}, 19782),
        ("amount", "12.50", Decimal("12.50")),
        ("blob", "0AFF", b"\x0a\xff"),
        ("ref", "eb26bdb1-a1d8-4aa6-990e-da940875492c", uuid.UUID("eb26bdb1-a1d8-4aa6-990e-da940875492c").bytes),
        ("ts", "2024-01-02T03:04:05.000006", 1704164645000006),
        ("price", 1, 1.0),
    ],
)
def test_literals_follow_the_single_value_encoding(column, raw, bound_value):
    bound = bind(SCHEMA, parse_filter({"type": "eq", "term": column, "value": raw}, SCHEMA), True)
    assert bound.literal.value == bound_value


@pytest.mark.parametrize(
    ("node", "words"),
    [
        ({"type": "eq", "term": "missing", "value": 1}, "cannot find field 'missing'"),
        ({"type": "eq", "term": "ID", "value": 1}, "cannot find field 'ID'"),
        ({"type": "eq", "term": "id", "value": "one"}, "not a valid long"),
        ({"type": "eq", "term": "id", "value": True}, "not a valid long"),
        ({"type": "eq", "term": "day", "value": "2024-13-01"}, "not a valid date"),
        ({"type": "eq", "term": "point", "value": 1}, "not a primitive column"),
        ({"type": "eq", "left": ID, "right": ID}, "comparing two columns"),
        ({"type": "in", "term": "id"}, "needs 'values'"),
        ({"type": "and", "left": True}, "needs 'right'"),
        (
            {"type": "eq", "term": {"type": "transform", "transform": "bucket[4]", "term": "id"}, "value": 1},
            "transforms",
        ),
        ({"type": "lt", "term": "id", "value": {"type": "literal", "value": 1, "data-type": "nope"}}, "data-type"),
        ({"type": "wat"}, "unknown predicate type"),
        ([1], "not a predicate"),
        ({"type": "starts-with", "term": "id", "value": 1}, "starts-with needs a string"),
    ],
)
def test_malformed_filters_are_bad_requests(node, words):
    with pytest.raises(FilterError) as raised:
        parse_filter(node, SCHEMA)
    assert raised.value.code == 400 and words in raised.value.message


def test_case_insensitive_names():
    parsed = parse_filter({"type": "eq", "term": "NAME", "value": "x"}, SCHEMA, case_sensitive=False)
    assert parsed == EqualTo("name", "x")


def test_deep_nesting_is_refused():
    node: object = True
    for _ in range(300):
        node = {"type": "not", "child": node}
    with pytest.raises(FilterError):
        parse_filter(node, SCHEMA)


def test_residuals_are_written_in_the_term_value_form():
    expression = bind(SCHEMA, And(In("id", {2, 1}), Or(IsNull("name"), EqualTo("day", "2024-01-01"))), True)
    assert filter_json(expression, SCHEMA) == {
        "type": "and",
        "left": {"type": "in", "term": "id", "values": [1, 2]},
        "right": {
            "type": "or",
            "left": {"type": "is-null", "term": "name"},
            "right": {"type": "eq", "term": "day", "value": "2024-01-01"},
        },
    }
    assert filter_json(AlwaysTrue(), SCHEMA) is True
    assert filter_json(Not(EqualTo("id", 1)), SCHEMA) == {
        "type": "not",
        "child": {"type": "eq", "term": "id", "value": 1},
    }


@pytest.mark.parametrize(
    ("value", "field_type", "encoded"),
    [
        (19782, DateType(), "2024-02-29"),
        (1704164645000006, TimestampType(), "2024-01-02T03:04:05.000006"),
        (0, TimestamptzType(), "1970-01-01T00:00:00.000000+00:00"),
        (3_600_000_001, TimeType(), "01:00:00.000001"),
        (b"\x0a\xff", BinaryType(), "0AFF"),
        (Decimal("1.50"), DecimalType(9, 2), "1.50"),
        (7, LongType(), 7),
        (uuid.UUID("eb26bdb1-a1d8-4aa6-990e-da940875492c").bytes, UUIDType(), "eb26bdb1-a1d8-4aa6-990e-da940875492c"),
        (None, LongType(), None),
        (datetime.date(2024, 1, 1), None, "2024-01-01"),
    ],
)
def test_value_encoding(value, field_type, encoded):
    assert value_json(value, field_type) == encoded
