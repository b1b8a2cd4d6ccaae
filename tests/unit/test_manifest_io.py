"""Planning reads manifests only under the warehouse's allowed roots (no I/O for a refusal)."""

from __future__ import annotations

import pytest

from app.ground.errors import BadRequest
from app.ground.locations import Location
from storage.manifests import ObjectStoreFileIO


class RecordingStore:
    def __init__(self) -> None:
        self.read_locations: list[str] = []

    def read(self, location: Location, max_bytes: int | None = None) -> bytes:
        self.read_locations.append(location.uri)
        return b"avro bytes"


ROOTS = [Location.parse("s3://bucket/warehouse")]


@pytest.mark.parametrize(
    "path",
    [
        "s3://bucket/other/snap-1.avro",
        "s3://elsewhere/warehouse/snap-1.avro",
        "file:///etc/passwd",
        "s3://bucket/warehouse/../other/snap-1.avro",
        "not a location",
    ],
)
def test_locations_outside_the_roots_are_refused_before_any_read(path):
    store = RecordingStore()
    with pytest.raises(BadRequest):
        ObjectStoreFileIO(store, ROOTS).new_input(path).open().read()
    assert store.read_locations == []


def test_a_manifest_inside_is_read_through_the_store_once():
    store = RecordingStore()
    input_file = ObjectStoreFileIO(store, ROOTS).new_input("s3://bucket/warehouse/db/t/metadata/m0.avro")
    assert store.read_locations == []  # lazily
    assert input_file.open().read() == b"avro bytes"
    assert len(input_file) == len(b"avro bytes")
    assert store.read_locations == ["s3://bucket/warehouse/db/t/metadata/m0.avro"]
