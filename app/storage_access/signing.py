"""Remote signing: the catalog signs a client's S3 request after checking it, and keeps the keys.

A client that loaded a table with ``X-Iceberg-Access-Delegation: remote-signing`` sends every
S3 request it wants to make to ``POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/sign``
(the spec's ``signRequest``; PyIceberg and older Java clients reach the same path through
``s3.signer.endpoint``). The request is signed (AWS SigV4, ``SigV4`` below) only when
``app.storage_access.s3_requests`` finds that everything it touches lies inside the folders the table owns (its
location, metadata directory and data path: ``app.rules.table.table_roots``) and the caller may
perform it; anything else is 403 ``ForbiddenException`` and nothing is signed.

Signing is on the path of every object a job reads or writes. What the name holds (the table's
location, or its live stages' before its create commits: storage/staged.py) is read for every
request, in one indexed query on the event loop: a table dropped, renamed, moved or re-created is
never signed for under its old location, on any worker or replica, not even for a moment. The
same query says whether a protection mark covers the table: a protected table's deletes are
refused from the moment the mark's answer was sent, on every worker. The
caller's grants and the warehouse's keys are the per-worker caches (invalidated by the version
every management change bumps).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from app.ground.audit_note import note_access
from app.ground.errors import BadRequest, Forbidden, NotFound
from app.ground.locations import InvalidLocation, Location
from app.ground.settings import Settings
from app.rules.privileges import Kind, Privilege, Securable
from app.rules.requests.tables import RemoteSignRequest
from app.storage_access import s3_requests
from app.storage_access.bulk_deletes import BulkDeleteTrust
from app.storage_access.delegation import NONE, credentials_mode
from app.storage_access.s3_requests import READ, WRITE, RefusedRequest, S3Request, StorageScope
from storage.objects import S3ObjectStore
from storage.staged import StoragePlaces
from storage.warehouses import WarehouseRow

if TYPE_CHECKING:  # the scope's type only: the tables' package is not imported by signing
    from app.tables.access import StorageScopeOf

log = logging.getLogger(__name__)

SIGNING_KEYS_ENTRIES = 1_000  # warehouses per worker
UNSIGNED_PAYLOAD = "UNSIGNED-PAYLOAD"
# Headers left out of the signature: set or changed by HTTP stacks after signing, varying per
# retry, or (``range``) allowed to vary under a cached signature (the Java client caches signed
# GET/HEAD requests by method and URI for 30 seconds).
UNSIGNED_HEADERS = frozenset(
    {
        "authorization",
        "user-agent",
        "range",
        "expect",
        "transfer-encoding",
        "connection",
        "content-length",
        "x-amzn-trace-id",
        "amz-sdk-invocation-id",
        "amz-sdk-request",
        "amz-sdk-retry",
        "x-amz-date",
        "accept-encoding",
    }
)
_CACHEABLE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class WarehouseKeys:
    """How one warehouse's requests are signed: its endpoint, region and keys (kept per worker,
    for as long as the warehouse row is the same: the SigV4 signing key is derived once a day)."""

    endpoint: str
    region: str
    # signs with the warehouse's keys (its own, or the environment's); None: it has none
    sigv4: SigV4 | None = field(default=None, repr=False)


@dataclass(frozen=True)
class SignedRequest:
    uri: str
    headers: dict[str, list[str]]  # only the headers the client must add to its own
    cacheable: bool

    def body(self) -> dict[str, Any]:
        return {"uri": self.uri, "headers": self.headers}


class RemoteSigner:
    def __init__(
        self,
        settings: Settings,
        tables: Any,
        *,
        federated_scope: Callable[[WarehouseRow, tuple[str, ...], str], StorageScopeOf] | None = None,
    ) -> None:
        self.settings = settings
        # app.tables.access.TableStorageAccess (TableService.access): the warehouses, what a
        # table's name holds (its row or its stages) and the authorizer
        self.tables = tables
        # a federated warehouse's table: its folders inside the warehouse's allowed locations, from
        # the remote's load (FederationService.storage_scope); None: federated tables are not signed
        self.federated_scope = federated_scope
        self._keys: dict[str, tuple[WarehouseRow, WarehouseKeys]] = {}
        self.bulk_deletes = BulkDeleteTrust(lambda row: S3ObjectStore(tables.warehouses.s3_settings(row)))

    def sign(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        name: str,
        request: RemoteSignRequest,
        places: StoragePlaces | None = None,
    ) -> SignedRequest:
        """The signed request, or 403 with nothing signed (a table the caller cannot see included).

        ``places``: what the name holds, read on the event loop by the caller; else read here.
        Either way it is read for this request: the scope is the table's current location (or its
        live stages'), never one remembered from before a drop, rename, move or expiry.
        """
        if (request.provider or "s3") != "s3":
            raise BadRequest(f"Remote signing supports the s3 provider only, not {request.provider}")
        try:  # a table the caller cannot see is refused like any other request (the spec has no 404 here)
            warehouse = self.tables.warehouses.get(prefix)
            if credentials_mode(warehouse, self.settings) == NONE:
                raise Forbidden(f"Remote signing is not enabled for warehouse {warehouse.name}")
            if warehouse.federation is None:
                scope = self.tables.storage_scope(warehouse, namespace, name, places)
            elif self.federated_scope is not None:
                scope = self.federated_scope(warehouse, namespace, name)
            else:
                raise Forbidden(f"Remote signing is not enabled for warehouse {warehouse.name}")
        except NotFound:
            raise Forbidden(f"Table does not exist or may not be signed for: {'.'.join(namespace)}.{name}") from None
        access = self.privileges(prefix, namespace, name, scope.staged)
        if not access:
            needed = "create on namespace" if scope.staged else "read on table"
            raise Forbidden(f"Principal lacks {needed} {prefix}:{'.'.join((*namespace, name))} for signRequest")
        keys = self.keys(warehouse)
        headers = _lower(request.headers)
        try:
            s3 = s3_requests.parse_request(request.method, request.uri, keys.endpoint)
            s3_requests.check_headers(headers)
            if s3.access not in access:
                raise RefusedRequest(f"The caller may not {s3.access} this table's objects")
            deletes = (s3.method == "DELETE" and s3.parameter("uploadId") is None) or s3.is_delete_objects
            if deletes:  # aborting an upload deletes no object: signed
                _refuse_deletes(warehouse, namespace, name, scope.protected)
            payload = _check_scope(s3, request, headers, _scope(scope.locations))
            if s3.is_delete_objects and not self._bulk_deletes_trusted(warehouse, keys):
                raise RefusedRequest(
                    f"Bulk deletes (DeleteObjects) are not signed for warehouse {warehouse.name}: its storage does not"
                    " check a request's body against its signature (probed), so a signed delete could be sent naming"
                    " other keys; delete objects one at a time"
                )
        except RefusedRequest as exc:
            log.info("remote signing refused for %s.%s: %s", ".".join(namespace), name, exc)
            raise Forbidden(str(exc)) from None
        signed = self._sign(s3, headers, payload, keys)
        # for the audit trail: the object's path and method (no query: it may carry an upload id), the
        # signature's lifetime (SigV4: a signed request is accepted for 15 minutes from its x-amz-date)
        note_access({"kind": "signed", "method": s3.method, "path": f"{s3.host}{s3.path}"[:1000], "lifetime-s": 900})
        return signed

    def signs_without_io(self, warehouse: WarehouseRow, request: RemoteSignRequest) -> bool:
        """Whether ``sign`` needs no I/O besides the places read (the event loop may run it): not
        a bulk delete whose warehouse this worker has yet to probe (app/storage_access/bulk_deletes.py)."""
        bulk_delete = request.method == "POST" and "delete" in request.uri.partition("?")[2]
        return not bulk_delete or self.bulk_deletes.known(warehouse) is not None

    def _bulk_deletes_trusted(self, warehouse: WarehouseRow, keys: WarehouseKeys) -> bool:
        def sign(uri: str, headers: dict[str, list[str]], body: str) -> dict[str, list[str]]:
            s3 = s3_requests.parse_request("POST", uri, keys.endpoint)
            payload = s3_requests.body_binding({name: ",".join(values) for name, values in headers.items()}, body)
            return self._sign(s3, headers, payload, keys).headers

        return self.bulk_deletes.trusted(warehouse, keys.endpoint, sign)

    def keys(self, warehouse: WarehouseRow) -> WarehouseKeys:
        known = self._keys.get(warehouse.name)
        if known is not None and known[0] is warehouse:
            return known[1]
        s3 = self.tables.warehouses.s3_settings(warehouse)
        keys = WarehouseKeys(
            endpoint=s3.endpoint or "",
            region=s3.region,
            sigv4=SigV4(s3.access_key, s3.secret_key) if s3.access_key and s3.secret_key else None,
        )
        if len(self._keys) > SIGNING_KEYS_ENTRIES:
            self._keys.clear()
        self._keys[warehouse.name] = (warehouse, keys)
        return keys

    def privileges(self, prefix: str, namespace: tuple[str, ...], name: str, staged: bool) -> frozenset[str]:
        """What the caller may do with the table's objects: the one place authorization plugs in.

        signRequest's rule (app/authorization.py, checked before this runs) lets in READ on the
        table or CREATE on its namespace; which one counts depends on what the name holds. A
        committed table: READ reads, WRITE adds writes. A staged one (no row yet): its writer
        needs CREATE on the namespace, and then reads and writes. The decisions are the
        authorizer's cached ones (no database round trip for a caller seen before).
        """
        if staged:
            return frozenset({READ, WRITE}) if self.tables.may_stage(prefix, namespace) else frozenset()
        table = Securable.of_entry(Kind.TABLE, prefix, namespace, name)
        self.tables.restrictions_for_storage(prefix, namespace, name)  # a restricted caller: trusted engines only
        if self.tables.authorizer.may(Privilege.WRITE, table):
            return frozenset({READ, WRITE})
        return frozenset({READ}) if self.tables.authorizer.may(Privilege.READ, table) else frozenset()

    def _sign(
        self, s3: S3Request, headers: dict[str, list[str]], payload: str | None, keys: WarehouseKeys
    ) -> SignedRequest:
        if keys.sigv4 is None:
            raise Forbidden("This catalog has no storage keys to sign with")
        to_sign: dict[str, str | list[str]] = {
            name: values for name, values in headers.items() if name not in UNSIGNED_HEADERS and name != "host"
        }
        added: dict[str, list[str]] = {}
        if "host" not in headers:
            added["Host"] = [s3.host]
        to_sign["host"] = s3.host
        if "x-amz-content-sha256" in headers:
            content_sha256 = headers["x-amz-content-sha256"][0]
        else:
            content_sha256 = payload or UNSIGNED_PAYLOAD
            to_sign["x-amz-content-sha256"] = content_sha256
            added["x-amz-content-sha256"] = [content_sha256]
        amz_date = _amz_date()
        to_sign["x-amz-date"] = amz_date
        path, query = s3.path, s3.query_string
        authorization = keys.sigv4.authorization(s3.method, path, query, keys.region, to_sign, content_sha256, amz_date)
        added["x-amz-date"] = [amz_date]
        added["Authorization"] = [authorization]
        uri = f"{s3.scheme}://{s3.host}{path}" + (f"?{query}" if query else "")
        return SignedRequest(uri, added, cacheable=s3.method in _CACHEABLE_METHODS)


_MULTI_SPACE = re.compile(" +")
_ALGORITHM = "AWS4-HMAC-SHA256"


def _amz_date() -> str:
    """Now, as SigV4's ``x-amz-date`` (``time.strftime`` of a ``gmtime``: a fraction of datetime's cost)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


