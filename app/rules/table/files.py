"""The files of one table's metadata: where they go (``write.metadata.path``), the manifest lists
a commit adds, and which previous ones a commit may delete
(``write.metadata.delete-after-commit.enabled``)."""

from __future__ import annotations

from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.update import AddSnapshotUpdate

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

    The service holds each to the warehouse's locations, as it does the table's location: scan
    planning reads manifest lists on the server, and signing and vended credentials cover only
    the warehouse's locations, so one elsewhere names an object no client of this table was meant
    to reach (or a file of the server's own disk).
    """
    return [update.snapshot.manifest_list for update in updates if isinstance(update, AddSnapshotUpdate)]
