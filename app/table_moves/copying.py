"""Moving a table home with a copy of its files (issue 50, docs/federation.md "Moving a table
home"): the remote's table copied into the native warehouse's storage, every path in it rewritten,
so that the native table owns its files and the remote's stay the remote's.

What is copied is what the table's current metadata reaches: every snapshot's manifest list, its
manifests, the data and delete files they name, and the statistics files. Data files and equality
deletes are copied byte for byte (server-side where both stores are one); manifests and manifest
lists are written anew with the new paths (PyIceberg's writers, the entries' status, snapshot and
sequence numbers kept); position delete files are rewritten, their ``file_path`` column (and its
bounds) naming the copied data files. The new metadata file is the remote's with the new location,
manifest lists and statistics paths, no metadata log (the old files are the remote's), and no
``write.*.path`` properties (the copy lives under its location). Nothing of the remote's is
changed.

Refused with a 400 and nothing registered: a table without Growler's own storage access to its
files (the federated warehouse's storage settings and allowed locations: Growler reads the files
with those), a format version PyIceberg cannot write manifests for (v3), deletion vectors, and a
file outside the table's own folders (it could be another table's: never copied).
"""

from __future__ import annotations

import io
import json
import logging
import uuid
from copy import copy
from typing import Any, TypeVar

from pyiceberg.manifest import (
    DATA_FILE_TYPE,
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS_STRUCT,
    MANIFEST_LIST_FILE_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestFile,
    read_manifest_list,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil

from app.ground.errors import BadRequest
from app.ground.locations import Location, TableFiles
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.table.files import data_path, stored_roots
from storage.manifests import ObjectStoreFileIO, WritingObjectStoreFileIO
from storage.objects import S3ObjectStore
from storage.warehouses import WarehouseRow

log = logging.getLogger(__name__)

# Properties that place files outside the location: the copy's files are all under its location.
PLACING_PROPERTIES = (
    "write.data.path",
    "write.metadata.path",
    "write.object-storage.path",
    "write.folder-storage.path",
)
POSITION_PATH_FIELD = 2147483546  # the reserved field id of a position delete's file_path
DOING = "Cannot copy the table"
R = TypeVar("R", DataFile, ManifestEntry, ManifestFile)
DELETE_BATCH = 1000  # objects per delete call when a copy is removed
# The fields of PyIceberg's records, in their order (a record's fields are set by position: most
# have no setter).
DATA_FILE_FIELDS = tuple(field.name for field in DATA_FILE_TYPE[DEFAULT_READ_VERSION].fields)
ENTRY_FIELDS = tuple(field.name for field in MANIFEST_ENTRY_SCHEMAS_STRUCT[DEFAULT_READ_VERSION].fields)
MANIFEST_FIELDS = tuple(field.name for field in MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION].as_struct().fields)


