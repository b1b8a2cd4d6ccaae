"""Object storage for metadata files: S3 through the minio SDK, or a local directory.

The interface is deliberately small (``write_new``, ``read``, ``exists``, ``delete``, ``list``)
and takes only parsed ``app.ground.locations.Location`` values: raw text never reaches S3 or the disk.
``write_new`` never overwrites: callers pass a fresh name per version and the S3 store adds a
conditional ``If-None-Match: *`` so a server that supports it refuses a second write too.
Failures to reach the store leave here as ``ServiceUnavailable`` (503 + Retry-After).
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import urllib3
from minio import Minio
from minio.deleteobjects import DeleteObject
from minio.error import S3Error

from app.ground import metrics  # prometheus only, no app imports
from app.ground.errors import AlreadyExists, BadRequest, CatalogError, PayloadTooLarge, ServiceUnavailable
from app.ground.locations import InvalidLocation, Location
from app.ground.settings import S3Settings

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 2.0  # /readyz's S3 request
COPY_PART_BYTES = 64 * 1024 * 1024  # a streamed copy's upload parts (an unknown length needs them)


class ObjectNotFound(CatalogError):
    code, error_type = 404, "NotFoundException"


class ObjectStore(Protocol):
    def write_new(self, location: Location, data: bytes, content_type: str = ...) -> None: ...
    def read(self, location: Location, max_bytes: int | None = None) -> bytes: ...
    def exists(self, location: Location) -> bool: ...
    def delete(self, locations: list[Location]) -> None: ...
    def list(self, prefix: Location) -> Iterator[Location]: ...
    def list_modified(self, prefix: Location) -> Iterator[tuple[Location, float]]: ...
    def ping(self) -> None: ...


def _object(location: Location) -> Location:
    """Only a parsed location naming an object (not a bucket or the file-system root) gets here."""
    if not isinstance(location, Location):
        raise TypeError(f"object stores take a parsed Location, not {type(location).__name__}")
    if not location.key:
        raise BadRequest(f"{location.uri} names a bucket or root, not an object")
    return location


def _s3(location: Location) -> tuple[str, str]:
    """(bucket, key) of a parsed ``s3`` location naming an object."""
    location = _object(location)
    if location.scheme != "s3":
        raise BadRequest(f"Not an S3 location: {location.uri}")
    return location.bucket, location.key


class S3ObjectStore:
    def __init__(self, settings: S3Settings) -> None:
        if not settings.endpoint:
            raise ValueError("an S3 endpoint is required")
        endpoint = urlparse(settings.endpoint)
        # Bounded waits: a dead or frozen store must turn into a quick 503, not a hung worker. A
        # frozen server still accepts connections and takes the request (its kernel does), so only
        # the read timeout fires: it is not retried (``read=0``), so a call gives up after about
        # one ``timeout_s``. Refused connections and 5xx answers are retried twice, briefly.
        timeout = urllib3.Timeout(connect=settings.timeout_s, read=settings.timeout_s)
        retries = urllib3.Retry(
            total=2, connect=2, read=0, status=2, other=0, backoff_factor=0.1, status_forcelist=[500, 502, 503, 504]
        )
        http = urllib3.PoolManager(timeout=timeout, maxsize=16, retries=retries)
        self.client = self._client(settings, endpoint, http)
        # /readyz: its own connection, no retries, a short timeout (see ping).
        probe_timeout = min(settings.timeout_s, PROBE_TIMEOUT_S)
        self._probe_http = urllib3.PoolManager(timeout=urllib3.Timeout(probe_timeout), maxsize=1, retries=False)
        self._probe = self._client(settings, endpoint, self._probe_http)

    @staticmethod
    def _client(settings: S3Settings, endpoint: Any, http: urllib3.PoolManager) -> Minio:
        return Minio(
            endpoint.netloc,
            access_key=settings.access_key,
            secret_key=settings.secret_key,
            secure=endpoint.scheme == "https",
            region=settings.region,
            http_client=http,
        )

    @contextmanager
    def _calls(self, what: str) -> Iterator[None]:
        # Timed, and errors counted by S3 code, per first word of ``what`` (write, read, stat, ...).
        with self._translated(what), metrics.object_store_call(what.split(" ", 1)[0]):
            yield

    @contextmanager
    def _translated(self, what: str) -> Iterator[None]:
        try:
            yield
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchBucket"):
                raise ObjectNotFound(f"{what}: {exc.code}") from exc
            if exc.code in ("PreconditionFailed", "ConditionalRequestConflict"):
                raise AlreadyExists(f"{what}: object already exists") from exc
            if exc.code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                log.error("object store refused %s: %s", what, exc.code)
                raise ServiceUnavailable("Object storage refused the catalog's credentials") from exc
            raise ServiceUnavailable(f"Object storage error ({exc.code})") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            log.warning("object storage unreachable during %s: %s", what, type(exc).__name__)
            raise ServiceUnavailable("Object storage is unavailable, retry later") from exc

    def send_presigned(self, method: str, uri: str, headers: dict[str, str], body: bytes) -> int:
        """Send a request signed elsewhere (by the remote signer), as a client would: its status.

        Only the bulk-delete probe (app/storage_access/bulk_deletes.py) uses it, to learn whether the store
        checks a body against the signature that covers it.
        """
        with self._translated(f"send {method}"):
            answer = self._probe_http.request(method, uri, body=body, headers=headers, retries=False)
        return int(answer.status)

    def write_new(self, location: Location, data: bytes, content_type: str = "application/json") -> None:
        bucket, key = _s3(location)
        headers = {"If-None-Match": "*", "Content-Type": content_type}
        with self._calls(f"write {location.uri}"):
            # put_object() would turn If-None-Match into user metadata; the plain PUT keeps it a
            # real conditional header (minio 7.2 is pinned in requirements.txt).
            self.client._put_object(bucket, key, data, headers=headers)

    def copy_in(self, source: S3ObjectStore, origin: Location, location: Location) -> None:
        """``origin`` of ``source``'s store copied to ``location`` of this one: streamed, never held
        whole in memory (a moved table's data files: app/table_moves/copying.py). The target is a
        new table's fresh folder, so nothing is overwritten."""
        from_bucket, from_key = _s3(origin)
        bucket, key = _s3(location)
        with self._calls(f"copy {origin.uri}"):
            response = source.client.get_object(from_bucket, from_key)
            try:
                length = int(response.headers.get("content-length") or -1)
                self.client.put_object(
                    bucket, key, response, length, content_type="application/octet-stream", part_size=COPY_PART_BYTES
                )
            finally:
                response.close()
                response.release_conn()

    def read(self, location: Location, max_bytes: int | None = None) -> bytes:
        bucket, key = _s3(location)
        with self._calls(f"read {location.uri}"):
            response = self.client.get_object(bucket, key)
            try:
                if max_bytes is None:
                    return response.read()
                declared = response.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > max_bytes:
                    raise _too_large(max_bytes)
                data = response.read(max_bytes + 1)  # a lying or missing length is still bounded
                if len(data) > max_bytes:
                    raise _too_large(max_bytes)
                return data
            finally:
                response.close()
                response.release_conn()

    def exists(self, location: Location) -> bool:
        bucket, key = _s3(location)
        try:
            with self._calls(f"stat {location.uri}"):
                self.client.stat_object(bucket, key)
        except ObjectNotFound:
            return False
        return True

    def delete(self, locations: list[Location]) -> None:
        by_bucket: dict[str, list[DeleteObject]] = {}
        for location in locations:
            bucket, key = _s3(location)
            by_bucket.setdefault(bucket, []).append(DeleteObject(key))
        for bucket, objects in by_bucket.items():
            with self._calls(f"delete in {bucket}"):
                errors = list(self.client.remove_objects(bucket, objects))
            failed = [e for e in errors if e.code != "NoSuchKey"]
            if failed:
                raise ServiceUnavailable(f"Object storage could not delete {len(failed)} objects")

    def list(self, prefix: Location) -> Iterator[Location]:
        """Every object at or under ``prefix`` (by segments) whose key the model accepts.

        A key the model refuses (``a//b``, ``x?y``, written by another client) is skipped and
        logged: Growler never touches what it cannot name unambiguously.
        """
        return (location for location, _ in self.list_modified(prefix))

    def list_modified(self, prefix: Location) -> Iterator[tuple[Location, float]]:
        """``list`` with each object's last-modified time (seconds since the epoch)."""
        if prefix.scheme != "s3":
            raise BadRequest(f"Not an S3 location: {prefix.uri}")
        listed = prefix.key + "/" if prefix.key else ""
        with self._calls(f"list {prefix.uri}"):
            for obj in self.client.list_objects(prefix.bucket, prefix=listed, recursive=True):
                try:
                    found = Location.parse(f"s3://{prefix.bucket}/{obj.object_name}")
                except InvalidLocation:
                    log.warning("skipping an object whose key is not a valid location under %s", prefix.uri)
                    continue
                if found.key and found.key == obj.object_name and found.is_within(prefix):
                    # no time: treat it as brand new, so no age floor ever lets it go
                    yield found, obj.last_modified.timestamp() if obj.last_modified else float("inf")

    def ensure_bucket(self, bucket: str) -> None:
        with self._calls(f"create bucket {bucket}"):
            if not self.client.bucket_exists(bucket):
                self.client.make_bucket(bucket)

    def bucket_exists(self, bucket: str) -> bool:
        with self._calls(f"check bucket {bucket}"):
            return self.client.bucket_exists(bucket)

    def ping(self) -> None:
        """Readiness: one request on a fresh connection, answered within a short timeout."""
        try:
            with self._calls("list buckets"):
                self._probe.list_buckets()
        finally:
            self._probe_http.clear()  # the next probe connects afresh


def _too_large(max_bytes: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"The object is larger than {max_bytes} bytes (GROWLER_MAX_METADATA_BYTES)")


def local_path(location: Location) -> Path:
    location = _object(location)
    if location.scheme != "file":
        raise BadRequest(f"Not a file: location: {location.uri}")
    return Path(location.path)


class LocalObjectStore:
    """``file:`` locations: for single-machine use and tests that need no S3."""

    def write_new(self, location: Location, data: bytes, content_type: str = "application/json") -> None:
        path = local_path(location)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write to a temp file, then link it into place: link() fails if the name exists, so a
        # version is never overwritten, and readers never see a half-written file.
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError as exc:
                raise AlreadyExists(f"write {location.uri}: object already exists") from exc
        finally:
            os.unlink(tmp)

    def read(self, location: Location, max_bytes: int | None = None) -> bytes:
        try:
            with local_path(location).open("rb") as handle:
                data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise ObjectNotFound(f"read {location.uri}: no such file") from exc
        if max_bytes is not None and len(data) > max_bytes:
            raise _too_large(max_bytes)
        return data

    def exists(self, location: Location) -> bool:
        return local_path(location).is_file()

    def delete(self, locations: list[Location]) -> None:
        for location in locations:
            path = local_path(location)
            if not path.is_dir():  # unlink() of a symlink removes the link, never its target
                path.unlink(missing_ok=True)

    def list(self, prefix: Location) -> Iterator[Location]:
        return (location for location, _ in self.list_modified(prefix))

    def list_modified(self, prefix: Location) -> Iterator[tuple[Location, float]]:
        if prefix.scheme != "file":
            raise BadRequest(f"Not a file: location: {prefix.uri}")
        root = Path(prefix.path)
        if root.is_dir() and not root.is_symlink():
            for path in sorted(root.rglob("*")):
                if path.is_file() or path.is_symlink():
                    try:
                        found = Location.parse("file://" + str(path))
                    except InvalidLocation:
                        log.warning("skipping a file whose name is not a valid location under %s", prefix.uri)
                        continue
                    if found.is_within(prefix):
                        yield found, path.lstat().st_mtime

    def ping(self) -> None:
        return None


class StoreRouter(Protocol):
    """The one question storage asks of the layers above it: which store holds an ``s3://``
    location when its warehouse has storage of its own (None: the environment's). The app's
    warehouse directory answers it (``app.namespaces.warehouses.WarehouseDirectory``); it is
    handed to the store at construction, so no service is installed into storage afterwards."""

    def store_for(self, location: Location) -> ObjectStore | None: ...


class RoutingObjectStore:
    """Chooses the store by the location: the local one for ``file:``, for ``s3://`` the store of
    the warehouse holding it when that warehouse has storage of its own (``router``), else the
    environment's S3 store."""

    def __init__(
        self, s3: S3ObjectStore | None, local: LocalObjectStore | None = None, *, router: StoreRouter | None = None
    ) -> None:
        self.s3 = s3
        self.local = local or LocalObjectStore()
        self._router = router

    def _store(self, location: Location) -> ObjectStore:
        if not isinstance(location, Location):
            raise TypeError(f"object stores take a parsed Location, not {type(location).__name__}")
        if location.scheme == "file":
            return self.local
        routed = self._router.store_for(location) if self._router is not None else None
        if routed is not None:
            return routed
        if self.s3 is None:
            raise BadRequest("No S3 endpoint is configured for s3:// locations")
        return self.s3

    def write_new(self, location: Location, data: bytes, content_type: str = "application/json") -> None:
        self._store(location).write_new(location, data, content_type)

    def read(self, location: Location, max_bytes: int | None = None) -> bytes:
        return self._store(location).read(location, max_bytes)

    def exists(self, location: Location) -> bool:
        return self._store(location).exists(location)

    def delete(self, locations: list[Location]) -> None:
        by_store: dict[int, tuple[ObjectStore, list[Location]]] = {}
        for location in locations:
            store = self._store(location)
            by_store.setdefault(id(store), (store, []))[1].append(location)
        for store, batch in by_store.values():
            store.delete(batch)

    def list(self, prefix: Location) -> Iterator[Location]:
        return self._store(prefix).list(prefix)

    def list_modified(self, prefix: Location) -> Iterator[tuple[Location, float]]:
        return self._store(prefix).list_modified(prefix)

    def ping(self) -> None:
        if self.s3 is not None:
            self.s3.ping()
