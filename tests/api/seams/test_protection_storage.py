"""Where protection marks (issue 35) meet storage access (remote signing, STS, commits that move a
table's files, the recycle bin's purge): the shared state is the mark's column on the table, its
namespaces and its warehouse, read by the query that reads what a table's name holds for signing
and vending (storage/staged.py), by the commit's swap and by the bin's purge.

While a mark covers a table, nothing Growler signs, vends or commits deletes its files or moves
them: a DELETE (or DeleteObjects) is not signed, vended STS credentials lack s3:DeleteObject
(checked against SeaweedFS), a commit that changes the location, the metadata directory or the
data path answers 409 with nothing written, ``write.metadata.delete-after-commit`` keeps the old
files; once the mark is removed all of it works again. A mark on the namespace a binned unit was
dropped from refuses an administrator's purge (409) and holds its expiry.
"""

from __future__ import annotations

import io
from typing import Any
from urllib.parse import urlparse

import httpx
import minio
import pytest
from minio.error import S3Error

from app.composition.services import services_of
from app.ground.locations import Location
from tests.api.bin_support import BIN, bin_state, protect, unit_of, units, unprotect, until
from tests.api.tables_support import PREFIX, bucket_objects, create_request, table_url, tables_url
from tests.conftest import TEST_BUCKET

NAMESPACE = "db%1Fin"
# The table ``db.in.t``; each mark that covers it: on it, on the namespace above its own, on the warehouse.
MARKS = {
    "table": ("table", ["db", "in"], "t"),
    "namespace": ("namespace", ["db"], None),
    "warehouse": ("warehouse", None, None),
}
REASONS = {"table": "table db.in.t is protected", "namespace": "namespace db is protected"}


@pytest.fixture
def table(client) -> dict[str, Any]:
    for path in (["db"], ["db", "in"]):
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": path}).status_code == 200
    created = client.post(tables_url(NAMESPACE), json=create_request("t"))
    assert created.status_code == 200, created.text
    return created.json()


@pytest.fixture
def marked(client, table, request):
    """The table under the mark ``request.param`` names; the mark removed after the test."""
    mark = MARKS[request.param]
    assert protect(client, *mark).status_code == 204
    yield request.param
    unprotect(client, *mark)


def _http(settings, location: str) -> str:
    parsed = Location.parse(location)
    return f"{settings.s3.endpoint}/{parsed.bucket}/{parsed.key}"


def _sign(client, method: str, uri: str, body: str | None = None) -> Any:
    request: dict[str, Any] = {"method": method, "uri": uri, "region": "us-east-1", "headers": {}}
    if body is not None:
        request["body"] = body
    return client.post(f"{table_url('t', NAMESPACE)}/sign", json=request)


def _refused_as_protected(response) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["type"] == "ForbiddenException", error
    assert "is protected" in error["message"] and "remove the protection first" in error["message"], error
    assert "Authorization" not in response.text


@pytest.mark.parametrize("marked", list(MARKS), indirect=True)
def test_no_delete_is_signed_for_a_protected_table_until_the_mark_is_removed(client, table, marked, settings, s3):
    location = table["metadata"]["location"]
    data_file = f"{location}/data/part-0.parquet"
    s3.write_new(data_file, b"rows")
    _refused_as_protected(_sign(client, "DELETE", _http(settings, data_file)))
    _refused_as_protected(_sign(client, "DELETE", _http(settings, table["metadata-location"])))
    bulk = f"{settings.s3.endpoint}/{TEST_BUCKET}?delete"
    keys = f"<Delete><Object><Key>{Location.parse(data_file).key}</Key></Object></Delete>"
    _refused_as_protected(_sign(client, "POST", bulk, keys))
    # the table stays writable and readable; aborting an upload deletes no object: signed
    assert _sign(client, "PUT", _http(settings, f"{location}/data/part-1.parquet")).status_code == 200
    assert _sign(client, "GET", _http(settings, data_file)).status_code == 200
    assert _sign(client, "DELETE", _http(settings, data_file) + "?uploadId=1").status_code == 200
    assert s3.exists(data_file)

    assert unprotect(client, *MARKS[marked]).status_code == 204
    signed = _sign(client, "DELETE", _http(settings, data_file))  # at once: no cache stands in the way
    assert signed.status_code == 200, signed.text
    headers = {name: ", ".join(values) for name, values in signed.json()["headers"].items()}
    assert httpx.delete(signed.json()["uri"], headers=headers, timeout=10).status_code == 204
    assert not s3.exists(data_file)