class TableCopy:
    def __init__(self, warehouses: WarehouseDirectory) -> None:
        self.warehouses = warehouses  # each warehouse's store and keys

    def copy(self, source: WarehouseRow, loaded: dict[str, Any], target: WarehouseRow, location: str) -> str:
        """The copy's new metadata location, under ``location`` in ``target``'s storage."""
        metadata_location = loaded.get("metadata-location")
        raw = loaded.get("metadata")
        if not isinstance(raw, dict) or not isinstance(metadata_location, str):
            raise BadRequest("The remote answered no metadata to copy (a staged table cannot be moved)")
        metadata = TableMetadataUtil.parse_raw(json.dumps(raw))
        if metadata.format_version not in (1, 2):
            raise BadRequest(
                f"A format version {metadata.format_version} table cannot be moved with a copy of its files yet;"
                ' move it with "files": "in-place"'
            )
        if any(snapshot.manifest_list is None for snapshot in metadata.snapshots):
            raise BadRequest("A table with snapshots of embedded manifests (v1) cannot be copied; move it in place")
        roots = self._readable_roots(source, metadata, metadata_location)
        source_store = S3ObjectStore(self.warehouses.s3_settings(source))
        target_store = S3ObjectStore(self.warehouses.s3_settings(target))
        try:
            return self._copied(raw, metadata, roots, location, source_store, target_store)
        except BaseException:  # a copy cut short is nobody's: gone with the failure
            try:
                _remove_under(target_store, Location.parse(location))
            except Exception as cleanup:  # noqa: BLE001 - the copy's own failure is the one to answer
                log.warning("a cut-short copy under %s was not removed: %s", location, type(cleanup).__name__)
            raise

    def _copied(  # noqa: PLR0913 - the table and the two stores
        self,
        raw: dict[str, Any],
        metadata: TableMetadata,
        roots: list[str],
        location: str,
        source_store: S3ObjectStore,
        target_store: S3ObjectStore,
    ) -> str:
        paths = PathMap(roots, location.rstrip("/"))
        files = TableFiles.of(*roots)
        reading = ObjectStoreFileIO(source_store, files, DOING)
        writing = WritingObjectStoreFileIO(
            source_store, files, Location.parse(location), DOING, write_objects=target_store
        )
        copied: dict[str, ManifestFile] = {}  # the source manifest's path -> its copy
        snapshots = []
        for snapshot in metadata.snapshots:
            manifests = read_manifest_list(reading.new_input(snapshot.manifest_list))
            new_manifests = []
            for manifest in manifests:
                if manifest.manifest_path not in copied:
                    copied[manifest.manifest_path] = self._manifest(
                        metadata, manifest, reading, writing, paths, source_store, target_store
                    )
                new_manifests.append(copied[manifest.manifest_path])
            new_list = paths.map(snapshot.manifest_list)
            with write_manifest_list(
                metadata.format_version,
                writing.new_output(new_list),
                snapshot.snapshot_id,
                snapshot.parent_snapshot_id,
                snapshot.sequence_number or 0,
                "deflate",
            ) as writer:
                writer.add_manifests(new_manifests)
            snapshots.append((snapshot.snapshot_id, new_list))
        new_metadata = self._metadata(raw, location, dict(snapshots), paths, source_store, target_store)
        new_location = f"{location.rstrip('/')}/metadata/00000-{uuid.uuid4()}.metadata.json"
        target_store.write_new(Location.parse(new_location), json.dumps(new_metadata).encode())
        return new_location

    def remove(self, target: WarehouseRow, metadata_location: str) -> None:
        """A copy's files, all under its location, deleted (a refused register, an undone move)."""
        location = Location.parse(metadata_location.rsplit("/metadata/", 1)[0])
        _remove_under(S3ObjectStore(self.warehouses.s3_settings(target)), location)

    def _readable_roots(self, source: WarehouseRow, metadata: TableMetadata, metadata_location: str) -> list[str]:
        """The table's folders, every one inside the federated warehouse's allowed locations:
        Growler reads them with its own storage settings, or not at all."""
        roots = stored_roots(
            metadata.location,
            metadata_location.rsplit("/", 1)[0],
            data_path(metadata.properties or {}) or None,
        )
        allowed = [Location.parse(text) for text in source.allowed_locations]
        outside = [root for root in roots if not any(Location.parse(root).is_within(a) for a in allowed)]
        if not allowed or outside:
            raise BadRequest(
                f"Moving with a copy of the files needs Growler's own storage access to the table's files"
                f" ({', '.join(outside or roots)}): give warehouse {source.name} storage settings and"
                ' allowed-locations around them, or move with "files": "in-place"'
            )
        return roots

    def _manifest(  # noqa: PLR0913 - one manifest, the copy's readers and writers
        self,
        metadata: TableMetadata,
        manifest: ManifestFile,
        reading: ObjectStoreFileIO,
        writing: WritingObjectStoreFileIO,
        paths: PathMap,
        source_store: S3ObjectStore,
        target_store: S3ObjectStore,
    ) -> ManifestFile:
        spec = metadata.specs()[manifest.partition_spec_id]
        output = writing.new_output(paths.map(manifest.manifest_path))
        writer = write_manifest(
            metadata.format_version, spec, metadata.schema(), output, manifest.added_snapshot_id, "deflate"
        )
        with writer:
            for entry in manifest.fetch_manifest_entry(reading, discard_deleted=False):
                writer.add_entry(self._entry(entry, paths, source_store, target_store))
        return _replaced(manifest, MANIFEST_FIELDS, manifest_path=output.location, manifest_length=len(output))

    def _entry(
        self, entry: ManifestEntry, paths: PathMap, source_store: S3ObjectStore, target_store: S3ObjectStore
    ) -> ManifestEntry:
        """The entry naming its file's copy; a live file copied (a deleted entry's file is not read)."""
        data_file = entry.data_file
        if data_file.file_format == FileFormat.PUFFIN:
            raise BadRequest(
                "A table with deletion vectors cannot be moved with a copy of its files yet; move it in place"
            )
        new_path = paths.map(data_file.file_path)
        changed: dict[str, Any] = {"file_path": new_path}
        live = entry.status != 2  # ManifestEntryStatus.DELETED: its file may be gone already
        if data_file.content == DataFileContent.POSITION_DELETES:
            if live:
                changed.update(_position_deletes(data_file, new_path, paths, source_store, target_store))
        elif live:
            target_store.copy_in(source_store, Location.parse(data_file.file_path), Location.parse(new_path))
        return _replaced(entry, ENTRY_FIELDS, data_file=_replaced(data_file, DATA_FILE_FIELDS, **changed))

    def _metadata(  # noqa: PLR0913 - the document and what the copy changed in it
        self,
        raw: dict[str, Any],
        location: str,
        manifest_lists: dict[int, str],
        paths: PathMap,
        source_store: S3ObjectStore,
        target_store: S3ObjectStore,
    ) -> dict[str, Any]:
        document = json.loads(json.dumps(raw))
        document["location"] = location.rstrip("/")
        document["metadata-log"] = []
        document["properties"] = {
            key: value for key, value in (document.get("properties") or {}).items() if key not in PLACING_PROPERTIES
        }
        for snapshot in document.get("snapshots") or ():
            snapshot["manifest-list"] = manifest_lists[snapshot["snapshot-id"]]
        for key in ("statistics", "partition-statistics"):
            for statistics in document.get(key) or ():
                new_path = paths.map(statistics["statistics-path"])
                target_store.copy_in(
                    source_store, Location.parse(statistics["statistics-path"]), Location.parse(new_path)
                )
                statistics["statistics-path"] = new_path
        return document


