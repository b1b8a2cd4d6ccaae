"""The files of one table's metadata: where they go (``write.metadata.path``), the manifest lists
a commit adds, which previous ones a commit may delete
(``write.metadata.delete-after-commit.enabled``), and which files are the table's own at all
(``files_of_entry``, ``files_after_commit``: the one definition every commit and reader uses)."""

from __future__ import annotations

from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.update import AddSnapshotUpdate

from app.ground.locations import Location, TableFiles
from app.rules.metadata_files import metadata_directory_of
from app.rules.table.models import DELETE_AFTER_COMMIT, TableUpdate


def metadata_directory(metadata: TableMetadata) -> str:
    """Where metadata files go: ``write.metadata.path``, else ``<location>/metadata``."""
    return metadata_directory_of(metadata.location, metadata.properties)


# Where a table's data files go besides its location (Java's LocationProviders; the last two are
# their deprecated names, still read).
DATA_PATHS = ("write.data.path", "write.object-storage.path", "write.folder-storage.path")


def relocates(old: TableMetadata, new: TableMetadata) -> bool:
    """Whether a commit moves where the table's files are or go: its location, its metadata
    directory (``write.metadata.path``) or its data path. A protected table refuses it."""
    if old.location != new.location or metadata_directory(old) != metadata_directory(new):
        return True
    return any(old.properties.get(key) != new.properties.get(key) for key in DATA_PATHS)


def files_of_entry(location: str, metadata_location: str) -> TableFiles:
    """A stored table's own places: its location and the directory of its current metadata file,
    as storage/placement.py claimed them (a registered table's metadata file may lie outside the
    directory ``write.metadata.path`` names; its own directory is what it owns until it commits)."""
    return TableFiles.of(location, Location.parse(metadata_location, "metadata-location").parent.uri)


def files_after_commit(new: TableMetadata) -> TableFiles:
    """The places a table owns once a commit producing ``new`` lands: its (possibly new) location
    and the directory its next metadata file goes to - what the commit claims when either moved."""
    return TableFiles.of(new.location, metadata_directory(new))


def metadata_files_to_delete(old: TableMetadata, new: TableMetadata) -> list[str]:
    """Previous metadata files that fell out of the log, when the table asks for their deletion.

    Java's ``CatalogUtil.deleteRemovedMetadataFiles``: only when
    ``write.metadata.delete-after-commit.enabled`` is true (default false) in the new metadata.
    """
    if new.properties.get(DELETE_AFTER_COMMIT, "false").strip().lower() != "true":
        return []
    kept = {entry.metadata_file for entry in new.metadata_log}
    dropped = [entry.metadata_file for entry in old.metadata_log if entry.metadata_file not in kept]
    return list(dict.fromkeys(dropped))


def added_manifest_lists(updates: list[TableUpdate]) -> list[str]:
    """The manifest lists of the snapshots a commit's ``add-snapshot`` updates add (read from the
    parsed updates: no walk over the table's history).

    The service holds each to the table's own locations (``files_after_commit``): scan planning,
    the console's preview and maintenance read manifest lists on the server, and signing and vended
    credentials cover only the table's location, so one elsewhere names an object no client of
    this table was meant to reach (another table's, or a file of the server's own disk).
    """
    return [update.snapshot.manifest_list for update in updates if isinstance(update, AddSnapshotUpdate)]
