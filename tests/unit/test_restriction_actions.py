"""The read restrictions' column actions (app/rules/restrictions/actions.py) against the spec's
own examples and encodings (apache/iceberg PR #13879), on the arrow types PyIceberg reads into."""

from __future__ import annotations

import datetime
import hashlib
import struct
import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyiceberg.expressions import (
    And,
    EqualTo,
    GreaterThan,
    In,
    IsNull,
    LessThan,
    Not,
    NotNull,
    Or,
    Reference,
)
from pyiceberg.expressions.visitors import bind
from pyiceberg.io.pyarrow import schema_to_pyarrow
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
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampNanoType,
    TimestampType,
    TimestamptzNanoType,
    TimestamptzType,
    TimeType,
    UnknownType,
    UUIDType,
)

from app.rules.restrictions.actions import ACTIONS, applicable, apply_action, filter_rows

UTC = datetime.UTC
SALT = bytes(range(16))
OTHER_SALT = bytes(range(1, 17))
POINT = StructType(NestedField(1, "x", IntegerType(), required=False), NestedField(2, "label", StringType()))

# One column of every type: a value, then a null.
SAMPLES: dict[str, tuple[IcebergType, object]] = {
    "boolean": (BooleanType(), True),
    "int": (IntegerType(), 42),
    "long": (LongType(), 1 << 40),
    "float": (FloatType(), 1.5),
    "double": (DoubleType(), 2.5),
    "decimal": (DecimalType(10, 2), Decimal("12.34")),
    "string": (StringType(), "Jane Doe, 42"),
    "date": (DateType(), datetime.date(2024, 7, 15)),
    "time": (TimeType(), datetime.time(12, 30)),
    "timestamp": (TimestampType(), datetime.datetime(2024, 7, 15, 10, 11, 12)),
    "timestamptz": (TimestamptzType(), datetime.datetime(2024, 7, 15, 10, 11, 12, tzinfo=UTC)),
    "timestamp_ns": (TimestampNanoType(), datetime.datetime(2024, 7, 15, 10, 11, 12)),
    "timestamptz_ns": (TimestamptzNanoType(), datetime.datetime(2024, 7, 15, 10, 11, 12, tzinfo=UTC)),
    "uuid": (UUIDType(), uuid.UUID("12345678-1234-5678-1234-567812345678")),
    "fixed": (FixedType(3), b"abc"),
    "binary": (BinaryType(), b"\x00\x01\xff"),
    "list": (ListType(10, StringType(), element_required=False), ["a", "b"]),
    "map": (MapType(11, StringType(), 12, IntegerType(), value_required=False), [("k", 1)]),
    "struct": (POINT, {"x": 3, "label": "p"}),
}


def column(field_type: IcebergType, *values: object) -> pa.Array:
    """The values as PyIceberg's reader would hand them over (its arrow type for the field)."""
    return pa.array(list(values), type=schema_to_pyarrow(field_type))


def run(action: str, field_type: IcebergType, *values: object, salt: bytes = b"") -> list[object]:
    return apply_action(action, column(field_type, *values), field_type, salt=salt).to_pylist()


def test_actions_are_the_spec_names_without_apply_expression() -> None:
    assert set(ACTIONS) == {
        "mask-alphanum",
        "show-first-4",
        "show-last-4",
        "replace-with-null",
        "mask-to-default",
        "truncate-to-year",
        "truncate-to-month",
        "sha-256-global",
        "sha-256-query-local",
    }


# -- the spec's examples -----------------------------------------------------------------------


def test_mask_alphanum_spec_example() -> None:
    assert run("mask-alphanum", StringType(), "prashant010696@gmail.com") == ["xxxxxxxxnnnnnn@xxxxx.xxx"]


def test_show_first_4_spec_example() -> None:
    assert run("show-first-4", StringType(), "prashant010696@gmail.com") == ["prasxxxxnnnnnn@xxxxx.xxx"]


def test_show_last_4_spec_example() -> None:
    assert run("show-last-4", StringType(), "4111-1111-1111-4444") == ["nnnn-nnnn-nnnn-4444"]


