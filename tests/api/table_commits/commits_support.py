"""What the updateTable tests share: checking a commit accepted or refused, and request pieces.

The tests of this folder run updateTable through the HTTP API: every requirement and every update
action, accepted and rejected.

A commit that is accepted must show its effect three times, identically: in the response, in the
metadata file written to the bucket, and in a following loadTable. A commit that is refused must
leave everything as it was: the same metadata-location and metadata on loadTable, no new object,
and (for a create through a commit) no row.

"No new object" is checked where a commit can write: the only object a commit writes is its
metadata file, under the table location (the test table is at ``db/<name>``) or
under a location or ``write.metadata.path`` the commit names; all of these are listed. Listing
the whole shared test bucket instead costs ~70 ms a time and would double this file's runtime;
one test (the long commit failing on its last update) still compares the whole bucket.
"""

from __future__ import annotations

import base64
import copy
import gzip
import json
import re
import time
from dataclasses import dataclass
from typing import Any

from app.ground.locations import InvalidLocation
from storage.objects import ObjectNotFound
from tests.api.tables_support import (
    SCHEMA,
    SORT_ORDER,
    create_request,
    snapshot,
    table_url,
    tables_url,
)
from tests.conftest import TEST_BUCKET

WAREHOUSE = f"s3://{TEST_BUCKET}"
METADATA_VERSION = re.compile(r"/(\d{5})-[0-9a-f-]{36}(?:\.gz)?\.metadata\.json$")
T = "t"  # the table every test works on


# --------------------------------------------------------------------------------------------
# Fixtures and helpers
# --------------------------------------------------------------------------------------------


def bucket_objects(s3) -> set[str]:
    return set(s3.list(f"{WAREHOUSE}/"))


def written_under(s3, prefix: str) -> set[str]:
    """Objects under a location the catalog could write to (this bucket, another one, file://)."""
    try:
        return set(s3.list(prefix))
    except InvalidLocation:  # the location model refuses it: nothing can be written there
        return set()
    except ObjectNotFound:  # no such bucket
        return set()


def named_locations(updates: list[dict[str, Any]]) -> list[str]:
    """Where the updates of a commit would send its metadata file, besides the table location."""
    named = []
    for update in updates:
        if update.get("action") == "set-location":
            named.append(update.get("location"))
        if update.get("action") == "set-properties" and isinstance(update.get("updates"), dict):
            named.append(update["updates"].get("write.metadata.path"))
    return [location for location in named if isinstance(location, str) and location]


def writable_objects(s3, table_prefix: str, updates: list[dict[str, Any]]) -> set[str]:
    """Every object under ``table_prefix`` and under the locations the updates name."""
    prefixes = [table_prefix, *(location.rstrip("/") + "/" for location in named_locations(updates))]
    return set().union(*(written_under(s3, prefix) for prefix in prefixes))


def read_metadata_file(s3, location: str) -> dict[str, Any]:
    data = s3.read(location)
    return json.loads(gzip.decompress(data) if location.endswith(".gz.metadata.json") else data)


def post_commit(client, name: str, updates: list[dict[str, Any]], requirements: list[dict[str, Any]] | None = None):
    return client.post(table_url(name), json={"requirements": requirements or [], "updates": updates})


def load(client, name: str = T) -> dict[str, Any]:
    response = client.get(table_url(name))
    assert response.status_code == 200, response.text
    return response.json()


def new_table(client, *setup: list[dict[str, Any]], version: int = 2, name: str = T) -> dict[str, Any]:
    """Create the test table (schema 0 with ids 1-3, spec 0 = day(ts) as 1000, unsorted) at
    ``db/<name>`` (where ``snapshot`` puts its manifest lists), then commit each list of ``setup``
    updates. Returns the loadTable body."""
    request = create_request(name, location=f"{WAREHOUSE}/db/{name}", properties={"format-version": str(version)})
    response = client.post(tables_url(), json=request)
    assert response.status_code == 200, response.text
    for updates in setup:
        response = post_commit(client, name, updates)
        assert response.status_code == 200, response.text
    return load(client, name)


@dataclass
class Committed:
    metadata: dict[str, Any]  # the response's metadata = the file's = loadTable's (checked)
    location: str
    base: dict[str, Any]  # the metadata before the commit
    base_location: str


def accept(
    client, s3, updates: list[dict[str, Any]], requirements: list[dict[str, Any]] | None = None, name: str = T
) -> Committed:
    """Commit, expect 200 and a new metadata file whose content the response and loadTable repeat."""
    before = load(client, name)
    started_ms = int(time.time() * 1000)
    response = post_commit(client, name, updates, requirements)
    finished_ms = int(time.time() * 1000)
    assert response.status_code == 200, response.text
    body = response.json()
    location, metadata = body["metadata-location"], body["metadata"]
    assert location != before["metadata-location"]
    directory = metadata["properties"].get("write.metadata.path", metadata["location"] + "/metadata")
    assert location.startswith(directory + "/")
    assert int(METADATA_VERSION.search(location).group(1)) == (
        int(METADATA_VERSION.search(before["metadata-location"]).group(1)) + 1
    )
    assert read_metadata_file(s3, location) == metadata, "the file written is not what the response says"
    loaded = load(client, name)
    assert loaded["metadata-location"] == location
    assert loaded["metadata"] == metadata, "loadTable does not show the committed metadata"
    # Bookkeeping every commit does: the previous file is logged, the time moves on.
    assert metadata["metadata-log"] == [
        *before["metadata"].get("metadata-log", []),
        {"metadata-file": before["metadata-location"], "timestamp-ms": before["metadata"]["last-updated-ms"]},
    ]
    assert max(started_ms, before["metadata"]["last-updated-ms"]) <= metadata["last-updated-ms"] <= finished_ms
    return Committed(metadata, location, before["metadata"], before["metadata-location"])


