"""The files of one table's metadata: where they go (``write.metadata.path``), the manifest lists
a commit adds, and which previous ones a commit may delete
(``write.metadata.delete-after-commit.enabled``)."""

from __future__ import annotations

from typing import Any

from pyiceberg.table.metadata import (
    TableMetadata,
)

from app.rules.metadata_files import metadata_directory_of
from app.rules.table.models import DELETE_AFTER_COMMIT


def metadata_directory(metadata: TableMetadata) -> str:
    """Where metadata files go: ``write.metadata.path``, else ``<location>/metadata``."""
    return metadata_directory_of(metadata.location, metadata.properties)


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


def added_manifest_lists(updates: list[dict[str, Any]]) -> list[str]:
    """The manifest lists of the snapshots a commit's ``add-snapshot`` updates add (read from the
    updates, already parsed by ``commit``: no walk over the table's history).

    The service holds each to the warehouse's locations, as it does the table's location: scan
    planning reads manifest lists on the server, and signing and vended credentials cover only
    the warehouse's locations, so one elsewhere names an object no client of this table was meant
    to reach (or a file of the server's own disk).
    """
    found = []
    for update in updates:
        snapshot = update.get("snapshot") if update.get("action") == "add-snapshot" else None
        if isinstance(snapshot, dict) and isinstance(snapshot.get("manifest-list"), str):
            found.append(snapshot["manifest-list"])
    return found