def test_mask_alphanum_keeps_only_the_listed_punctuation() -> None:
    kept = "(),.-@"
    assert run("mask-alphanum", StringType(), kept) == [kept]
    assert run("mask-alphanum", StringType(), "A b\tC\n_/+#!9") == ["xxxxxxxxxxxn"]
    assert run("mask-alphanum", StringType(), "Zoë 中文 ٣") == ["x" * 8]  # code points; only 0-9 are digits
    assert run("mask-alphanum", StringType(), "") == [""]


def test_show_4_counts_code_points_and_leaves_short_values() -> None:
    assert run("show-first-4", StringType(), "Zoë-Ünal 12") == ["Zoë-xxxxxnn"]
    assert run("show-last-4", StringType(), "12 Zoë-ün") == ["nnxxxë-ün"]
    for action in ("show-first-4", "show-last-4"):
        assert run(action, StringType(), "", "ab", "a1b2", "éé中9") == ["", "ab", "a1b2", "éé中9"]
    assert run("show-first-4", StringType(), "abcd1") == ["abcdn"]
    assert run("show-last-4", StringType(), "1abcd") == ["nabcd"]


@pytest.mark.parametrize(
    ("action", "expected"),
    [("truncate-to-year", datetime.date(2024, 1, 1)), ("truncate-to-month", datetime.date(2024, 7, 1))],
)
def test_truncate_spec_example(action: str, expected: datetime.date) -> None:
    assert run(action, DateType(), datetime.date(2024, 7, 15)) == [expected]


@pytest.mark.parametrize("name", ["timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"])
def test_truncate_timestamps_sets_the_time_to_midnight(name: str) -> None:
    field_type, value = SAMPLES[name]
    assert isinstance(value, datetime.datetime)
    year, month = run("truncate-to-year", field_type, value), run("truncate-to-month", field_type, value)
    assert year == [value.replace(month=1, day=1, hour=0, minute=0, second=0)]
    assert month == [value.replace(day=1, hour=0, minute=0, second=0)]


def test_truncate_timestamptz_is_in_utc_whatever_the_arrow_zone() -> None:
    # 2024-01-01T02:00Z is still 2023-12-31 in New York and already 2024-01-01 in Tokyo.
    instant = datetime.datetime(2024, 1, 1, 2, 0, tzinfo=UTC)
    for zone in ("UTC", "America/New_York", "Asia/Tokyo", "+05:00"):
        arrow_type = pa.timestamp("us", tz=zone)
        array = pa.array([instant, datetime.datetime(2024, 3, 31, 23, 30, tzinfo=UTC)], type=arrow_type)
        year = apply_action("truncate-to-year", array, TimestamptzType())
        month = apply_action("truncate-to-month", array, TimestamptzType())
        assert year.type == arrow_type and month.type == arrow_type
        assert [v.astimezone(UTC) for v in year.to_pylist()] == [datetime.datetime(2024, 1, 1, tzinfo=UTC)] * 2
        assert [v.astimezone(UTC) for v in month.to_pylist()] == [
            datetime.datetime(2024, 1, 1, tzinfo=UTC),
            datetime.datetime(2024, 3, 1, tzinfo=UTC),
        ]


# -- mask-to-default ---------------------------------------------------------------------------

DEFAULTS: dict[str, object] = {
    "boolean": False,
    "int": 999999999,
    "long": 999999999,
    "float": 0.0,
    "double": 0.0,
    "decimal": Decimal("0.00"),
    "string": "XXXXXXXX",
    "date": datetime.date(9999, 12, 31),
    "time": datetime.time(0, 0),
    "timestamp": datetime.datetime(9999, 12, 31),
    "timestamptz": datetime.datetime(9999, 12, 31, tzinfo=UTC),
    "uuid": uuid.UUID("00000000-0000-0000-0000-000000000000"),
    "fixed": b"\x00\x00\x00",
    "binary": b"",
    "list": [],
    "map": [],
    "struct": {"x": 999999999, "label": "XXXXXXXX"},
}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_mask_to_default_constants(name: str) -> None:
    field_type, value = SAMPLES[name]
    assert run("mask-to-default", field_type, value, None, value) == [DEFAULTS[name], None, DEFAULTS[name]]


