"""Manifest lists and manifests for scan planning, read through the catalog's object store.

PyIceberg's manifest readers take a ``FileIO``; ``ObjectStoreFileIO`` is a read-only one over
Growler's own object store, so planning reads storage the same way (credentials, errors mapped
to 503, sizes bounded) as everything else. It reads only the table's own files
(``app.ground.locations.TableFiles``): a manifest list path comes from metadata a client
committed, and a manifest's path and the data and delete files it names from files a client
wrote, so none may make the server read - or hand out - another table's files or arbitrary ones.
Manifests and manifest lists are immutable once written, so what was read is cached by path in a
bounded LRU; the table's check comes before the cache (a path another table read is not the
caller's for that).
"""

from __future__ import annotations

import io
from collections.abc import Callable

from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.manifest import DataFileContent, ManifestEntry, ManifestFile, read_manifest_list

from app.ground.errors import BadRequest
from app.ground.locations import Location, TableFiles
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
    """Read-only FileIO over the catalog's object store, confined to one table's own ``files``
    (``ForeignFile``, a 400, for anything else; ``doing`` opens its message)."""

    def __init__(self, objects: ObjectStore, files: TableFiles, doing: str = "Cannot read the table") -> None:
        super().__init__({})
        self.objects = objects
        self.files = files
        self.doing = doing

    def new_input(self, location: str) -> InputFile:
        parsed = self.files.require(location, "manifest or manifest list", self.doing)
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
    metadata directory: maintenance writing manifests; a moved table's copy, in another store)."""

    def __init__(
        self,
        objects: ObjectStore,
        files: TableFiles,
        write_root: Location,
        doing: str,
        write_objects: ObjectStore | None = None,
    ) -> None:
        super().__init__(objects, files, doing)
        self.write_root = write_root
        self.write_objects = write_objects or objects  # another store's (a moved table's copy) or the same

    def new_output(self, location: str) -> OutputFile:
        parsed = Location.parse(location, "manifest location")
        if not parsed.is_within(self.write_root) or parsed == self.write_root:
            raise BadRequest(f"{location!r} is outside {self.write_root.uri}")
        return _BufferedOutput(location, parsed, self.write_objects)


class ManifestReader:
    """Manifest lists and live manifest entries, cached by path (both are immutable)."""

    def __init__(self, objects: ObjectStore, capacity: int = 512) -> None:
        self.objects = objects
        self._lists: LruCache[str, tuple[ManifestFile, ...]] = LruCache(max(1, capacity // 4))
        self._entries: LruCache[str, list[ManifestEntry]] = LruCache(capacity)
        # (manifest, table roots) whose entries were all found the table's own: not parsed again
        self._owned: LruCache[tuple[str, tuple[Location, ...]], bool] = LruCache(capacity)
        self.reads = 0  # objects read from storage (the tests see the cache work)

    def manifests(self, manifest_list: str, io: ObjectStoreFileIO) -> tuple[ManifestFile, ...]:
        """The manifests of ``manifest_list``, each the table's own (``io``'s table); the list's
        own path is checked before the cache."""
        io.files.require(manifest_list, "manifest list", io.doing)
        cached = self._lists.get(manifest_list)
        if cached is None:
            self.reads += 1
            cached = tuple(read_manifest_list(io.new_input(manifest_list)))
            self._lists.put(manifest_list, cached)
        for manifest in cached:
            io.files.require(manifest.manifest_path, "manifest", io.doing)
        return cached

    def entries(self, manifest: ManifestFile, io: ObjectStoreFileIO) -> list[ManifestEntry]:
        """Live (not deleted) entries, with sequence numbers and snapshot ids inherited, each naming
        a data or delete file of ``io``'s table (else ``ForeignFile``: nothing of it is handed out).

        What a manifest's entries inherit (its sequence number, the snapshot that added it) is
        fixed when it is first committed, so the path is key enough.
        """
        io.files.require(manifest.manifest_path, "manifest", io.doing)
        cached = self._entries.get(manifest.manifest_path)
        if cached is None:
            self.reads += 1
            cached = manifest.fetch_manifest_entry(io, discard_deleted=True)
            self._entries.put(manifest.manifest_path, cached)
        owned = (manifest.manifest_path, io.files.roots)
        if self._owned.get(owned) is None:
            require_own_entries(io, cached)
            self._owned.put(owned, True)
        return cached


def require_own_entries(io: ObjectStoreFileIO, entries: list[ManifestEntry]) -> None:
    """Every data and delete file the entries name is the table's own (``ForeignFile`` otherwise)."""
    for entry in entries:
        data_file = entry.data_file
        what = "data file" if data_file.content == DataFileContent.DATA else "delete file"
        io.files.require(data_file.file_path, what, io.doing)


class BoundManifestReader:
    """A ``ManifestReader`` confined to one table's own files (the planner's ``ManifestSource``):
    no manifest list, manifest, data or delete file of another table is read or planned."""

    def __init__(self, reader: ManifestReader, files: TableFiles) -> None:
        self.reader = reader
        self.io = ObjectStoreFileIO(reader.objects, files, "Cannot plan the scan")

    def manifests(self, manifest_list: str) -> tuple[ManifestFile, ...]:
        return self.reader.manifests(manifest_list, self.io)

    def entries(self, manifest: ManifestFile) -> list[ManifestEntry]:
        return self.reader.entries(manifest, self.io)
