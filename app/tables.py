"""Table operations: create, load, commit, drop (with purge), rename, register, metrics.

The commit follows ARCHITECTURE.md: read the row (one query), apply the pure rules, write a
new metadata object (never overwriting), then compare-and-set the pointer in PostgreSQL. A lost
race re-reads and re-applies while the requirements still hold; the losing file is deleted.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import random
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from app import table_metadata as rules
from app.catalog import Page, WarehouseDirectory
from app.errors import (
    AlreadyExists,
    BadRequest,
    CommitFailed,
    NoSuchNamespace,
    NoSuchTable,
)
from app.identifiers import (
    check_name,
    check_namespace,
    decode_page_token,
    encode_page_token,
    format_namespace,
    page_window,
)
from app.settings import Settings
from app.storage_access import client_storage_config, storage_credentials
from storage.objects import ObjectNotFound, ObjectStore
from storage.repository import CatalogRepository, EntryRow, NewEntry, WarehouseRow

log = logging.getLogger(__name__)

TABLE = "table"
MAX_COMMIT_ATTEMPTS = 8
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class LoadedTable:
    """What loadTable answers; ``metadata`` is the stored JSON text, not re-parsed."""

    metadata_location: str | None
    metadata: str
    config: dict[str, str]
    credentials: list[dict[str, Any]]
    etag: str | None = None


def etag_for(metadata_location: str, variant: str) -> str:
    digest = hashlib.sha256(f"{metadata_location}|{variant}".encode()).hexdigest()[:32]
    return f'"{digest}"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    candidates = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in candidates or etag in candidates


def now_ms() -> int:
    return int(time.time() * 1000)


def encode_metadata(text: str, location: str) -> bytes:
    data = text.encode("utf-8")
    return gzip.compress(data, mtime=0) if location.endswith(".gz.metadata.json") else data


def decode_metadata(data: bytes) -> str:
    if data[:2] == GZIP_MAGIC:
        data = gzip.decompress(data)
    return data.decode("utf-8")


class TableService:
    def __init__(
        self,
        settings: Settings,
        repository: CatalogRepository,
        objects: ObjectStore,
        warehouses: WarehouseDirectory,
    ) -> None:
        self.settings = settings
        self.repository = repository
        self.objects = objects
        self.warehouses = warehouses
        self.purge_requested = threading.Event()

    # -- reading ------------------------------------------------------------------------

    def list_tables(
        self, prefix: str, namespace: tuple[str, ...], page_token: str | None, page_size: int | None
    ) -> Page:
        warehouse = self.warehouses.get(prefix)
        paginate, limit = page_window(page_token, page_size, self.settings.max_page_size)
        after = decode_page_token(page_token) if page_token else None
        if after is not None and not isinstance(after, str):
            raise BadRequest("Invalid pageToken")
        names = self.repository.list_entries(
            warehouse.id, namespace, TABLE, after, None if limit is None else limit + 1
        )
        if limit is not None and len(names) > limit:
            names = names[:limit]
            return Page(names, encode_page_token(names[-1]) if paginate else None)
        return Page(names, None)

    def load_table(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        name: str,
        *,
        snapshots: str | None = None,
        vend_credentials: bool = False,
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        row = self._require_table(warehouse, namespace, name)
        metadata = row.metadata
        if snapshots == "refs":
            metadata = json.dumps(rules.refs_only(json.loads(metadata)), separators=(",", ":"))
        variant = f"{snapshots or 'all'}|{'vended' if vend_credentials else 'plain'}"
        return LoadedTable(
            metadata_location=row.metadata_location,
            metadata=metadata,
            config=client_storage_config(warehouse),
            credentials=self._credentials(warehouse, row.location, vend_credentials),
            etag=etag_for(row.metadata_location, variant),
        )

    def table_etag(
        self, prefix: str, namespace: tuple[str, ...], name: str, snapshots: str | None, vend_credentials: bool
    ) -> str:
        """The ETag loadTable would send, for answering If-None-Match."""
        warehouse = self.warehouses.get(prefix)
        row = self._require_table(warehouse, namespace, name)
        return etag_for(row.metadata_location, f"{snapshots or 'all'}|{'vended' if vend_credentials else 'plain'}")

    def require_table(self, prefix: str, namespace: tuple[str, ...], name: str) -> None:
        warehouse = self.warehouses.get(prefix)
        if not self.repository.entry_exists(warehouse.id, namespace, name, TABLE):
            raise NoSuchTable(f"Table does not exist: {format_namespace((*namespace, name))}")

    def load_credentials(self, prefix: str, namespace: tuple[str, ...], name: str) -> list[dict[str, Any]]:
        warehouse = self.warehouses.get(prefix)
        row = self._require_table(warehouse, namespace, name)
        return self._credentials(warehouse, row.location, True)

    # -- creating -----------------------------------------------------------------------

    def create_table(
        self, prefix: str, namespace: tuple[str, ...], request: dict[str, Any], vend_credentials: bool = False
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        name = check_name(request["name"], "table name")
        self._require_namespace(warehouse, namespace)
        table_uuid = str(uuid.uuid4())
        location = self._table_location(warehouse, namespace, name, table_uuid, request.get("location"))
        metadata = rules.new_table_metadata(request, location=location, now_ms=now_ms(), table_uuid=table_uuid)
        text = rules.to_json(metadata)
        config = client_storage_config(warehouse)
        credentials = self._credentials(warehouse, location, vend_credentials)
        if request.get("stage-create"):
            if self.repository.load_entry(warehouse.id, namespace, name) is not None:
                raise AlreadyExists(f"Table or view already exists: {format_namespace((*namespace, name))}")
            if credentials:
                # A staged table has no metadata-location, and PyIceberg matches storage-credentials
                # against it; so the vended keys (asked for by this request) also travel in config.
                config = {**config, **credentials[0]["config"]}
            return LoadedTable(None, text, config, credentials)
        metadata_location = self._metadata_location(metadata, rules.next_metadata_version(None))
        self._write_metadata(metadata_location, text)
        entry = NewEntry(name, TABLE, str(metadata.table_uuid), metadata.location, metadata_location, text)
        try:
            self.repository.insert_entry(warehouse.id, namespace, entry)
        except Exception:
            self._forget_files([metadata_location])
            raise
        return LoadedTable(metadata_location, text, config, credentials, etag_for(metadata_location, "all|plain"))

    def register_table(
        self, prefix: str, namespace: tuple[str, ...], request: dict[str, Any], vend_credentials: bool = False
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        name = check_name(request["name"], "table name")
        metadata_location = request["metadata-location"]
        self._require_inside_warehouse(warehouse, metadata_location, "metadata-location")
        self._require_namespace(warehouse, namespace)
        try:
            text = decode_metadata(self.objects.read(metadata_location))
        except ObjectNotFound as exc:
            raise BadRequest(f"Metadata file does not exist: {metadata_location}") from exc
        except (UnicodeDecodeError, OSError, EOFError) as exc:
            raise BadRequest(f"Not a valid table metadata file: {metadata_location}") from exc
        metadata = rules.parse_metadata(text)
        text = rules.to_json(metadata)
        entry = NewEntry(name, TABLE, str(metadata.table_uuid), metadata.location, metadata_location, text)
        if request.get("overwrite"):
            self.repository.replace_entry(warehouse.id, namespace, entry)
        else:
            self.repository.insert_entry(warehouse.id, namespace, entry)
        return LoadedTable(
            metadata_location,
            text,
            client_storage_config(warehouse),
            self._credentials(warehouse, metadata.location, vend_credentials),
            etag_for(metadata_location, "all|plain"),
        )

    # -- committing ---------------------------------------------------------------------

    def commit_table(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        name: str,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
    ) -> LoadedTable:
        warehouse = self.warehouses.get(prefix)
        check_name(name, "table name")
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            outcome = self._attempt_commit(warehouse, namespace, name, requirements, updates)
            if outcome is not None:
                return outcome
            # Another writer swapped the pointer first: back off, re-read, re-check, re-apply.
            time.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))
        raise CommitFailed(
            f"Commit to {format_namespace((*namespace, name))} lost {MAX_COMMIT_ATTEMPTS} races "
            "with concurrent writers; refresh and retry"
        )

    def _attempt_commit(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        name: str,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
    ) -> LoadedTable | None:
        row = self.repository.load_entry(warehouse.id, namespace, name)
        if row is not None and row.kind != TABLE:
            raise NoSuchTable(f"Table does not exist: {format_namespace((*namespace, name))} is a view")
        if row is None and not any(r.get("type") == "assert-create" for r in requirements):
            self._require_namespace(warehouse, namespace)
            raise NoSuchTable(f"Table does not exist: {format_namespace((*namespace, name))}")
        base = rules.parse_metadata(row.metadata) if row else None
        default_location = None
        if row is None:  # staged create: a location unless the updates set one
            default_location = self._table_location(warehouse, namespace, name, str(uuid.uuid4()), None)
        new = rules.commit(
            base,
            requirements,
            updates,
            base_location=row.metadata_location if row else None,
            now_ms=now_ms(),
            default_location=default_location,
        )
        if row is None:
            return self._create_from_commit(warehouse, namespace, name, new)
        text = rules.to_json(new)
        if text == row.metadata:  # nothing changed: no new version
            return LoadedTable(
                row.metadata_location, row.metadata, {}, [], etag_for(row.metadata_location, "all|plain")
            )
        self._require_inside_warehouse(warehouse, new.location, "location")
        metadata_location = self._metadata_location(new, rules.next_metadata_version(row.metadata_location))
        self._write_metadata(metadata_location, text)
        if not self.repository.swap_metadata(row.id, row.metadata_location, metadata_location, text, new.location):
            self._forget_files([metadata_location])
            return None
        self._forget_files(rules.metadata_files_to_delete(base, new))
        return LoadedTable(metadata_location, text, {}, [], etag_for(metadata_location, "all|plain"))

    def _create_from_commit(
        self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str, new: Any
    ) -> LoadedTable:
        """A staged create (``assert-create``) becomes a table: first version of its metadata."""
        self._require_inside_warehouse(warehouse, new.location, "location")
        text = rules.to_json(new)
        metadata_location = self._metadata_location(new, rules.next_metadata_version(None))
        self._write_metadata(metadata_location, text)
        entry = NewEntry(name, TABLE, str(new.table_uuid), new.location, metadata_location, text)
        try:
            self.repository.insert_entry(warehouse.id, namespace, entry)
        except AlreadyExists as exc:
            self._forget_files([metadata_location])
            raise CommitFailed(
                f"Requirement failed: table {format_namespace((*namespace, name))} already exists"
            ) from exc
        except Exception:
            self._forget_files([metadata_location])
            raise
        return LoadedTable(metadata_location, text, {}, [], etag_for(metadata_location, "all|plain"))

    # -- dropping and renaming ----------------------------------------------------------

    def drop_table(self, prefix: str, namespace: tuple[str, ...], name: str, purge: bool) -> None:
        warehouse = self.warehouses.get(prefix)
        purge_objects = None
        if purge:
            row = self._require_table(warehouse, namespace, name)
            purge_objects = self._metadata_files_of(row)
        row = self.repository.delete_entry(warehouse.id, namespace, name, TABLE, purge_objects)
        if row is None:
            self._require_namespace(warehouse, namespace)
            raise NoSuchTable(f"Table does not exist: {format_namespace((*namespace, name))}")
        if purge:
            self.purge_requested.set()

    def rename_table(self, prefix: str, source: dict[str, Any], destination: dict[str, Any]) -> None:
        warehouse = self.warehouses.get(prefix)
        src = (check_namespace(source["namespace"]), check_name(source["name"], "table name"))
        dst = (check_namespace(destination["namespace"]), check_name(destination["name"], "table name"))
        if not self.repository.rename_entry(warehouse.id, src, dst, TABLE):
            self._require_namespace(warehouse, src[0])
            raise NoSuchTable(f"Table does not exist: {format_namespace((*src[0], src[1]))}")

    def report_metrics(self, prefix: str, namespace: tuple[str, ...], name: str, report: dict[str, Any]) -> None:
        warehouse = self.warehouses.get(prefix)
        self._require_table(warehouse, namespace, name)
        self.repository.insert_metrics_report(warehouse.id, namespace, name, report["report-type"], report)

    # -- helpers ------------------------------------------------------------------------

    def _require_table(self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str) -> EntryRow:
        row = self.repository.load_entry(warehouse.id, namespace, name)
        if row is None or row.kind != TABLE:
            if row is None:
                self._require_namespace(warehouse, namespace)
            raise NoSuchTable(f"Table does not exist: {format_namespace((*namespace, name))}")
        return row

    def _require_namespace(self, warehouse: WarehouseRow, namespace: tuple[str, ...]) -> None:
        if not self.repository.namespace_exists(warehouse.id, namespace):
            raise NoSuchNamespace(f"Namespace does not exist: {format_namespace(namespace)}")

    def _table_location(
        self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str, table_uuid: str, requested: str | None
    ) -> str:
        if requested:
            location = requested.rstrip("/")
            self._require_inside_warehouse(warehouse, location, "location")
            return location
        # The uuid suffix keeps a re-created table from ever sharing files with a dropped one.
        base = warehouse.location.rstrip("/")
        return f"{base}/{'/'.join(namespace)}/{name}-{table_uuid.replace('-', '')}"

    @staticmethod
    def _require_inside_warehouse(warehouse: WarehouseRow, location: str, what: str) -> None:
        root = warehouse.location.rstrip("/") + "/"
        if not location.startswith(root) or ".." in location.split("/"):
            raise BadRequest(f"The {what} {location} is outside the warehouse storage location {root}")

    @staticmethod
    def _metadata_location(metadata: Any, version: int) -> str:
        file_name = rules.metadata_file_name(version, metadata.properties or {}, str(uuid.uuid4()))
        return f"{rules.metadata_directory(metadata).rstrip('/')}/{file_name}"

    def _write_metadata(self, location: str, text: str) -> None:
        self.objects.write_new(location, encode_metadata(text, location))

    def _forget_files(self, locations: list[str]) -> None:
        """Best-effort cleanup of files no commit points to; a failure only leaves garbage."""
        if not locations:
            return
        try:
            self.objects.delete(locations)
        except Exception as exc:  # noqa: BLE001 - cleanup must not turn a result into an error
            log.warning("could not delete %d unreferenced metadata files: %s", len(locations), type(exc).__name__)

    @staticmethod
    def _metadata_files_of(row: EntryRow) -> list[str]:
        document = json.loads(row.metadata)
        files = [row.metadata_location]
        files += [entry["metadata-file"] for entry in document.get("metadata-log", [])]
        return files

    def _credentials(self, warehouse: WarehouseRow, location: str, vend: bool) -> list[dict[str, Any]]:
        return storage_credentials(self.settings, warehouse, location) if vend else []