@pytest.mark.parametrize("name", ["timestamp_ns", "timestamptz_ns"])
def test_mask_to_default_nanosecond_timestamps(name: str) -> None:
    field_type, value = SAMPLES[name]
    array = apply_action("mask-to-default", column(field_type, value), field_type)
    assert array.type.unit == "ns"
    assert array.cast(pa.int64()).to_pylist() == [
        int((datetime.datetime(2261, 12, 31, tzinfo=UTC) - datetime.datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())
        * 10**9
    ]


def test_mask_to_default_decimal_keeps_precision_and_scale() -> None:
    field_type = DecimalType(10, 2)
    array = apply_action("mask-to-default", column(field_type, Decimal("123.45"), None), field_type)
    assert array.type == pa.decimal128(10, 2)
    assert array.to_pylist() == [Decimal("0.00"), None]
    assert str(array[0].as_py()) == "0.00"


def test_mask_to_default_struct_is_each_field_default_recursively() -> None:
    inner = StructType(NestedField(3, "when", DateType()), NestedField(4, "amount", DecimalType(5, 1)))
    field_type = StructType(
        NestedField(1, "id", LongType()),
        NestedField(2, "inner", inner, required=False),
        NestedField(5, "tags", ListType(6, StringType())),
        NestedField(7, "key", UUIDType(), required=False),
    )
    arrow_type = schema_to_pyarrow(field_type)
    key = pa.ExtensionArray.from_storage(pa.uuid(), pa.array([uuid.uuid4().bytes, None], pa.binary(16)))
    children = [
        pa.array([7, 8], pa.int64()),
        column(inner, {"when": datetime.date(2020, 2, 2), "amount": Decimal("1.5")}, None),
        column(field_type.fields[2].field_type, ["a"], []),
        key,
    ]
    validity = pa.array([True, False])
    array = pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=pc.invert(validity))
    array = apply_action("mask-to-default", array, field_type)
    assert array.type == schema_to_pyarrow(field_type)
    assert array.to_pylist() == [
        {
            "id": 999999999,
            "inner": {"when": datetime.date(9999, 12, 31), "amount": Decimal("0.0")},
            "tags": [],
            "key": uuid.UUID(int=0),
        },
        None,
    ]


# -- sha-256 -----------------------------------------------------------------------------------

HASH_CASES: list[tuple[IcebergType, object, bytes]] = [
    (StringType(), "prashant010696@gmail.com", b"prashant010696@gmail.com"),
    (StringType(), "Zoë", "Zoë".encode()),
    (IntegerType(), 42, (42).to_bytes(4, "little", signed=True)),
    (IntegerType(), -1, b"\xff\xff\xff\xff"),
    (LongType(), 1 << 40, (1 << 40).to_bytes(8, "little", signed=True)),
    (LongType(), -(2**63), (-(2**63)).to_bytes(8, "little", signed=True)),
    (BinaryType(), b"\x00\x01\xff", b"\x00\x01\xff"),
    (BinaryType(), b"", b""),
]


def expected_hash(field_type: IcebergType, digest: bytes) -> object:
    if isinstance(field_type, StringType):
        return digest.hex()
    if isinstance(field_type, IntegerType):
        return int.from_bytes(digest[:4], "little", signed=True)
    if isinstance(field_type, LongType):
        return int.from_bytes(digest[:8], "little", signed=True)
    return digest


@pytest.mark.parametrize(("field_type", "value", "canonical"), HASH_CASES)
def test_sha_256_global_known_vectors(field_type: IcebergType, value: object, canonical: bytes) -> None:
    expected = expected_hash(field_type, hashlib.sha256(canonical).digest())
    assert run("sha-256-global", field_type, value, None) == [expected, None]


def test_sha_256_global_fixed_vectors() -> None:
    # FIPS 180-4's "abc" and the empty message, independent of this test's own encoder.
    abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert run("sha-256-global", StringType(), "abc", "") == [abc, empty]
    assert run("sha-256-global", BinaryType(), b"abc") == [bytes.fromhex(abc)]
    assert run("sha-256-global", IntegerType(), 0) == [struct.unpack("<i", hashlib.sha256(bytes(4)).digest()[:4])[0]]