def _minio(settings, config: dict[str, str]) -> minio.Minio:
    return minio.Minio(
        urlparse(settings.s3.endpoint).netloc,
        access_key=config["s3.access-key-id"],
        secret_key=config["s3.secret-access-key"],
        session_token=config["s3.session-token"],
        secure=False,
        region="us-east-1",
    )


def _vended(client, how: str) -> dict[str, str]:
    if how == "loadTable":
        loaded = client.get(table_url("t", NAMESPACE), headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    else:
        loaded = client.get(f"{table_url('t', NAMESPACE)}/credentials")
    assert loaded.status_code == 200, loaded.text
    (credential,) = loaded.json()["storage-credentials"]
    return credential["config"]


@pytest.mark.parametrize("how", ["loadTable", "loadCredentials"])
@pytest.mark.parametrize("marked", ["table", "namespace"], indirect=True)
def test_sts_credentials_vended_for_a_protected_table_cannot_delete(client, table, marked, settings, how):
    """Against SeaweedFS's STS (the suite's warehouse vends sts credentials): with the mark, a
    write under the table's location succeeds and a delete is denied by the store itself; the
    credentials vended once the mark is gone delete again."""
    if settings.storage_credentials_mode != "sts":
        pytest.skip("the test storage has no STS (an external one without GROWLER_TEST_STS_ROLE_ARN)")
    key = f"{Location.parse(table['metadata']['location']).key}/data/vended.parquet"
    store = _minio(settings, _vended(client, how))
    store.put_object(TEST_BUCKET, key, io.BytesIO(b"1"), 1)
    with pytest.raises(S3Error) as denied:
        store.remove_object(TEST_BUCKET, key)
    assert denied.value.code == "AccessDenied"
    assert store.stat_object(TEST_BUCKET, key).size == 1

    assert unprotect(client, *MARKS[marked]).status_code == 204
    _minio(settings, _vended(client, how)).remove_object(TEST_BUCKET, key)
    with pytest.raises(S3Error):
        store.stat_object(TEST_BUCKET, key)


def _commit(client, updates: list[dict[str, Any]]) -> Any:
    return client.post(table_url("t", NAMESPACE), json={"requirements": [], "updates": updates})


def set_properties(client, **properties: str) -> Any:
    return _commit(client, [{"action": "set-properties", "updates": properties}])


MOVES = {
    "set-location": lambda location: [{"action": "set-location", "location": f"{location}_moved"}],
    "write.metadata.path": lambda location: [
        {"action": "set-properties", "updates": {"write.metadata.path": f"{location}/elsewhere"}}
    ],
    "write.data.path": lambda location: [
        {"action": "set-properties", "updates": {"write.data.path": f"{location}/other-data"}}
    ],
}


@pytest.mark.parametrize("move", list(MOVES))
@pytest.mark.parametrize("marked", list(MARKS), indirect=True)
def test_a_protected_tables_files_cannot_be_moved_by_a_commit(client, table, marked, move, db, s3):
    location = table["metadata"]["location"]
    before, objects = bin_state(db), bucket_objects(s3)
    refused = _commit(client, MOVES[move](location))
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["type"] == "ProtectedException", error
    assert error["message"].startswith("Cannot change the location of db.in.t: "), error
    assert "remove the protection first" in error["message"]
    if marked in REASONS:
        assert REASONS[marked] in error["message"]
    assert bin_state(db) == before and bucket_objects(s3) == objects  # nothing written
    # other commits still land: protection keeps files, it does not freeze the table
    assert set_properties(client, owner="me").status_code == 200

    assert unprotect(client, *MARKS[marked]).status_code == 204
    moved = _commit(client, MOVES[move](location))
    assert moved.status_code == 200, moved.text


def test_a_transaction_moving_a_protected_table_writes_nothing(client, table, db, s3):
    assert client.post(tables_url(NAMESPACE), json=create_request("free")).status_code == 200
    assert protect(client, *MARKS["table"]).status_code == 204
    before, objects = bin_state(db), bucket_objects(s3)
    location = table["metadata"]["location"]
    changes = [
        {"identifier": {"namespace": ["db", "in"], "name": "free"}, "requirements": [], "updates": []},
        {"identifier": {"namespace": ["db", "in"], "name": "t"}, "requirements": [], "updates": []},
    ]
    changes[0]["updates"] = [{"action": "set-properties", "updates": {"a": "b"}}]
    changes[1]["updates"] = MOVES["set-location"](location)
    refused = client.post(f"{PREFIX}/transactions/commit", json={"table-changes": changes})
    assert refused.status_code == 409 and refused.json()["error"]["type"] == "ProtectedException", refused.text
    assert bin_state(db) == before and bucket_objects(s3) == objects


def test_delete_after_commit_keeps_a_protected_tables_metadata_files(client, table, s3):
    trimming = {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1"}
    locations = [table["metadata-location"], set_properties(client, **trimming).json()["metadata-location"]]
    assert protect(client, *MARKS["namespace"]).status_code == 204
    for i in range(3):
        committed = set_properties(client, n=str(i))
        assert committed.status_code == 200, committed.text
        locations.append(committed.json()["metadata-location"])
    assert all(s3.exists(location) for location in locations)  # fell out of the log, kept

    assert unprotect(client, *MARKS["namespace"]).status_code == 204
    locations.append(set_properties(client, n="last").json()["metadata-location"])
    assert not s3.exists(locations[-3]) and s3.exists(locations[-2]) and s3.exists(locations[-1])


def _purge(client, unit_id: int) -> Any:
    return client.delete(f"{BIN}/{unit_id}")


@pytest.mark.parametrize("unit_kind", ["table", "namespace"])
@pytest.mark.parametrize("mark", ["namespace", "warehouse"])
def test_an_administrators_purge_of_a_unit_under_a_mark_is_refused(client, table, db, s3, unit_kind, mark):
    """A table dropped from ``db.in`` (or the namespace ``db.in`` dropped recursively), then ``db``
    or the warehouse protected: the purge answers 409 with nothing written, until the mark goes."""
    if unit_kind == "table":
        assert client.delete(table_url("t", NAMESPACE)).status_code == 204
        unit = unit_of(client, "t")
    else:
        dropped = client.delete("/management/v1/warehouses/test/namespaces/db%1Fin", params={"recursive": "true"})
        assert dropped.status_code in (200, 204), dropped.text
        unit = unit_of(client, "in")
    assert protect(client, *MARKS[mark]).status_code == 204
    try:
        before = bin_state(db)
        refused = _purge(client, unit["id"])
        assert refused.status_code == 409, refused.text
        error = refused.json()["error"]
        assert error["type"] == "ProtectedException" and "remove the protection first" in error["message"], error
        assert bin_state(db) == before
        assert s3.exists(table["metadata-location"])
    finally:
        assert unprotect(client, *MARKS[mark]).status_code == 204
    assert _purge(client, unit["id"]).status_code == 204


def test_expiry_waits_while_a_mark_holds_the_unit(client, table, db, app):
    """Units past their retention under a protected namespace are neither expired nor purged, and
    do not keep a due unit elsewhere from its turn; once the mark is removed they expire."""
    assert client.post(tables_url(NAMESPACE), json=create_request("other")).status_code == 200
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["free"]}).status_code == 200
    assert client.post(tables_url("free"), json=create_request("x")).status_code == 200
    for name, namespace in (("t", NAMESPACE), ("other", NAMESPACE), ("x", "free")):
        assert client.delete(table_url(name, namespace), params={"purgeRequested": "true"}).status_code == 204
    assert protect(client, *MARKS["namespace"]).status_code == 204
    try:
        db.execute("UPDATE bin_unit SET expires_at = now() - interval '1 hour' WHERE name <> 'x'")  # the oldest
        db.execute("UPDATE bin_unit SET expires_at = now() - interval '1 minute' WHERE name = 'x'")
        services_of(app.app).recycle_bin.expire_due(limit=1)  # one at a time: x's turn comes
        listed = {u["name"]: u for u in units(client)}
        assert "x" not in listed or listed["x"]["purging-since"] is not None  # expired: its purge queued
        held = [listed["t"], listed["other"]]
        assert all(u["purging-since"] is None for u in held)
        queued = db.execute(
            "SELECT count(*) FROM purge_job j JOIN bin_entry b ON b.id = j.bin_entry_id WHERE b.unit_id = ANY(%s)",
            ([u["id"] for u in held],),
        )
        assert queued.fetchone()[0] == 0
    finally:
        assert unprotect(client, *MARKS["namespace"]).status_code == 204
    until(lambda: not units(client), app)  # expired and purged once the mark is gone
