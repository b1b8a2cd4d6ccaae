"""The console's data preview: the first rows of a table's snapshot, read with PyIceberg.

Object I/O, so it lives here: the metadata the catalog holds is parsed by PyIceberg and a scan
limited to ``limit`` rows reads the data files from the warehouse's store with Growler's own
keys (the caller's right to read was checked by the service, app/previews.py). Values leave as
short texts, and the whole answer is bounded in bytes, so a wide or binary table cannot make
a page large.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.ground.settings import S3Settings

MAX_CELL_CHARS = 200


@dataclass(frozen=True)
class PreviewRows:
    columns: list[str]
    rows: list[list[str]]
    truncated: bool  # fewer rows than read: the byte bound was reached


def read_preview(
    metadata_json: str,
    metadata_location: str,
    s3: S3Settings,
    snapshot_id: int | None,
    limit: int,
    max_bytes: int,
) -> PreviewRows:
    from pyiceberg.catalog.noop import NoopCatalog
    from pyiceberg.io import load_file_io
    from pyiceberg.table import Table
    from pyiceberg.table.metadata import TableMetadataUtil

    metadata = TableMetadataUtil.parse_raw(metadata_json)
    properties = {
        "s3.region": s3.region,
        "s3.path-style-access": str(s3.path_style).lower(),
        "s3.connect-timeout": str(s3.timeout_s),
        "s3.request-timeout": str(max(s3.timeout_s, 10.0)),
    }
    if s3.endpoint:
        properties["s3.endpoint"] = s3.endpoint
    if s3.access_key and s3.secret_key:
        properties["s3.access-key-id"] = s3.access_key
        properties["s3.secret-access-key"] = s3.secret_key
    io = load_file_io(properties, metadata_location)
    table = Table(("preview",), metadata, metadata_location, io, NoopCatalog("preview"))
    arrow = table.scan(snapshot_id=snapshot_id, limit=limit).to_arrow()
    columns = list(arrow.column_names)
    rows: list[list[str]] = []
    size = 0
    for record in arrow.slice(0, limit).to_pylist():
        row = [_text(record[name]) for name in columns]
        size += sum(len(cell) for cell in row)
        if size > max_bytes:
            return PreviewRows(columns, rows, True)
        rows.append(row)
    return PreviewRows(columns, rows, False)


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bytes):
        text = value[: MAX_CELL_CHARS // 2].hex()
    else:
        text = str(value)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"
