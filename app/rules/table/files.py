"""The files of one table: the folders it owns (``table_roots``: its location, metadata directory
and data path) - the one definition of its places, which placement claims, signing and STS serve,
commits hold manifest lists to and every server-side reader reads within (``table_files``,
``files_of_entry``) - where its metadata files go (``write.metadata.path``), the manifest lists a
commit adds, and which previous ones a commit may delete
(``write.metadata.delete-after-commit.enabled``)."""

from __future__ import annotations

from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.update import AddSnapshotUpdate

from app.ground.locations import TableFiles
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
    namespace's home; signing and STS serve exactly these (``stored_roots`` of its row); a
    commit's manifest lists and every file a server-side reader opens lie under them
    (``table_files``, ``files_of_entry``); a commit that changes them moves the table
    (``relocates``)."""
    directory = metadata_location.rsplit("/", 1)[0] if metadata_location else metadata_directory(metadata)
    return stored_roots(metadata.location, directory, data_path(metadata.properties or {}))


def stored_roots(location: str, metadata_directory: str, data_path: str | None = None) -> list[str]:
    """``table_roots`` from what a table's row (or a stage's) keeps: its location, metadata
    directory and data path (None when unset); in that order, each once."""
    roots = [location.rstrip("/"), metadata_directory.rstrip("/")]
    if data_path:
        roots.append(data_path.rstrip("/"))
    return list(dict.fromkeys(roots))


def relocates(old: TableMetadata, new: TableMetadata) -> bool:
    """Whether a commit moves where the table's files are or go: any of its ``table_roots`` (its
    location, its metadata directory, ``write.metadata.path``, or its data path). A protected
    table refuses it."""
    return table_roots(old) != table_roots(new)


def table_files(metadata: TableMetadata, metadata_location: str | None = None) -> TableFiles:
    """The table's own files, as readers check them: those under its ``table_roots``. Without
    ``metadata_location``: the places a table owns once a commit producing ``metadata`` lands (its
    possibly new location, the directory its next metadata file goes to, its data path) - what the
    commit claims when one of them moved."""
    return TableFiles.of(*table_roots(metadata, metadata_location))


def files_of_entry(location: str, metadata_location: str, data_path: str | None = None) -> TableFiles:
    """A stored table's own files, from its row: those under its ``stored_roots`` (its location,
    the directory of its current metadata file - a registered table's may lie outside the
    directory ``write.metadata.path`` names; its own directory is what it owns until it commits -
    and its data path), as storage/placement.py claimed them and signing and STS serve them."""
    return TableFiles.of(*stored_roots(location, metadata_location.rsplit("/", 1)[0], data_path))


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

    The service holds each to the table's own files (``table_files``): scan planning,
    the console's preview and maintenance read manifest lists on the server, and signing and vended
    credentials cover only the table's folders, so one elsewhere names an object no client of
    this table was meant to reach (another table's, or a file of the server's own disk).
    """
    return [update.snapshot.manifest_list for update in updates if isinstance(update, AddSnapshotUpdate)]
