"""The console's data preview: the first rows of a table's snapshot, read with PyIceberg.

Object I/O, so it lives here: the metadata the catalog holds is parsed by PyIceberg and a scan
limited to ``limit`` rows reads the data files from the warehouse's store with Growler's own
keys (the caller's right to read was checked by the service, app/previews/service.py). Growler's keys
reach further than the caller's, so every file the scan opens must be the table's own
(``TableFiles``): the manifest list, each manifest, each data and delete file is checked before
it is read, and one outside the table's locations refuses the preview (``ForeignFile``) with
nothing of it shown. A file the snapshot needs that is missing, or data files PyIceberg cannot
read as the table's schema (Parquet written without Iceberg field ids and no name mapping), is
an ``UnprocessableEntity`` saying so, which the console shows as a page. Values leave as short
texts, and the whole answer is bounded in bytes, so a wide or binary table cannot make a page
large.

A caller with read restrictions (``RowRestriction``, built by the service from the rules: storage
knows none of them) is read for as an engine would: the row filter goes into PyIceberg's scan, so
files that cannot hold an allowed row are skipped and the row limit counts allowed rows only
(PyIceberg 0.12's Arrow reader filters each file's rows exactly with it, not only its row groups),
and the rows read are then handed to the restriction, which filters them again and leaves out or
transforms the restricted columns before any value becomes text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pyiceberg.io import FileIO, InputFile, OutputFile

from app.ground.errors import UnprocessableEntity
from app.ground.locations import TableFiles
from app.ground.settings import S3Settings

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.schema import Schema

MAX_CELL_CHARS = 200
DOING = "Cannot preview the table"
NAME_MAPPING = "schema.name-mapping.default"


class RowRestriction(Protocol):
    """What a restricted caller may see of a table's rows (app/previews/restricted.py)."""

    def row_filter(self, schema: Schema) -> BooleanExpression:
        """The rows it may see, over ``schema`` (the table's current one, which PyIceberg's scan binds to)."""
        ...

    def apply(self, rows: pa.Table, schema: Schema) -> pa.Table:
        """``rows``, read as ``schema``, as the caller may see them (filtered, columns cut)."""
        ...


@dataclass(frozen=True)
class PreviewRows:
    columns: list[str]
    rows: list[list[str]]
    truncated: bool  # fewer rows than read: the byte bound was reached


class OwnFilesIO(FileIO):
    """A FileIO that opens only the table's own files (the last line: each path the scan reads
    was checked before with a name for what it is)."""

    def __init__(self, inner: FileIO, files: TableFiles) -> None:
        super().__init__(inner.properties)
        self.inner = inner
        self.files = files

    def new_input(self, location: str) -> InputFile:
        self.files.require(location, "file", DOING)
        return self.inner.new_input(location)

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError("the preview never writes")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise NotImplementedError("the preview never deletes")


def read_preview(
    metadata_json: str,
    metadata_location: str,
    s3: S3Settings,
    files: TableFiles,
    snapshot_id: int | None,
    limit: int,
    max_bytes: int,
    restriction: RowRestriction | None = None,
) -> PreviewRows:
    from pyiceberg.catalog.noop import NoopCatalog
    from pyiceberg.io import load_file_io
    from pyiceberg.io.pyarrow import ArrowScan
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
    io = OwnFilesIO(load_file_io(properties, metadata_location), files)
    table = Table(("preview",), metadata, metadata_location, io, NoopCatalog("preview"))
    scan = table.scan(snapshot_id=snapshot_id, limit=limit)
    if restriction is not None:
        scan = scan.filter(restriction.row_filter(metadata.schema()))
    snapshot = scan.snapshot()
    tasks: list[Any] = []
    if snapshot is not None:
        tasks = _own_tasks(scan, snapshot, files)
    try:
        projection = scan.projection()
        arrow = ArrowScan(metadata, io, projection, scan.row_filter, scan.case_sensitive, limit).to_table(tasks)
    except FileNotFoundError as exc:
        raise UnprocessableEntity(
            f"{DOING}: a data or delete file of snapshot {snapshot.snapshot_id if snapshot else ''} does not exist "
            f"({_reason(exc)}); it was deleted from storage while the table still names it"
        ) from None
    except ValueError as exc:
        raise UnprocessableEntity(_unreadable(exc)) from None
    if restriction is not None:
        arrow = restriction.apply(arrow, projection)
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


def _own_tasks(scan: Any, snapshot: Any, files: TableFiles) -> list[Any]:
    """The scan's file tasks, every manifest list, manifest, data and delete file on the way
    checked to be the table's own before it is read or its rows shown."""
    files.require(snapshot.manifest_list, "manifest list", DOING)
    try:
        for manifest in snapshot.manifests(scan.io):
            files.require(manifest.manifest_path, "manifest", DOING)
    except FileNotFoundError:
        raise UnprocessableEntity(
            f"{DOING}: the manifest list of snapshot {snapshot.snapshot_id}, {snapshot.manifest_list}, does not exist "
            "(deleted from storage while the table still names it). The table's other snapshots may still be "
            "readable; a client that owns the table can roll back to one of them, or remove this one"
        ) from None
    try:
        tasks = list(scan.plan_files())
    except FileNotFoundError as exc:
        raise UnprocessableEntity(
            f"{DOING}: a manifest of snapshot {snapshot.snapshot_id} does not exist ({_reason(exc)}); it was "
            "deleted from storage while the table still names it"
        ) from None
    for task in tasks:
        files.require(task.file.file_path, "data file", DOING)
        for delete in task.delete_files:
            files.require(delete.file_path, "delete file", DOING)
    return tasks


def _reason(exc: BaseException) -> str:
    return str(exc)[:300]


def _unreadable(exc: ValueError) -> str:
    """Why the data files could not be read as the table's schema, and what to do."""
    if "field-ids" in str(exc) or "field ids" in str(exc):
        return (
            f"{DOING}: its Parquet data files carry no Iceberg field ids (as files written outside Iceberg, "
            f"then imported, often do) and the table has no name mapping ({NAME_MAPPING}) to read them by "
            "column name. Set that table property to the table's name mapping (PyIceberg's add_files and "
            "Iceberg's migrate and add_files procedures set it) and the preview reads them"
        )
    return f"{DOING}: its data files cannot be read as the table's schema: {_reason(exc)}"


def _text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bytes):
        text = value[: MAX_CELL_CHARS // 2].hex()
    else:
        text = str(value)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"
