"""The bounded JSON parser, request-shape caps and bounded gzip (app/ground/limits.py): pure, no I/O."""

from __future__ import annotations

import gzip
import json
import tracemalloc

import pytest

from app.ground.errors import BadRequest, PayloadTooLarge, error_body
from app.ground.limits import (
    INT32_MAX,
    INT64_MAX,
    INT64_MIN,
    LARGE_DOCUMENT_CHARS,
    Limits,
    check_metadata_schemas,
    check_request_shape,
    inflate,
    load_json,
)
from app.ground.settings import Settings
from tests.timing_support import cpu_s as timing_cpu_s

LIMITS = Limits()
# A refusal costs about what parsing a valid document of its size costs (measured ratios: 0.1 to
# 7, the highest for a body of 200 brackets); a parser that went quadratic on a 200 KiB body
# would cost thousands of times more.
AT_MOST_TIMES_A_PARSE = 50


def cpu_s(work, runs: int = 7) -> float:
    """The least CPU time over ``runs`` calls (tests/timing_support.py: why ratios, not seconds)."""
    return timing_cpu_s(work, runs)


def refused(text: str | bytes, limits: Limits = LIMITS, **kwargs) -> str:
    with pytest.raises(BadRequest) as info:
        load_json(text, limits, **kwargs)
    assert info.value.code == 400
    return info.value.message


@pytest.mark.parametrize("large", [False, True], ids=["c-scanner", "python-scanner"])
def test_valid_documents_parse_as_json_does(large):
    doc = {"a": [1, -2, 3.5, True, None, "x\u00e9\U0001f600"], "b": {"c": INT64_MAX, "d": INT64_MIN}}
    text = json.dumps(doc)  # ensure_ascii: the emoji travels as a surrogate pair, which is fine
    if large:
        text = text[:-1] + ', "pad": "' + "p" * LARGE_DOCUMENT_CHARS + '"}'
        doc["pad"] = "p" * LARGE_DOCUMENT_CHARS
    assert load_json(text, LIMITS) == doc
    assert load_json(text.encode(), LIMITS) == doc


@pytest.mark.parametrize("pad", [0, LARGE_DOCUMENT_CHARS], ids=["c-scanner", "python-scanner"])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"a": ' + "[" * 100 + "]" * 100 + "}", "nested deeper than 100"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 100"),
        ('{"a": ' + "9" * 41 + "}", "longer than 40 characters"),
        ('{"a": ' + "9" * 5000 + "}", "longer than 40 characters"),
        ('{"a": 1.' + "5" * 40 + "}", "longer than 40 characters"),
        ('{"a": 9223372036854775808}', "outside the signed 64-bit range"),
        ('{"a": -9223372036854775809}', "outside the signed 64-bit range"),
        ('{"a": 1e400}', "too large for a double"),
        ('{"a": NaN}', "NaN is not a JSON value"),
        ('{"a": -Infinity}', "-Infinity is not a JSON value"),
        ('{"a": "\\ud800"}', "lone UTF-16 surrogate"),
        ('{"a": "\\udc00x"}', "lone UTF-16 surrogate"),
        ('{"a": "\\ud83d\\ud83d"}', "lone UTF-16 surrogate"),
        ('{"schema-id": 2147483648}', "'schema-id' in the request body must be a 32-bit integer"),
        ('{"x": {"fields": [{"id": -2147483649}]}}', "'id' in the request body must be a 32-bit integer"),
        ('{"source-ids": [1, 4294967296]}', "'source-ids' in the request body must be a 32-bit integer"),
        ('{"a": [1, 2', "Invalid JSON in the request body"),
    ],
)
def test_refusals(body, message, pad):
    if pad:
        body = '{"pad": "' + "p" * pad + '", ' + body[1:]
    assert message in refused(body)
    # Not quadratic: the refusal costs a small multiple of parsing a valid document as long.
    valid = '{"pad": "' + "p" * max(pad, len(body)) + '"}'
    refusal, parse = cpu_s(lambda: refused(body)), cpu_s(lambda: load_json(valid, LIMITS))
    assert refusal < AT_MOST_TIMES_A_PARSE * parse, (refusal, parse)


def test_the_limits_are_the_configured_ones():
    small = Limits(max_json_depth=3, max_number_length=20, max_json_items=2)
    assert load_json('{"a": {"b": 1}}', small) == {"a": {"b": 1}}
    assert load_json('{"a": {"b": [1]}}', small) == {"a": {"b": [1]}}  # three containers deep
    assert "nested deeper than 3" in refused('{"a": {"b": [[1]]}}', small)
    assert "more than 2 entries" in refused("[1, 2, 3]", small)
    assert "more than 2 entries" in refused('{"a": 1, "b": 2, "c": 3}', small)
    assert load_json("[1, 2, 3]", small, items=False) == [1, 2, 3]
    assert load_json(str(INT32_MAX), small) == INT32_MAX  # only named members are 32-bit


def test_depth_boundary():
    assert load_json("[" * 100 + "]" * 100, LIMITS) is not None
    assert "nested deeper than 100" in refused("[" * 101 + "]" * 101)


def test_raw_surrogate_bytes_are_not_utf8():
    assert "not valid UTF-8" in refused(b'{"a": "\xed\xa0\x80"}')


def test_escaped_backslash_before_u_is_not_a_surrogate():
    assert load_json('{"a": "\\\\ud800"}', LIMITS) == {"a": "\\ud800"}


def commit(updates: int = 0, requirements: int = 0) -> dict:
    return {
        "requirements": [{"type": "assert-create"}] * requirements,
        "updates": [{"action": "remove-properties", "removals": ["k"]}] * updates,
    }