class SigV4:
    """AWS Signature Version 4 for S3: the ``Authorization`` header of one request.

    The same computation as ``minio.signer.sign_v4_s3`` (a unit test holds them equal), made
    for a signer that runs once per S3 request of every client: the signing key, four HMACs
    deep, is derived once per day and region instead of per signature, and the request's
    already-canonical path and query are taken as they are instead of re-parsing a URL.
    """

    def __init__(self, access_key: str, secret_key: str) -> None:
        self.access_key = access_key
        self._secret = ("AWS4" + secret_key).encode()
        self._keys: dict[tuple[str, str], bytes] = {}

    def authorization(
        self,
        method: str,
        path: str,
        query: str,
        region: str,
        headers: dict[str, str | list[str]],
        content_sha256: str,
        amz_date: str,
    ) -> str:
        """``headers``: lower-case names, every one of them signed (``host`` and ``x-amz-date`` included)."""
        canonical = {}
        for name, values in headers.items():
            if name in ("authorization", "user-agent"):  # never signed (as minio)
                continue
            items = values if isinstance(values, list | tuple) else [values]
            canonical[name] = ",".join(
                (_MULTI_SPACE.sub(" ", value) if "  " in value else value).strip() for value in items
            )
        names = sorted(canonical)
        signed_headers = ";".join(names)
        canonical_headers = "\n".join(f"{name}:{canonical[name]}" for name in names)
        canonical_query = "&".join("=".join(pair) for pair in sorted(part.split("=") for part in query.split("&")))
        request = (
            f"{method}\n{path or '/'}\n{canonical_query}\n{canonical_headers}\n\n{signed_headers}\n{content_sha256}"
        )
        day = amz_date[:8]
        scope = f"{day}/{region}/s3/aws4_request"
        string_to_sign = f"{_ALGORITHM}\n{amz_date}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
        signature = hmac.digest(self._signing_key(day, region), string_to_sign.encode(), "sha256").hex()
        return (
            f"{_ALGORITHM} Credential={self.access_key}/{scope}, SignedHeaders={signed_headers}, Signature={signature}"
        )

    def _signing_key(self, day: str, region: str) -> bytes:
        key = self._keys.get((day, region))
        if key is None:
            key = hmac.digest(self._secret, day.encode(), "sha256")
            for part in (region, "s3", "aws4_request"):
                key = hmac.digest(key, part.encode(), "sha256")
            if len(self._keys) > 64:  # a few regions, one day at a time
                self._keys.clear()
            self._keys[(day, region)] = key
        return key


