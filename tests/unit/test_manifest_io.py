"""Planning and maintenance read manifests only inside the table's own locations (no I/O for a
refusal), and hand out no data or delete file outside them - whatever another table cached."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyiceberg.manifest import DataFileContent

from app.ground.errors import BadRequest
from app.ground.locations import ForeignFile, Location, TableFiles
from storage.manifests import BoundManifestReader, ManifestReader, ObjectStoreFileIO, require_own_entries


class RecordingStore:
    def __init__(self) -> None:
        self.read_locations: list[str] = []

    def read(self, location: Location, max_bytes: int | None = None) -> bytes:
        self.read_locations.append(location.uri)
        return b"avro bytes"


TABLE = TableFiles.of("s3://bucket/warehouse/db/t", "s3://bucket/warehouse/db/t/metadata")
OTHER = TableFiles.of("s3://bucket/warehouse/db/other", "s3://bucket/warehouse/db/other/metadata")


@pytest.mark.parametrize(
    "path",
    [
        "s3://bucket/warehouse/db/other/metadata/snap-1.avro",  # another table of the warehouse
        "s3://bucket/warehouse/db/t-2/metadata/snap-1.avro",  # a sibling sharing a prefix
        "s3://bucket/warehouse/db/t",  # the table's root itself is no file of it
        "s3://elsewhere/warehouse/db/t/snap-1.avro",
        "file:///etc/passwd",
        "s3://bucket/warehouse/db/t/../other/snap-1.avro",
        "not a location",
    ],
)
def test_locations_outside_the_table_are_refused_before_any_read(path):
    store = RecordingStore()
    with pytest.raises(ForeignFile) as refused:
        ObjectStoreFileIO(store, TABLE, "Cannot plan the scan").new_input(path).open().read()
    assert isinstance(refused.value, BadRequest) and refused.value.message.startswith("Cannot plan the scan: ")
    assert store.read_locations == []


def test_a_manifest_inside_is_read_through_the_store_once():
    store = RecordingStore()
    input_file = ObjectStoreFileIO(store, TABLE).new_input("s3://bucket/warehouse/db/t/metadata/m0.avro")
    assert store.read_locations == []  # lazily
    assert input_file.open().read() == b"avro bytes"
    assert len(input_file) == len(b"avro bytes")
    assert store.read_locations == ["s3://bucket/warehouse/db/t/metadata/m0.avro"]


def _entry(path: str, content: DataFileContent = DataFileContent.DATA) -> SimpleNamespace:
    return SimpleNamespace(data_file=SimpleNamespace(file_path=path, content=content))


def test_entries_naming_another_tables_files_are_refused_naming_the_file():
    io = ObjectStoreFileIO(RecordingStore(), TABLE, "Cannot plan the scan")
    require_own_entries(io, [_entry("s3://bucket/warehouse/db/t/data/a.parquet")])
    with pytest.raises(ForeignFile, match="data file 's3://bucket/warehouse/db/other/data/b.parquet'"):
        require_own_entries(io, [_entry("s3://bucket/warehouse/db/other/data/b.parquet")])
    with pytest.raises(ForeignFile, match="delete file 's3://stranger/d.parquet'"):
        require_own_entries(io, [_entry("s3://stranger/d.parquet", DataFileContent.POSITION_DELETES)])


def test_what_another_table_read_is_not_served_from_the_cache():
    """The cache is keyed by path; the table's own check comes before it."""
    reader = ManifestReader(RecordingStore())
    manifest_list = "s3://bucket/warehouse/db/other/metadata/snap-1.avro"
    reader._lists.put(manifest_list, ())  # as if the other table had planned it
    assert BoundManifestReader(reader, OTHER).manifests(manifest_list) == ()
    with pytest.raises(ForeignFile):
        BoundManifestReader(reader, TABLE).manifests(manifest_list)
    manifest = SimpleNamespace(manifest_path="s3://bucket/warehouse/db/other/metadata/m0.avro")
    reader._entries.put(manifest.manifest_path, [_entry("s3://bucket/warehouse/db/other/data/a.parquet")])
    assert len(BoundManifestReader(reader, OTHER).entries(manifest)) == 1
    with pytest.raises(ForeignFile):
        BoundManifestReader(reader, TABLE).entries(manifest)
    assert reader.reads == 0
