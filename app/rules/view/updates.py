"""Creating a view, and a view commit: its requirements checked, its updates applied, the
version history kept to ``version.history.num-entries``."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from app.ground.errors import BadRequest, CommitFailed, invalid_metadata
from app.ground.limits import INT32_MAX
from app.rules.describe import describe_error
from app.rules.view.documents import (
    FORMAT_VERSION,
    LAST_ADDED,
    REPLACE_DROP_DIALECT_ALLOWED,
    ViewMetadata,
    check_properties,
    current_version,
    dialect_list,
    history_size,
    int_value,
    ordered,
    parse_schema,
    parse_version,
    str_list,
    str_map,
    str_value,
    uuid_text,
)


@dataclass(frozen=True)
class ViewDefinition:
    """What a CreateViewRequest defines, validated: the schema, the first version (SQL only, one
    per dialect) and the properties, each in the spec's shape, as the view's first metadata holds them."""

    schema: dict[str, Any]
    version: dict[str, Any]
    properties: dict[str, str]


def parse_definition(request: Mapping[str, Any]) -> ViewDefinition:
    """The definition a CreateViewRequest body carries; BadRequest (Java's exception types) when
    a part is not valid."""
    try:
        properties = str_map(request.get("properties", {}), "properties")
        check_properties(properties)
        schema = parse_schema(request.get("schema"))
        version = parse_version(request.get("view-version"), "view-version", request=True)
    except ValueError as exc:
        raise invalid_metadata(f"Invalid view definition: {describe_error(exc)}", exc) from exc
    return ViewDefinition(schema, version, properties)


def new_view_metadata(definition: ViewDefinition, *, location: str, now_ms: int, view_uuid: str) -> ViewMetadata:
    """The first metadata of a view, from a CreateViewRequest's definition.

    As Java's ``BaseMetastoreViewCatalog`` builds it on the server: the request's schema becomes
    schema 0 (field ids kept), the version becomes version 1 using schema 0, timed ``now_ms``
    (the server's clock), and it is current from the start. ``location`` is the resolved view
    location (checking the request's own ``location`` is the caller's business).
    """
    schema = {**definition.schema, "schema-id": 0}
    version = {**definition.version, "version-id": 1, "schema-id": 0, "timestamp-ms": now_ms}
    return ordered(
        {
            "view-uuid": view_uuid,
            "format-version": FORMAT_VERSION,
            "location": location,
            "properties": dict(definition.properties),
            "schemas": [schema],
            "current-version-id": 1,
            "versions": [version],
            "version-log": [{"timestamp-ms": now_ms, "version-id": 1}],
        }
    )


def _requirement_failed(what: str) -> NoReturn:
    """Java's ``UpdateRequirement`` wording (``Requirement failed: view UUID does not match: ...``)."""
    raise CommitFailed(f"Requirement failed: {what}")


def _parse_view_uuid_requirement(raw: dict[str, Any]) -> str:
    return str_value(raw.get("uuid"), "uuid")


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


def check_requirements(base: ViewMetadata, requirements: Sequence[ViewChange]) -> None:
    """Raise CommitFailed (409) for a parsed requirement that does not hold."""
    for requirement in requirements:
        _REQUIREMENTS[requirement.kind].check(base, requirement.value)


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
    "assign-uuid": _Update(lambda u: uuid_text(u.get("uuid"), "uuid"), _assign_uuid),
    "upgrade-format-version": _Update(
        lambda u: int_value(u.get("format-version"), "format-version"), _upgrade_format_version
    ),
    "add-schema": _Update(lambda u: parse_schema(u.get("schema")), _add_schema),
    "set-location": _Update(lambda u: str_value(u.get("location"), "location"), _set_location),
    "set-properties": _Update(lambda u: str_map(u.get("updates"), "updates"), _set_properties),
    "remove-properties": _Update(lambda u: str_list(u.get("removals"), "removals"), _remove_properties),
    "add-view-version": _Update(
        lambda u: parse_version(u.get("view-version"), "view-version", request=True), _add_view_version
    ),
    "set-current-view-version": _Update(
        lambda u: int_value(u.get("view-version-id"), "view-version-id"), _set_current_view_version
    ),
}


@dataclass(frozen=True)
class ViewChange:
    """One requirement or update of a view commit, parsed: where it stood in the request, its
    ``type`` (requirement) or ``action`` (update), the value the rule checks or applies (a uuid,
    an id, a schema or version in the spec's shape, properties), and the JSON as the client sent
    it (what the change feed records)."""

    index: int
    kind: str
    value: Any
    sent: Any


def parse_requirements(raw: object) -> tuple[ViewChange, ...]:
    """A CommitViewRequest's ``requirements``; BadRequest on the first malformed one."""
    return _parse_all(raw, _REQUIREMENTS, "requirement", "type")


def parse_updates(raw: object) -> tuple[ViewChange, ...]:
    """A CommitViewRequest's ``updates``; BadRequest on the first malformed one."""
    return _parse_all(raw, _UPDATES, "update", "action")


def _parse_all(raw: object, table: Mapping[str, Any], kind: str, tag: str) -> tuple[ViewChange, ...]:
    if raw is None:
        return ()
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
            parsed.append(ViewChange(index, name, table[name].parse(item), item))
        except ValueError as exc:
            raise BadRequest(f"Invalid view {kind} #{index} ({name}): {describe_error(exc)}") from exc
    return tuple(parsed)


def apply_updates(base: ViewMetadata, updates: Sequence[ViewChange], *, now_ms: int) -> ViewMetadata:
    """Apply a commit's parsed updates in order; ``base`` itself when they change nothing."""
    metadata = copy.deepcopy(ordered(base))
    changes = _Changes(now_ms=now_ms)
    for update in updates:
        try:
            _UPDATES[update.kind].apply(metadata, update.value, changes)
        except ValueError as exc:
            raise invalid_metadata(f"Invalid view update #{update.index} ({update.kind}): {exc}", exc) from exc
    try:
        metadata = _finish(base, metadata, changes)
    except ValueError as exc:
        raise invalid_metadata(f"Invalid view metadata after updates: {exc}", exc) from exc
    return base if metadata == ordered(base) else metadata


def _finish(base: ViewMetadata, metadata: ViewMetadata, changes: _Changes) -> ViewMetadata:
    """Version log, the dialect rule, and version expiry (Java's ``Builder.build``)."""
    properties = metadata["properties"]
    check_properties(properties)
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
    before, after = set(dialect_list(previous)), set(dialect_list(new))
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


def commit(
    base: ViewMetadata, requirements: Sequence[ViewChange], updates: Sequence[ViewChange], *, now_ms: int
) -> ViewMetadata:
    """Check and apply one parsed CommitViewRequest; what the catalog service calls.

    Every requirement and update was parsed with the request (400 on a malformed one, updates
    first); here the requirements are checked (409), then the updates applied (400 on an invalid
    one). Returns ``base`` itself when nothing changed, so the caller can skip writing a new file.
    """
    check_requirements(base, requirements)
    return apply_updates(base, updates, now_ms=now_ms)
