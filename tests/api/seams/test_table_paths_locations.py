"""Where a table's path properties meet location ownership and storage access (issue 46).

Shared state: ``write.data.path`` (and Java's deprecated ``write.object-storage.path`` and
``write.folder-storage.path``) and ``write.metadata.path``, which send a table's data files and
metadata files to folders a client names, and the folders a table owns (``table_roots``: its
location, metadata directory and data path) - claimed in storage/placement.py so that no two
entries overlap, and the only folders signing and STS serve for it. A path into another entry's
folder is refused with nothing written, at create, stage, register and commit; a folder of its own
(inside its namespace's home) is claimed with the table, and signing and vended credentials reach
it - and nothing beside it.
"""

from __future__ import annotations

import io
import json
import uuid
from typing import Any
from urllib.parse import quote

import httpx
import minio
import pytest
from minio.error import S3Error

from app.ground.locations import Location
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url
from tests.conftest import TEST_BUCKET

WH = f"s3://{TEST_BUCKET}"
PATH_PROPERTIES = ("write.data.path", "write.object-storage.path", "write.folder-storage.path", "write.metadata.path")


def refused(response: Any, *words: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "BadRequestException"
    for word in words:
        assert word in error["message"], error["message"]


def commit(client: Any, name: str, updates: list[dict[str, Any]], namespace: str = "db") -> Any:
    return client.post(table_url(name, namespace), json={"requirements": [], "updates": updates})


def objects(s3: Any, prefix: str) -> dict[str, bytes]:
    return {location: s3.read(location) for location in s3.list(prefix)}


@pytest.fixture
def victim(client, ns, s3) -> dict[str, Any]:
    """Table ``other.victim`` with a data object, and the namespace ``db`` (``ns``) of the attacker."""
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["other"]}).status_code == 200
    made = client.post(tables_url("other"), json=create_request("victim"))
    assert made.status_code == 200, made.text
    location = made.json()["metadata"]["location"]
    s3.write_new(f"{location}/data/part-0.parquet", b"victim data")
    return {"location": location, "before": objects(s3, f"{WH}/other")}


@pytest.mark.parametrize("prop", PATH_PROPERTIES)
def test_a_path_into_another_entrys_folder_is_refused_at_create(client, victim, s3, db, prop):
    neighbour = client.post(tables_url(), json=create_request("neighbour")).json()["metadata"]["location"]
    for target in (victim["location"], f"{victim['location']}/data", f"{WH}/other", neighbour, f"{neighbour}/x"):
        for stage in (False, True):
            body = {**create_request("evil", properties={prop: target}), "stage-create": stage}
            refused(client.post(tables_url(), json=body))
    assert db.execute("SELECT count(*) FROM catalog_entry WHERE name = 'evil'").fetchone()[0] == 0
    assert db.execute("SELECT count(*) FROM staged_table").fetchone()[0] == 0
    assert objects(s3, f"{WH}/other") == victim["before"]


@pytest.mark.parametrize("prop", PATH_PROPERTIES)
def test_a_path_into_another_entrys_folder_is_refused_in_a_commit(client, victim, s3, db, prop):
    created = client.post(tables_url(), json=create_request("mover"))
    assert created.status_code == 200, created.text
    own = objects(s3, created.json()["metadata"]["location"])
    for target in (victim["location"], f"{victim['location']}/data/x", f"{WH}/other"):
        refused(commit(client, "mover", [{"action": "set-properties", "updates": {prop: target}}]))
    assert client.get(table_url("mover")).json()["metadata-location"] == created.json()["metadata-location"]
    assert objects(s3, created.json()["metadata"]["location"]) == own  # no metadata file left behind
    assert objects(s3, f"{WH}/other") == victim["before"]


def test_a_registered_table_whose_data_path_is_anothers_is_refused(client, victim, s3, db):
    model = client.post(tables_url(), json=create_request("model")).json()["metadata"]

    def register(name: str, data_path: str) -> Any:
        location = f"{WH}/db/registered-{uuid.uuid4().hex[:8]}"
        metadata = model | {"location": location, "properties": {"write.data.path": data_path}}
        file = f"{location}/metadata/00001-{uuid.uuid4()}.metadata.json"
        s3.write_new(file, json.dumps(metadata).encode())
        return client.post(f"{PREFIX}/namespaces/db/register", json={"name": name, "metadata-location": file})

    refused(register("evil", f"{victim['location']}/data"))
    assert db.execute("SELECT count(*) FROM catalog_entry WHERE name = 'evil'").fetchone()[0] == 0
    own = f"{WH}/db/registered-data-{uuid.uuid4().hex[:8]}"
    assert register("fine", own).status_code == 200
    assert db.execute("SELECT data_path FROM catalog_entry WHERE name = 'fine'").fetchone()[0] == own