def _refuse_deletes(warehouse: WarehouseRow, namespace: tuple[str, ...], name: str, protected: bool) -> None:
    """A delete is not signed in a warehouse that refuses deletes, nor for a protected table
    (a mark on it, one of its namespaces or its warehouse: read with the table's row, for this
    request), until the mark is removed."""
    if warehouse.refuse_deletes:
        raise RefusedRequest(
            f"Warehouse {warehouse.name} refuses to sign deletes (refuse-deletes): table files are deleted"
            " by the catalog's purge only"
        )
    if protected:
        raise RefusedRequest(
            f"Table {'.'.join((*namespace, name))} is protected (a mark on it, one of its namespaces or its"
            " warehouse): its files are not deleted; remove the protection first (manage-grants)"
        )


def _check_scope(
    s3: S3Request, request: RemoteSignRequest, headers: dict[str, list[str]], scope: StorageScope
) -> str | None:
    """Refuses (``RefusedRequest``) what lies outside ``scope``; the payload hash a bulk delete signs."""
    if not s3.is_delete_objects:
        s3_requests.check_scope(s3, scope)
        return None
    s3_requests.check_delete_scope(s3, request.body, scope)
    single = {header: ",".join(values) for header, values in headers.items()}
    return s3_requests.body_binding(single, request.body or "")


def _lower(headers: dict[str, list[str]]) -> dict[str, list[str]]:
    lowered: dict[str, list[str]] = {}
    for name, values in headers.items():
        lowered.setdefault(name.lower(), []).extend(values)
    return lowered


def _scope(locations: tuple[str, ...]) -> StorageScope:
    """The table's folders (a staged table's: each live stage's) as key prefixes ending in
    ``/`` (``tbl/`` does not contain ``tbl2/``); an invalid one, or the bucket root, adds nothing."""
    prefixes = []
    for location in locations:
        try:
            parsed = Location.parse(location)
        except InvalidLocation:
            continue
        key = parsed.key.rstrip("/")
        if parsed.scheme == "s3" and key:  # a table is never the bucket root: sign nothing for one
            prefixes.append((parsed.bucket, key + "/"))
    return StorageScope(tuple(prefixes))
