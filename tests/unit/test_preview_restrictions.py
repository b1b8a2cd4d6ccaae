"""The console preview's restricted rows (app/previews/restricted.py) on Arrow tables: the filter,
hidden columns left out (nested ones too), the others transformed, rules inside a list closed."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.expressions import AlwaysFalse, EqualTo
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, ListType, LongType, NestedField, StringType, StructType

from app.previews.restricted import RestrictedRows
from app.rules.restrictions.policies import ColumnRule, Restrictions

SALT = bytes(range(16))
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType()),
    NestedField(3, "salary", DoubleType()),
    NestedField(4, "email", StringType()),
)
ROWS = pa.table(
    {
        "id": pa.array([1, 2, 3], pa.int64()),
        "region": ["eu", "us", None],
        "salary": [10.0, 20.0, 30.0],
        "email": ["ann@x.eu", "bob@y.us", "cy@z.eu"],
    }
)
EU_ONLY = {"type": "eq", "term": "region", "value": "eu"}


def _rows(*rules: tuple[str, str], row_filter: object = None) -> RestrictedRows:
    filters = () if row_filter is None else (row_filter,)
    return RestrictedRows(Restrictions(filters, tuple(ColumnRule(n, a) for n, a in rules)), SALT)


def test_rows_are_filtered_hidden_columns_left_out_and_the_others_transformed() -> None:
    restricted = _rows(("salary", "hide"), ("email", "mask-alphanum"), row_filter=EU_ONLY)
    assert restricted.row_filter(SCHEMA) == EqualTo("region", "eu")
    shown = restricted.apply(ROWS, SCHEMA)
    assert shown.column_names == ["id", "region", "email"]
    assert shown.to_pylist() == [{"id": 1, "region": "eu", "email": "xxx@x.xx"}]  # null region: dropped too


def test_a_filter_on_a_hidden_column_still_filters_before_it_is_left_out() -> None:
    shown = _rows(("salary", "hide"), row_filter={"type": "lt", "term": "salary", "value": 25}).apply(ROWS, SCHEMA)
    assert shown.column_names == ["id", "region", "email"]
    assert [row["id"] for row in shown.to_pylist()] == [1, 2]


def test_a_filter_that_does_not_bind_keeps_no_row() -> None:
    restricted = _rows(row_filter={"type": "eq", "term": "department", "value": "hr"})
    assert restricted.row_filter(SCHEMA) == AlwaysFalse()
    assert restricted.apply(ROWS, SCHEMA).num_rows == 0


def test_the_query_local_hash_follows_the_salt() -> None:
    first = _rows(("email", "sha-256-query-local")).apply(ROWS, SCHEMA).column("email").to_pylist()
    again = _rows(("email", "sha-256-query-local")).apply(ROWS, SCHEMA).column("email").to_pylist()
    other = RestrictedRows(Restrictions((), (ColumnRule("email", "sha-256-query-local"),)), bytes(16))
    assert first == again and first != other.apply(ROWS, SCHEMA).column("email").to_pylist()
    assert "ann@x.eu" not in first


def test_nested_fields_are_left_out_or_transformed_inside_their_struct_and_a_list_closes() -> None:
    schema = Schema(
        NestedField(1, "id", LongType()),
        NestedField(
            2, "contact", StructType(NestedField(3, "email", StringType()), NestedField(4, "pin", StringType()))
        ),
        NestedField(5, "tags", ListType(6, StringType())),
    )
    rows = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "contact": pa.array(
                [{"email": "ann@x.eu", "pin": "1234"}, None], pa.struct([("email", pa.string()), ("pin", pa.string())])
            ),
            "tags": pa.array([["a"], ["b", "c"]], pa.list_(pa.string())),
        }
    )
    restricted = RestrictedRows(
        Restrictions(
            (),
            (
                ColumnRule("contact.email", "mask-alphanum"),
                ColumnRule("contact.pin", "hide"),
                ColumnRule("tags.element", "mask-alphanum"),
            ),
        ),
        SALT,
    )
    shown = restricted.apply(rows, schema)
    assert shown.column_names == ["id", "contact", "tags"]
    assert shown.to_pylist() == [
        {"id": 1, "contact": {"email": "xxx@x.xx"}, "tags": None},
        {"id": 2, "contact": None, "tags": None},  # a null struct stays null
    ]


def test_no_visible_column_is_no_column() -> None:
    schema = Schema(NestedField(3, "salary", DoubleType()))
    assert _rows(("salary", "hide")).apply(pa.table({"salary": [1.0]}), schema).column_names == []
