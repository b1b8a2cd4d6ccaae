"""The files of one table: the folders it owns (``table_roots``: its location, metadata directory
and data path), where its metadata files go (``write.metadata.path``), the manifest lists a
commit adds, and which previous ones a commit may delete
(``write.metadata.delete-after-commit.enabled``)."""

from __future__ import annotations

from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.update import AddSnapshotUpdate

from app.rules.metadata_files import metadata_directory_of
from app.rules.table.models import DELETE_AFTER_COMMIT, TableUpdate

# Where data files go, in Java's order (``LocationProviders``): the first set wins, else
# ``<location>/data``. The last two are deprecated in Java but still honoured by its writers.
DATA_PATH_PROPERTIES = ("write.data.path", "write.object-storage.path", "write.folder-storage.path")


def metadata_directory(metadata: TableMetadata) -> str:
    """Where metadata files go: ``write.metadata.path``, else ``<location>/metadata``."""
    return metadata_directory_of(metadata.location, metadata.properties)


def data_path(properties: dict[str, str]) -> str | None:
    """The data path the table's properties set (``DATA_PATH_PROPERTIES``), else None (data files go
    under ``<location>/data``, inside the location)."""
    for key in DATA_PATH_PROPERTIES:
        value = properties.get(key)
        if value:
            return value.rstrip("/")
    return None


def table_roots(metadata: TableMetadata, metadata_location: str | None = None) -> list[str]:
    """The folders a table owns, and the only ones: its location, its metadata directory (that of
    ``metadata_location``, its current metadata file, when given; else where the next one goes)
    and its data path when its properties set one. Everything its clients and Growler write for it
    lies in one of them (data files, manifests, metadata files).

    The one notion of a table's places: a create, register, stage or moving commit claims exactly
    these (storage/placement.py: no other entry may overlap them) and each must lie in its
    namespace's home; signing and STS serve exactly these (``stored_roots`` of its row)."""
    directory = metadata_location.rsplit("/", 1)[0] if metadata_location else metadata_directory(metadata)
    return stored_roots(metadata.location, directory, data_path(metadata.properties or {}))


def stored_roots(location: str, metadata_directory: str, data_path: str | None = None) -> list[str]:
    """``table_roots`` from what a table's row (or a stage's) keeps: its location, metadata
    directory and data path (None when unset); in that order, each once."""
    roots = [location.rstrip("/"), metadata_directory.rstrip("/")]
    if data_path:
        roots.append(data_path.rstrip("/"))
    return list(dict.fromkeys(roots))


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
