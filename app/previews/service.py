"""The console's data preview (issue 38): a table's first rows, under the caller's ``read``.

The same rule as loadTable decides (READ on the table; a table the caller cannot see is the
404 the API gives), then the stored metadata is read from the table's row and the rows through
storage/previews.py, bounded in rows and bytes. The preview reads with Growler's keys,
which reach further than the caller's: only the table's own files are opened
(``table_rules.table_files``: under the folders it owns, the definition commits, claims, signing
and every server-side reader share), and
a snapshot naming any other file is refused (``ForeignFile``, a 400 the console shows as a page).

Read restrictions (issue 51): the console is Growler reading on the caller's behalf, so it
applies them itself, to a trusted engine and anyone else alike (app/previews/restricted.py: rows
where the filter holds, hidden columns left out, the others' actions applied). It therefore reads
the row without loadTable's storage gate (``restrictions_for_storage``'s 403 is about handing
metadata and storage access to an engine that would not apply them; the preview hands out
neither).
"""

from __future__ import annotations

import secrets

from app.ground.text import UNIT_SEPARATOR
from app.rules import table as table_rules
from app.rules.privileges import Kind, Securable
from app.tables.service import TableService
from storage.previews import PreviewRows, read_preview

PREVIEW_ROWS = 50
PREVIEW_BYTES = 256 * 1024
SALT_BYTES = 16  # sha-256-query-local's salt, drawn afresh for each preview


class PreviewService:
    def __init__(self, tables: TableService) -> None:
        self.tables = tables

    def preview(
        self, prefix: str, namespace: tuple[str, ...], name: str, snapshot_id: int | None = None
    ) -> PreviewRows:
        params = {"prefix": prefix, "namespace": UNIT_SEPARATOR.join(namespace), "table": name}
        self.tables.authorizer.authorize("loadTable", params)  # READ on the table, as loadTable
        warehouse = self.tables.warehouses.get(prefix)
        row = self.tables.entries.require_entry(warehouse, namespace, name)
        metadata = self.tables.parsed.parse(row.metadata_location, row.metadata)
        securable = Securable.of_entry(Kind.TABLE, prefix, namespace, name)
        restrictions = self.tables.authorizer.grants().restrictions_on(securable)
        restriction = None
        if restrictions is not None:
            # Arrow work, imported where it is used: a worker does not load pyarrow at startup
            # (tests/api/test_worker_imports.py); the preview's read loads it anyway
            from app.previews.restricted import RestrictedRows

            restriction = RestrictedRows(restrictions, secrets.token_bytes(SALT_BYTES))
        return read_preview(
            row.metadata,
            row.metadata_location,
            self.tables.warehouses.s3_settings(warehouse),
            table_rules.table_files(metadata, row.metadata_location),
            snapshot_id,
            PREVIEW_ROWS,
            PREVIEW_BYTES,
            restriction,
        )
