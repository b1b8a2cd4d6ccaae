"""Metadata files of tables and views alike: their names (version, uuid, codec suffix), where they
go (``write.metadata.path``), and their bytes (gzip when the name says so).

Java's ``BaseMetastoreTableOperations`` / ``BaseViewOperations`` name the files the same way for
both kinds, so one set of functions serves both.
"""

from __future__ import annotations

import gzip
import re

from app.ground.errors import BadRequest
from app.ground.limits import inflate

COMPRESSION_CODEC = "write.metadata.compression-codec"
METADATA_PATH = "write.metadata.path"
FILE_SUFFIX_BY_CODEC = {"none": ".metadata.json", "gzip": ".gz.metadata.json"}
GZIP_MAGIC = b"\x1f\x8b"


def metadata_file_name(version: int, properties: dict[str, str], file_uuid: str) -> str:
    """``00001-<uuid>.metadata.json`` or, with ``write.metadata.compression-codec=gzip``,
    ``00001-<uuid>.gz.metadata.json`` (Java's ``newTableMetadataFilePath``). The caller gzips."""
    codec = properties.get(COMPRESSION_CODEC, "none").lower()
    if codec not in FILE_SUFFIX_BY_CODEC:
        raise BadRequest(f"Unsupported {COMPRESSION_CODEC}: {codec} (use none or gzip)")
    return f"{version:05d}-{file_uuid}{FILE_SUFFIX_BY_CODEC[codec]}"


def parse_metadata_version(location: str) -> int:
    """The version a metadata file name starts with (``.../00042-<uuid>...`` -> 42), else -1."""
    match = re.match(r"(\d+)-", location.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else -1


def next_metadata_version(base_location: str | None) -> int:
    """The version of the next metadata file, as Java's ``BaseMetastoreTableOperations``.

    A new table is written as version 0 (``00000-...``); each commit writes the current file's
    version + 1. A current file whose name carries no version (registered ``v3.metadata.json``)
    counts as -1, so the next is 0 again; the uuid keeps the name unique.
    """
    if base_location is None:
        return 0
    return parse_metadata_version(base_location) + 1


def metadata_directory_of(location: str, properties: dict[str, str]) -> str:
    """Where metadata files go: ``write.metadata.path``, else ``<location>/metadata`` (Java's)."""
    configured = properties.get(METADATA_PATH)
    if configured:
        return configured.rstrip("/")
    return f"{location.rstrip('/')}/metadata"


def metadata_file_location(directory: str, version: int, properties: dict[str, str], file_uuid: str) -> str:
    """The full location of a new metadata file in ``directory``."""
    return f"{directory.rstrip('/')}/{metadata_file_name(version, properties, file_uuid)}"


def encode_metadata(text: str, location: str) -> bytes:
    """The bytes to write: gzip (reproducible, no mtime) when the file name says so."""
    data = text.encode("utf-8")
    return gzip.compress(data, mtime=0) if location.endswith(".gz.metadata.json") else data


def decode_metadata(data: bytes, max_inflated_bytes: int | None = None) -> str:
    """The text of a metadata file, gzipped or not (whatever its name), inflated within a bound."""
    if data[:2] == GZIP_MAGIC:
        data = gzip.decompress(data) if max_inflated_bytes is None else inflate(data, max_inflated_bytes)
    return data.decode("utf-8")
