"""Bounded work per request: every cap refused quickly with the Iceberg error body, nothing written.

The caps are ``app.ground.limits.Limits`` (``GROWLER_MAX_*``); these tests use the production defaults
except where a default would need a huge object in S3 (the registered-metadata size caps).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import time
from typing import Any

import pytest

from app.composition.services import services_of
from app.ground.limits import Limits
from tests.api.tables_support import PREFIX, T_LOCATION, TextStore, create_request, snapshot, table_url, tables_url
from tests.conftest import TEST_BUCKET, authenticated
from tests.timing_support import cpu_s

LIMITS = Limits()
NS = f"{PREFIX}/namespaces"
# A refusal costs at most this many times the same-run baseline (``Cost``). Measured: 1-3 for most,
# up to 46 for the bodies of a thousand objects (validated against the OpenAPI schema); doing the
# work a cap protects against (a million members, thousands of updates committed, 16 MiB inflated)
# costs far more.
AT_MOST_TIMES_THE_BASELINE = 100


@pytest.fixture
def table(client) -> str:
    assert client.post(NS, json={"namespace": ["db"]}).status_code == 200
    created = client.post(tables_url(), json=create_request("t", location=T_LOCATION))  # snapshot()'s table
    assert created.status_code == 200, created.text
    return table_url("t")


@pytest.fixture
def s3(app):
    return TextStore(services_of(app.app).namespaces.objects)


@dataclasses.dataclass(frozen=True)
class Cost:
    """The CPU time of a request and of its same-run baseline: a cheap accepted request on the same
    client plus ``json.loads`` of the body (of a JSON string as long, if the body is hostile JSON).

    Refused "quickly" means: without doing the work the cap protects against (thousands of updates
    applied, a huge document parsed or inflated, quadratic scans). That is asserted as a ratio of
    two CPU times of this process (the app runs in it), not as seconds: a machine 2-4x slower
    scales both alike, and another process taking the CPU counts in neither, so only a refusal that
    does more work can fail it.
    """

    request_s: float
    baseline_s: float


def post(client, url: str, body: Any) -> tuple[Any, Cost]:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    started = time.process_time()
    response = client.post(url, content=content, headers={"content-type": "application/json"})
    request_s = time.process_time() - started
    try:
        json.loads(content)
        readable = content
    except (ValueError, RecursionError):  # hostile: as long a JSON string instead
        readable = json.dumps("x" * len(content)).encode()
    baseline_s = cpu_s(lambda: client.get(NS)) + cpu_s(lambda: json.loads(readable))
    return response, Cost(request_s, baseline_s)


def assert_refused(response, cost: Cost, status: int, *fragments: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status
    assert error["type"] == "BadRequestException"
    for fragment in fragments:
        assert fragment in error["message"], error["message"]
    assert cost.request_s < AT_MOST_TIMES_THE_BASELINE * cost.baseline_s, cost


def catalog_state(db) -> list[tuple]:
    return db.execute("SELECT kind, name, metadata_location FROM catalog_entry ORDER BY name").fetchall()


def namespaces(db) -> list[tuple]:
    return db.execute("SELECT path FROM namespace ORDER BY path").fetchall()


# -- JSON itself: the former 500s ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b'{"namespace": ["a"], "properties": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested deeper than 100"),
        (
            b'{"namespace": ["a"], "properties": {"k": "v"}, "x": ' + b'{"y": ' * 100 + b"1" + b"}" * 100 + b"}",
            "nested deeper than 100",
        ),
        (b'{"namespace": [' + b"9" * 5000 + b"]}", "longer than 40 characters"),
        (b'{"namespace": ["a"], "properties": {"k": ' + b"1" * 100_000 + b"}}", "longer than 40 characters"),
        (b'{"namespace": ["a"], "properties": {"k": 1e999}}', "too large for a double"),
        (b'{"namespace": ["a"], "properties": {"k": NaN}}', "NaN is not a JSON value"),
        (b'{"namespace": ["\\ud800"]}', "lone UTF-16 surrogate"),
        (b'{"namespace": ["a"], "properties": {"k": "x\\udfffy"}}', "lone UTF-16 surrogate"),
        (b'{"namespace": ["a"], "properties": {"\\udbff": "v"}}', "lone UTF-16 surrogate"),
    ],
)
def test_hostile_json_is_a_400(client, db, body, fragment):
    response, cost = post(client, NS, body)
    assert_refused(response, cost, 400, fragment)
    assert namespaces(db) == []


def test_a_surrogate_pair_is_fine(client, db):
    response, _ = post(client, NS, b'{"namespace": ["emoji"], "properties": {"k": "\\ud83d\\ude00"}}')
    assert response.status_code == 200, response.text
    assert client.get(f"{NS}/emoji").json()["properties"]["k"] == "\U0001f600"


def test_an_object_with_too_many_members(client, db):
    properties = {f"k{i}": "v" for i in range(LIMITS.max_json_items + 1)}
    response, cost = post(client, NS, {"namespace": ["wide"], "properties": properties})
    assert_refused(response, cost, 400, f"more than {LIMITS.max_json_items} entries")
    assert namespaces(db) == []


# -- 64-bit and 32-bit ranges --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("update", "fragment"),
    [
        ({"action": "add-snapshot", "snapshot": snapshot(2**63, 1)}, "outside the signed 64-bit range"),
        ({"action": "add-snapshot", "snapshot": snapshot(-(2**63) - 1, 1)}, "outside the signed 64-bit range"),
        ({"action": "add-snapshot", "snapshot": snapshot(7, 2**64)}, "outside the signed 64-bit range"),
        ({"action": "add-snapshot", "snapshot": snapshot(7, 1, parent=10**25)}, "outside the signed 64-bit range"),
        ({"action": "add-snapshot", "snapshot": {**snapshot(7, 1), "timestamp-ms": 2**63}}, "64-bit range"),
        ({"action": "add-snapshot", "snapshot": snapshot(7, 1, schema_id=2**31)}, "'schema-id'"),
        ({"action": "set-current-schema", "schema-id": 2**40}, "'schema-id' in the request body must be a 32-bit"),
        ({"action": "set-default-spec", "spec-id": -(2**31) - 1}, "'spec-id'"),
        ({"action": "set-default-sort-order", "sort-order-id": 2**31}, "'sort-order-id'"),
        ({"action": "upgrade-format-version", "format-version": 2**32 + 2}, "'format-version'"),
        ({"action": "remove-snapshots", "snapshot-ids": [1, 2**63]}, "outside the signed 64-bit range"),
        (
            {"action": "set-snapshot-ref", "ref-name": "b", "type": "branch", "snapshot-id": 2**63},
            "outside the signed 64-bit range",
        ),
    ],
)
def test_ids_and_sequence_numbers_outside_their_range(client, db, table, update, fragment):
    before = catalog_state(db)
    response, cost = post(client, table, {"requirements": [], "updates": [update]})
    assert_refused(response, cost, 400, fragment)
    assert catalog_state(db) == before


def test_the_largest_64_bit_ids_are_accepted(client, table):
    largest = 2**63 - 1
    response, _ = post(
        client,
        table,
        {
            "requirements": [],
            "updates": [
                {"action": "add-snapshot", "snapshot": snapshot(largest, 1)},
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": largest},
            ],
        },
    )
    assert response.status_code == 200, response.text
    assert response.json()["metadata"]["current-snapshot-id"] == largest


def test_a_field_id_outside_32_bits_in_a_create(client, db):
    assert client.post(NS, json={"namespace": ["db"]}).status_code == 200
    body = create_request("wide")
    body["schema"]["fields"][0]["id"] = 2**31
    response, cost = post(client, tables_url(), body)
    assert_refused(response, cost, 400, "'id' in the request body must be a 32-bit integer")
    assert catalog_state(db) == []


# -- what one request may ask for ----------------------------------------------------------------


def set_property(i: int) -> dict:
    return {"action": "set-properties", "updates": {f"k{i}": "v"}}


def test_updates_per_commit(client, db, table):
    before = catalog_state(db)
    over = [set_property(i) for i in range(LIMITS.max_updates + 1)]
    response, cost = post(client, table, {"requirements": [], "updates": over})
    assert_refused(response, cost, 400, f"at most {LIMITS.max_updates} updates")
    assert catalog_state(db) == before
    at_cap, _ = post(client, table, {"requirements": [], "updates": over[:-1]})
    assert at_cap.status_code == 200, at_cap.text
    assert len(at_cap.json()["metadata"]["properties"]) >= LIMITS.max_updates


def test_requirements_per_commit(client, db, table):
    before = catalog_state(db)
    requirement = {"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}
    body = {"requirements": [requirement] * (LIMITS.max_requirements + 1), "updates": [set_property(0)]}
    response, cost = post(client, table, body)
    assert_refused(response, cost, 400, f"at most {LIMITS.max_requirements} requirements")
    assert catalog_state(db) == before


def test_changes_per_transaction(client, db, table):
    before = catalog_state(db)
    change = {"identifier": {"namespace": ["db"], "name": "t"}, "requirements": [], "updates": [set_property(0)]}
    body = {"table-changes": [change] * (LIMITS.max_table_changes + 1)}
    response, cost = post(client, f"{PREFIX}/transactions/commit", body)
    assert_refused(response, cost, 400, f"at most {LIMITS.max_table_changes} tables")
    updates = [set_property(i) for i in range(LIMITS.max_updates // 2 + 1)]
    body = {"table-changes": [{**change, "updates": updates}, {**change, "updates": updates}]}
    response, cost = post(client, f"{PREFIX}/transactions/commit", body)  # counted together
    assert_refused(response, cost, 400, f"at most {LIMITS.max_updates} updates")
    assert catalog_state(db) == before


def wide_schema(fields: int) -> dict:
    """``fields`` fields in all: struct columns of 100 nested fields each (no list over the item cap)."""
    ids = iter(range(1, fields + 1))
    columns = []
    remaining = fields
    while remaining:
        nested = min(100, remaining - 1)
        inner = [{"id": next(ids), "name": f"n{j}", "type": "int", "required": False} for j in range(nested)]
        column_type: Any = {"type": "struct", "fields": inner} if nested else "int"
        columns.append({"id": next(ids), "name": f"c{len(columns)}", "type": column_type, "required": False})
        remaining -= nested + 1
    return {"type": "struct", "schema-id": 0, "fields": columns}


def test_schema_fields(client, db, table):
    before = catalog_state(db)
    body = {"name": "wide", "schema": wide_schema(LIMITS.max_schema_fields + 1)}
    response, cost = post(client, tables_url(), body)
    assert_refused(response, cost, 400, f"at most {LIMITS.max_schema_fields} fields")
    add_schema = {"action": "add-schema", "schema": wide_schema(LIMITS.max_schema_fields + 1)}
    response, cost = post(client, table, {"requirements": [], "updates": [add_schema]})
    assert_refused(response, cost, 400, f"at most {LIMITS.max_schema_fields} fields")
    assert catalog_state(db) == before


# -- registered metadata: bytes read and bytes inflated ------------------------------------------


@pytest.fixture
def small_client(settings, clean_catalog):
    """An app whose metadata caps are small enough to test with small objects."""
    from app.edge.factory import create_app

    limits = dataclasses.replace(Limits(), max_metadata_bytes=64 * 1024, max_inflated_bytes=256 * 1024)
    return authenticated(create_app(dataclasses.replace(settings, limits=limits))).test_client()


def metadata_of(client) -> dict:
    assert client.post(NS, json={"namespace": ["db"]}).status_code == 200
    created = client.post(tables_url(), json=create_request("orig")).json()
    assert client.delete(table_url("orig")).status_code == 204
    return created["metadata"]


def register(client, location: str) -> tuple[Any, Cost]:
    return post(client, f"{PREFIX}/namespaces/db/register", {"name": "back", "metadata-location": location})


def test_registered_metadata_within_the_caps(small_client, s3, db):
    metadata = metadata_of(small_client)
    metadata["properties"] = {f"p{i}": "x" * 100 for i in range(1000)}  # ~110 KiB inflated
    location = f"s3://{TEST_BUCKET}/db/reg/ok/metadata/00001-a.gz.metadata.json"  # in its home (issue 46)
    s3.write_new(location, gzip.compress(json.dumps(metadata).encode()))
    response, _ = register(small_client, location)
    assert response.status_code == 200, response.text
    assert len(response.json()["metadata"]["properties"]) == 1000


def test_registered_metadata_too_large(small_client, s3, db):
    metadata = metadata_of(small_client)
    metadata["properties"] = {"p": "x" * (65 * 1024)}
    location = f"s3://{TEST_BUCKET}/reg/big/metadata/00001-a.metadata.json"
    s3.write_new(location, json.dumps(metadata).encode())
    response, cost = register(small_client, location)
    assert_refused(response, cost, 413, "larger than 65536 bytes")
    assert catalog_state(db) == []


def test_registered_gzip_bomb(small_client, s3, db):
    metadata_of(small_client)
    # 16 MiB of whitespace in under 64 KiB: within the read cap, 64 times the inflated cap
    bomb = gzip.compress(b"{" + b" " * (16 * 1024 * 1024) + b"}", compresslevel=9)
    assert len(bomb) < 64 * 1024
    location = f"s3://{TEST_BUCKET}/reg/bomb/metadata/00001-a.gz.metadata.json"
    s3.write_new(location, bomb)
    response, cost = register(small_client, location)
    assert_refused(response, cost, 413, "inflates to more than 262144 bytes")
    assert catalog_state(db) == []


def test_registered_metadata_is_parsed_within_the_json_limits(small_client, s3, db):
    metadata = metadata_of(small_client)
    metadata["current-snapshot-id"] = 2**63
    location = f"s3://{TEST_BUCKET}/reg/range/metadata/00001-a.metadata.json"
    s3.write_new(location, json.dumps(metadata).encode())
    response, cost = register(small_client, location)
    assert_refused(response, cost, 400, "outside the signed 64-bit range", "metadata file")
    assert catalog_state(db) == []


# -- error messages ------------------------------------------------------------------------------


def test_error_messages_are_bounded(client, table):
    response = client.get(table_url("x" * 200) + "x" * 5000)
    assert response.status_code in (400, 404)
    assert len(response.json()["error"]["message"]) <= 1000


def test_no_database_text_in_error_messages(client, db):
    # PostgreSQL's jsonb refuses \u0000; its own message names the type and the escape.
    response, _ = post(client, NS, b'{"namespace": ["nul"], "properties": {"k": "a\\u0000b"}}')
    assert response.status_code == 400, response.text
    message = response.json()["error"]["message"]
    assert message.startswith("Invalid value: "), message  # refused by PostgreSQL, not before
    for database_word in ("jsonb", "json", "DETAIL", "CONTEXT", "escape", "Unicode", "SQL", "psycopg"):
        assert database_word not in message, message
    assert namespaces(db) == []


# -- nesting that real schemas need --------------------------------------------------------------


def nested_schema(levels: int) -> dict:
    """A struct in a struct ``levels`` deep: three JSON levels each (field, type, fields)."""
    ids = iter(range(1, 10_000))
    inner: dict = {"type": "struct", "fields": [{"id": next(ids), "name": "leaf", "type": "int", "required": False}]}
    for level in range(levels):
        field = {"id": next(ids), "name": f"s{level}", "type": inner, "required": False}
        inner = {"type": "struct", "fields": [field]}
    return {"type": "struct", "schema-id": 0, "fields": inner["fields"]}


def test_thirty_levels_of_nested_structs_are_accepted(client):
    assert client.post(NS, json={"namespace": ["db"]}).status_code == 200
    response, _ = post(client, tables_url(), {"name": "deep", "schema": nested_schema(30)})
    assert response.status_code == 200, response.text
    commit, _ = post(client, table_url("deep"), {"requirements": [], "updates": [set_property(1)]})
    assert commit.status_code == 200, commit.text


def test_the_deepest_configurable_nesting_is_never_a_server_error(settings, clean_catalog):
    """At GROWLER_MAX_JSON_DEPTH's maximum, the validators' recursion still has stack to spare."""
    from app.edge.factory import create_app

    deepest = dataclasses.replace(Limits(), max_json_depth=160)
    client = authenticated(create_app(dataclasses.replace(settings, limits=deepest))).test_client()
    assert client.post(NS, json={"namespace": ["db"]}).status_code == 200
    accepted, _ = post(client, tables_url(), {"name": "deepest", "schema": nested_schema(51)})  # 158 levels
    assert accepted.status_code == 200, accepted.text
    refused, _ = post(client, tables_url(), {"name": "deeper", "schema": nested_schema(55)})
    assert refused.status_code == 400 and "nested deeper than 160" in refused.json()["error"]["message"]
