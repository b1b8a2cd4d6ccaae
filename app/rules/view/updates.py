"""The Iceberg view-metadata rules: pure functions, no I/O.

What the catalog service calls to create view metadata, check a view commit's requirements,
apply its updates, and serialise the result. Like ``app.rules.table``: nothing here touches
the network, files, the database or the clock (time comes in as ``now_ms``).

The document is a plain ``dict`` in the spec's shape (``view-uuid``, ``versions``, ...): PyIceberg
0.12's view models (``pyiceberg.view.metadata``) read the wall clock for a missing timestamp and
drop representation types they do not know, so they are not used for the document itself;
PyIceberg's ``Schema`` validates every schema. The rules are those of Java's
``ViewMetadata.Builder`` (Iceberg 1.10/1.11):

* A view's first schema is schema 0 and its first version is version 1; the create request's
  ``view-version`` is rewritten to point at that schema.
* ``add-schema`` reuses the id of an identical schema (same columns and identifier fields), else
  takes the highest id + 1.
* ``add-view-version`` reuses the id of an equal version (equal ignoring ``version-id`` and
  ``timestamp-ms``), else takes ``max(requested id, highest id + 1)``. ``schema-id`` -1 means the
  schema added last in this commit. One SQL representation per dialect (case-insensitive).
* ``set-current-view-version`` -1 means the version added last in this commit. When the current
  version changes, the version log gains one entry, timed by the version when it was added in
  this commit and by ``now_ms`` otherwise.
* ``version.history.num-entries`` (default 10) caps ``versions``: the newest ids are kept, always
  with the current one and those added in this commit; the version log loses entries older than
  an expired version.
* A new current version must keep every dialect of the previous one, unless
  ``replace.drop-dialect.allowed`` is true.

Deliberately different from Java (each documented where it happens): -1 also accepts an add
that reused an existing schema or version id (as ``app.rules.table`` does); requests may only
carry ``sql`` representations and at least one (Java's server refuses other types on create
only, and a view without SQL is unusable); a view's uuid is validated as a UUID.

Errors: a requirement that does not hold raises ``CommitFailed`` (409) naming what was expected
and what was found; anything invalid raises ``BadRequest`` (400).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pyiceberg.schema import Schema
from pyiceberg.types import IcebergType, ListType, MapType, StructType

from app.ground.errors import BadRequest, CommitFailed, invalid_metadata
from app.ground.limits import INT32_MAX
from app.rules.describe import describe_error
from app.rules.metadata_files import (
    COMPRESSION_CODEC,
    METADATA_PATH,
    metadata_directory_of,
    metadata_file_name,
    next_metadata_version,
)

__all__ = [
    "METADATA_PATH",
    "ViewMetadata",
    "commit",
    "current_version",
    "history_size",
    "metadata_directory",
    "metadata_file_name",
    "new_view_metadata",
    "next_metadata_version",
    "parse_view_metadata",
    "to_json",
]

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


# --------------------------------------------------------------------------------------------
# Validating the parts (each raises ValueError; the callers turn it into BadRequest)
# --------------------------------------------------------------------------------------------


def _int(raw: object, what: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"{what} must be an integer")
    return raw


def _str(raw: object, what: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"{what} must be a non-empty string")
    return raw


def _uuid(raw: object, what: str) -> str:
    text = _str(raw, what)
    try:
        uuid.UUID(text)
    except ValueError:
        raise ValueError(f"{what} is not a UUID: {text!r}") from None
    return text


def _str_map(raw: object, what: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
        raise ValueError(f"{what} must be an object of strings")
    return dict(raw)


def _str_list(raw: object, what: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise ValueError(f"{what} must be an array of strings")
    return list(raw)


def _schema(raw: object, what: str = "schema") -> dict[str, Any]:
    """A schema as PyIceberg reads it (types, names, identifier fields) with unique field ids."""
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object")
    try:
        schema = Schema.model_validate(raw)
    except TypeError as exc:  # PyIceberg raises TypeError for a default that does not fit its type
        raise ValueError(f"Invalid {what}: {exc}") from exc
    duplicates = sorted(i for i, n in Counter(_field_ids(schema.as_struct())).items() if n > 1)
    if duplicates:
        raise ValueError(f"Invalid {what}: duplicate field ids {duplicates}")
    return schema.model_dump(mode="json")


def _field_ids(field_type: IcebergType) -> list[int]:
    if isinstance(field_type, StructType):
        return [i for f in field_type.fields for i in (f.field_id, *_field_ids(f.field_type))]
    if isinstance(field_type, ListType):
        return [field_type.element_id, *_field_ids(field_type.element_type)]
    if isinstance(field_type, MapType):
        nested = (*_field_ids(field_type.key_type), *_field_ids(field_type.value_type))
        return [field_type.key_id, field_type.value_id, *nested]
    return []


def _representation(raw: object, what: str, *, sql_only: bool) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object")
    kind = _str(raw.get("type"), f"{what} type")
    if kind == "sql":
        sql, dialect = _str(raw.get("sql"), f"{what} sql"), _str(raw.get("dialect"), f"{what} dialect")
        return {"type": "sql", "sql": sql, "dialect": dialect}
    if sql_only:
        raise ValueError(f"Unsupported view representation type {kind!r}: only sql is accepted")
    return dict(raw)  # a newer writer's representation, kept as it is


def _version(raw: object, what: str, *, request: bool) -> dict[str, Any]:
    """A view version; from a request (``request``) it must hold SQL, one per dialect."""
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object")
    representations = raw.get("representations")
    if not isinstance(representations, list):
        raise ValueError(f"{what} representations must be an array")
    version: dict[str, Any] = {
        "version-id": _int(raw.get("version-id"), f"{what} version-id"),
        "timestamp-ms": _int(raw.get("timestamp-ms"), f"{what} timestamp-ms"),
        "schema-id": _int(raw.get("schema-id"), f"{what} schema-id"),
        "summary": _str_map(raw.get("summary"), f"{what} summary"),
        "default-namespace": _str_list(raw.get("default-namespace"), f"{what} default-namespace"),
        "representations": [
            _representation(r, f"{what} representation #{i}", sql_only=request) for i, r in enumerate(representations)
        ],
    }
    if raw.get("default-catalog") is not None:
        version["default-catalog"] = _str(raw["default-catalog"], f"{what} default-catalog")
    if request:
        _check_dialects(version)
    return {key: version[key] for key in _VERSION_KEYS if key in version}


def _check_dialects(version: dict[str, Any]) -> None:
    if not version["representations"]:
        raise ValueError("Invalid view version: it needs at least one SQL representation")
    seen: set[str] = set()
    for dialect in _dialect_list(version):
        if dialect in seen:
            raise ValueError(f"Invalid view version: Cannot add multiple queries for dialect {dialect}")
        seen.add(dialect)


def _dialect_list(version: dict[str, Any]) -> list[str]:
    return [r["dialect"].lower() for r in version["representations"] if r.get("type") == "sql"]


def _history_entry(raw: object, what: str) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise ValueError(f"{what} must be an object")
    return {
        "timestamp-ms": _int(raw.get("timestamp-ms"), f"{what} timestamp-ms"),
        "version-id": _int(raw.get("version-id"), f"{what} version-id"),
    }


def _check_properties(properties: dict[str, str]) -> None:
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


# --------------------------------------------------------------------------------------------
# Parsing and serialising
# --------------------------------------------------------------------------------------------


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
        "view-uuid": _uuid(data.get("view-uuid"), "view-uuid"),
        "format-version": FORMAT_VERSION,
        "location": _str(data.get("location"), "location"),
        "properties": _str_map(data.get("properties", {}), "properties"),
        "schemas": [_schema(s, f"schema #{i}") for i, s in enumerate(schemas)],
        "current-version-id": _int(data.get("current-version-id"), "current-version-id"),
        "versions": [_version(v, f"version #{i}", request=False) for i, v in enumerate(versions)],
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
    return json.dumps(_ordered(metadata), separators=(",", ":"))


def _ordered(metadata: ViewMetadata) -> ViewMetadata:
    ordered = {key: metadata[key] for key in _METADATA_KEYS if key in metadata}
    ordered["versions"] = [{k: v[k] for k in _VERSION_KEYS if k in v} | v for v in metadata["versions"]]
    return ordered


def current_version(metadata: ViewMetadata) -> dict[str, Any]:
    return next(v for v in metadata["versions"] if v["version-id"] == metadata["current-version-id"])


def metadata_directory(metadata: ViewMetadata) -> str:
    """Where metadata files go: ``write.metadata.path``, else ``<location>/metadata`` (Java's)."""
    return metadata_directory_of(metadata["location"], metadata.get("properties", {}))


# --------------------------------------------------------------------------------------------
# Creating a view
# --------------------------------------------------------------------------------------------


def new_view_metadata(request: dict[str, Any], *, location: str, now_ms: int, view_uuid: str) -> ViewMetadata:
    """The first metadata of a view, from a CreateViewRequest body.

    As Java's ``BaseMetastoreViewCatalog`` builds it on the server: the request's schema becomes
    schema 0 (field ids kept), the version becomes version 1 using schema 0, timed ``now_ms``
    (the server's clock), and it is current from the start. ``location`` is the resolved view
    location (checking the request's own ``location`` is the caller's business).
    """
    if not isinstance(request, dict):
        raise BadRequest("Invalid create view request: expected an object")
    try:
        properties = _str_map(request.get("properties", {}), "properties")
        _check_properties(properties)
        schema = {**_schema(request.get("schema")), "schema-id": 0}
        version = _version(request.get("view-version"), "view-version", request=True)
    except ValueError as exc:
        raise invalid_metadata(f"Invalid view definition: {describe_error(exc)}", exc) from exc
    version.update({"version-id": 1, "schema-id": 0, "timestamp-ms": now_ms})
    return _ordered(
        {
            "view-uuid": view_uuid,
            "format-version": FORMAT_VERSION,
            "location": location,
            "properties": properties,
            "schemas": [schema],
            "current-version-id": 1,
            "versions": [version],
            "version-log": [{"timestamp-ms": now_ms, "version-id": 1}],
        }
    )


# --------------------------------------------------------------------------------------------
# Requirements
# --------------------------------------------------------------------------------------------


def _requirement_failed(what: str) -> NoReturn:
    """Java's ``UpdateRequirement`` wording (``Requirement failed: view UUID does not match: ...``)."""
    raise CommitFailed(f"Requirement failed: {what}")


def _parse_view_uuid_requirement(raw: dict[str, Any]) -> str:
    return _str(raw.get("uuid"), "uuid")


def _check_view_uuid(base: ViewMetadata, expected: str) -> None:
    if expected.lower() != base["view-uuid"].lower():
        _requirement_failed(f"view UUID does not match: expected {base['view-uuid']} != {expected}")


@dataclass(frozen=True)
class _Requirement:
    parse: Callable[[dict[str, Any]], Any]
    check: Callable[[ViewMetadata, Any], None]


_REQUIREMENTS: dict[str, _Requirement] = {
    "assert-view-uuid": _Requirement(_parse_view_uuid_requirement, _check_view_uuid),
}


def check_requirements(base: ViewMetadata, requirements: list[dict[str, Any]]) -> None:
    """Raise BadRequest for a malformed requirement, CommitFailed (409) for one that fails."""
    parsed = _parse_all(requirements, _REQUIREMENTS, "requirement", "type")
    for _index, kind, payload in parsed:
        _REQUIREMENTS[kind].check(base, payload)


# --------------------------------------------------------------------------------------------
# Updates
# --------------------------------------------------------------------------------------------


@dataclass
class _Changes:
    """What the updates of one commit did so far (Java's builder keeps the same bookkeeping)."""

    now_ms: int
    last_added_schema_id: int | None = None
    last_added_version_id: int | None = None
    added_version_ids: set[int] = field(default_factory=set)


def _resolve_last_added(requested: int, last_added: int | None, what: str) -> int:
    """-1 means "the one added last in this commit" (also when the add reused an existing id)."""
    if requested != LAST_ADDED:
        return requested
    if last_added is None:
        raise ValueError(f"Cannot set last added {what}: no {what} has been added")
    return last_added


def _assign_uuid(metadata: ViewMetadata, new_uuid: str, _: _Changes) -> None:
    if new_uuid.lower() != metadata["view-uuid"].lower():
        raise ValueError(f"Cannot reassign the uuid of a view: {metadata['view-uuid']} != {new_uuid}")


def _upgrade_format_version(metadata: ViewMetadata, target: int, _: _Changes) -> None:
    if target < metadata["format-version"]:
        raise ValueError(f"Cannot downgrade v{metadata['format-version']} view to v{target}")
    if target > FORMAT_VERSION:
        raise ValueError(f"Unsupported view format version: v{target} (supported: v1)")


def _same_schema(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Java's ``Schema.sameSchema``: same columns and identifier fields, whatever the schema id."""
    ids_a, ids_b = a.get("identifier-field-ids") or [], b.get("identifier-field-ids") or []
    return a["fields"] == b["fields"] and set(ids_a) == set(ids_b)


def _add_schema(metadata: ViewMetadata, schema: dict[str, Any], changes: _Changes) -> None:
    existing = next((s for s in metadata["schemas"] if _same_schema(s, schema)), None)
    if existing is not None:
        changes.last_added_schema_id = existing["schema-id"]
        return
    new_id = max((s["schema-id"] for s in metadata["schemas"]), default=-1) + 1
    metadata["schemas"].append({**schema, "schema-id": new_id})
    changes.last_added_schema_id = new_id


def _set_location(metadata: ViewMetadata, location: str, _: _Changes) -> None:
    metadata["location"] = location


def _set_properties(metadata: ViewMetadata, updates: dict[str, str], _: _Changes) -> None:
    metadata["properties"].update(updates)


def _remove_properties(metadata: ViewMetadata, removals: list[str], _: _Changes) -> None:
    for key in removals:  # removing what is not there is a no-op, as in Java
        metadata["properties"].pop(key, None)


def _same_version(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Java's ``sameViewVersion``: equal but for ``version-id`` and ``timestamp-ms``."""
    ignored = ("version-id", "timestamp-ms")
    return {k: v for k, v in a.items() if k not in ignored} == {k: v for k, v in b.items() if k not in ignored}


def _add_view_version(metadata: ViewMetadata, version: dict[str, Any], changes: _Changes) -> None:
    schema_id = _resolve_last_added(version["schema-id"], changes.last_added_schema_id, "schema")
    if schema_id not in {s["schema-id"] for s in metadata["schemas"]}:
        raise ValueError(f"Cannot add version with unknown schema: {schema_id}")
    version = {**version, "schema-id": schema_id}
    existing = next((v for v in metadata["versions"] if _same_version(v, version)), None)
    if existing is not None:
        changes.last_added_version_id = existing["version-id"]
        return
    new_id = max([version["version-id"], *(v["version-id"] + 1 for v in metadata["versions"])])
    metadata["versions"].append({**version, "version-id": new_id})
    changes.last_added_version_id = new_id
    changes.added_version_ids.add(new_id)


def _set_current_view_version(metadata: ViewMetadata, version_id: int, changes: _Changes) -> None:
    version_id = _resolve_last_added(version_id, changes.last_added_version_id, "view version")
    if version_id not in {v["version-id"] for v in metadata["versions"]}:
        raise ValueError(f"Cannot set current version to unknown version: {version_id}")
    metadata["current-version-id"] = version_id


@dataclass(frozen=True)
class _Update:
    parse: Callable[[dict[str, Any]], Any]
    apply: Callable[[ViewMetadata, Any, _Changes], None]


_UPDATES: dict[str, _Update] = {
    "assign-uuid": _Update(lambda u: _uuid(u.get("uuid"), "uuid"), _assign_uuid),
    "upgrade-format-version": _Update(
        lambda u: _int(u.get("format-version"), "format-version"), _upgrade_format_version
    ),
    "add-schema": _Update(lambda u: _schema(u.get("schema")), _add_schema),
    "set-location": _Update(lambda u: _str(u.get("location"), "location"), _set_location),
    "set-properties": _Update(lambda u: _str_map(u.get("updates"), "updates"), _set_properties),
    "remove-properties": _Update(lambda u: _str_list(u.get("removals"), "removals"), _remove_properties),
    "add-view-version": _Update(
        lambda u: _version(u.get("view-version"), "view-version", request=True), _add_view_version
    ),
    "set-current-view-version": _Update(
        lambda u: _int(u.get("view-version-id"), "view-version-id"), _set_current_view_version
    ),
}


def _parse_all(
    raw: object, table: dict[str, Any], kind: str, tag: str
) -> list[tuple[int, str, Any]]:
    """(index, tag value, parsed payload) for every item; BadRequest on the first bad one."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRequest("Invalid view commit: requirements and updates must be arrays")
    parsed = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            raise BadRequest(f"Invalid view {kind} #{index}: expected an object")
        name = item.get(tag)
        if name not in table:
            raise BadRequest(f"Invalid view {kind} #{index}: unknown {tag} {name!r}")
        try:
            parsed.append((index, name, table[name].parse(item)))
        except ValueError as exc:
            raise BadRequest(f"Invalid view {kind} #{index} ({name}): {describe_error(exc)}") from exc
    return parsed


def apply_updates(base: ViewMetadata, updates: list[dict[str, Any]], *, now_ms: int) -> ViewMetadata:
    """Apply a commit's updates in order; ``base`` itself when they change nothing."""
    return _apply_parsed(base, _parse_all(updates, _UPDATES, "update", "action"), now_ms=now_ms)


def _apply_parsed(base: ViewMetadata, parsed: list[tuple[int, str, Any]], *, now_ms: int) -> ViewMetadata:
    metadata = copy.deepcopy(_ordered(base))
    changes = _Changes(now_ms=now_ms)
    for index, action, payload in parsed:
        try:
            _UPDATES[action].apply(metadata, payload, changes)
        except ValueError as exc:
            raise invalid_metadata(f"Invalid view update #{index} ({action}): {exc}", exc) from exc
    try:
        metadata = _finish(base, metadata, changes)
    except ValueError as exc:
        raise invalid_metadata(f"Invalid view metadata after updates: {exc}", exc) from exc
    return base if metadata == _ordered(base) else metadata


def _finish(base: ViewMetadata, metadata: ViewMetadata, changes: _Changes) -> ViewMetadata:
    """Version log, the dialect rule, and version expiry (Java's ``Builder.build``)."""
    properties = metadata["properties"]
    _check_properties(properties)
    current_id = metadata["current-version-id"]
    if current_id != base["current-version-id"]:
        version = current_version(metadata)
        timestamp = version["timestamp-ms"] if current_id in changes.added_version_ids else changes.now_ms
        metadata["version-log"].append({"timestamp-ms": timestamp, "version-id": current_id})
        if properties.get(REPLACE_DROP_DIALECT_ALLOWED, "false").strip().lower() != "true":
            _check_no_dialect_dropped(current_version(base), version)
    highest = max([0, *(v["version-id"] for v in metadata["versions"]), *(s["schema-id"] for s in metadata["schemas"])])
    if highest > INT32_MAX:  # an id at the top of the range plus one (request values are checked on parse)
        raise BadRequest(f"Invalid view metadata after updates: id {highest} is outside the signed 32-bit range")
    keep = max(len(changes.added_version_ids | {current_id}), history_size(properties))
    if len(metadata["versions"]) > keep:
        _expire_versions(metadata, keep)
    return metadata


def _check_no_dialect_dropped(previous: dict[str, Any], new: dict[str, Any]) -> None:
    before, after = set(_dialect_list(previous)), set(_dialect_list(new))
    if not before <= after:
        raise ValueError(
            f"Cannot replace view due to loss of view dialects ({REPLACE_DROP_DIALECT_ALLOWED}=false): "
            f"previous dialects {sorted(before)}, new dialects {sorted(after)}"
        )


def _expire_versions(metadata: ViewMetadata, keep: int) -> None:
    """Java's ``expireVersions`` + ``updateHistory``: keep the current and the newest ids."""
    current_id = metadata["current-version-id"]
    retained = {current_id}
    for version_id in sorted((v["version-id"] for v in metadata["versions"]), reverse=True)[:keep]:
        if len(retained) == keep:
            break
        retained.add(version_id)
    metadata["versions"] = [v for v in metadata["versions"] if v["version-id"] in retained]
    log: list[dict[str, int]] = []
    for entry in metadata["version-log"]:
        if entry["version-id"] in retained:
            log.append(entry)
        else:  # a gap: what came before it can no longer be trusted
            log.clear()
    metadata["version-log"] = log


# --------------------------------------------------------------------------------------------
# A commit, end to end
# --------------------------------------------------------------------------------------------


def commit(
    base: ViewMetadata, requirements: list[dict[str, Any]], updates: list[dict[str, Any]], *, now_ms: int
) -> ViewMetadata:
    """Parse, check and apply one CommitViewRequest; what the catalog service calls.

    Every requirement and update is parsed first (400 on a malformed one), then the requirements
    are checked (409), then the updates applied (400 on an invalid one). Returns ``base`` itself
    when nothing changed, so the caller can skip writing a new file.
    """
    parsed_updates = _parse_all(updates, _UPDATES, "update", "action")
    check_requirements(base, requirements)
    return _apply_parsed(base, parsed_updates, now_ms=now_ms)