def test_a_data_path_of_its_own_is_claimed_with_the_table(client, ns, db):
    """Inside its namespace's home but outside its location: the table's, so another table,
    stage or namespace cannot be placed at, inside or above it; outside the home: refused."""
    data = f"{WH}/db/shared-data-{uuid.uuid4().hex[:8]}"
    made = client.post(tables_url(), json=create_request("t", properties={"write.data.path": data}))
    assert made.status_code == 200, made.text
    assert db.execute("SELECT data_path FROM catalog_entry WHERE name = 't'").fetchone()[0] == data
    for location in (data, f"{data}/b"):
        refused(client.post(tables_url(), json=create_request("b", location=location)), "Cannot place table db.b")
        staged = {**create_request("b", location=location), "stage-create": True}
        refused(client.post(tables_url(), json=staged), "Cannot place staged table db.b")
        refused(client.post(tables_url(), json=create_request("b", properties={"write.data.path": location})))
    child = {"namespace": ["db", "c"], "properties": {"location": f"{data}/c"}}
    refused(client.post(f"{PREFIX}/namespaces", json=child), "Cannot place namespace db.c")
    # outside its namespace's home, though inside the warehouse
    refused(
        client.post(tables_url(), json=create_request("u", properties={"write.data.path": f"{WH}/elsewhere"})),
        "write.data.path",
        "outside its namespace's location",
    )
    # moved by a commit: the old folder is free again, the new one is the table's
    moved = f"{data}-moved"
    assert commit(client, "t", [{"action": "set-properties", "updates": {"write.data.path": moved}}]).is_success
    assert client.post(tables_url(), json=create_request("b", location=f"{data}/b")).status_code == 200
    refused(client.post(tables_url(), json=create_request("d", location=f"{moved}/d")))


def _http(settings: Any, location: str) -> str:
    parsed = Location.parse(location)
    return f"{settings.s3.endpoint}/{parsed.bucket}/{quote(parsed.key)}"


def _signed_put(client: Any, settings: Any, name: str, location: str) -> httpx.Response | None:
    """Has the signer sign a PUT of ``location`` for table ``db.<name>`` and sends it; None when refused."""
    request = {"method": "PUT", "uri": _http(settings, location), "region": "us-east-1", "headers": {}}
    answer = client.post(f"{table_url(name)}/sign", json=request)
    if answer.status_code == 403:
        return None
    assert answer.status_code == 200, answer.text
    signed = answer.json()
    headers = {header: ", ".join(values) for header, values in signed["headers"].items()}
    return httpx.put(signed["uri"], headers=headers, content=b"written", timeout=10)


def test_signing_serves_the_tables_own_data_and_metadata_paths_and_nothing_beside(client, victim, s3, settings):
    suffix = uuid.uuid4().hex[:8]
    data, meta = f"{WH}/db/data-{suffix}", f"{WH}/db/meta-{suffix}"
    properties = {"write.data.path": data, "write.metadata.path": meta}
    made = client.post(tables_url(), json=create_request("t", properties=properties))
    assert made.status_code == 200, made.text
    assert made.json()["metadata-location"].startswith(meta + "/")
    for place in (f"{data}/part-0.parquet", f"{meta}/snap-1.avro", f"{made.json()['metadata']['location']}/x"):
        sent = _signed_put(client, settings, "t", place)
        assert sent is not None and sent.status_code == 200, (place, sent and sent.text)
        assert s3.read(place) == b"written"
    for place in (f"{data}-2/x", f"{WH}/db/x", f"{victim['location']}/data/part-0.parquet"):
        assert _signed_put(client, settings, "t", place) is None
    assert objects(s3, f"{WH}/other") == victim["before"]


def _allowed(call: Any) -> bool:
    try:
        call()
    except S3Error as exc:
        assert exc.code == "AccessDenied", exc.code
        return False
    return True


def test_vended_credentials_serve_the_tables_own_data_path_and_nothing_beside(client, victim, settings):
    data = f"{WH}/db/data-{uuid.uuid4().hex[:8]}"
    made = client.post(tables_url(), json=create_request("t", properties={"write.data.path": data}))
    assert made.status_code == 200, made.text
    loaded = client.get(table_url("t"), headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    assert loaded.status_code == 200, loaded.text
    (credential,) = loaded.json()["storage-credentials"]
    config = credential["config"]
    endpoint = httpx.URL(settings.s3.endpoint)
    store = minio.Minio(
        endpoint.netloc.decode(),
        access_key=config["s3.access-key-id"],
        secret_key=config["s3.secret-access-key"],
        session_token=config["s3.session-token"],
        secure=False,
        region="us-east-1",
    )

    def put(location: str) -> bool:
        key = Location.parse(location).key
        return _allowed(lambda: store.put_object(TEST_BUCKET, key, io.BytesIO(b"1"), 1))

    assert put(f"{data}/part-0.parquet")
    assert put(f"{made.json()['metadata']['location']}/data/part-0.parquet")
    assert not put(f"{data}-2/part-0.parquet")
    assert not put(f"{victim['location']}/data/part-1.parquet")
    refreshed = client.get(f"{table_url('t')}/credentials")
    assert refreshed.status_code == 200, refreshed.text
    (again,) = refreshed.json()["storage-credentials"]
    store = minio.Minio(
        endpoint.netloc.decode(),
        access_key=again["config"]["s3.access-key-id"],
        secret_key=again["config"]["s3.secret-access-key"],
        session_token=again["config"]["s3.session-token"],
        secure=False,
        region="us-east-1",
    )
    assert put(f"{data}/part-1.parquet")