def accept_no_change(client, s3, updates: list[dict[str, Any]], name: str = T) -> None:
    """A valid commit that changes nothing: 200 with the current metadata, and no new file."""
    before = load(client, name)
    objects = writable_objects(s3, before["metadata"]["location"] + "/", updates)
    assert before["metadata-location"] in objects  # the listing sees the table's files
    response = post_commit(client, name, updates)
    assert response.status_code == 200, response.text
    assert response.json()["metadata-location"] == before["metadata-location"]
    assert response.json()["metadata"] == before["metadata"]
    assert writable_objects(s3, before["metadata"]["location"] + "/", updates) == objects
    assert load(client, name) == before


def reject(
    client,
    s3,
    updates: list[dict[str, Any]],
    requirements: list[dict[str, Any]] | None = None,
    *,
    status: int = 400,
    error_type: str = "BadRequestException",
    name: str = T,
) -> str:
    """Commit, expect the error, and that the table and the bucket are exactly as before."""
    before = load(client, name)
    objects = writable_objects(s3, before["metadata"]["location"] + "/", updates)
    assert before["metadata-location"] in objects  # the listing sees the table's files
    response = post_commit(client, name, updates, requirements)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (error["type"], error["code"]) == (error_type, status)
    assert load(client, name) == before, "a refused commit changed the table"
    assert writable_objects(s3, before["metadata"]["location"] + "/", updates) == objects, "a refused commit wrote"
    return error["message"]


def ids(items: list[dict[str, Any]], key: str) -> list[int]:
    return [item[key] for item in items]


# Request pieces ------------------------------------------------------------------------------

EXTRA_COLUMN = {"id": 4, "name": "extra", "type": "string", "required": False}


def schema_with(*extra: dict[str, Any], schema_id: int = 0) -> dict[str, Any]:
    schema = copy.deepcopy(SCHEMA)
    schema["schema-id"] = schema_id
    schema["fields"] += [copy.deepcopy(field) for field in extra]
    return schema


ADD_SCHEMA = {"action": "add-schema", "schema": schema_with(EXTRA_COLUMN, schema_id=9)}
SET_LAST_SCHEMA = {"action": "set-current-schema", "schema-id": -1}
# A second spec: bucket(id) without a field-id, so the server assigns 1001.
BUCKET_SPEC = {"fields": [{"source-id": 1, "name": "id_bucket", "transform": "bucket[4]"}]}
ADD_SPEC = {"action": "add-spec", "spec": BUCKET_SPEC}
SET_LAST_SPEC = {"action": "set-default-spec", "spec-id": -1}
ADD_ORDER = {"action": "add-sort-order", "sort-order": {**SORT_ORDER, "order-id": 5}}
SET_LAST_ORDER = {"action": "set-default-sort-order", "sort-order-id": -1}


def add_snapshot(snapshot_id: int, sequence_number: int, parent: int | None = None, **fields: Any) -> dict[str, Any]:
    return {"action": "add-snapshot", "snapshot": {**snapshot(snapshot_id, sequence_number, parent), **fields}}


def set_ref(name: str, snapshot_id: int, ref_type: str = "branch", **retention: int) -> dict[str, Any]:
    return {"action": "set-snapshot-ref", "ref-name": name, "type": ref_type, "snapshot-id": snapshot_id, **retention}


def append(snapshot_id: int, sequence_number: int, parent: int | None = None) -> list[dict[str, Any]]:
    return [add_snapshot(snapshot_id, sequence_number, parent), set_ref("main", snapshot_id)]


def statistics(snapshot_id: int, path: str = "stats-a.puffin") -> dict[str, Any]:
    return {
        "snapshot-id": snapshot_id,
        "statistics-path": f"{WAREHOUSE}/db/t/metadata/{path}",
        "file-size-in-bytes": 413,
        "file-footer-size-in-bytes": 42,
        "blob-metadata": [
            {
                "type": "apache-datasketches-theta-v1",
                "snapshot-id": snapshot_id,
                "sequence-number": 1,
                "fields": [1],
                "properties": {"ndv": "3"},
            },
            # Any blob type is allowed by the Puffin spec; it must survive the round trip.
            {"type": "engine-specific-blob-v7", "snapshot-id": snapshot_id, "sequence-number": 1, "fields": [2, 3]},
        ],
    }


def partition_statistics(snapshot_id: int, path: str = "partition-stats-a.parquet") -> dict[str, Any]:
    return {
        "snapshot-id": snapshot_id,
        "statistics-path": f"{WAREHOUSE}/db/t/metadata/{path}",
        "file-size-in-bytes": 1024,
    }


def encryption_key(key_id: str, secret: bytes = b"wrapped key bytes") -> dict[str, Any]:
    return {
        "key-id": key_id,
        "encrypted-key-metadata": base64.b64encode(secret).decode(),
        "encrypted-by-id": "kms-master",
        "properties": {"algorithm": "AES_GCM_256"},
    }


CREATE_UPDATES = [
    {"action": "upgrade-format-version", "format-version": 2},
    {"action": "add-schema", "schema": schema_with()},
    SET_LAST_SCHEMA,
    {"action": "set-properties", "updates": {"created-by": "commit"}},
]
