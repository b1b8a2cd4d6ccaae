"""Remote signing against the embedded SeaweedFS: what is signed works, what is refused is not signed.

A warehouse of its own (``signed``, in ``remote-signing`` mode) keeps these tests apart from
the suite's default warehouse, which vends static keys. Every signed request is really sent to
SeaweedFS with httpx, and every refusal is checked twice: the signer answers 403
``ForbiddenException`` with no signature, and the object store is unchanged.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
from urllib.parse import quote

import httpx
import pytest

from app.composition.services import services_of
from app.ground.locations import Location
from app.storage_access import s3_requests
from app.storage_access.bulk_deletes import PROBE_FOLDER, probe
from storage.objects import S3ObjectStore
from tests.api.tables_support import create_request
from tests.conftest import TEST_BUCKET

WAREHOUSE = "signed"
PREFIX = f"/v1/{WAREHOUSE}"
SIGN_ENDPOINT = "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign"


@pytest.fixture(scope="module")
def signing_settings(settings):
    return dataclasses.replace(
        settings,
        warehouse=WAREHOUSE,
        warehouse_location=f"s3://{TEST_BUCKET}/{WAREHOUSE}/",
        storage_credentials_mode="remote-signing",
    )


@pytest.fixture(scope="module")
def signing_app(signing_settings):
    from app.edge.factory import create_app
    from tests.conftest import authenticated

    return authenticated(create_app(signing_settings))


@pytest.fixture
def sclient(signing_app, clean_catalog):
    return signing_app.test_client()


@pytest.fixture
def store(signing_settings):
    return S3ObjectStore(signing_settings.s3)


@pytest.fixture
def tables(sclient):
    """Tables ``tbl`` and its prefix sibling ``tbl2``; their locations by name."""
    assert sclient.post(f"{PREFIX}/namespaces", json={"namespace": ["ns"]}).status_code == 200
    locations = {}
    for name in ("tbl", "tbl2"):
        request = {**create_request(name), "location": f"s3://{TEST_BUCKET}/{WAREHOUSE}/ns/{name}"}
        created = sclient.post(f"{PREFIX}/namespaces/ns/tables", json=request)
        assert created.status_code == 200, created.text
        locations[name] = created.json()["metadata"]["location"]
    assert locations["tbl2"].startswith(locations["tbl"])  # a real prefix sibling
    return locations


def _http_url(settings, location: str, virtual: bool = False) -> str:
    parsed = Location.parse(location)
    endpoint = httpx.URL(settings.s3.endpoint)
    if virtual:
        return f"{endpoint.scheme}://{parsed.bucket}.{endpoint.netloc.decode()}/{quote(parsed.key)}"
    return f"{settings.s3.endpoint}/{parsed.bucket}/{quote(parsed.key)}"


def _sign(client, method: str, uri: str, headers: dict | None = None, body: str | None = None, table: str = "tbl"):
    request = {"method": method, "uri": uri, "region": "us-east-1", "headers": headers or {}}
    if body is not None:
        request["body"] = body
    return client.post(f"{PREFIX}/namespaces/ns/tables/{table}/sign", json=request)


def _send(signed: dict, method: str, content: bytes = b"", extra: dict | None = None) -> httpx.Response:
    headers = {name: ", ".join(values) for name, values in signed["headers"].items()}
    headers.update(extra or {})
    return httpx.request(method, signed["uri"], headers=headers, content=content, timeout=10)


def _refused(response) -> None:
    assert response.status_code == 403, response.text
    body = response.json()
    assert body["error"]["type"] == "ForbiddenException"
    assert "Authorization" not in response.text and "Signature" not in response.text


def test_load_table_offers_remote_signing_and_no_keys(sclient, tables, signing_settings):
    for header in ("remote-signing", "vended-credentials", "vended-credentials,remote-signing"):
        loaded = sclient.get(f"{PREFIX}/namespaces/ns/tables/tbl", headers={"X-Iceberg-Access-Delegation": header})
        assert loaded.status_code == 200
        body = loaded.json()
        config = body["config"]
        assert config["s3.remote-signing-enabled"] == "true"
        assert config["s3.signer.endpoint"] == f"v1/{WAREHOUSE}/namespaces/ns/tables/tbl/sign"
        assert config["s3.signer"] == "S3V4RestSigner"
        assert config["s3.endpoint"] == signing_settings.s3.endpoint
        # the spec's field for the signer client's settings, next to the deprecated config keys
        assert body["remote-signing-config"] == {"properties": {}, "headers": {}}
        assert "storage-credentials" not in body
        assert signing_settings.s3.secret_key not in loaded.text
        assert "s3.access-key-id" not in loaded.text and "s3.secret-access-key" not in loaded.text
    plain = sclient.get(f"{PREFIX}/namespaces/ns/tables/tbl").json()
    assert "s3.remote-signing-enabled" not in plain["config"]
    assert "remote-signing-config" not in plain
    assert sclient.get(f"{PREFIX}/namespaces/ns/tables/tbl/credentials").json() == {"storage-credentials": []}


def test_config_advertises_the_sign_endpoint(sclient):
    assert SIGN_ENDPOINT in sclient.get("/v1/config", params={"warehouse": WAREHOUSE}).json()["endpoints"]


def test_signed_requests_reach_the_store(sclient, tables, signing_settings, store):
    key_location = tables["tbl"] + "/data/part=1/a b.parquet"
    uri = _http_url(signing_settings, key_location)
    put = _sign(sclient, "PUT", uri, {"Content-Type": ["application/octet-stream"]})
    assert put.status_code == 200, put.text
    assert put.headers["Cache-Control"] == "no-cache"
    assert set(put.json()["headers"]) >= {"Authorization", "x-amz-date", "x-amz-content-sha256"}
    sent = _send(put.json(), "PUT", b"hello", {"Content-Type": "application/octet-stream"})
    assert sent.status_code == 200, sent.text
    assert store.read(Location.parse(key_location)) == b"hello"

    for virtual in (False, True):  # virtual-hosted style is understood the same way
        get = _sign(sclient, "GET", _http_url(signing_settings, key_location, virtual=virtual))
        assert get.status_code == 200, get.text
        assert get.headers["Cache-Control"] == "private"
        if not virtual:  # SeaweedFS serves path style only here; the signature is checked below
            fetched = _send(get.json(), "GET", extra={"Range": "bytes=1-3"})
            assert fetched.status_code == 206 and fetched.content == b"ell"

    data_prefix = quote(Location.parse(tables["tbl"]).key + "/data/")
    listing = f"{signing_settings.s3.endpoint}/{TEST_BUCKET}?list-type=2&prefix={data_prefix}"
    listed = _sign(sclient, "GET", listing)
    assert listed.status_code == 200, listed.text
    answer = _send(listed.json(), "GET")
    assert answer.status_code == 200 and "a b.parquet" in answer.text


def test_multipart_upload_is_signed(sclient, tables, signing_settings, store):
    location = tables["tbl"] + "/data/big.parquet"
    uri = _http_url(signing_settings, location)
    started = _send(_sign(sclient, "POST", uri + "?uploads").json(), "POST")
    assert started.status_code == 200, started.text
    upload_id = started.text.split("<UploadId>")[1].split("</UploadId>")[0]
    part_uri = f"{uri}?partNumber=1&uploadId={quote(upload_id, safe='')}"
    part = _send(_sign(sclient, "PUT", part_uri).json(), "PUT", b"x" * 1024)
    assert part.status_code == 200, part.text
    complete = (
        f"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>{part.headers['ETag']}</ETag></Part>"
        "</CompleteMultipartUpload>"
    ).encode()
    done = _send(_sign(sclient, "POST", f"{uri}?uploadId={quote(upload_id, safe='')}").json(), "POST", complete)
    assert done.status_code == 200, done.text
    assert store.read(Location.parse(location)) == b"x" * 1024


def _delete_body(*keys: str) -> str:
    objects = "".join(f"<Object><Key>{key}</Key></Object>" for key in keys)
    return f'<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">{objects}</Delete>'


def test_delete_objects_checks_every_key_and_is_refused_on_a_store_that_does_not_bind_bodies(
    sclient, signing_app, tables, signing_settings, store
):
    inside = Location.parse(tables["tbl"] + "/data/x.parquet")
    outside = Location.parse(tables["tbl2"] + "/data/y.parquet")
    for location in (inside, outside):
        store.write_new(location, b"1", "application/octet-stream")
    uri = f"{signing_settings.s3.endpoint}/{TEST_BUCKET}?delete"
    body = _delete_body(inside.key, outside.key)
    md5 = base64.b64encode(hashlib.md5(body.encode()).digest()).decode()  # noqa: S324 - S3's own check
    _refused(_sign(sclient, "POST", uri, {"Content-MD5": [md5]}, body))
    _refused(_sign(sclient, "POST", uri, {"Content-MD5": [md5]}))  # no body: keys cannot be checked
    only_inside = _delete_body(inside.key)
    _refused(_sign(sclient, "POST", uri, {"Content-MD5": [md5]}, only_inside))  # checksum of another body
    assert store.exists(inside) and store.exists(outside)

    # Every key is the table's, but SeaweedFS checks neither Content-MD5 nor the payload hash of a
    # DeleteObjects (the probe finds out: test_bulk_delete_probe_on_seaweedfs): a signature for
    # this body would delete any other keys sent under it. So no bulk delete is signed here.
    inside_md5 = base64.b64encode(hashlib.md5(only_inside.encode()).digest()).decode()  # noqa: S324
    for headers in ({"Content-MD5": [inside_md5]}, {}):
        refused = _sign(sclient, "POST", uri, headers, only_inside)
        _refused(refused)
        assert "does not check a request's body against its signature" in refused.json()["error"]["message"]
    signer = services_of(signing_app.app).signer
    assert signer.bulk_deletes.known(signer.tables.warehouses.get(WAREHOUSE)) is False
    assert store.exists(inside) and store.exists(outside)

    # One object at a time (its key in the signed URI) still works.
    single = _sign(sclient, "DELETE", _http_url(signing_settings, inside.uri))
    assert single.status_code == 200, single.text
    assert _send(single.json(), "DELETE").status_code == 204
    assert not store.exists(inside) and store.exists(outside)


def test_bulk_delete_probe_on_seaweedfs(signing_app, signing_settings, store):
    """The probe itself, against the real store: SeaweedFS deletes the victim canary under a
    signature made for the other (for either binding) and honours the genuine request; no canary
    is left behind."""
    signer = services_of(signing_app.app).signer
    warehouse = signer.tables.warehouses.get(WAREHOUSE)
    keys = signer.keys(warehouse)
    root = Location.parse(signing_settings.warehouse_location)

    def sign(uri, headers, body):
        s3 = s3_requests.parse_request("POST", uri, keys.endpoint)
        payload = s3_requests.body_binding({k: ",".join(v) for k, v in headers.items()}, body)
        return signer._sign(s3, headers, payload, keys).headers

    outcomes = probe(store, root, keys.endpoint, sign)
    assert [(o.binding, o.forgery_refused, o.genuine_honoured) for o in outcomes] == [
        ("payload-hash", False, True),
        ("content-md5", False, True),
    ]
    assert not any(o.trusted for o in outcomes)
    assert list(store.list(root.child(PROBE_FOLDER))) == []


@pytest.mark.parametrize(
    ("method", "path", "why"),
    [
        ("PUT", "{tbl2}/data/x", "prefix sibling"),
        ("PUT", "{tbl}/../{tbl2_name}/data/x", "dot segments"),
        ("PUT", "{tbl}/%2E%2E/{tbl2_name}/data/x", "encoded dot segments"),
        ("PUT", "{tbl}%2F..%2F{tbl2_name}%2Fdata%2Fx", "encoded slashes"),
        ("PUT", "{tbl}", "the table's own prefix object"),
        ("GET", "{ns}/other/x", "outside the table"),
        ("PATCH", "{tbl}/data/x", "not an S3 method"),
        ("OPTIONS", "{tbl}/data/x", "not an S3 method"),
        ("PUT", "{tbl}/data/x?acl", "a sub-resource"),
        ("DELETE", "{tbl}/data/x?tagging", "a sub-resource"),
        ("POST", "{tbl}/data/x", "a POST that is no multipart upload"),
        ("GET", "?list-type=2&prefix={ns}/", "a listing wider than the table"),
        ("GET", "?list-type=2", "a listing of the bucket"),
        ("DELETE", "", "the bucket itself"),
    ],
)
def test_refusals_sign_nothing(sclient, tables, signing_settings, store, method, path, why):
    tbl = Location.parse(tables["tbl"]).key
    ns = tbl.rsplit("/", 1)[0]
    tbl2 = Location.parse(tables["tbl2"]).key
    path = path.format(tbl=tbl, tbl2=tbl2, ns=ns, tbl2_name=tbl2.rsplit("/", 1)[1])
    separator = "" if path.startswith("?") else "/"
    uri = f"{signing_settings.s3.endpoint}/{TEST_BUCKET}{separator}{path}"
    before = sorted(found.uri for found in store.list(Location.parse(f"s3://{TEST_BUCKET}/{WAREHOUSE}/")))
    _refused(_sign(sclient, method, uri))
    assert sorted(found.uri for found in store.list(Location.parse(f"s3://{TEST_BUCKET}/{WAREHOUSE}/"))) == before


def test_other_buckets_and_hosts_are_refused(sclient, tables, signing_settings):
    key = Location.parse(tables["tbl"]).key + "/data/x"
    endpoint = httpx.URL(signing_settings.s3.endpoint)
    host = endpoint.netloc.decode()
    for uri in (
        f"{signing_settings.s3.endpoint}/other-bucket/{key}",
        f"{endpoint.scheme}://other-bucket.{host}/{key}",
        f"{endpoint.scheme}://evil.example.com/{TEST_BUCKET}/{key}",
        f"https://{host}/{TEST_BUCKET}/{key}",
        f"{endpoint.scheme}://user:pw@{host}/{TEST_BUCKET}/{key}",
    ):
        _refused(_sign(sclient, "PUT", uri))


def test_unknown_table_is_403_and_unsupported_provider_400(sclient, tables, signing_settings):
    uri = _http_url(signing_settings, tables["tbl"] + "/data/x")
    _refused(_sign(sclient, "GET", uri, table="nope"))
    assert (
        sclient.post(
            "/v1/nowhere/namespaces/ns/tables/tbl/sign",
            json={"method": "GET", "uri": uri, "region": "us-east-1", "headers": {}},
        ).status_code
        == 403
    )
    request = {"method": "GET", "uri": uri, "region": "us-east-1", "headers": {}, "provider": "gcs"}
    other = sclient.post(f"{PREFIX}/namespaces/ns/tables/tbl/sign", json=request)
    assert other.status_code == 400


def test_tampered_signed_request_is_refused_by_the_store(sclient, tables, signing_settings, store):
    inside = tables["tbl"] + "/data/ok"
    signed = _sign(sclient, "PUT", _http_url(signing_settings, inside)).json()
    elsewhere = _http_url(signing_settings, tables["tbl2"] + "/data/stolen")
    headers = {name: ", ".join(values) for name, values in signed["headers"].items()}
    moved = httpx.put(elsewhere, headers=headers, content=b"x", timeout=10)
    assert moved.status_code == 403, moved.text
    assert not store.exists(Location.parse(tables["tbl2"] + "/data/stolen"))
    as_delete = httpx.delete(signed["uri"], headers=headers, timeout=10)  # another method, same URI
    assert as_delete.status_code == 403


def test_a_dropped_or_renamed_table_is_refused_at_once(sclient, tables, signing_settings):
    """What the name holds is read for every request: no window in which an old scope signs."""
    uri = _http_url(signing_settings, tables["tbl"] + "/data/x")
    assert _sign(sclient, "GET", uri).status_code == 200
    renamed = {"source": {"namespace": ["ns"], "name": "tbl"}, "destination": {"namespace": ["ns"], "name": "moved"}}
    assert sclient.post(f"{PREFIX}/tables/rename", json=renamed).status_code == 204
    _refused(_sign(sclient, "GET", uri))  # the old name holds nothing now
    assert _sign(sclient, "GET", uri, table="moved").status_code == 200  # the new name holds the table
    assert sclient.delete(f"{PREFIX}/namespaces/ns/tables/moved").status_code == 204
    _refused(_sign(sclient, "GET", uri, table="moved"))


def test_a_table_created_again_under_its_name_is_signed_for_at_once(sclient, tables, signing_settings, store):
    """The dropped table's scope does not refuse its successor (a new location), nor sign its own."""
    old = tables["tbl"]
    assert _sign(sclient, "GET", _http_url(signing_settings, old + "/data/x")).status_code == 200  # now cached
    assert sclient.delete(f"{PREFIX}/namespaces/ns/tables/tbl").status_code == 204
    created = sclient.post(f"{PREFIX}/namespaces/ns/tables", json=create_request("tbl"))
    assert created.status_code == 200, created.text
    location = created.json()["metadata"]["location"]
    assert not location.startswith(old + "/")  # the successor lives elsewhere
    inside = location + "/data/new.parquet"
    signed = _sign(sclient, "PUT", _http_url(signing_settings, inside))
    assert signed.status_code == 200, signed.text
    assert _send(signed.json(), "PUT", b"new").status_code == 200
    assert store.exists(Location.parse(inside))
    _refused(_sign(sclient, "PUT", _http_url(signing_settings, old + "/data/stale.parquet")))  # the old one's


