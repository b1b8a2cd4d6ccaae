"""Row types shared by the storage modules (kept apart so that they import no one but ground)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EntryRow:
    id: int
    kind: str
    uuid: str
    location: str
    metadata_location: str
    metadata: str
    data_path: str | None = None  # a table's write.data.path, when set (app/rules/table/files.py)