class PathMap:
    """A path of the table's folders, mapped into the copy's location: the location's files keep
    their place under it, the metadata directory's go to ``metadata/``, the data path's to
    ``data/``. A path outside the folders is refused (it could be another table's)."""

    def __init__(self, roots: list[str], target: str) -> None:
        location, directory, *data = [root.rstrip("/") for root in roots] + [""]
        pairs = [(location, target), (directory, f"{target}/metadata")]
        if data and data[0]:
            pairs.append((data[0], f"{target}/data"))
        self.pairs = sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)  # the most specific first

    def map(self, path: str) -> str:
        for root, target in self.pairs:
            if root and path.startswith(root + "/"):
                return target + path[len(root) :]
        raise BadRequest(f"File {path[:300]} lies outside the table's folders: it is not copied with the table")


def _position_deletes(
    data_file: DataFile, new_path: str, paths: PathMap, source_store: S3ObjectStore, target_store: S3ObjectStore
) -> dict[str, Any]:
    """A position delete file rewritten to name the copied data files: its new size and the bounds
    of its file_path column."""
    if data_file.file_format != FileFormat.PARQUET:
        raise BadRequest(f"Position deletes in {data_file.file_format} cannot be copied yet; move the table in place")
    # imported here: pyarrow is some 40 MB a worker holds only once something uses it
    # (tests/api/test_worker_imports.py)
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(io.BytesIO(source_store.read(Location.parse(data_file.file_path))))
    mapped = [paths.map(path) for path in table.column("file_path").to_pylist()]
    index = table.schema.get_field_index("file_path")
    field = table.schema.field(index)
    table = table.set_column(index, field, pa.array(mapped, type=field.type))
    out = io.BytesIO()
    pq.write_table(table, out)
    body = out.getvalue()
    target_store.write_new(Location.parse(new_path), body, "application/octet-stream")
    changed: dict[str, Any] = {"file_size_in_bytes": len(body)}
    if mapped:
        changed["lower_bounds"] = _bound(data_file.lower_bounds, min(mapped))
        changed["upper_bounds"] = _bound(data_file.upper_bounds, max(mapped))
    return changed


def _remove_under(store: S3ObjectStore, location: Location) -> None:
    found = list(store.list(location))
    for start in range(0, len(found), DELETE_BATCH):
        store.delete(found[start : start + DELETE_BATCH])


def _replaced(record: R, fields: tuple[str, ...], **changes: Any) -> R:
    """A copy of one of PyIceberg's records with ``changes`` (its own list of values: the original
    is the reader's, cached)."""
    replaced = copy(record)
    replaced._data = list(record._data)  # noqa: SLF001 - the record's values, set by position
    for name, value in changes.items():
        replaced[fields.index(name)] = value
    return replaced


def _bound(found: dict[int, bytes] | None, value: str) -> dict[int, bytes] | None:
    """The bounds with the file_path column's (a string's bound: its UTF-8 bytes), where there were any."""
    return {**found, POSITION_PATH_FIELD: value.encode()} if found is not None else None