def test_no_secret_or_signature_in_logs(sclient, tables, signing_settings, caplog):
    caplog.set_level(logging.DEBUG)
    uri = _http_url(signing_settings, tables["tbl"] + "/data/x")
    signed = _sign(sclient, "PUT", uri).json()
    _refused(_sign(sclient, "PUT", _http_url(signing_settings, tables["tbl2"] + "/data/x")))
    signature = signed["headers"]["Authorization"][0].rsplit("Signature=", 1)[1]
    text = caplog.text
    assert signature not in text
    assert signing_settings.s3.secret_key not in text
    assert "outside the table's location" in text  # the refusal is logged, with its reason


def test_every_sign_request_goes_through_the_one_pipeline(sclient, tables, signing_settings, monkeypatch):
    """What the yaml accepts is signed on the event loop (app/edge/loop_reads.py); what it refuses
    is answered by connexion's validation inside the dispatcher (app/edge/contract.py), 400 with
    the Iceberg error body, never reaching the signer."""
    from app.edge.loop_reads import SignRequestOnLoop

    served = []
    original = SignRequestOnLoop.__call__

    async def spy(self, kwargs, headers, in_thread):
        try:
            rendered = await original(self, kwargs, headers, in_thread)
        except Exception as exc:
            served.append(getattr(exc, "code", 500))
            raise
        served.append(rendered.status)
        return rendered

    monkeypatch.setattr(SignRequestOnLoop, "__call__", spy)
    inside = _http_url(signing_settings, tables["tbl"] + "/data/x")
    outside = _http_url(signing_settings, tables["tbl2"] + "/data/x")
    cases = [
        ({"method": "GET", "uri": inside, "region": "us-east-1", "headers": {"Range": ["bytes=0-1"]}}, 200),
        ({"method": "PUT", "uri": inside, "region": "us-east-1", "headers": {}, "provider": "s3"}, 200),
        ({"method": "PUT", "uri": outside, "region": "us-east-1", "headers": {}}, 403),
        ({"method": "GET", "uri": inside, "region": "us-east-1", "headers": {}, "provider": "gcs"}, 400),
        ({"method": "TRACE", "uri": inside, "region": "us-east-1", "headers": {}}, 400),  # not in the enum
        ({"method": "GET", "uri": inside, "headers": {}}, 400),  # no region
        ({"method": "GET", "uri": inside, "region": "us-east-1", "headers": {"a": "not-a-list"}}, 400),
    ]
    url = f"{PREFIX}/namespaces/ns/tables/tbl/sign"
    for request, status in cases:
        answer = sclient.post(url, json=request)
        assert answer.status_code == status, (request, answer.text)
        assert answer.headers["Content-Type"] == "application/json"
        if status == 200:
            assert answer.json()["uri"] == inside
            assert answer.headers["Cache-Control"] in ("private", "no-cache")
        else:
            assert answer.json()["error"]["code"] == status
    assert served == [200, 200, 403, 400]  # the ones the yaml accepts reached the signer


