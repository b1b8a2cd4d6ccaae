"""What an S3 request a client wants signed would do, decided from its method, URI and body.

Pure rules, no I/O. The remote signer (``app.storage_access.signing``) signs a request only after these rules
have named the objects it touches and each of them lies inside the table's storage. A request
is understood in one canonical form: the key is the percent-decoded path (so ``%2F`` is a
slash like any other), with the bucket taken from the host (virtual-hosted style) or the first
path segment (path style). Whatever cannot be understood unambiguously - dot segments, a
backslash, control characters, an unknown sub-resource, a bucket-level request other than a
listing or a multi-object delete - is refused, never guessed at. The URI that is signed and
sent back is rebuilt from that canonical form, so the object store sees exactly what was
checked.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zlib
from dataclasses import dataclass
from urllib.parse import quote, unquote, urlsplit
from xml.etree import ElementTree

from app.ground.errors import BadRequest

READ = "read"
WRITE = "write"

_READ_METHODS = frozenset({"GET", "HEAD"})
_WRITE_METHODS = frozenset({"PUT", "POST", "DELETE"})
# Sub-resources and parameters an Iceberg FileIO uses on objects (reads, writes, multipart
# uploads); ``x-id`` is the operation name some SDKs add. Anything else (acl, tagging, policy,
# restore, select, ...) is refused.
_OBJECT_PARAMETERS = frozenset({"partNumber", "uploadId", "uploads", "versionId", "x-id"})
_LIST_PARAMETERS = frozenset(
    {
        "list-type",
        "prefix",
        "delimiter",
        "max-keys",
        "continuation-token",
        "start-after",
        "encoding-type",
        "fetch-owner",
        "marker",
        "x-id",
    }
)
_DELETE_PARAMETERS = frozenset({"delete", "x-id"})
# Headers that would make a request reach outside the table (a copy reads its source), change who
# may read an object, or lock it: refused, whatever the key.
_REFUSED_HEADERS = re.compile(
    r"^(x-amz-copy-source.*|x-amz-acl|x-amz-grant-.*|x-amz-object-lock-.*|x-amz-bypass-governance-retention|"
    r"x-amz-website-redirect-location)$"
)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_BAD_KEY_CHARACTERS = re.compile(r"[\x00-\x1f\x7f\\]")
# What ``quote(key, safe="/~")`` leaves as it is (its always-safe characters and the slash).
_UNRESERVED_KEY = re.compile(r"[A-Za-z0-9_.~/-]*")
MAX_DELETE_KEYS = 1000  # what S3 itself accepts in one DeleteObjects


class RefusedRequest(Exception):
    """The request is not one the signer may sign; the message says why (never a secret)."""


@dataclass(frozen=True)
class StorageScope:
    """Where a table's objects may be: ``(bucket, key prefix)`` pairs, each prefix ending in ``/``.

    Containment is by prefix on the canonical key, and a prefix ends in ``/``, so the sibling
    ``tbl2/`` is not inside ``tbl/``.
    """

    roots: tuple[tuple[str, str], ...]

    def contains(self, bucket: str, key: str) -> bool:
        return any(bucket == b and key.startswith(p) and key != p for b, p in self.roots)

    def contains_prefix(self, bucket: str, prefix: str) -> bool:
        """A listing prefix that only matches keys inside the scope."""
        return any(bucket == b and prefix.startswith(p) for b, p in self.roots)


@dataclass(frozen=True)
class S3Request:
    """One S3 request, canonical: what is signed is exactly what was checked."""

    method: str
    scheme: str
    host: str  # as the client addresses it (with the bucket in front for virtual-hosted style)
    bucket: str
    key: str  # "" for a bucket-level request
    query: tuple[tuple[str, str], ...]  # decoded, sorted
    access: str  # READ or WRITE

    @property
    def path(self) -> str:
        """The canonical, once-encoded path SigV4 signs and the client must send."""
        key = self.key if _UNRESERVED_KEY.fullmatch(self.key) else quote(self.key, safe="/~")
        if self.host.startswith(self.bucket + "."):
            return "/" + key
        return f"/{self.bucket}/{key}" if key else f"/{self.bucket}"

    @property
    def query_string(self) -> str:
        return "&".join(f"{_encode(name)}={_encode(value)}" for name, value in self.query)

    @property
    def uri(self) -> str:
        query = self.query_string
        return f"{self.scheme}://{self.host}{self.path}" + (f"?{query}" if query else "")

    def parameter(self, name: str) -> str | None:
        for key, value in self.query:
            if key == name:
                return value
        return None

    @property
    def is_delete_objects(self) -> bool:
        return self.method == "POST" and not self.key and self.parameter("delete") is not None


def _encode(text: str) -> str:
    return quote(text, safe="-_.~")


def parse_request(method: str, uri: str, endpoint: str) -> S3Request:
    """The request as S3 would understand it, or RefusedRequest.

    ``endpoint`` is the storage endpoint the warehouse is configured with (``http://host:port``):
    the request must go to that host (path style) or to ``<bucket>.<that host>`` (virtual-hosted).
    """
    method = method.upper()
    if method in _READ_METHODS:
        access = READ
    elif method in _WRITE_METHODS:
        access = WRITE
    else:
        raise RefusedRequest(f"Method {method} is not signed")
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - parses the port: a malformed one raises here, not later
        userinfo = parts.username or parts.password
    except ValueError:
        raise BadRequest("The URI to sign is malformed") from None
    configured = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or userinfo or parts.fragment:
        raise RefusedRequest("Not an S3 request URI")
    host = parts.netloc.lower()
    expected = configured.netloc.lower()
    if parts.scheme != configured.scheme:
        raise RefusedRequest("The request is not for this warehouse's storage endpoint")
    raw_path = parts.path or "/"
    if _BAD_KEY_CHARACTERS.search(unquote(raw_path)) or "\\" in raw_path:
        raise RefusedRequest("The request path holds characters S3 keys may not be signed with")
    path = unquote(raw_path)
    if host == expected:
        bucket, _, key = path.removeprefix("/").partition("/")
    elif host.endswith("." + expected):
        bucket, key = host[: -len(expected) - 1], path.removeprefix("/")
    else:
        raise RefusedRequest("The request is not for this warehouse's storage endpoint")
    if not _BUCKET.match(bucket):
        raise RefusedRequest("The request names no valid bucket")
    if key and any(segment in (".", "..") for segment in key.split("/")):
        raise RefusedRequest("The request path holds dot segments")
    query = _parse_query(parts.query)
    request = S3Request(method, parts.scheme, host, bucket, key, query, access)
    _check_operation(request)
    return request


def check_headers(headers: dict[str, object]) -> None:
    """No header that copies from elsewhere, grants access or locks objects (names lower-case)."""
    for name in headers:
        if _REFUSED_HEADERS.match(name):
            raise RefusedRequest(f"Requests with the header {name} are not signed")


def _parse_query(text: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in text.split("&") if text else []:
        name, _, value = item.partition("=")
        pairs.append((unquote(name), unquote(value)))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise RefusedRequest("The request repeats a query parameter")
    return tuple(sorted(pairs))


def _check_operation(request: S3Request) -> None:
    names = {name for name, _ in request.query}
    if request.key:
        if not names <= _OBJECT_PARAMETERS:
            raise RefusedRequest("The request uses an S3 sub-resource that is not signed")
        if request.method == "POST" and not names & {"uploads", "uploadId"}:
            raise RefusedRequest("Only multipart uploads are signed as POST on an object")
        return
    if request.method in _READ_METHODS and names <= _LIST_PARAMETERS and "prefix" in names:
        return  # a listing; its prefix is checked against the scope
    if request.is_delete_objects and names <= _DELETE_PARAMETERS:
        return  # its keys are checked one by one
    raise RefusedRequest("Bucket-level requests other than a listing with a prefix or DeleteObjects are not signed")


def check_scope(request: S3Request, scope: StorageScope) -> None:
    """The request touches nothing outside ``scope`` (DeleteObjects: see ``delete_keys``)."""
    if request.key:
        if not scope.contains(request.bucket, request.key):
            raise RefusedRequest("The request is outside the table's location")
    elif not request.is_delete_objects:
        if not scope.contains_prefix(request.bucket, request.parameter("prefix") or ""):
            raise RefusedRequest("The listing is outside the table's location")


def delete_keys(body: str | None) -> list[str]:
    """The keys of a DeleteObjects body (``<Delete><Object><Key>``), or RefusedRequest."""
    if not body:
        raise RefusedRequest("DeleteObjects is signed only with its body, to check each key")
    if "<!DOCTYPE" in body or "<!ENTITY" in body:
        raise RefusedRequest("The DeleteObjects body is not plain XML")
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise RefusedRequest("The DeleteObjects body is not XML") from exc
    if _local(root.tag) != "Delete":
        raise RefusedRequest("The DeleteObjects body is not a Delete document")
    keys = []
    for child in root:
        if _local(child.tag) == "Object":
            found = [element.text or "" for element in child if _local(element.tag) == "Key"]
            if len(found) != 1:
                raise RefusedRequest("A DeleteObjects entry must name exactly one key")
            keys.append(found[0])
    if not keys or len(keys) > MAX_DELETE_KEYS:
        raise RefusedRequest(f"DeleteObjects must name between 1 and {MAX_DELETE_KEYS} keys")
    return keys


def check_delete_scope(request: S3Request, body: str | None, scope: StorageScope) -> None:
    for key in delete_keys(body):
        if _BAD_KEY_CHARACTERS.search(key) or any(s in (".", "..") for s in key.split("/")):
            raise RefusedRequest("A DeleteObjects key holds dot segments or characters that are not signed")
        if not scope.contains(request.bucket, key):
            raise RefusedRequest("A DeleteObjects key is outside the table's location")


def body_binding(headers: dict[str, str], body: str) -> str | None:
    """How a checked body is tied to the signature: the payload hash to sign, or None.

    A body that was checked must be the body sent. The client's own ``x-amz-content-sha256``
    (a hash), ``Content-MD5`` or ``x-amz-checksum-sha256`` header does that once it matches the
    body and is signed; otherwise the signature covers the body's SHA-256 itself (returned).
    ``x-amz-checksum-crc32``/``-sha1`` are checked but bind nothing: the client picks the body
    and a CRC32 is forged with four chosen bytes (SHA-1 collides), so another body with the same
    checksum - other keys, anywhere in the bucket - would pass the store's check under the same
    signature. A body whose headers name another body is refused.
    """
    raw = body.encode()
    declared = headers.get("x-amz-content-sha256")
    if declared and not declared.startswith(("UNSIGNED-PAYLOAD", "STREAMING-")):
        if declared != hashlib.sha256(raw).hexdigest():
            raise RefusedRequest("The request's payload hash does not match the checked body")
        return declared
    checks = {
        "content-md5": lambda: base64.b64encode(hashlib.md5(raw).digest()).decode(),  # noqa: S324 - S3's own check
        "x-amz-checksum-sha256": lambda: base64.b64encode(hashlib.sha256(raw).digest()).decode(),
        "x-amz-checksum-sha1": lambda: base64.b64encode(hashlib.sha1(raw).digest()).decode(),  # noqa: S324
        "x-amz-checksum-crc32": lambda: base64.b64encode(zlib.crc32(raw).to_bytes(4, "big")).decode(),
    }
    bound = False
    for name, compute in checks.items():
        if name in headers:
            if headers[name].strip() != compute():
                raise RefusedRequest(f"The request's {name} does not match the checked body")
            bound = bound or name in _BINDING_CHECKSUMS
    if bound:
        return None
    if declared:  # UNSIGNED-PAYLOAD and nothing that cannot be forged ties the body to the signature
        raise RefusedRequest(
            "DeleteObjects must carry Content-MD5, x-amz-checksum-sha256 or a payload hash of its body"
        )
    return hashlib.sha256(raw).hexdigest()


# The checksums that tie a checked body to a signature (the client cannot make another body match).
_BINDING_CHECKSUMS = frozenset({"content-md5", "x-amz-checksum-sha256"})


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