def schema_with(fields: int, nested: bool = False) -> dict:
    if nested:  # one struct column holding the rest, inside a list of maps
        inner = {"type": "struct", "fields": [{"id": i, "name": f"c{i}", "type": "int"} for i in range(fields - 3)]}
        value = {"type": "map", "key-id": 1, "key": "string", "value-id": 2, "value": inner}
        column = {"type": "list", "element-id": 3, "element": value}
        return {"type": "struct", "fields": [{"id": 0, "name": "c", "type": column}]}
    return {"type": "struct", "fields": [{"id": i, "name": f"c{i}", "type": "int"} for i in range(fields)]}


def shape_refused(body: dict, limits: Limits = LIMITS) -> str:
    with pytest.raises(BadRequest) as info:
        check_request_shape(body, limits)
    return info.value.message


def test_request_shape_caps():
    limits = Limits(max_updates=3, max_requirements=2, max_table_changes=2, max_schema_fields=5)
    check_request_shape(commit(3, 2), limits)
    assert "at most 3 updates" in shape_refused(commit(4), limits)
    assert "at most 2 requirements" in shape_refused(commit(0, 3), limits)
    changes = {"table-changes": [commit(2), commit(1)]}
    check_request_shape(changes, limits)
    assert "at most 3 updates" in shape_refused({"table-changes": [commit(2), commit(2)]}, limits)
    assert "at most 2 tables" in shape_refused({"table-changes": [commit(0)] * 3}, limits)
    check_request_shape({"name": "t", "schema": schema_with(5)}, limits)
    assert "at most 5 fields" in shape_refused({"name": "t", "schema": schema_with(6)}, limits)
    assert "at most 5 fields" in shape_refused({"name": "t", "schema": schema_with(6, nested=True)}, limits)
    add_schema = {"updates": [{"action": "add-schema", "schema": schema_with(6)}]}
    assert "at most 5 fields" in shape_refused(add_schema, limits)
    # A namespace's "updates" is a map of properties, not a list of updates.
    check_request_shape({"updates": {f"k{i}": "v" for i in range(10)}, "removals": []}, limits)


def test_registered_metadata_schemas_are_capped():
    limits = Limits(max_schema_fields=5)
    check_metadata_schemas({"schemas": [schema_with(5), schema_with(4)]}, limits)
    with pytest.raises(BadRequest):
        check_metadata_schemas({"schemas": [schema_with(2), schema_with(6)]}, limits)
    with pytest.raises(BadRequest):
        check_metadata_schemas({"schema": schema_with(6)}, limits)  # format v1


def test_inflate_round_trips_and_accepts_concatenated_members():
    data = b'{"format-version": 2}' * 1000
    assert inflate(gzip.compress(data), 10 * len(data)) == data
    assert inflate(gzip.compress(data) + gzip.compress(b"tail"), 10 * len(data)) == data + b"tail"
    assert inflate(gzip.compress(data), len(data)) == data  # exactly at the bound


def test_a_gzip_bomb_stops_at_the_bound_without_inflating():
    bomb = gzip.compress(b"\0" * (1024 * 1024 * 1024), compresslevel=9)  # 1 GiB of zeros, ~1 MiB
    tracemalloc.start()
    try:
        with pytest.raises(PayloadTooLarge) as info:
            inflate(bomb, 8 * 1024 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.code == 413
    assert peak < 32 * 1024 * 1024, peak

    def refuse_the_bomb() -> None:
        with pytest.raises(PayloadTooLarge):
            inflate(bomb, 8 * 1024 * 1024)

    # Stops at the bound: about the work of inflating the 8 MiB the bound allows (measured ratio
    # about 1), where inflating the whole GiB - even without holding it - is about 128 times that.
    at_the_bound = gzip.compress(b"\0" * (8 * 1024 * 1024), compresslevel=9)
    refusal, allowed = cpu_s(refuse_the_bomb, runs=3), cpu_s(lambda: inflate(at_the_bound, 8 * 1024 * 1024), runs=3)
    assert refusal < 8 * allowed, (refusal, allowed)


@pytest.mark.parametrize("data", [gzip.compress(b"x" * 1000)[:-12], b"\x1f\x8b not gzip at all"])
def test_truncated_or_corrupt_gzip_is_a_bad_request(data):
    with pytest.raises(BadRequest):
        inflate(data, 1 << 20)


def test_error_messages_are_bounded():
    message = error_body("x" * 100_000, "BadRequestException", 400)["error"]["message"]
    assert len(message) <= 1000 and message.endswith("(truncated)")
    assert error_body("short", "BadRequestException", 400)["error"]["message"] == "short"


def test_limits_from_the_environment():
    env = {
        "GROWLER_DATABASE_URL": "postgresql://x",
        "GROWLER_WAREHOUSE_LOCATION": "file:///tmp/w",
        "GROWLER_MAX_JSON_DEPTH": "10",
        "GROWLER_MAX_UPDATES": "7",
        "GROWLER_MAX_INFLATED_BYTES": "99",
    }
    limits = Settings.from_env(env).limits
    assert (limits.max_json_depth, limits.max_updates, limits.max_inflated_bytes) == (10, 7, 99)
    assert limits.max_requirements == Limits.max_requirements
    with pytest.raises(ValueError, match="GROWLER_MAX_JSON_DEPTH"):
        Settings.from_env({**env, "GROWLER_MAX_JSON_DEPTH": "5000"})
    with pytest.raises(ValueError, match="positive"):
        Settings.from_env({**env, "GROWLER_MAX_UPDATES": "0"})