def test_bodies_the_compiled_reader_does_not_take_are_read_by_connexion(sclient, tables, signing_settings, monkeypatch):
    """Another media type, malformed JSON, a body over the compiled reader's size: connexion's
    validation reads and judges each (with the body already read replayed); a valid large one
    is then signed like any other."""
    from app.edge.dispatch import MAX_BODY_BYTES
    from app.edge.loop_reads import SignRequestOnLoop

    served = []
    original = SignRequestOnLoop.__call__

    async def spy(self, kwargs, headers, in_thread):
        served.append(kwargs["body"].method)  # the typed body (RemoteSignRequest)
        return await original(self, kwargs, headers, in_thread)

    monkeypatch.setattr(SignRequestOnLoop, "__call__", spy)
    inside = _http_url(signing_settings, tables["tbl"] + "/data/x")
    valid = json.dumps({"method": "GET", "uri": inside, "region": "us-east-1", "headers": {}})
    padded = json.dumps({**json.loads(valid), "properties": {"p": "x" * MAX_BODY_BYTES}})
    url = f"{PREFIX}/namespaces/ns/tables/tbl/sign"
    statuses = []
    for content, content_type in (
        (valid, "text/plain"),
        (valid[:-1], "application/json"),
        (padded, "application/json"),
    ):
        answer = sclient.post(url, content=content, headers={"Content-Type": content_type})
        statuses.append(answer.status_code)
    assert statuses == [415, 400, 200]
    assert served == ["GET"]
    utf8 = {"Content-Type": "application/json; charset=UTF-8"}
    assert sclient.post(url, content=valid, headers=utf8).status_code == 200
    assert served == ["GET", "GET"]


