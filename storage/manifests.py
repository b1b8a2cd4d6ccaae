"""Manifest lists and manifests for scan planning, read through the catalog's object store.

PyIceberg's manifest readers take a ``FileIO``; ``ObjectStoreFileIO`` is a read-only one over
Growler's own object store, so planning reads storage the same way (credentials, errors mapped
to 503, sizes bounded) as everything else. It reads only under the warehouse's allowed roots: a
manifest list path comes from metadata a client committed, and must not make the server read
arbitrary files. Manifests and manifest lists are immutable once written, so what was read is
cached by path in a bounded LRU.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.manifest import ManifestEntry, ManifestFile, read_manifest_list

from app.ground.errors import BadRequest
from app.ground.locations import InvalidLocation, Location, is_allowed
from app.ground.lru import LruCache
from storage.objects import ObjectStore

# A manifest or manifest list larger than this is refused rather than held in memory.
MAX_MANIFEST_BYTES = 256 * 1024 * 1024


class _BytesInput(InputFile):
    def __init__(self, location: str, read: Callable[[], bytes]) -> None:
        super().__init__(location)
        self._read = read
        self._data: bytes | None = None

    def _bytes(self) -> bytes:
        if self._data is None:
            self._data = self._read()
        return self._data

    def __len__(self) -> int:
        return len(self._bytes())

    def exists(self) -> bool:
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return io.BytesIO(self._bytes())


class ObjectStoreFileIO(FileIO):
    """Read-only FileIO over the catalog's object store, confined to ``roots``."""

    def __init__(self, objects: ObjectStore, roots: list[Location]) -> None:
        super().__init__({})
        self.objects = objects
        self.roots = roots

    def new_input(self, location: str) -> InputFile:
        try:
            parsed = Location.parse(location, "manifest location")
        except InvalidLocation as exc:
            raise BadRequest(f"Cannot plan the scan: {exc}") from exc
        if not is_allowed(parsed, self.roots):
            raise BadRequest(f"Cannot plan the scan: {location!r} is outside the warehouse's allowed locations")
        return _BytesInput(location, lambda: self.objects.read(parsed, MAX_MANIFEST_BYTES))

    def new_output(self, location: str) -> OutputFile:
        raise NotImplementedError("planning never writes")

    def delete(self, location: str | InputFile | OutputFile) -> None:
        raise NotImplementedError("planning never deletes")


class _BufferedOutput(OutputFile):
    """Bytes gathered in memory, written once on close with ``write_new`` (never overwriting)."""

    def __init__(self, location: str, parsed: Location, objects: ObjectStore) -> None:
        super().__init__(location)
        self.parsed = parsed
        self.objects = objects
        self.length: int | None = None

    def __len__(self) -> int:
        if self.length is None:
            raise NotImplementedError("the length is known once written")
        return self.length

    def exists(self) -> bool:
        return self.objects.exists(self.parsed)

    def to_input_file(self) -> InputFile:
        return _BytesInput(self.location, lambda: self.objects.read(self.parsed, MAX_MANIFEST_BYTES))

    def create(self, overwrite: bool = False) -> OutputStream:
        output = self

        class Stream(io.BytesIO):
            def close(self) -> None:
                if not self.closed:
                    data = self.getvalue()
                    output.objects.write_new(output.parsed, data, "application/octet-stream")
                    output.length = len(data)
                super().close()

        return Stream()


class WritingObjectStoreFileIO(ObjectStoreFileIO):
    """Reads as ``ObjectStoreFileIO``; writes new objects, and only under ``write_root`` (a table's
    metadata directory: maintenance writing manifests)."""

    def __init__(self, objects: ObjectStore, roots: list[Location], write_root: Location) -> None:
        super().__init__(objects, roots)
        self.write_root = write_root

    def new_output(self, location: str) -> OutputFile:
        parsed = Location.parse(location, "manifest location")
        if not parsed.is_within(self.write_root) or parsed == self.write_root:
            raise BadRequest(f"{location!r} is outside {self.write_root.uri}")
        return _BufferedOutput(location, parsed, self.objects)


class ManifestReader:
    """Manifest lists and live manifest entries, cached by path (both are immutable)."""

    def __init__(self, objects: ObjectStore, capacity: int = 512) -> None:
        self.objects = objects
        self._lists: LruCache[str, tuple[ManifestFile, ...]] = LruCache(max(1, capacity // 4))
        self._entries: LruCache[str, list[ManifestEntry]] = LruCache(capacity)
        self.reads = 0  # objects read from storage (the tests see the cache work)

    def manifests(self, manifest_list: str, roots: list[Location]) -> tuple[ManifestFile, ...]:
        cached = self._lists.get(manifest_list)
        if cached is None:
            self.reads += 1
            cached = tuple(read_manifest_list(ObjectStoreFileIO(self.objects, roots).new_input(manifest_list)))
            self._lists.put(manifest_list, cached)
        return cached

    def entries(self, manifest: ManifestFile, roots: list[Location]) -> list[ManifestEntry]:
        """Live (not deleted) entries, with sequence numbers and snapshot ids inherited.

        What a manifest's entries inherit (its sequence number, the snapshot that added it) is
        fixed when it is first committed, so the path is key enough.
        """
        cached = self._entries.get(manifest.manifest_path)
        if cached is None:
            self.reads += 1
            cached = manifest.fetch_manifest_entry(ObjectStoreFileIO(self.objects, roots), discard_deleted=True)
            self._entries.put(manifest.manifest_path, cached)
        return cached


class BoundManifestReader:
    """A ``ManifestReader`` confined to one warehouse's roots (the planner's ``ManifestSource``)."""

    def __init__(self, reader: ManifestReader, roots: list[Location]) -> None:
        self.reader = reader
        self.roots = roots

    def manifests(self, manifest_list: str) -> tuple[ManifestFile, ...]:
        return self.reader.manifests(manifest_list, self.roots)

    def entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        return self.reader.entries(manifest, self.roots)