@pytest.mark.parametrize(("field_type", "value", "canonical"), HASH_CASES)
def test_sha_256_query_local_is_salted_and_stable(field_type: IcebergType, value: object, canonical: bytes) -> None:
    local = run("sha-256-query-local", field_type, value, None, salt=SALT)
    assert local == [expected_hash(field_type, hashlib.sha256(SALT + canonical).digest()), None]
    assert local != run("sha-256-global", field_type, value, None)
    assert local == run("sha-256-query-local", field_type, value, None, salt=SALT)
    assert local != run("sha-256-query-local", field_type, value, None, salt=OTHER_SALT)


def test_sha_256_query_local_needs_a_16_byte_salt() -> None:
    for salt in (b"", b"x" * 15):
        with pytest.raises(ValueError, match="salt"):
            run("sha-256-query-local", StringType(), "a", salt=salt)
    long_salt = run("sha-256-query-local", StringType(), "a", salt=b"x" * 32)
    assert long_salt == [hashlib.sha256(b"x" * 32 + b"a").hexdigest()]


def test_sha_256_global_ignores_a_salt() -> None:
    assert run("sha-256-global", StringType(), "a", salt=SALT) == run("sha-256-global", StringType(), "a")


# -- every action: nulls stay null, the arrow type stays --------------------------------------

APPLICABLE_TO: dict[str, set[str]] = {
    "mask-alphanum": {"string"},
    "show-first-4": {"string"},
    "show-last-4": {"string"},
    "replace-with-null": set(SAMPLES),
    "mask-to-default": set(SAMPLES),
    "truncate-to-year": {"date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"},
    "truncate-to-month": {"date", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"},
    "sha-256-global": {"string", "int", "long", "binary"},
    "sha-256-query-local": {"string", "int", "long", "binary"},
}
PAIRS = [(action, name) for action in ACTIONS for name in sorted(APPLICABLE_TO[action])]


@pytest.mark.parametrize(("action", "name"), PAIRS)
def test_nulls_stay_null_and_the_type_stays(action: str, name: str) -> None:
    field_type, value = SAMPLES[name]
    array = column(field_type, value, None, value)
    result = apply_action(action, array, field_type, salt=SALT)
    assert isinstance(result, pa.Array) and result.type == array.type and len(result) == 3
    assert result[1].as_py() is None
    expect_null = action == "replace-with-null"
    assert [result[0].is_valid, result[2].is_valid] == [not expect_null, not expect_null]
    assert result[0] == result[2]  # every action is value to value


@pytest.mark.parametrize(("action", "name"), PAIRS)
def test_chunked_arrays_keep_their_chunks_and_type(action: str, name: str) -> None:
    field_type, value = SAMPLES[name]
    chunked = pa.chunked_array([column(field_type, value), column(field_type, None, value)])
    result = apply_action(action, chunked, field_type, salt=SALT)
    assert isinstance(result, pa.ChunkedArray) and result.type == chunked.type
    assert [len(c) for c in result.chunks] == [1, 2]
    single = apply_action(action, column(field_type, value, None, value), field_type, salt=SALT)
    assert result.to_pylist() == single.to_pylist()


def test_plain_string_view_and_dictionary_string_columns() -> None:
    values = ["4111-1111-1111-4444", None, "ab"]
    expected = ["nnnn-nnnn-nnnn-4444", None, "ab"]
    for arrow_type in (pa.string(), pa.large_string(), pa.string_view()):
        result = apply_action("show-last-4", pa.array(values, type=arrow_type), StringType())
        assert result.type == arrow_type and result.to_pylist() == expected
    encoded = pa.array(values + values).dictionary_encode()
    result = apply_action("show-last-4", encoded, StringType())
    assert result.type == encoded.type and result.to_pylist() == expected + expected
    nulled = apply_action("replace-with-null", encoded, StringType())
    assert nulled.type == encoded.type and nulled.null_count == 6


# -- applicability -----------------------------------------------------------------------------


@pytest.mark.parametrize("action", ACTIONS)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_applicability_table(action: str, name: str) -> None:
    field_type, value = SAMPLES[name]
    allowed = name in APPLICABLE_TO[action]
    assert applicable(action, field_type) is allowed
    if not allowed:
        with pytest.raises(ValueError, match=action) as refused:
            apply_action(action, column(field_type, value), field_type, salt=SALT)
        assert str(field_type) in str(refused.value)


def test_refusals_name_the_action_and_type() -> None:
    with pytest.raises(ValueError, match=r"show-last-4.*int"):
        apply_action("show-last-4", pa.array([1], pa.int32()), IntegerType())
    with pytest.raises(ValueError, match=r"sha-256-global.*date"):
        apply_action("sha-256-global", pa.array([datetime.date(2024, 1, 1)]), DateType())
    with pytest.raises(ValueError, match=r"truncate-to-year.*string"):
        apply_action("truncate-to-year", pa.array(["2024"]), StringType())


def test_apply_expression_and_unknown_actions_are_refused() -> None:
    assert not applicable("apply-expression", StringType()) and "apply-expression" not in ACTIONS
    with pytest.raises(ValueError, match="apply-expression"):
        apply_action("apply-expression", pa.array(["a"]), StringType())
    with pytest.raises(ValueError, match="mask-everything"):
        apply_action("mask-everything", pa.array(["a"]), StringType())
    assert not applicable("mask-everything", StringType())


def test_mask_to_default_needs_a_default_for_every_nested_field() -> None:
    assert applicable("replace-with-null", UnknownType())
    assert not applicable("mask-to-default", UnknownType())
    assert not applicable("mask-to-default", StructType(NestedField(1, "u", UnknownType(), required=False)))
    assert applicable("mask-to-default", ListType(1, UnknownType(), element_required=False))  # []


# -- the row filter ----------------------------------------------------------------------------

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
    NestedField(3, "amount", IntegerType(), required=False),
)
TABLE = pa.table(
    {
        "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "region": pa.array(["eu", "us", None, "eu", "apac"], pa.large_string()),
        "amount": pa.array([10, None, 30, 40, 50], pa.int32()),
    }
)


