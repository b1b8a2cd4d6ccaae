"""The console's data preview (issue 38): a table's first rows, under the caller's ``read``.

The same rule as loadTable decides (READ on the table; a table the caller cannot see is the
404 the API gives), then the stored metadata is read through the table service and the rows
through storage/previews.py, bounded in rows and bytes. The preview reads with Growler's keys,
which reach further than the caller's: only the table's own files are opened
(``table_rules.table_files``: under the folders it owns, the definition commits, claims, signing
and every server-side reader share), and
a snapshot naming any other file is refused (``ForeignFile``, a 400 the console shows as a page).
"""

from __future__ import annotations

from app.ground.text import UNIT_SEPARATOR
from app.rules import table as table_rules
from app.tables.service import LoadedTable, LoadTableRequest, TableService
from storage.previews import PreviewRows, read_preview

PREVIEW_ROWS = 50
PREVIEW_BYTES = 256 * 1024


class PreviewService:
    def __init__(self, tables: TableService) -> None:
        self.tables = tables

    def preview(
        self, prefix: str, namespace: tuple[str, ...], name: str, snapshot_id: int | None = None
    ) -> PreviewRows:
        params = {"prefix": prefix, "namespace": UNIT_SEPARATOR.join(namespace), "table": name}
        self.tables.authorizer.authorize("loadTable", params)  # READ on the table, as loadTable
        loaded = self.tables.load(LoadTableRequest(prefix, namespace, name))
        assert isinstance(loaded, LoadedTable)  # no If-None-Match: never NotModified
        warehouse = self.tables.warehouses.get(prefix)
        metadata_location = loaded.metadata_location or ""
        metadata = self.tables.parsed.parse(metadata_location, loaded.metadata)
        return read_preview(
            loaded.metadata,
            metadata_location,
            self.tables.warehouses.s3_settings(warehouse),
            table_rules.table_files(metadata, metadata_location),
            snapshot_id,
            PREVIEW_ROWS,
            PREVIEW_BYTES,
        )
