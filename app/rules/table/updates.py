"""Applying a commit's updates, and a commit end to end: check the requirements, apply."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyiceberg.table.metadata import (
    TableMetadata,
    check_partition_specs,
    check_schemas,
    check_sort_orders,
)
from pyiceberg.table.snapshots import MetadataLogEntry
from pyiceberg.table.update import (
    AssertCreate,
    AssignUUIDUpdate,
    RemovePropertiesUpdate,
    SetLocationUpdate,
    SetPropertiesUpdate,
    TableRequirement,
    UpgradeFormatVersionUpdate,
)

from app.ground.errors import BadRequest, NoSuchTable, invalid_metadata
from app.ground.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from app.rules.describe import describe_error
from app.rules.table.changes import Changes, Handler, apply_with_pyiceberg
from app.rules.table.creation import complete_new_table, empty_metadata, validate_properties
from app.rules.table.models import (
    FORMAT_VERSIONS,
    INVALID,
    MODEL_BY_VERSION,
    PREVIOUS_VERSIONS_MAX,
    PREVIOUS_VERSIONS_MAX_DEFAULT,
    AddEncryptionKeyUpdate,
    EncryptedKey,
    RemoveEncryptionKeyUpdate,
    TableUpdate,
)
from app.rules.table.requirements import (
    DocumentFields,
    check_requirements,
    refute_with_document,
    refute_with_fields,
)
from app.rules.table.schemas import SCHEMA_UPDATES
from app.rules.table.serialisation import as_lossless, check_refs, metadata_from_dict, to_dict
from app.rules.table.snapshots import SNAPSHOT_UPDATES, correct_snapshot_log


def _assign_uuid(metadata: TableMetadata, update: AssignUUIDUpdate, changes: Changes) -> TableMetadata:
    if update.uuid == metadata.table_uuid:
        return metadata
    if not changes.creating:
        raise ValueError(f"Cannot change the UUID of an existing table: {metadata.table_uuid} != {update.uuid}")
    return apply_with_pyiceberg(metadata, update)


def _upgrade_format_version(metadata: TableMetadata, update: UpgradeFormatVersionUpdate, _: Changes) -> TableMetadata:
    target = update.format_version
    if target not in FORMAT_VERSIONS:
        raise ValueError(f"Cannot upgrade table to unsupported format version: v{target} (supported: v1 to v3)")
    if target < metadata.format_version:
        raise ValueError(f"Cannot downgrade v{metadata.format_version} table to v{target}")
    if target == metadata.format_version:
        return metadata
    # PyIceberg refuses v3 and carries v1-only attributes over; build the target model instead.
    model = MODEL_BY_VERSION[target]
    values = {name: getattr(metadata, name) for name in model.model_fields if name in type(metadata).model_fields}
    values["format_version"] = target
    values.setdefault("last_sequence_number", 0)
    if target >= 3:
        values.setdefault("next_row_id", 0)
    return model.model_construct(**values)


def _set_location(metadata: TableMetadata, update: SetLocationUpdate, _: Changes) -> TableMetadata:
    if not update.location.strip():
        raise ValueError("Table location must not be empty")
    if update.location == metadata.location:
        return metadata
    return apply_with_pyiceberg(metadata, update)


def _set_properties(metadata: TableMetadata, update: SetPropertiesUpdate, _: Changes) -> TableMetadata:
    validate_properties(update.updates)
    return apply_with_pyiceberg(metadata, update)


def _remove_properties(metadata: TableMetadata, update: RemovePropertiesUpdate, _: Changes) -> TableMetadata:
    present = [key for key in update.removals if key in metadata.properties]
    if not present:
        return metadata
    return apply_with_pyiceberg(metadata, RemovePropertiesUpdate(removals=present))


def _add_encryption_key(metadata: TableMetadata, update: AddEncryptionKeyUpdate, _: Changes) -> TableMetadata:
    """Re-adding the same key is a no-op; a different key under a used id is refused (Java keeps
    the old key silently, and the client would then encrypt with a key the table does not hold)."""
    key = update.encryption_key
    try:
        base64.b64decode(key.encrypted_key_metadata, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"encrypted-key-metadata of key {key.key_id} is not base64") from None
    keys: list[EncryptedKey] = metadata.encryption_keys
    existing = next((k for k in keys if k.key_id == key.key_id), None)
    if existing == key:
        return metadata
    if existing is not None:
        raise ValueError(f"Encryption key {key.key_id} already exists with different content")
    return metadata.model_copy(update={"encryption_keys": [*keys, key]})


def _remove_encryption_key(metadata: TableMetadata, update: RemoveEncryptionKeyUpdate, _: Changes) -> TableMetadata:
    """Removing an unknown key is a no-op (Java); a key a snapshot still uses cannot go."""
    keys: list[EncryptedKey] = metadata.encryption_keys
    if not any(k.key_id == update.key_id for k in keys):
        return metadata
    users = [s.snapshot_id for s in metadata.snapshots if getattr(s, "key_id", None) == update.key_id]
    if users:
        raise ValueError(f"Cannot remove encryption key {update.key_id}: used by snapshots {users}")
    return metadata.model_copy(update={"encryption_keys": [k for k in keys if k.key_id != update.key_id]})


_UPDATE_HANDLERS: dict[type, Handler] = {
    AssignUUIDUpdate: _assign_uuid,
    UpgradeFormatVersionUpdate: _upgrade_format_version,
    SetLocationUpdate: _set_location,
    SetPropertiesUpdate: _set_properties,
    RemovePropertiesUpdate: _remove_properties,
    AddEncryptionKeyUpdate: _add_encryption_key,
    RemoveEncryptionKeyUpdate: _remove_encryption_key,
    **SCHEMA_UPDATES,
    **SNAPSHOT_UPDATES,
}


def _apply_one(metadata: TableMetadata, update: Any, changes: Changes, index: int) -> TableMetadata:
    handler = next((_UPDATE_HANDLERS[c] for c in type(update).__mro__ if c in _UPDATE_HANDLERS), None)
    if handler is None:
        raise BadRequest(f"Invalid table update #{index}: unsupported update {type(update).__name__}")
    try:
        return handler(metadata, update, changes)
    except INVALID as exc:
        message = f"Invalid table update #{index} ({update.action}): {describe_error(exc)}"
        raise invalid_metadata(message, exc) from exc


def apply_updates(
    base: TableMetadata | None,
    updates: Iterable[TableUpdate],
    *,
    base_location: str | None,
    now_ms: int,
    default_location: str | None = None,
) -> TableMetadata:
    """Apply a commit's updates in order and return the new metadata.

    ``base`` None builds a new table from the updates alone (a staged create: Spark CTAS, PyIceberg
    ``create_table_transaction``), starting, like Java's ``buildFromEmpty``, from an empty table of
    the first ``upgrade-format-version``'s version (default 2). ``default_location`` is used
    when such updates carry no ``set-location``.

    ``base_location`` is the metadata file ``base`` was read from; it is appended to the
    metadata log (trimmed to ``write.metadata.previous-versions-max``). When the updates change
    nothing, ``base`` itself is returned, so the caller can skip writing a new file.
    """
    updates = list(updates)
    creating = base is None
    changes = Changes(now_ms=now_ms, creating=creating)
    metadata = empty_metadata(updates) if base is None else as_lossless(base)
    for index, update in enumerate(updates):
        metadata = _apply_one(metadata, update, changes, index)
    if base is None:
        metadata = complete_new_table(metadata, changes, default_location)
    metadata = correct_snapshot_log(metadata, changes)
    # Model equality, not a comparison of two dumps: the updates copy only what they change, so
    # the unchanged parts (the snapshot list above all) compare by identity, in O(changes).
    if base is not None and metadata == base:
        return base
    return _finish(base, metadata, base_location=base_location, now_ms=now_ms)


def _finish(
    base: TableMetadata | None, metadata: TableMetadata, *, base_location: str | None, now_ms: int
) -> TableMetadata:
    """Metadata log, ``last-updated-ms``, and a check of the result.

    A commit on an existing table of the same format version is checked with the rules the model
    validators hold (current schema, default spec and sort order exist; refs are consistent),
    without re-validating every snapshot: the parts the updates did not touch were validated when
    the base was parsed, and the parts they added when the updates were. That keeps a commit's
    cost independent of the table's history. A new table and a format upgrade, whose models are
    built without validation, are re-validated in full.
    """
    problem = "Invalid table metadata after updates"
    _check_ranges(metadata, problem)
    try:
        metadata.spec().check_compatible(metadata.schema())
        metadata.sort_order().check_compatible(metadata.schema())
    except INVALID as exc:
        raise invalid_metadata(f"{problem}: {describe_error(exc)}", exc) from exc
    metadata_log = list(metadata.metadata_log)
    if base is not None and base_location:
        metadata_log = _metadata_log_with(base, base_location, metadata.properties)
    values = {"metadata_log": metadata_log, "last_updated_ms": _last_updated_ms(base, metadata, metadata_log, now_ms)}
    if base is None or type(base) is not type(metadata) or metadata.format_version == 1:
        data = to_dict(metadata.model_copy(update=values))
        return metadata_from_dict(data, problem)
    try:
        for check in (check_schemas, check_partition_specs, check_sort_orders):
            check(metadata)
    except INVALID as exc:
        raise invalid_metadata(f"{problem}: {describe_error(exc)}", exc) from exc
    check_refs(metadata, problem)
    return metadata.model_copy(update=values)


def _check_ranges(metadata: TableMetadata, problem: str) -> None:
    """Values the rules compute (next ids, row ids, sequence numbers) stay in Java's int/long.

    Request values are range-checked when the body is parsed (``app.ground.limits``); a value at the top
    of its range plus one - ``first-row-id + added-rows``, the next schema id - is caught here.
    """
    longs = {
        "last-sequence-number": getattr(metadata, "last_sequence_number", None) or 0,  # not in v1
        "last-updated-ms": metadata.last_updated_ms,
        "next-row-id": getattr(metadata, "next_row_id", None) or 0,
    }
    ints = {
        "last-column-id": metadata.last_column_id,
        "last-partition-id": metadata.last_partition_id or 0,
        "schema-id": max((schema.schema_id for schema in metadata.schemas), default=0),
        "spec-id": max((spec.spec_id for spec in metadata.partition_specs), default=0),
        "order-id": max((order.order_id for order in metadata.sort_orders), default=0),
    }
    for ranges, low, high, kind in ((longs, INT64_MIN, INT64_MAX, "64"), (ints, INT32_MIN, INT32_MAX, "32")):
        for name, value in ranges.items():
            if not low <= value <= high:
                raise BadRequest(f"{problem}: {name} {value} is outside the signed {kind}-bit range")


def _metadata_log_with(base: TableMetadata, base_location: str, properties: dict[str, str]) -> list[MetadataLogEntry]:
    """Java's ``addPreviousFile``: append the base file, keep at most previous-versions-max."""
    max_entries = max(1, _int_property(properties, PREVIOUS_VERSIONS_MAX, PREVIOUS_VERSIONS_MAX_DEFAULT))
    previous = list(base.metadata_log)
    kept = previous[len(previous) - max_entries + 1 :] if len(previous) >= max_entries else previous
    return [*kept, MetadataLogEntry(metadata_file=base_location, timestamp_ms=base.last_updated_ms)]


