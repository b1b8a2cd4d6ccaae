"""Hostile values planted anywhere in otherwise valid bodies: a 4xx (or a 2xx), never a 5xx.

Each draw takes a valid request of a mutating operation, replaces one member or element at a
random place with a hostile JSON value (lone surrogates, numbers out of every range, deep or
wide nesting, NaN/Infinity, control characters) and posts it. Whatever the server says, it must
be the Iceberg error body or a success - the former 500s (deep nesting, huge numbers, lone
surrogates) were all of this kind.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.tables_support import PREFIX, T_LOCATION, create_request, snapshot, table_url, tables_url

NS = f"{PREFIX}/namespaces"

HOSTILE_TEXT = st.sampled_from(["\ud800", "a\udc00b", "\ud83d", "\x00", "\x1f", "x" * 5000, "", "\u2028"])
HOSTILE_NUMBER = st.sampled_from(
    [
        2**63,
        -(2**63) - 1,
        2**64,
        10**39,
        10**400,
        2**31,
        -(2**31) - 1,
        -1,
        0,
        float("nan"),
        float("inf"),
        -float("inf"),
        1e308,
        5e-324,
    ]
)
HOSTILE = st.one_of(
    HOSTILE_TEXT,
    HOSTILE_NUMBER,
    st.integers(min_value=2**62, max_value=2**70),
    st.just(None),
    st.booleans(),
    st.integers(min_value=1, max_value=120).map(lambda depth: json.loads("[" * depth + "]" * depth)),
    st.dictionaries(HOSTILE_TEXT, HOSTILE_NUMBER, max_size=3),
    st.lists(HOSTILE_NUMBER, max_size=3),
)


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every place in a JSON document: member names and list indexes from the root."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(paths(item, (*prefix, index)))
    return found


def planted(body: Any, where: tuple, value: Any) -> Any:
    if not where:
        return value
    body = copy.deepcopy(body)
    node = body
    for step in where[:-1]:
        node = node[step]
    node[where[-1]] = value
    return body


def bodies() -> list[tuple[str, Any]]:
    commit = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}],
        "updates": [
            {"action": "add-snapshot", "snapshot": snapshot(11, 1)},
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 11},
            {"action": "set-properties", "updates": {"k": "v"}},
        ],
    }
    version = {
        "version-id": 1,
        "timestamp-ms": 1_700_000_000_000,
        "schema-id": 0,
        "summary": {"engine-name": "spark"},
        "default-namespace": ["db"],
        "representations": [{"type": "sql", "sql": "SELECT 1", "dialect": "spark"}],
    }
    view = {"name": "v", "schema": create_request("v")["schema"], "view-version": version, "properties": {}}
    view_commit = {
        "requirements": [],
        "updates": [
            {"action": "add-view-version", "view-version": {**version, "version-id": 2}},
            {"action": "set-current-view-version", "view-version-id": -1},
        ],
    }
    return [
        (NS, {"namespace": ["n1"], "properties": {"owner": "me"}}),
        (f"{NS}/db/views", view),
        (f"{NS}/db/views/v0", view_commit),
        (f"{NS}/db/register", {"name": "r", "metadata-location": "s3://growler-test-warehouse/db/x.metadata.json"}),
        (f"{NS}/db/properties", {"removals": ["a"], "updates": {"b": "c"}}),
        (tables_url(), create_request("fz", properties={"p": "q"})),
        (table_url("t"), commit),
        (
            f"{PREFIX}/transactions/commit",
            {"table-changes": [{"identifier": {"namespace": ["db"], "name": "t"}, **commit}]},
        ),
        (
            f"{PREFIX}/tables/rename",
            {"source": {"namespace": ["db"], "name": "t"}, "destination": {"namespace": ["db"], "name": "t2"}},
        ),
    ]


BODIES = bodies()


@pytest.fixture
def seeded(client):
    assert client.post(NS, json={"namespace": ["db"]}).status_code == 200
    assert client.post(tables_url(), json=create_request("t", location=T_LOCATION)).status_code == 200
    view = next(body for url, body in BODIES if url.endswith("/views"))
    assert client.post(f"{NS}/db/views", json={**view, "name": "v0"}).status_code == 200
    return client


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.data())
def test_no_hostile_value_anywhere_is_a_server_error(seeded, data):
    url, body = data.draw(st.sampled_from(BODIES), label="operation")
    where = data.draw(st.sampled_from(paths(body)), label="where")
    value = data.draw(HOSTILE, label="value")
    content = json.dumps(planted(body, where, value), allow_nan=True).encode()
    response = seeded.post(url, content=content, headers={"content-type": "application/json"})
    assert response.status_code < 500, (url, where, value, response.text)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["code"] == response.status_code and error["message"] and len(error["message"]) <= 1000
