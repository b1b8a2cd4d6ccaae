"""A move's copy of a table's files (app/table_moves/copying.py): the paths mapped into the copy's
location, and position delete files rewritten to name the copied data files."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.typedef import Record

from app.ground.errors import BadRequest
from app.ground.locations import Location
from app.table_moves.copying import DATA_FILE_FIELDS, POSITION_PATH_FIELD, PathMap, _position_deletes, _replaced

REMOTE = "s3://lake/remote/db/t"
COPY = "s3://home/wh/landed/t-0123"


class Store:
    """Objects by location, as storage/objects.py reads and writes them."""

    def __init__(self, objects: dict[str, bytes] | None = None) -> None:
        self.objects = dict(objects or {})

    def read(self, location: Location, max_bytes: int | None = None) -> bytes:
        return self.objects[location.uri]

    def write_new(self, location: Location, data: bytes, content_type: str = "") -> None:
        assert location.uri not in self.objects
        self.objects[location.uri] = data


def test_paths_map_folder_by_folder_and_nothing_outside_is_copied():
    paths = PathMap([REMOTE, "s3://lake/meta/t", "s3://lake/data/t"], COPY)
    assert paths.map(f"{REMOTE}/data/a.parquet") == f"{COPY}/data/a.parquet"
    assert paths.map("s3://lake/meta/t/snap-1.avro") == f"{COPY}/metadata/snap-1.avro"
    assert paths.map("s3://lake/data/t/x/b.parquet") == f"{COPY}/data/x/b.parquet"
    for outside in ("s3://lake/remote/db/t2/data/a.parquet", "s3://lake/remote/db/other.parquet", REMOTE):
        with pytest.raises(BadRequest, match="outside the table's folders"):
            paths.map(outside)
    # the default layout: the metadata directory inside the location maps to itself
    nested = PathMap([REMOTE, f"{REMOTE}/metadata"], COPY)
    assert nested.map(f"{REMOTE}/metadata/v1.json") == f"{COPY}/metadata/v1.json"


def test_position_deletes_are_rewritten_to_name_the_copied_data_files():
    schema = pa.schema(
        [
            pa.field("file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": b"2147483546"}),
            pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": b"2147483545"}),
        ]
    )
    rows = pa.table(
        {"file_path": [f"{REMOTE}/data/a.parquet", f"{REMOTE}/data/b.parquet"], "pos": [3, 7]}, schema=schema
    )
    out = io.BytesIO()
    pq.write_table(rows, out)
    origin = f"{REMOTE}/data/deletes-1.parquet"
    source, target = Store({origin: out.getvalue()}), Store()
    deletes = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=origin,
        file_format=FileFormat.PARQUET,
        partition=Record(),
        record_count=2,
        file_size_in_bytes=len(out.getvalue()),
        lower_bounds={POSITION_PATH_FIELD: f"{REMOTE}/data/a.parquet".encode(), 2147483545: b"\x03"},
        upper_bounds={POSITION_PATH_FIELD: f"{REMOTE}/data/b.parquet".encode()},
    )
    paths = PathMap([REMOTE, f"{REMOTE}/metadata"], COPY)
    copied = f"{COPY}/data/deletes-1.parquet"

    changed = _position_deletes(deletes, copied, paths, source, target)  # type: ignore[arg-type]

    written = pq.read_table(io.BytesIO(target.objects[copied]))
    assert written.column("file_path").to_pylist() == [f"{COPY}/data/a.parquet", f"{COPY}/data/b.parquet"]
    assert written.column("pos").to_pylist() == [3, 7]
    assert written.schema.field("file_path").metadata[b"PARQUET:field_id"] == b"2147483546"  # Iceberg's ids kept
    assert changed["file_size_in_bytes"] == len(target.objects[copied])
    assert changed["lower_bounds"] == {POSITION_PATH_FIELD: f"{COPY}/data/a.parquet".encode(), 2147483545: b"\x03"}
    assert changed["upper_bounds"] == {POSITION_PATH_FIELD: f"{COPY}/data/b.parquet".encode()}
    # the entry's copy is another record: the reader's (cached) one is unchanged
    moved = _replaced(deletes, DATA_FILE_FIELDS, file_path=copied, **changed)
    assert (moved.file_path, deletes.file_path) == (copied, origin)
    assert moved.lower_bounds[POSITION_PATH_FIELD] == f"{COPY}/data/a.parquet".encode()