def _last_updated_ms(
    base: TableMetadata | None, metadata: TableMetadata, metadata_log: list[MetadataLogEntry], now_ms: int
) -> int:
    """``now_ms``, but never before the base or the newest log entries (clocks differ)."""
    candidates = [now_ms]
    if base is not None:
        candidates.append(base.last_updated_ms)
    for log in (metadata.snapshot_log, metadata_log):
        if log:
            candidates.append(log[-1].timestamp_ms)
    return max(candidates)


def _int_property(properties: dict[str, str], key: str, default: int) -> int:
    try:
        return int(properties.get(key, default))
    except ValueError:
        return default


@dataclass(frozen=True)
class Screen:
    """What ``commit`` would refuse first, decided on the base's decoded document before it is
    parsed (``parse_metadata``'s ``screen``): a requirement the document refutes (409), with
    ``commit``'s own errors. A commit that another writer made hopeless then costs a JSON decode
    instead of a parse of the table's history - or nothing, when the fields of that version were
    read before (``refute``: the workers' parse cache keeps them). (The requirements and updates
    were parsed with the request: a malformed one was refused before.)"""

    requirements: list[TableRequirement]

    def __call__(self, document: dict[str, Any]) -> None:
        refute_with_document(document, self.requirements)

    def refute(self, fields: DocumentFields | None) -> None:
        refute_with_fields(fields, self.requirements)


def screen_for(requirements: list[TableRequirement]) -> Screen:
    return Screen(requirements)


def commit(
    base: TableMetadata | None,
    requirements: list[TableRequirement],
    updates: list[TableUpdate],
    *,
    base_location: str | None,
    now_ms: int,
    default_location: str | None = None,
) -> TableMetadata:
    """Check and apply one CommitTableRequest's requirements and updates (parsed with the
    request: ``app.rules.requests.tables``); what the catalog service calls.

    Deterministic for given inputs, except for the uuid of a created table the client did not
    assign. Returns ``base`` itself when nothing changed. A missing table (``base`` None) is
    only acceptable with ``assert-create`` (a staged create); otherwise NoSuchTable (404), as
    Java's ``CatalogHandlers.updateTable``.
    """
    if base is None and not any(isinstance(r, AssertCreate) for r in requirements):
        raise NoSuchTable("Table does not exist")
    check_requirements(base, requirements)
    return apply_updates(base, updates, base_location=base_location, now_ms=now_ms, default_location=default_location)