def kept(row_filter: object) -> list[int]:
    return filter_rows(TABLE, row_filter, SCHEMA).column("id").to_pylist()  # type: ignore[arg-type]


def test_filter_rows_comparisons_drop_false_and_null() -> None:
    assert kept(EqualTo("region", "eu")) == [1, 4]  # row 3 (null region) is not kept
    assert kept(Not(EqualTo("region", "eu"))) == [2, 5]
    assert kept(GreaterThan("amount", 20)) == [3, 4, 5]


def test_filter_rows_and_or_in_is_null() -> None:
    assert kept(And(EqualTo("region", "eu"), GreaterThan("amount", 20))) == [4]
    assert kept(Or(EqualTo("region", "us"), LessThan("amount", 20))) == [1, 2]
    assert kept(In("region", {"eu", "apac"})) == [1, 4, 5]
    assert kept(IsNull("region")) == [3]
    assert kept(NotNull("amount")) == [1, 3, 4, 5]
    assert kept(Or(IsNull("amount"), And(In("region", {"eu"}), Not(EqualTo(Reference("id"), 1))))) == [2, 4]


def test_filter_rows_takes_a_bound_expression_and_keeps_the_table_shape() -> None:
    bound = bind(SCHEMA, And(In("region", {"eu", "us"}), NotNull("amount")), case_sensitive=True)
    result = filter_rows(TABLE, bound, SCHEMA)
    assert result.schema == TABLE.schema and result.column("id").to_pylist() == [1, 4]
    assert filter_rows(TABLE, EqualTo("region", "nowhere"), SCHEMA).num_rows == 0


def test_filter_rows_refuses_an_unknown_column() -> None:
    with pytest.raises(ValueError, match="nope"):
        filter_rows(TABLE, EqualTo("nope", 1), SCHEMA)
