"""The signer's rules on S3 requests, without a server: what a request touches, canonically."""

from __future__ import annotations

import base64
import hashlib
import zlib

import pytest

from app.storage_access.s3_requests import (
    READ,
    WRITE,
    RefusedRequest,
    StorageScope,
    body_binding,
    check_delete_scope,
    check_scope,
    parse_request,
)

ENDPOINT = "http://127.0.0.1:9000"
SCOPE = StorageScope((("bkt", "wh/ns/tbl/"),))


def test_path_and_virtual_host_style_name_the_same_object():
    path = parse_request("GET", f"{ENDPOINT}/bkt/wh/ns/tbl/data/a%20b.parquet", ENDPOINT)
    virtual = parse_request("GET", "http://bkt.127.0.0.1:9000/wh/ns/tbl/data/a%20b.parquet", ENDPOINT)
    assert (path.bucket, path.key) == (virtual.bucket, virtual.key) == ("bkt", "wh/ns/tbl/data/a b.parquet")
    assert path.access == READ
    assert path.uri == f"{ENDPOINT}/bkt/wh/ns/tbl/data/a%20b.parquet"
    assert virtual.uri == "http://bkt.127.0.0.1:9000/wh/ns/tbl/data/a%20b.parquet"
    check_scope(path, SCOPE)
    check_scope(virtual, SCOPE)


def test_the_signed_uri_is_the_canonical_form_of_what_was_checked():
    request = parse_request("PUT", f"{ENDPOINT}/bkt/wh%2Fns%2Ftbl/p=1/x?uploadId=a%2Bb&partNumber=2", ENDPOINT)
    assert request.key == "wh/ns/tbl/p=1/x" and request.access == WRITE
    assert request.uri == f"{ENDPOINT}/bkt/wh/ns/tbl/p%3D1/x?partNumber=2&uploadId=a%2Bb"
    check_scope(request, SCOPE)


@pytest.mark.parametrize(
    "uri",
    [
        f"{ENDPOINT}/bkt/wh/ns/tbl2/x",  # prefix sibling
        f"{ENDPOINT}/bkt/wh/ns/tbl",  # the prefix itself
        f"{ENDPOINT}/other/wh/ns/tbl/x",  # another bucket
        "http://other.127.0.0.1:9000/wh/ns/tbl/x",
        f"{ENDPOINT}/bkt?list-type=2&prefix=wh/ns/",  # a listing wider than the table
    ],
)
def test_outside_the_scope(uri):
    with pytest.raises(RefusedRequest):
        check_scope(parse_request("GET", uri, ENDPOINT), SCOPE)


@pytest.mark.parametrize(
    ("method", "uri"),
    [
        ("GET", f"{ENDPOINT}/bkt/wh/ns/tbl/../tbl2/x"),
        ("GET", f"{ENDPOINT}/bkt/wh/ns/tbl/%2e%2e/tbl2/x"),
        ("GET", f"{ENDPOINT}/bkt/wh/ns/tbl/.%2Fx"),
        ("GET", f"{ENDPOINT}/bkt/wh/ns/tbl/a%5Cb"),
        ("GET", f"{ENDPOINT}/bkt/wh/ns/tbl/a%00b"),
        ("GET", "http://evil:9000/bkt/wh/ns/tbl/x"),
        ("GET", "https://127.0.0.1:9000/bkt/wh/ns/tbl/x"),
        ("PATCH", f"{ENDPOINT}/bkt/wh/ns/tbl/x"),
        ("GET", f"{ENDPOINT}/bkt/wh/ns/tbl/x?acl"),
        ("GET", f"{ENDPOINT}/bkt/wh/ns/tbl/x?partNumber=1&partNumber=2"),
        ("POST", f"{ENDPOINT}/bkt/wh/ns/tbl/x"),
        ("GET", f"{ENDPOINT}/bkt"),
        ("PUT", f"{ENDPOINT}/bkt"),
    ],
)
def test_refused_before_any_scope_check(method, uri):
    with pytest.raises(RefusedRequest):
        parse_request(method, uri, ENDPOINT)


def _delete(*keys: str) -> str:
    entries = "".join(f"<Object><Key>{key}</Key></Object>" for key in keys)
    return f'<Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Quiet>true</Quiet>{entries}</Delete>'


def test_delete_objects_keys_are_checked_one_by_one():
    request = parse_request("POST", f"{ENDPOINT}/bkt?delete", ENDPOINT)
    check_delete_scope(request, _delete("wh/ns/tbl/a", "wh/ns/tbl/b"), SCOPE)
    for body in (
        _delete("wh/ns/tbl/a", "wh/ns/tbl2/b"),
        _delete("wh/ns/tbl/../tbl2/b"),
        None,
        "<Delete/>",
        "not xml",
        '<!DOCTYPE x [<!ENTITY e "e">]><Delete/>',
    ):
        with pytest.raises(RefusedRequest):
            check_delete_scope(request, body, SCOPE)


def test_a_checked_body_is_bound_to_the_signature():
    body = _delete("wh/ns/tbl/a")
    raw = body.encode()
    assert body_binding({}, body) == hashlib.sha256(raw).hexdigest()  # the signature covers the body
    md5 = base64.b64encode(hashlib.md5(raw).digest()).decode()  # noqa: S324 - S3's own check
    assert body_binding({"content-md5": md5, "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}, body) is None
    with pytest.raises(RefusedRequest):
        body_binding({"content-md5": base64.b64encode(b"0" * 16).decode()}, body)
    with pytest.raises(RefusedRequest):
        body_binding({"x-amz-content-sha256": "UNSIGNED-PAYLOAD"}, body)
    with pytest.raises(RefusedRequest):
        body_binding({"x-amz-content-sha256": hashlib.sha256(b"other").hexdigest()}, body)
    # a CRC32 (what botocore, hence PyIceberg, sends) is checked but forgeable: the payload hash binds
    crc = base64.b64encode(zlib.crc32(raw).to_bytes(4, "big")).decode()
    assert body_binding({"x-amz-checksum-crc32": crc}, body) == hashlib.sha256(raw).hexdigest()
    with pytest.raises(RefusedRequest):
        body_binding({"x-amz-checksum-crc32": crc, "x-amz-content-sha256": "UNSIGNED-PAYLOAD"}, body)