def test_copies_acls_and_locks_are_refused(sclient, tables, signing_settings, store):
    inside = _http_url(signing_settings, tables["tbl"] + "/data/copy")
    other = Location.parse(tables["tbl2"]).key + "/metadata/x"
    for headers in (
        {"x-amz-copy-source": [f"{TEST_BUCKET}/{other}"]},
        {"X-Amz-Copy-Source-Range": ["bytes=0-10"]},
        {"x-amz-acl": ["public-read"]},
        {"x-amz-grant-read": ["uri=http://acs.amazonaws.com/groups/global/AllUsers"]},
        {"x-amz-object-lock-mode": ["COMPLIANCE"]},
    ):
        _refused(_sign(sclient, "PUT", inside, headers))
    assert not store.exists(Location.parse(tables["tbl"] + "/data/copy"))


def test_a_copy_header_added_after_signing_is_refused_by_the_store(sclient, tables, signing_settings, store):
    source = Location.parse(tables["tbl2"] + "/data/secret")
    store.write_new(source, b"secret", "application/octet-stream")
    target = Location.parse(tables["tbl"] + "/data/copy")
    signed = _sign(sclient, "PUT", _http_url(signing_settings, tables["tbl"] + "/data/copy")).json()
    sent = _send(signed, "PUT", b"", {"x-amz-copy-source": f"{TEST_BUCKET}/{source.key}"})
    assert sent.status_code == 403, sent.text  # x-amz-* headers are part of what SeaweedFS checks
    assert not store.exists(target)


def test_a_read_only_grant_signs_reads_only(sclient, signing_app, tables, signing_settings, monkeypatch):
    """The one place authorization will decide (``RemoteSigner.privileges``), exercised read-only."""
    from app.storage_access.s3_requests import READ

    signer = services_of(signing_app.app).signer
    monkeypatch.setattr(signer, "privileges", lambda *_args: frozenset({READ}))
    uri = _http_url(signing_settings, tables["tbl"] + "/data/x")
    assert _sign(sclient, "GET", uri).status_code == 200
    assert _sign(sclient, "HEAD", uri).status_code == 200
    for method, target in (("PUT", uri), ("DELETE", uri), ("POST", uri + "?uploads")):
        _refused(_sign(sclient, method, target))
