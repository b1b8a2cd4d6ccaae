"""View metadata documents: the parts validated one by one, a stored or registered document
parsed and checked, and the canonical metadata-file text (Java's key order)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pyiceberg.schema import Schema

from app.ground.errors import BadRequest, invalid_metadata
from app.rules.describe import describe_error
from app.rules.metadata_files import (
    COMPRESSION_CODEC,
    metadata_directory_of,
)
from app.rules.schema_fields import duplicate_field_ids

ViewMetadata = dict[str, Any]


FORMAT_VERSION = 1


LAST_ADDED = -1


VERSION_HISTORY_SIZE = "version.history.num-entries"


VERSION_HISTORY_SIZE_DEFAULT = 10


REPLACE_DROP_DIALECT_ALLOWED = "replace.drop-dialect.allowed"


_CODECS = ("none", "gzip")


# Java's ViewMetadataParser / ViewVersionParser key order, so our files read like everyone else's.
_METADATA_KEYS = (
    "view-uuid",
    "format-version",
    "location",
    "properties",
    "schemas",
    "current-version-id",
    "versions",
    "version-log",
)


_VERSION_KEYS = (
    "version-id",
    "timestamp-ms",
    "schema-id",
    "summary",
    "default-catalog",
    "default-namespace",
    "representations",
)


def int_value(raw: object, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"{what} must be an integer")
    return raw


def str_value(raw: object, what: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"{what} must be a non-empty string")
    return raw


def uuid_text(raw: object, what: str) -> str:
    text = str_value(raw, what)
    try:
        uuid.UUID(text)
    except ValueError:
        raise ValueError(f"{what} is not a UUID: {text!r}") from None
    return text


def str_map(raw: object, what: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise ValueError(f"{what} must be an object of strings")
    return dict(raw)


def str_list(raw: object, what: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise ValueError(f"{what} must be an array of strings")
    return list(raw)


def parse_schema(raw: object, what: str = "schema") -> dict[str, Any]:
    """A schema as PyIceberg reads it (types, names, identifier fields) with unique field ids."""
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object")
    try:
        schema = Schema.model_validate(raw)
    except TypeError as exc:  # PyIceberg raises TypeError for a default that does not fit its type
        raise ValueError(f"Invalid {what}: {exc}") from exc
    duplicates = duplicate_field_ids(schema)
    if duplicates:
        raise ValueError(f"Invalid {what}: duplicate field ids {duplicates}")
    return schema.model_dump(mode="json")


def _representation(raw: object, what: str, *, sql_only: bool) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object")
    kind = str_value(raw.get("type"), f"{what} type")
    if kind == "sql":
        sql, dialect = str_value(raw.get("sql"), f"{what} sql"), str_value(raw.get("dialect"), f"{what} dialect")
        return {"type": "sql", "sql": sql, "dialect": dialect}
    if sql_only:
        raise ValueError(f"Unsupported view representation type {kind!r}: only sql is accepted")
    return dict(raw)  # a newer writer's representation, kept as it is


def parse_version(raw: object, what: str, *, request: bool) -> dict[str, Any]:
    """A view version; from a request (``request``) it must hold SQL, one per dialect."""
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object")
    representations = raw.get("representations")
    if not isinstance(representations, list):
        raise ValueError(f"{what} representations must be an array")
    version: dict[str, Any] = {
        "version-id": int_value(raw.get("version-id"), f"{what} version-id"),
        "timestamp-ms": int_value(raw.get("timestamp-ms"), f"{what} timestamp-ms"),
        "schema-id": int_value(raw.get("schema-id"), f"{what} schema-id"),
        "summary": str_map(raw.get("summary"), f"{what} summary"),
        "default-namespace": str_list(raw.get("default-namespace"), f"{what} default-namespace"),
        "representations": [
            _representation(r, f"{what} representation #{i}", sql_only=request) for i, r in enumerate(representations)
        ],
    }
    if raw.get("default-catalog") is not None:
        version["default-catalog"] = str_value(raw["default-catalog"], f"{what} default-catalog")
    if request:
        _check_dialects(version)
    return {key: version[key] for key in _VERSION_KEYS if key in version}


def _check_dialects(version: dict[str, Any]) -> None:
    if not version["representations"]:
        raise ValueError("Invalid view version: it needs at least one SQL representation")
    seen: set[str] = set()
    for dialect in dialect_list(version):
        if dialect in seen:
            raise ValueError(f"Invalid view version: Cannot add multiple queries for dialect {dialect}")
        seen.add(dialect)


def dialect_list(version: dict[str, Any]) -> list[str]:
    return [r["dialect"].lower() for r in version["representations"] if r.get("type") == "sql"]


def _history_entry(raw: object, what: str) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object")
    return {
        "timestamp-ms": int_value(raw.get("timestamp-ms"), f"{what} timestamp-ms"),
        "version-id": int_value(raw.get("version-id"), f"{what} version-id"),
    }


def check_properties(properties: dict[str, str]) -> None:
    """Reject values that later steps would fail on (history size, metadata file name)."""
    history_size(properties)
    codec = properties.get(COMPRESSION_CODEC, "none").lower()
    if codec not in _CODECS:
        raise ValueError(f"Unsupported {COMPRESSION_CODEC}: {codec} (use none or gzip)")


def history_size(properties: dict[str, str]) -> int:
    raw = properties.get(VERSION_HISTORY_SIZE)
    if raw is None:
        return VERSION_HISTORY_SIZE_DEFAULT
    try:
        size = int(raw)
    except ValueError:
        raise ValueError(f"{VERSION_HISTORY_SIZE} must be an integer: {raw}") from None
    if size <= 0:
        raise ValueError(f"{VERSION_HISTORY_SIZE} must be positive but was {size}")
    return size


def parse_view_metadata(text: str | bytes) -> ViewMetadata:
    """Parse a view metadata file (registerView, stored documents); BadRequest when not valid."""
    try:
        data = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise BadRequest(f"Not valid view metadata: {exc}") from exc
    try:
        return _metadata_from_dict(data)
    except ValueError as exc:
        raise invalid_metadata(f"Not valid view metadata: {describe_error(exc)}", exc) from exc


def _metadata_from_dict(data: object) -> ViewMetadata:
    if not isinstance(data, dict):
        raise ValueError("expected a JSON object")
    if data.get("format-version") != FORMAT_VERSION:
        raise ValueError(f"unsupported format-version {data.get('format-version')!r} (supported: 1)")
    schemas, versions, log = data.get("schemas"), data.get("versions"), data.get("version-log")
    if not isinstance(schemas, list) or not schemas:
        raise ValueError("schemas must be a non-empty array")
    if not isinstance(versions, list) or not versions:
        raise ValueError("versions must be a non-empty array")
    if not isinstance(log, list):
        raise ValueError("version-log must be an array")
    metadata: ViewMetadata = {
        "view-uuid": uuid_text(data.get("view-uuid"), "view-uuid"),
        "format-version": FORMAT_VERSION,
        "location": str_value(data.get("location"), "location"),
        "properties": str_map(data.get("properties", {}), "properties"),
        "schemas": [parse_schema(s, f"schema #{i}") for i, s in enumerate(schemas)],
        "current-version-id": int_value(data.get("current-version-id"), "current-version-id"),
        "versions": [parse_version(v, f"version #{i}", request=False) for i, v in enumerate(versions)],
        "version-log": [_history_entry(e, f"version-log entry #{i}") for i, e in enumerate(log)],
    }
    _check_consistent(metadata)
    return metadata


def _check_consistent(metadata: ViewMetadata) -> None:
    schema_ids = [s["schema-id"] for s in metadata["schemas"]]
    version_ids = [v["version-id"] for v in metadata["versions"]]
    if len(set(schema_ids)) != len(schema_ids):
        raise ValueError(f"duplicate schema ids {schema_ids}")
    if len(set(version_ids)) != len(version_ids):
        raise ValueError(f"duplicate version ids {version_ids}")
    for version in metadata["versions"]:
        if version["schema-id"] not in schema_ids:
            raise ValueError(f"version {version['version-id']} uses unknown schema {version['schema-id']}")
    if metadata["current-version-id"] not in version_ids:
        raise ValueError(f"current version {metadata['current-version-id']} is not among the versions")


def to_json(metadata: ViewMetadata) -> str:
    """The canonical metadata-file JSON: spec field names, Java's key order."""
    return json.dumps(ordered(metadata), separators=(",", ":"))


def ordered(metadata: ViewMetadata) -> ViewMetadata:
    ordered = {key: metadata[key] for key in _METADATA_KEYS if key in metadata}
    ordered["versions"] = [{k: v[k] for k in _VERSION_KEYS if k in v} | v for v in metadata["versions"]]
    return ordered


def current_version(metadata: ViewMetadata) -> dict[str, Any]:
    return next(v for v in metadata["versions"] if v["version-id"] == metadata["current-version-id"])


def metadata_directory(metadata: ViewMetadata) -> str:
    """Where metadata files go: ``write.metadata.path``, else ``<location>/metadata`` (Java's)."""
    return metadata_directory_of(metadata["location"], metadata.get("properties", {}))
