"""Request bodies and small helpers shared by the table API tests."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

from app.ground.locations import Location
from tests.conftest import TEST_BUCKET

PREFIX = "/v1/test"
METADATA_FILE = re.compile(r"/metadata/\d{5}-[0-9a-f-]{36}\.metadata\.json$")


class TextStore:
    """The catalog's object store for tests, which name objects by text: the store itself takes
    only parsed locations (``app.ground.locations``); listings come back as canonical text."""

    def __init__(self, real: Any) -> None:
        self.real = real

    def read(self, location: str) -> bytes:
        return self.real.read(Location.parse(location))

    def exists(self, location: str) -> bool:
        return self.real.exists(Location.parse(location))

    def write_new(self, location: str, data: bytes, content_type: str = "application/json") -> None:
        self.real.write_new(Location.parse(location), data, content_type)

    def delete(self, locations: list[str]) -> None:
        self.real.delete([Location.parse(location) for location in locations])

    def list(self, prefix: str) -> Iterator[str]:
        return (found.uri for found in self.real.list(Location.parse(prefix)))


SCHEMA: dict[str, Any] = {
    "type": "struct",
    "schema-id": 0,
    "fields": [
        {"id": 1, "name": "id", "type": "long", "required": True},
        {"id": 2, "name": "ts", "type": "timestamptz", "required": False},
        {"id": 3, "name": "data", "type": "string", "required": False},
    ],
}
PARTITION_SPEC: dict[str, Any] = {
    "spec-id": 0,
    "fields": [{"source-id": 2, "field-id": 1000, "name": "ts_day", "transform": "day"}],
}
SORT_ORDER: dict[str, Any] = {
    "order-id": 1,
    "fields": [{"source-id": 1, "transform": "identity", "direction": "asc", "null-order": "nulls-first"}],
}


def create_request(name: str, **extra: Any) -> dict[str, Any]:
    body = {"name": name, "schema": copy.deepcopy(SCHEMA), "partition-spec": copy.deepcopy(PARTITION_SPEC)}
    body.update(extra)
    return body


def tables_url(namespace: str = "db") -> str:
    return f"{PREFIX}/namespaces/{namespace}/tables"


def table_url(name: str, namespace: str = "db") -> str:
    return f"{tables_url(namespace)}/{name}"


# Where ``snapshot`` puts its manifest list by default: the table ``db.t`` created at this location
# (a commit names only manifest lists in the table's own locations: docs/security.md).
T_LOCATION = f"s3://{TEST_BUCKET}/db/t"


def snapshot(
    snapshot_id: int,
    sequence_number: int,
    parent: int | None = None,
    ts: int = 1_700_000_000_000,
    schema_id: int = 0,
    location: str = T_LOCATION,
) -> dict[str, Any]:
    """A snapshot whose manifest list is in the metadata directory of the table at ``location``."""
    body = {
        "snapshot-id": snapshot_id,
        "sequence-number": sequence_number,
        "timestamp-ms": ts,
        "manifest-list": f"{location}/metadata/snap-{snapshot_id}.avro",
        "summary": {"operation": "append"},
        "schema-id": schema_id,
    }
    if parent is not None:
        body["parent-snapshot-id"] = parent
    return body


def append(client, url: str, snapshot_id: int, sequence_number: int, parent: int | None, location: str | None = None):
    """Commit one snapshot to main the way clients do: add-snapshot + set-snapshot-ref + requirement,
    its manifest list in the metadata directory of the table at ``location`` (when not given, the
    table is loaded first to learn it: a test that counts reads passes it)."""
    if location is None:
        loaded = client.get(url)
        location = loaded.json()["metadata"]["location"] if loaded.status_code == 200 else T_LOCATION
    return client.post(
        url,
        json={
            "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
            "updates": [
                {
                    "action": "add-snapshot",
                    "snapshot": snapshot(snapshot_id, sequence_number, parent, location=location),
                },
                {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": snapshot_id},
            ],
        },
    )


# Temporary credentials differ in every answer (sts, the product's default): two paths' answers
# are compared with these values masked, and without the Content-Length they change.
_FRESH_PER_ANSWER = re.compile(
    rb'("s3\.(?:access-key-id|secret-access-key|session-token|session-token-expires-at-ms)": ?")[^"]*(")'
)
VARYING_HEADERS = frozenset({"x-request-id", "date"})


def mask_fresh_credentials(content: bytes) -> bytes:
    return _FRESH_PER_ANSWER.sub(rb"\1*\2", content)


def assert_same_answer(one, other) -> None:
    """Two responses to the same request carry the same status, bytes and headers, up to what
    differs per request (request id, date, freshly vended temporary credentials)."""
    assert one.status_code == other.status_code
    masked = [mask_fresh_credentials(response.content) for response in (one, other)]
    assert masked[0] == masked[1]
    varying = VARYING_HEADERS | ({"content-length"} if masked[0] != one.content else set())
    assert {k: v for k, v in one.headers.items() if k not in varying} == {
        k: v for k, v in other.headers.items() if k not in varying
    }


# What a test reads back: the objects under a location or in the bucket, an error body's type.
def objects_under(s3, location: str) -> list[str]:
    return list(s3.list(location.rstrip("/") + "/"))


def bucket_objects(s3) -> set[str]:
    return set(s3.list(f"s3://{TEST_BUCKET}/"))


def set_properties(client, table: str, **properties: str):
    updates = [{"action": "set-properties", "updates": properties}]
    return client.post(table_url(table), json={"requirements": [], "updates": updates})


def error_type(response) -> str:
    return response.json()["error"]["type"]
