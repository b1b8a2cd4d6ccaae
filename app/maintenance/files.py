"""Which files a table's metadata reaches, and which of a set of candidates a run may delete.

Every maintenance read is of the table's own files: ``Reachable`` reads manifest lists and
manifests with PyIceberg's manifest readers over Growler's own object store, and opens or
returns only what lies in the table's own locations (``app.ground.locations.TableFiles``, the
one definition commits and every server-side reader use); a manifest list, manifest, data or
delete file anywhere else fails the run (``ForeignFile``) before anything is written, committed
or deleted, whichever policy type runs.

Every maintenance delete goes through ``Deletable``: a file is deleted only when the run proved
that no live metadata of this table reaches it (``Reachable``), it lies strictly under the
table's own location (``app.ground.locations``, by segments), and no other entry - live, staged,
or retained by the recycle bin - owns its place (``MaintenanceRows.owners_besides``). Paths are
compared as parsed locations, never as text.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.manifest import DataFileContent, ManifestFile, read_manifest_list

from app.ground.errors import BadRequest
from app.ground.locations import InvalidLocation, Location, TableFiles
from storage.manifests import ObjectStoreFileIO, require_own_entries
from storage.objects import ObjectNotFound, ObjectStore

log = logging.getLogger(__name__)

SMALL_MANIFEST_BYTES = 6 * 1024 * 1024  # 75% of Iceberg's commit.manifest.target-size-bytes


def parsed(text: str | None) -> Location | None:
    if not text:
        return None
    try:
        return Location.parse(text)
    except InvalidLocation:
        return None


@dataclass
class FileSet:
    """Locations reached, by kind (manifest lists, manifests, data and delete files, statistics)."""

    manifest_lists: set[Location] = field(default_factory=set)
    manifests: set[Location] = field(default_factory=set)
    content: set[Location] = field(default_factory=set)
    other: set[Location] = field(default_factory=set)

    def all(self) -> set[Location]:
        return self.manifest_lists | self.manifests | self.content | self.other

    def counts(self) -> dict[str, int]:
        return {
            "manifest-lists": len(self.manifest_lists),
            "manifests": len(self.manifests),
            "data-and-delete-files": len(self.content),
            "other": len(self.other),
        }


class Reachable:
    """Reads manifest lists and manifests once per run (a manifest is shared by many snapshots),
    only the table's own ``files``: a foreign path is ``ForeignFile`` (the run fails, unchanged)."""

    def __init__(self, objects: ObjectStore, files: TableFiles) -> None:
        self.io = ObjectStoreFileIO(objects, files, "Maintenance refused to read the table")
        self._lists: dict[str, list[ManifestFile]] = {}
        self._entries: dict[tuple[str, bool], list[Any]] = {}

    @property
    def files(self) -> TableFiles:
        return self.io.files

    def manifests(self, manifest_list: str) -> list[ManifestFile]:
        if manifest_list not in self._lists:
            manifests = list(read_manifest_list(self.io.new_input(manifest_list)))
            for manifest in manifests:
                self.files.require(manifest.manifest_path, "manifest", self.io.doing)
            self._lists[manifest_list] = manifests
        return self._lists[manifest_list]

    def entries(self, manifest: ManifestFile, live_only: bool) -> list[Any]:
        key = (manifest.manifest_path, live_only)
        if key not in self._entries:
            entries = manifest.fetch_manifest_entry(self.io, discard_deleted=live_only)
            require_own_entries(self.io, entries)
            self._entries[key] = entries
        return self._entries[key]

    def of(
        self, metadata: Any, snapshot_ids: Iterable[int] | None, live_only: bool, missing_ok: bool = False
    ) -> FileSet:
        """The files the snapshots reach (all of the metadata's when ``snapshot_ids`` is None).

        ``live_only``: only entries a reader of those snapshots reads (added and existing), as
        Java's expiry counts them; without it, deleted entries too (orphan removal keeps anything
        a manifest names at all). ``missing_ok`` (the candidates of an expiry, never what is kept):
        a snapshot whose manifest list is already gone adds nothing - there is nothing to delete.
        """
        wanted = None if snapshot_ids is None else set(snapshot_ids)
        found = FileSet()
        for snapshot in metadata.snapshots:
            if wanted is not None and snapshot.snapshot_id not in wanted:
                continue
            if not snapshot.manifest_list:
                raise BadRequest(f"Snapshot {snapshot.snapshot_id} has no manifest list (format v1 manifests)")
            try:
                manifests = self.manifests(snapshot.manifest_list)
            except ObjectNotFound:
                if not missing_ok:
                    raise
                continue
            _add(found.manifest_lists, snapshot.manifest_list)
            for manifest in manifests:
                _add(found.manifests, manifest.manifest_path)
                for entry in self.entries(manifest, live_only):
                    _add(found.content, entry.data_file.file_path)
        for statistics in [*metadata.statistics, *metadata.partition_statistics]:
            if wanted is None or statistics.snapshot_id in wanted:
                _add(found.other, statistics.statistics_path)
        return found


def _add(into: set[Location], text: str) -> None:
    location = parsed(text)
    if location is None:
        raise BadRequest(f"The table's metadata names a file whose location is not valid: {text[:200]!r}")
    into.add(location)


class Deletable:
    """The rule every maintenance delete obeys (see the module's docstring)."""

    def __init__(self, table_root: Location, owned_by_others: list[str]) -> None:
        self.root = table_root
        self.others = [location for location in map(parsed, owned_by_others) if location is not None]
        unparsable = len(self.others) != len(owned_by_others)
        # another owner at or above the table's location (or one we cannot read): delete nothing
        self.refused = unparsable or any(table_root.is_within(other) for other in self.others)

    def __call__(self, location: Location) -> bool:
        if self.refused or location == self.root or not location.is_within(self.root):
            return False
        return not any(location.is_within(other) for other in self.others)


@dataclass
class PartitionStats:
    data_files: int = 0
    delete_files: int = 0
    records: int = 0
    bytes: int = 0
    small_data_files: int = 0


def current_shape(reachable: Reachable, metadata: Any, target_size: int, small_share: float) -> dict[str, Any]:
    """Manifests and data/delete files of the current snapshot, per partition (the health report)."""
    snapshot = metadata.current_snapshot()
    partitions: dict[str, PartitionStats] = {}
    manifests = small_manifests = 0
    if snapshot is not None and snapshot.manifest_list:
        specs = metadata.specs()
        schema = metadata.schema()
        for manifest in reachable.manifests(snapshot.manifest_list):
            manifests += 1
            small_manifests += manifest.manifest_length < SMALL_MANIFEST_BYTES
            for entry in reachable.entries(manifest, live_only=True):
                data_file = entry.data_file
                key = _partition_name(specs.get(manifest.partition_spec_id), data_file.partition, schema)
                stats = partitions.setdefault(key, PartitionStats())
                if data_file.content == DataFileContent.DATA:
                    stats.data_files += 1
                    stats.records += data_file.record_count
                    stats.small_data_files += data_file.file_size_in_bytes < target_size * small_share
                else:
                    stats.delete_files += 1
                stats.bytes += data_file.file_size_in_bytes
    return {"manifests": manifests, "small-manifests": small_manifests, "partitions": partitions}


def _partition_name(spec: Any, partition: Any, schema: Any) -> str:
    if spec is None or not spec.fields:
        return ""
    try:
        return spec.partition_to_path(partition, schema)
    except Exception:  # noqa: BLE001 - a name for a report only: fall back to the raw values
        return str(partition)
