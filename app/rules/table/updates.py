"""The Iceberg table-metadata rules: pure functions, no I/O.

What the catalog service calls to create table metadata, check a commit's requirements, apply its
updates, and name and serialise the resulting metadata file. Nothing here touches the network,
files, the database or the clock: time comes in as ``now_ms`` and the caller writes the files.

PyIceberg 0.12 (``pyiceberg.table.metadata`` and ``pyiceberg.table.update``) supplies the models,
the parsing of requirements and updates, and the handlers whose rules match the Java reference
implementation (``TableMetadata.Builder``). Where PyIceberg is missing something or differs from
Java in a way clients notice, this module fills the gap; each such place says why. In short:

* The models are subclassed so a commit never drops what PyIceberg does not model: a snapshot's
  ``key-id``, statistics blobs of any ``type``, the table's ``encryption-keys``. Writing v3 metadata
  works (PyIceberg refuses), and serialising never reads PyIceberg's config file.
* add-schema / add-spec / add-sort-order assign the id themselves and reuse an identical existing
  one, as Java does; PyIceberg appends the client's object with the client's id.
* add-snapshot checks the sequence number for v3 too, checks the parent, and keeps
  ``next-row-id`` instead of nulling it when ``added-rows`` is missing.
* Removals of things that are already gone (snapshots, schemas, specs, statistics, properties)
  are no-ops, as in Java; PyIceberg raises (``remove-properties`` with a ``KeyError``).
* Timestamps come from ``now_ms``; PyIceberg reads the wall clock.
* ``assign_fresh_schema_ids`` drops ``initial-default``/``write-default``; ours keeps them.

Deliberately stricter or more lenient than Java (each documented at its function): a table's
uuid cannot be reassigned; a snapshot's parent must exist; a different encryption key under a
used id is refused; ``-1`` ("last added") also accepts an add that reused an existing id.

Errors: a requirement that does not hold raises ``CommitFailed`` (409) naming what was expected and
what was found; anything invalid in a request raises ``BadRequest`` (400). No ``ValueError``,
``KeyError`` or pydantic ``ValidationError`` escapes.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, NoReturn

from pydantic import Field, TypeAdapter, field_serializer
from pydantic import ValidationError as PydanticValidationError
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.partitioning import (
    PARTITION_FIELD_ID_START,
    PartitionField,
    PartitionSpec,
    assign_fresh_partition_spec_ids,
    validate_partition_name,
)
from pyiceberg.schema import Schema, index_by_id
from pyiceberg.table.metadata import (
    TableMetadata,
    TableMetadataV1,
    TableMetadataV2,
    TableMetadataV3,
    check_partition_specs,
    check_schemas,
    check_sort_orders,
)
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import MetadataLogEntry, Snapshot, SnapshotLogEntry
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, UNSORTED_SORT_ORDER_ID, SortOrder, assign_fresh_sort_order_ids
from pyiceberg.table.statistics import BlobMetadata, StatisticsFile
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSnapshotUpdate,
    AddSortOrderUpdate,
    AssertCreate,
    AssertCurrentSchemaId,
    AssertDefaultSortOrderId,
    AssertDefaultSpecId,
    AssertLastAssignedFieldId,
    AssertLastAssignedPartitionId,
    AssertRefSnapshotId,
    AssertTableUUID,
    AssignUUIDUpdate,
    RemovePartitionSpecsUpdate,
    RemovePartitionStatisticsUpdate,
    RemovePropertiesUpdate,
    RemoveSchemasUpdate,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    RemoveStatisticsUpdate,
    SetCurrentSchemaUpdate,
    SetDefaultSortOrderUpdate,
    SetDefaultSpecUpdate,
    SetLocationUpdate,
    SetPartitionStatisticsUpdate,
    SetPropertiesUpdate,
    SetSnapshotRefUpdate,
    SetStatisticsUpdate,
    TableRequirement,
    UpgradeFormatVersionUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
)
from pyiceberg.transforms import UnknownTransform
from pyiceberg.typedef import IcebergBaseModel
from pyiceberg.types import IcebergType, ListType, MapType, StructType

from app.ground.errors import BadRequest, CommitFailed, InvalidArgument, NoSuchTable, invalid_metadata
from app.ground.limits import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from app.ground.lru import LruCache

__all__ = [
    "TableMetadata",
    "TableRequirement",
    "TableUpdate",
    "apply_updates",
    "check_requirements",
    "commit",
    "current_location",
    "metadata_directory",
    "metadata_file_name",
    "metadata_files_to_delete",
    "new_table_metadata",
    "next_metadata_version",
    "parse_metadata",
    "parse_metadata_version",
    "parse_requirements",
    "parse_updates",
    "refs_only",
    "table_uuid",
    "to_json",
]

FORMAT_VERSIONS = (1, 2, 3)
DEFAULT_FORMAT_VERSION = 2  # Java's default since Iceberg 1.4

FORMAT_VERSION_PROPERTY = "format-version"
PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"
PREVIOUS_VERSIONS_MAX_DEFAULT = 100
DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"
COMPRESSION_CODEC = "write.metadata.compression-codec"
METADATA_PATH = "write.metadata.path"

# Java's TableProperties.RESERVED_PROPERTIES: derived from the metadata, never stored as properties.
RESERVED_PROPERTIES = frozenset(
    {
        "format-version",
        "uuid",
        "snapshot-count",
        "current-snapshot-id",
        "current-snapshot-summary",
        "current-snapshot-timestamp-ms",
        "current-schema",
        "default-partition-spec",
        "default-sort-order",
    }
)

_FILE_SUFFIX_BY_CODEC = {"none": ".metadata.json", "gzip": ".gz.metadata.json"}

# The metadata-file key order of Java's TableMetadataParser, so our files read like everyone else's.
_KEY_ORDER = (
    "format-version",
    "table-uuid",
    "location",
    "last-sequence-number",
    "last-updated-ms",
    "next-row-id",
    "last-column-id",
    "schema",
    "current-schema-id",
    "schemas",
    "partition-spec",
    "default-spec-id",
    "partition-specs",
    "last-partition-id",
    "default-sort-order-id",
    "sort-orders",
    "properties",
    "current-snapshot-id",
    "refs",
    "snapshots",
    "statistics",
    "partition-statistics",
    "snapshot-log",
    "metadata-log",
    "encryption-keys",
)

# What PyIceberg and pydantic raise for bad input (pydantic's ValidationError is a ValueError).
_INVALID = (ValueError, KeyError, TypeError, IcebergValidationError)


# --------------------------------------------------------------------------------------------
# Models: PyIceberg's, widened so that nothing a client sends is silently dropped
# --------------------------------------------------------------------------------------------


class EncryptedKey(IcebergBaseModel):
    """The spec's ``EncryptedKey`` (v3 table encryption); PyIceberg 0.12 has no model for it."""

    key_id: str = Field(alias="key-id")
    encrypted_key_metadata: str = Field(alias="encrypted-key-metadata")
    encrypted_by_id: str | None = Field(alias="encrypted-by-id", default=None)
    properties: dict[str, str] | None = None


class _Snapshot(Snapshot):
    """PyIceberg's snapshot lacks the v3 ``key-id`` (the key of the manifest list)."""

    key_id: str | None = Field(alias="key-id", default=None)


class _BlobMetadata(BlobMetadata):
    """PyIceberg accepts two blob types only; the Puffin spec allows any (engines write others)."""

    type: str  # type: ignore[assignment]


class _StatisticsFile(StatisticsFile):
    blob_metadata: list[_BlobMetadata] = Field(alias="blob-metadata")  # type: ignore[assignment]


class _Lossless(IcebergBaseModel):
    """Fields and serialisers shared by the three metadata versions below."""

    snapshots: list[_Snapshot] = Field(default_factory=list)
    statistics: list[_StatisticsFile] = Field(default_factory=list)
    encryption_keys: list[EncryptedKey] = Field(alias="encryption-keys", default_factory=list)

    @field_serializer("current_snapshot_id", check_fields=False)
    def serialize_current_snapshot_id(self, current_snapshot_id: int | None) -> int | None:
        # Overrides PyIceberg's, which reads ~/.pyiceberg.yaml on every call (I/O in a pure module).
        return current_snapshot_id

    @field_serializer("snapshots")
    def serialize_snapshots(self, snapshots: list[_Snapshot]) -> list[_Snapshot]:
        # Overrides PyIceberg's, whose ``list[Snapshot]`` return type drops ``key-id``.
        if self.format_version == 1:  # type: ignore[attr-defined]
            return [snapshot.model_copy(update={"sequence_number": None}) for snapshot in snapshots]
        return snapshots


class _TableMetadataV1(_Lossless, TableMetadataV1):  # type: ignore[misc]
    pass


class _TableMetadataV2(_Lossless, TableMetadataV2):  # type: ignore[misc]
    pass


class _TableMetadataV3(_Lossless, TableMetadataV3):  # type: ignore[misc]
    next_row_id: int = Field(alias="next-row-id", default=0)  # type: ignore[assignment]

    def model_dump_json(self, **kwargs: Any) -> str:  # type: ignore[override]
        # PyIceberg 0.12 raises NotImplementedError for v3; the JSON itself is fine.
        return IcebergBaseModel.model_dump_json(self, **kwargs)


_MODEL_BY_VERSION: dict[int, type[TableMetadata]] = {1: _TableMetadataV1, 2: _TableMetadataV2, 3: _TableMetadataV3}
_METADATA_ADAPTER: TypeAdapter[TableMetadata] = TypeAdapter(
    Annotated[_TableMetadataV1 | _TableMetadataV2 | _TableMetadataV3, Field(discriminator="format_version")]
)


class _AddSnapshotUpdate(AddSnapshotUpdate):
    snapshot: _Snapshot


class _SetStatisticsUpdate(SetStatisticsUpdate):
    statistics: _StatisticsFile


class AddEncryptionKeyUpdate(IcebergBaseModel):
    """The spec's ``add-encryption-key`` (missing from PyIceberg 0.12)."""

    action: Literal["add-encryption-key"] = Field(default="add-encryption-key")
    encryption_key: EncryptedKey = Field(alias="encryption-key")


class RemoveEncryptionKeyUpdate(IcebergBaseModel):
    """The spec's ``remove-encryption-key`` (missing from PyIceberg 0.12)."""

    action: Literal["remove-encryption-key"] = Field(default="remove-encryption-key")
    key_id: str = Field(alias="key-id")


TableUpdate = Annotated[
    AssignUUIDUpdate
    | UpgradeFormatVersionUpdate
    | AddSchemaUpdate
    | SetCurrentSchemaUpdate
    | AddPartitionSpecUpdate
    | SetDefaultSpecUpdate
    | AddSortOrderUpdate
    | SetDefaultSortOrderUpdate
    | _AddSnapshotUpdate
    | SetSnapshotRefUpdate
    | RemoveSnapshotsUpdate
    | RemoveSnapshotRefUpdate
    | SetLocationUpdate
    | SetPropertiesUpdate
    | RemovePropertiesUpdate
    | _SetStatisticsUpdate
    | RemoveStatisticsUpdate
    | SetPartitionStatisticsUpdate
    | RemovePartitionStatisticsUpdate
    | RemovePartitionSpecsUpdate
    | RemoveSchemasUpdate
    | AddEncryptionKeyUpdate
    | RemoveEncryptionKeyUpdate,
    Field(discriminator="action"),
]
_UPDATE_ADAPTER: TypeAdapter[Any] = TypeAdapter(TableUpdate)
_REQUIREMENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(TableRequirement)


# --------------------------------------------------------------------------------------------
# Error helpers
# --------------------------------------------------------------------------------------------


def describe_error(exc: BaseException) -> str:
    """A one-line, client-facing account of a parsing/validation error (views use it too)."""
    if isinstance(exc, PydanticValidationError):
        parts = []
        for error in exc.errors(include_url=False):
            location = ".".join(str(part) for part in error["loc"])
            parts.append(f"{location}: {error['msg']}" if location else error["msg"])
        return "; ".join(parts)
    if isinstance(exc, KeyError):
        return f"missing field {exc}"
    return str(exc)


def _requirement_failed(what: str) -> NoReturn:
    """Java's ``UpdateRequirement`` wording (``Requirement failed: current schema changed: ...``):
    clients and people search for these messages."""
    raise CommitFailed(f"Requirement failed: {what}")


# --------------------------------------------------------------------------------------------
# Parsing and serialising
# --------------------------------------------------------------------------------------------


def parse_requirements(raw: list[dict[str, Any]]) -> list[TableRequirement]:
    """Parse a CommitTableRequest's ``requirements`` (BadRequest on an unknown type or bad field)."""
    return [_parse_item(_REQUIREMENT_ADAPTER, item, "requirement", "type", i) for i, item in enumerate(_as_list(raw))]


def parse_updates(raw: list[dict[str, Any]]) -> list[TableUpdate]:
    """Parse a CommitTableRequest's ``updates`` (BadRequest on an unknown action or bad field)."""
    items = _as_list(raw)
    return [_parse_item(_UPDATE_ADAPTER, _prepare_update(item), "update", "action", i) for i, item in enumerate(items)]


def _as_list(raw: object) -> list[Any]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRequest("Invalid commit: requirements and updates must be arrays")
    return raw


def _parse_item(adapter: TypeAdapter[Any], item: object, kind: str, tag: str, index: int) -> Any:
    if not isinstance(item, dict):
        raise BadRequest(f"Invalid table {kind} #{index}: expected an object")
    try:
        return adapter.validate_python(item)
    except _INVALID as exc:
        raise BadRequest(f"Invalid table {kind} #{index} ({item.get(tag)}): {describe_error(exc)}") from exc


def _prepare_update(item: object) -> object:
    """Give add-spec fields without a ``field-id`` (optional in the spec) a negative placeholder.

    PyIceberg requires the id; the real one is assigned from ``last-partition-id`` when the
    update is applied (see ``_assign_missing_partition_field_ids``).
    """
    if not isinstance(item, dict) or item.get("action") != "add-spec" or not isinstance(item.get("spec"), dict):
        return item
    return {**item, "spec": _spec_with_placeholder_ids(item["spec"])}


def _spec_with_placeholder_ids(spec: dict[str, Any]) -> dict[str, Any]:
    fields = spec.get("fields")
    if not isinstance(fields, list):
        return spec
    placeholders = (-(i + 1) for i in itertools.count())
    return {
        **spec,
        "fields": [
            {**f, "field-id": next(placeholders)} if isinstance(f, dict) and f.get("field-id") is None else f
            for f in fields
        ],
    }


def parse_metadata(text: str | bytes) -> TableMetadata:
    """Parse a metadata file (registerTable, stored documents); BadRequest when it is not valid."""
    try:
        data = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise BadRequest(f"not valid table metadata: {exc}") from exc
    return _metadata_from_dict(data, "not valid table metadata")


def _metadata_from_dict(data: object, problem: str) -> TableMetadata:
    if not isinstance(data, dict):
        raise BadRequest(f"{problem}: expected a JSON object")
    if data.get("format-version") not in FORMAT_VERSIONS:
        raise InvalidArgument(f"{problem}: unsupported format-version {data.get('format-version')!r}")
    try:
        metadata = _METADATA_ADAPTER.validate_python(data)
    except _INVALID as exc:
        raise invalid_metadata(f"{problem}: {describe_error(exc)}", exc) from exc
    _check_refs(metadata, problem)
    return metadata


def _check_refs(metadata: TableMetadata, problem: str) -> None:
    """Java's ``validateRefs``: refs point at known snapshots and ``main`` is the current one."""
    known = {snapshot.snapshot_id for snapshot in metadata.snapshots}
    for name, ref in metadata.refs.items():
        if ref.snapshot_id not in known:
            raise InvalidArgument(f"{problem}: ref {name} points to unknown snapshot {ref.snapshot_id}")
    main = metadata.refs.get(MAIN_BRANCH)
    if (main.snapshot_id if main else None) != metadata.current_snapshot_id:
        raise InvalidArgument(f"{problem}: current-snapshot-id {metadata.current_snapshot_id} does not match main")


_COMPACT = (",", ":")


class SnapshotJson:
    """The JSON of snapshots already serialised, reused when the next version is written.

    Snapshots never change once added, and a commit's new metadata shares its base's snapshot
    objects (updates copy only what they change); serialising only the new ones keeps the cost of
    a commit from growing with the table's history. An entry is used only for the very object it
    was made from (models are frozen), so it can never be stale.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._texts: LruCache[tuple[int, int], tuple[Snapshot, str]] = LruCache(capacity)

    def of(self, snapshot: Snapshot, format_version: int) -> str:
        key = (snapshot.snapshot_id, format_version)
        cached = self._texts.get(key)
        if cached is not None and cached[0] is snapshot:
            return cached[1]
        text = json.dumps(_snapshot_dict(snapshot, format_version), separators=_COMPACT)
        self._texts.put(key, (snapshot, text))
        return text


def _snapshot_dict(snapshot: Snapshot, format_version: int) -> dict[str, Any]:
    """One element of ``snapshots`` as ``_Lossless.serialize_snapshots`` writes it."""
    if format_version == 1:
        snapshot = snapshot.model_copy(update={"sequence_number": None})
    return snapshot.model_dump(mode="json")


def to_json(metadata: TableMetadata, snapshot_json: SnapshotJson | None = None) -> str:
    """The canonical metadata-file JSON: spec field names, Java's key order, no nulls.

    With ``snapshot_json``, snapshots it has already serialised are not serialised again; the
    text is the same either way.
    """
    if snapshot_json is None or not metadata.snapshots:
        return json.dumps(_to_dict(metadata), separators=_COMPACT)
    data = _to_dict(metadata, snapshots=False)
    keys = list(data)
    at = keys.index("snapshots")
    head = json.dumps({key: data[key] for key in keys[:at]}, separators=_COMPACT)
    tail = json.dumps({key: data[key] for key in keys[at + 1 :]}, separators=_COMPACT)
    version = metadata.format_version
    snapshots = ",".join(snapshot_json.of(snapshot, version) for snapshot in metadata.snapshots)
    parts = [head[1:-1], f'"snapshots":[{snapshots}]', tail[1:-1]]
    return "{" + ",".join(part for part in parts if part) + "}"


def _to_dict(metadata: TableMetadata, snapshots: bool = True) -> dict[str, Any]:
    """The document as a dict; ``snapshots=False`` leaves a placeholder where they go."""
    metadata = _as_lossless(metadata)
    data = metadata.model_dump(mode="json", exclude=None if snapshots else {"snapshots"})
    if not snapshots:
        data["snapshots"] = None
    _restore_unknown_transforms(data, metadata)
    if metadata.format_version == 1:
        # v1 readers use the single current schema/spec; they are derived, never stale.
        data["schema"] = next(s for s in data["schemas"] if s["schema-id"] == data["current-schema-id"])
        data["partition-spec"] = next(s for s in data["partition-specs"] if s["spec-id"] == data["default-spec-id"])[
            "fields"
        ]
    if not data.get("encryption-keys"):
        data.pop("encryption-keys", None)
    ordered = {key: data[key] for key in _KEY_ORDER if key in data}
    ordered.update((key, value) for key, value in data.items() if key not in ordered)
    return ordered


def _restore_unknown_transforms(data: dict[str, Any], metadata: TableMetadata) -> None:
    """PyIceberg serialises a transform it does not know as "unknown"; write back its real name.

    Such transforms can only come from stored metadata (new specs must bind), e.g. a newer writer's.
    """
    pairs = [
        *zip(data["partition-specs"], metadata.partition_specs, strict=True),
        *zip(data["sort-orders"], metadata.sort_orders, strict=True),
    ]
    for document, model in pairs:
        for field_json, field_model in zip(document["fields"], model.fields, strict=True):
            if isinstance(field_model.transform, UnknownTransform):
                field_json["transform"] = field_model.transform._transform


def _as_lossless(metadata: TableMetadata) -> TableMetadata:
    """Accept plain PyIceberg metadata too (e.g. built by a caller), as our widened model."""
    if isinstance(metadata, _Lossless):
        return metadata
    data = IcebergBaseModel.model_dump(metadata, mode="json")
    return _metadata_from_dict(data, "invalid table metadata")


# --------------------------------------------------------------------------------------------
# Requirements
# --------------------------------------------------------------------------------------------


def check_requirements(base: TableMetadata | None, requirements: Iterable[TableRequirement]) -> None:
    """Raise CommitFailed (409) unless every requirement holds against ``base``.

    ``base`` is None when the table does not exist: only ``assert-create`` can hold then.
    """
    for requirement in requirements:
        if base is None and not isinstance(requirement, AssertCreate):
            raise CommitFailed(f"Requirement failed: {requirement.type}: table does not exist")
        _REQUIREMENT_CHECKS[type(requirement)](base, requirement)


def _check_create(base: TableMetadata | None, _: AssertCreate) -> None:
    if base is not None:
        _requirement_failed("table already exists")


def _check_table_uuid(base: TableMetadata, req: AssertTableUUID) -> None:
    if req.uuid != base.table_uuid:
        _requirement_failed(f"UUID does not match: expected {base.table_uuid} != {req.uuid}")


def _check_ref_snapshot_id(base: TableMetadata, req: AssertRefSnapshotId) -> None:
    ref = base.refs.get(req.ref)
    if ref is None:
        if req.snapshot_id is not None:
            _requirement_failed(f"branch or tag {req.ref} is missing, expected {req.snapshot_id}")
        return
    kind = ref.snapshot_ref_type.value
    if req.snapshot_id is None:
        _requirement_failed(f"{kind} {req.ref} was created concurrently")
    if req.snapshot_id != ref.snapshot_id:
        _requirement_failed(f"{kind} {req.ref} has changed: expected id {req.snapshot_id} != {ref.snapshot_id}")


def _check_last_assigned_field_id(base: TableMetadata, req: AssertLastAssignedFieldId) -> None:
    if req.last_assigned_field_id != base.last_column_id:
        _requirement_failed(
            f"last assigned field id changed: expected id {req.last_assigned_field_id} != {base.last_column_id}"
        )


def _check_current_schema_id(base: TableMetadata, req: AssertCurrentSchemaId) -> None:
    if req.current_schema_id != base.current_schema_id:
        _requirement_failed(
            f"current schema changed: expected id {req.current_schema_id} != {base.current_schema_id}"
        )


def _check_last_assigned_partition_id(base: TableMetadata, req: AssertLastAssignedPartitionId) -> None:
    if req.last_assigned_partition_id != base.last_partition_id:
        _requirement_failed(
            "last assigned partition id changed: "
            f"expected id {req.last_assigned_partition_id} != {base.last_partition_id}"
        )


def _check_default_spec_id(base: TableMetadata, req: AssertDefaultSpecId) -> None:
    if req.default_spec_id != base.default_spec_id:
        _requirement_failed(
            f"default partition spec changed: expected id {req.default_spec_id} != {base.default_spec_id}"
        )


def _check_default_sort_order_id(base: TableMetadata, req: AssertDefaultSortOrderId) -> None:
    if req.default_sort_order_id != base.default_sort_order_id:
        _requirement_failed(
            f"default sort order changed: expected id {req.default_sort_order_id} != {base.default_sort_order_id}"
        )


# Our own checks rather than PyIceberg's ``validate()``: its assert-ref-snapshot-id wrongly fails
# any ref other than main on a table without snapshots, and these messages match Java's wording.
_REQUIREMENT_CHECKS: dict[type, Callable[[Any, Any], None]] = {
    AssertCreate: _check_create,
    AssertTableUUID: _check_table_uuid,
    AssertRefSnapshotId: _check_ref_snapshot_id,
    AssertLastAssignedFieldId: _check_last_assigned_field_id,
    AssertCurrentSchemaId: _check_current_schema_id,
    AssertLastAssignedPartitionId: _check_last_assigned_partition_id,
    AssertDefaultSpecId: _check_default_spec_id,
    AssertDefaultSortOrderId: _check_default_sort_order_id,
}


# --------------------------------------------------------------------------------------------
# Schemas, partition specs and sort orders
# --------------------------------------------------------------------------------------------


def _validate_schema(schema: Schema, format_version: int) -> None:
    """Unique field ids, and only types and defaults the format version supports (Java's checks)."""
    ids = Counter(_field_ids(schema.as_struct()))
    duplicates = sorted(field_id for field_id, count in ids.items() if count > 1)
    if duplicates:
        raise ValueError(f"Invalid schema: duplicate field ids {duplicates}")
    schema.check_format_version_compatibility(format_version)
    if format_version < 3:
        for nested in index_by_id(schema).values():
            if nested.initial_default is not None:
                raise ValueError(
                    f"Invalid initial default for {nested.name}: non-null default is not supported until v3"
                )


def _field_ids(field_type: IcebergType) -> list[int]:
    if isinstance(field_type, StructType):
        return [i for f in field_type.fields for i in (f.field_id, *_field_ids(f.field_type))]
    if isinstance(field_type, ListType):
        return [field_type.element_id, *_field_ids(field_type.element_type)]
    if isinstance(field_type, MapType):
        return [
            field_type.key_id,
            field_type.value_id,
            *_field_ids(field_type.key_type),
            *_field_ids(field_type.value_type),
        ]
    return []


def _same_schema(a: Schema, b: Schema) -> bool:
    """Java's ``Schema.sameSchema``: same columns and identifier fields, whatever the schema id."""
    return a.columns == b.columns and set(a.identifier_field_ids) == set(b.identifier_field_ids)


def _assign_fresh_schema_ids(schema: Schema) -> Schema:
    """Renumber every field 1..n in Java's order (a struct's fields first, then each one's children).

    Same order as PyIceberg's ``assign_fresh_schema_ids``, which however drops ``initial-default``
    and ``write-default``; here each field is copied with only its id and type replaced.
    """
    counter = itertools.count(1)
    old_to_new: dict[int, int] = {}

    def fresh_id(old: int) -> int:
        old_to_new[old] = next(counter)
        return old_to_new[old]

    def fresh(field_type: IcebergType) -> IcebergType:
        if isinstance(field_type, StructType):
            new_ids = [fresh_id(f.field_id) for f in field_type.fields]
            return StructType(
                *[
                    f.model_copy(update={"field_id": new_id, "field_type": fresh(f.field_type)})
                    for new_id, f in zip(new_ids, field_type.fields, strict=True)
                ]
            )
        if isinstance(field_type, ListType):
            element_id = fresh_id(field_type.element_id)
            return ListType(element_id, fresh(field_type.element_type), field_type.element_required)
        if isinstance(field_type, MapType):
            key_id, value_id = fresh_id(field_type.key_id), fresh_id(field_type.value_id)
            key_type, value_type = fresh(field_type.key_type), fresh(field_type.value_type)
            return MapType(key_id, key_type, value_id, value_type, field_type.value_required)
        return field_type

    struct = fresh(schema.as_struct())
    assert isinstance(struct, StructType)
    identifiers = [old_to_new[field_id] for field_id in schema.identifier_field_ids]
    return Schema(*struct.fields, schema_id=0, identifier_field_ids=identifiers)


def _validate_spec(spec: PartitionSpec, schema: Schema, format_version: int) -> None:
    """Java's checks when binding a spec: sources, transforms, unique names and ids, v1 ids."""
    spec.check_compatible(schema)
    names: set[str] = set()
    ids: set[int] = set()
    for partition_field in spec.fields:
        if not partition_field.name:
            raise ValueError("Cannot use empty partition name")
        if partition_field.name in names:
            raise ValueError(f"Cannot use partition name more than once: {partition_field.name}")
        if partition_field.field_id in ids:
            raise ValueError(f"Cannot use partition field id more than once: {partition_field.field_id}")
        names.add(partition_field.name)
        ids.add(partition_field.field_id)
        # PyIceberg's name-vs-schema conflict rule (identity may reuse its own column's name).
        validate_partition_name(
            partition_field.name, partition_field.transform, partition_field.source_id, schema, set()
        )
    sequential = list(range(PARTITION_FIELD_ID_START, PARTITION_FIELD_ID_START + len(spec.fields)))
    if format_version == 1 and [f.field_id for f in spec.fields] != sequential:
        raise ValueError(f"Spec does not use sequential IDs that are required in v1: {spec}")


def _assign_missing_partition_field_ids(spec: PartitionSpec, last_partition_id: int | None) -> PartitionSpec:
    """Replace the placeholders of ``_prepare_update`` with ids above every assigned one."""
    if all(f.field_id >= 0 for f in spec.fields):
        return spec
    floor = PARTITION_FIELD_ID_START - 1 if last_partition_id is None else last_partition_id
    highest = max([floor, *(f.field_id for f in spec.fields)])
    next_ids = itertools.count(highest + 1)
    fields = [
        f if f.field_id >= 0 else PartitionField(f.source_id, next(next_ids), f.transform, f.name) for f in spec.fields
    ]
    return PartitionSpec(*fields, spec_id=spec.spec_id)


def _current_schema(metadata: TableMetadata) -> Schema:
    schema = metadata.schema_by_id(metadata.current_schema_id)
    if schema is None:
        raise ValueError("table has no current schema: add-schema and set-current-schema must come first")
    return schema


# --------------------------------------------------------------------------------------------
# Creating a table
# --------------------------------------------------------------------------------------------


def new_table_metadata(
    request: dict[str, Any], *, location: str, now_ms: int, table_uuid: str | None = None
) -> TableMetadata:
    """The first metadata of a table, from a CreateTableRequest body.

    Like Java's ``TableMetadata.newTableMetadata``: columns renumbered 1..n, partition fields
    1000.., the sort order 1 (0 when unsorted), ``format-version`` taken out of the properties
    (default 2) along with the other reserved properties. ``location`` is the resolved table
    location (the request's own ``location`` is the caller's business).
    """
    if not isinstance(request, dict):
        raise BadRequest("Invalid create table request: expected an object")
    properties = _string_properties(request.get("properties"))
    format_version = _requested_format_version(properties.get(FORMAT_VERSION_PROPERTY))
    properties = {key: value for key, value in properties.items() if key not in RESERVED_PROPERTIES}
    schema = _parse_part(Schema, request.get("schema"), "schema")
    spec = _parse_part(PartitionSpec, _spec_with_placeholder_ids(request.get("partition-spec") or {}), "partition-spec")
    order = _parse_part(SortOrder, request.get("write-order") or {"order-id": 0, "fields": []}, "write-order")
    try:
        _validate_properties(properties)
        _validate_schema(schema, format_version)
        fresh_schema = _assign_fresh_schema_ids(schema)
        fresh_spec = assign_fresh_partition_spec_ids(spec, schema, fresh_schema)
        _validate_spec(fresh_spec, fresh_schema, format_version)
        fresh_order = assign_fresh_sort_order_ids(order, schema, fresh_schema)
        fresh_order.check_compatible(fresh_schema)
    except _INVALID as exc:
        raise invalid_metadata(f"Invalid table definition: {describe_error(exc)}", exc) from exc
    data: dict[str, Any] = {
        "format-version": format_version,
        "table-uuid": table_uuid or str(uuid.uuid4()),
        "location": location,
        "last-updated-ms": now_ms,
        "last-column-id": fresh_schema.highest_field_id,
        "schemas": [fresh_schema.model_dump(mode="json")],
        "current-schema-id": fresh_schema.schema_id,
        "partition-specs": [fresh_spec.model_dump(mode="json")],
        "default-spec-id": fresh_spec.spec_id,
        "last-partition-id": fresh_spec.last_assigned_field_id,
        "sort-orders": [fresh_order.model_dump(mode="json")],
        "default-sort-order-id": fresh_order.order_id,
        "properties": properties,
    }
    if format_version == 1:
        data["schema"] = data["schemas"][0]
        data["partition-spec"] = data["partition-specs"][0]["fields"]
    return _metadata_from_dict(data, "Invalid table definition")


def _string_properties(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(key, str) for key in raw):
        raise BadRequest("Invalid properties: expected an object of strings")
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in raw.items()}


def _requested_format_version(raw: str | None) -> int:
    if raw is None:
        return DEFAULT_FORMAT_VERSION
    try:
        version = int(raw.strip())
    except ValueError:
        raise BadRequest(f"Invalid format-version: {raw!r}") from None
    if version not in FORMAT_VERSIONS:
        raise BadRequest(f"Unsupported format-version: {version} (supported: 1, 2, 3)")
    return version


def _parse_part(model: type[Any], raw: object, what: str) -> Any:
    if not isinstance(raw, dict):
        raise BadRequest(f"Invalid {what}: expected an object")
    try:
        return model.model_validate(raw)
    except _INVALID as exc:
        raise BadRequest(f"Invalid {what}: {describe_error(exc)}") from exc


def _validate_properties(properties: dict[str, str]) -> None:
    """Reject values this module would later fail on (file name, metadata log size)."""
    if COMPRESSION_CODEC in properties and properties[COMPRESSION_CODEC].lower() not in _FILE_SUFFIX_BY_CODEC:
        raise ValueError(f"Unsupported {COMPRESSION_CODEC}: {properties[COMPRESSION_CODEC]} (use none or gzip)")
    if PREVIOUS_VERSIONS_MAX in properties:
        try:
            int(properties[PREVIOUS_VERSIONS_MAX])
        except ValueError:
            value = properties[PREVIOUS_VERSIONS_MAX]
            raise ValueError(f"{PREVIOUS_VERSIONS_MAX} must be an integer: {value}") from None


# --------------------------------------------------------------------------------------------
# Applying updates
# --------------------------------------------------------------------------------------------


@dataclass
class _Changes:
    """What the updates of one commit did so far (Java's builder keeps the same bookkeeping)."""

    now_ms: int
    creating: bool
    last_added_schema_id: int | None = None
    last_added_spec_id: int | None = None
    last_added_order_id: int | None = None
    added_snapshot_ids: set[int] = field(default_factory=set)
    main_snapshot_ids: list[int] = field(default_factory=list)  # added snapshots made current, in order
    removed_snapshots: bool = False


def _pyiceberg(metadata: TableMetadata, update: Any) -> TableMetadata:
    """Delegate to PyIceberg's handler for an update whose rules match Java's."""
    return _apply_table_update(update, metadata, _TableMetadataUpdateContext())


def _resolve_last_added(requested: int, last_added: int | None, what: str) -> int:
    """-1 means "the one added last in this commit" (also when the add reused an existing id)."""
    if requested != -1:
        return requested
    if last_added is None:
        raise ValueError(f"Cannot set last added {what}: no {what} has been added")
    return last_added


def _assign_uuid(metadata: TableMetadata, update: AssignUUIDUpdate, changes: _Changes) -> TableMetadata:
    if update.uuid == metadata.table_uuid:
        return metadata
    if not changes.creating:
        raise ValueError(f"Cannot change the UUID of an existing table: {metadata.table_uuid} != {update.uuid}")
    return _pyiceberg(metadata, update)


def _upgrade_format_version(metadata: TableMetadata, update: UpgradeFormatVersionUpdate, _: _Changes) -> TableMetadata:
    target = update.format_version
    if target not in FORMAT_VERSIONS:
        raise ValueError(f"Cannot upgrade table to unsupported format version: v{target} (supported: v1 to v3)")
    if target < metadata.format_version:
        raise ValueError(f"Cannot downgrade v{metadata.format_version} table to v{target}")
    if target == metadata.format_version:
        return metadata
    # PyIceberg refuses v3 and carries v1-only attributes over; build the target model instead.
    model = _MODEL_BY_VERSION[target]
    values = {name: getattr(metadata, name) for name in model.model_fields if name in type(metadata).model_fields}
    values["format_version"] = target
    values.setdefault("last_sequence_number", 0)
    if target >= 3:
        values.setdefault("next_row_id", 0)
    return model.model_construct(**values)


def _add_schema(metadata: TableMetadata, update: AddSchemaUpdate, changes: _Changes) -> TableMetadata:
    schema = update.schema_
    _validate_schema(schema, metadata.format_version)
    last_column_id = max(metadata.last_column_id, schema.highest_field_id)
    existing = next((s for s in metadata.schemas if _same_schema(s, schema)), None)
    if existing is not None:
        changes.last_added_schema_id = existing.schema_id
        return metadata.model_copy(update={"last_column_id": last_column_id})
    new_id = max((s.schema_id for s in metadata.schemas), default=-1) + 1
    changes.last_added_schema_id = new_id
    return metadata.model_copy(
        update={
            "schemas": [*metadata.schemas, schema.model_copy(update={"schema_id": new_id})],
            "last_column_id": last_column_id,
        }
    )


def _set_current_schema(metadata: TableMetadata, update: SetCurrentSchemaUpdate, changes: _Changes) -> TableMetadata:
    schema_id = _resolve_last_added(update.schema_id, changes.last_added_schema_id, "schema")
    if schema_id == metadata.current_schema_id:
        return metadata
    if metadata.schema_by_id(schema_id) is None:
        raise ValueError(f"Cannot set current schema to unknown schema: {schema_id}")
    return metadata.model_copy(update={"current_schema_id": schema_id})


def _add_spec(metadata: TableMetadata, update: AddPartitionSpecUpdate, changes: _Changes) -> TableMetadata:
    spec = _assign_missing_partition_field_ids(update.spec, metadata.last_partition_id)
    _validate_spec(spec, _current_schema(metadata), metadata.format_version)
    existing = next((s for s in metadata.partition_specs if s.compatible_with(spec)), None)
    if existing is not None:
        changes.last_added_spec_id = existing.spec_id
        return metadata
    new_spec = PartitionSpec(*spec.fields, spec_id=max((s.spec_id for s in metadata.partition_specs), default=-1) + 1)
    last_partition_id = metadata.last_partition_id
    if last_partition_id is None:
        last_partition_id = PARTITION_FIELD_ID_START - 1
    changes.last_added_spec_id = new_spec.spec_id
    return metadata.model_copy(
        update={
            "partition_specs": [*metadata.partition_specs, new_spec],
            "last_partition_id": max(last_partition_id, new_spec.last_assigned_field_id),
        }
    )


def _set_default_spec(metadata: TableMetadata, update: SetDefaultSpecUpdate, changes: _Changes) -> TableMetadata:
    spec_id = _resolve_last_added(update.spec_id, changes.last_added_spec_id, "partition spec")
    if spec_id == metadata.default_spec_id:
        return metadata
    if spec_id not in metadata.specs():
        raise ValueError(f"Cannot set default partition spec to unknown spec: {spec_id}")
    return metadata.model_copy(update={"default_spec_id": spec_id})


def _add_sort_order(metadata: TableMetadata, update: AddSortOrderUpdate, changes: _Changes) -> TableMetadata:
    order = update.sort_order
    if order.is_unsorted:
        existing = metadata.sort_order_by_id(UNSORTED_SORT_ORDER_ID)
        new_order = UNSORTED_SORT_ORDER
    else:
        order.check_compatible(_current_schema(metadata))
        existing = next((o for o in metadata.sort_orders if o.fields == order.fields), None)
        new_id = max(1, max((o.order_id for o in metadata.sort_orders), default=0) + 1)
        new_order = SortOrder(*order.fields, order_id=new_id)
    if existing is not None:
        changes.last_added_order_id = existing.order_id
        return metadata
    changes.last_added_order_id = new_order.order_id
    return metadata.model_copy(update={"sort_orders": [*metadata.sort_orders, new_order]})


def _set_default_sort_order(
    metadata: TableMetadata, update: SetDefaultSortOrderUpdate, changes: _Changes
) -> TableMetadata:
    order_id = _resolve_last_added(update.sort_order_id, changes.last_added_order_id, "sort order")
    if order_id == metadata.default_sort_order_id:
        return metadata
    if metadata.sort_order_by_id(order_id) is None:
        raise ValueError(f"Cannot set default sort order to unknown sort order: {order_id}")
    return metadata.model_copy(update={"default_sort_order_id": order_id})


def _add_snapshot(metadata: TableMetadata, update: AddSnapshotUpdate, changes: _Changes) -> TableMetadata:
    snapshot = update.snapshot
    for present, what in (
        (metadata.schemas, "schema"),
        (metadata.partition_specs, "partition spec"),
        (metadata.sort_orders, "sort order"),
    ):
        if not present:
            raise ValueError(f"Attempting to add a snapshot before a {what} is added")
    if metadata.snapshot_by_id(snapshot.snapshot_id) is not None:
        raise ValueError(f"Snapshot already exists for id: {snapshot.snapshot_id}")
    _check_parent(metadata, snapshot)
    values: dict[str, Any] = {}
    if metadata.format_version >= 2:
        values["last_sequence_number"] = _next_last_sequence_number(metadata, snapshot)
    if metadata.format_version >= 3:
        snapshot, values["next_row_id"] = _assign_row_ids(metadata, snapshot)
    values["snapshots"] = [*metadata.snapshots, snapshot]
    changes.added_snapshot_ids.add(snapshot.snapshot_id)
    return metadata.model_copy(update=values)


def _check_parent(metadata: TableMetadata, snapshot: Snapshot) -> None:
    """A parent must be a snapshot of this table (stricter than Java, which does not look)."""
    parent_id = snapshot.parent_snapshot_id
    if parent_id is None:
        return
    if parent_id == snapshot.snapshot_id:
        raise ValueError(f"Snapshot {snapshot.snapshot_id} cannot be its own parent")
    if metadata.snapshot_by_id(parent_id) is None:
        raise ValueError(f"Parent snapshot {parent_id} of snapshot {snapshot.snapshot_id} does not exist")


def _next_last_sequence_number(metadata: TableMetadata, snapshot: Snapshot) -> int:
    """Java's rule (v2 and v3 alike): a snapshot with a parent must move the sequence number on."""
    last = metadata.last_sequence_number
    sequence_number = snapshot.sequence_number or 0
    if snapshot.parent_snapshot_id is not None and sequence_number <= last:
        raise ValueError(
            f"Cannot add snapshot with sequence number {sequence_number} older than last sequence number {last}"
        )
    return max(last, sequence_number)  # never lower it (Java would, for a parentless snapshot)


def _assign_row_ids(metadata: TableMetadata, snapshot: Snapshot) -> tuple[Snapshot, int]:
    """v3 row lineage: the snapshot's rows get ids from ``first-row-id``; the table's next id moves on.

    Writers (Java, PyIceberg) set ``first-row-id`` to the table's ``next-row-id``; when absent it is
    assigned here. ``added-rows`` is required: without it ``next-row-id`` cannot advance safely.
    """
    next_row_id = metadata.next_row_id or 0
    if snapshot.added_rows is None or snapshot.added_rows < 0:
        raise ValueError(f"Cannot add a snapshot to a v3 table without a valid added-rows: {snapshot.added_rows}")
    first_row_id = snapshot.first_row_id
    if first_row_id is None:
        first_row_id = next_row_id
        snapshot = snapshot.model_copy(update={"first_row_id": first_row_id})
    elif first_row_id < next_row_id:
        raise ValueError(
            f"Cannot add a snapshot, first-row-id is behind table next-row-id: {first_row_id} < {next_row_id}"
        )
    return snapshot, first_row_id + snapshot.added_rows


def _set_snapshot_ref(metadata: TableMetadata, update: SetSnapshotRefUpdate, changes: _Changes) -> TableMetadata:
    ref = SnapshotRef(
        snapshot_id=update.snapshot_id,
        snapshot_ref_type=update.type,
        min_snapshots_to_keep=update.min_snapshots_to_keep,
        max_snapshot_age_ms=update.max_snapshot_age_ms,
        max_ref_age_ms=update.max_ref_age_ms,
    )
    if update.ref_name == MAIN_BRANCH and ref.snapshot_ref_type != SnapshotRefType.BRANCH:
        raise ValueError("Cannot set main to a tag: main must be a branch")
    if metadata.refs.get(update.ref_name) == ref:
        return metadata
    snapshot = metadata.snapshot_by_id(ref.snapshot_id)
    if snapshot is None:
        raise ValueError(f"Cannot set {update.ref_name} to unknown snapshot: {ref.snapshot_id}")
    values: dict[str, Any] = {"refs": {**metadata.refs, update.ref_name: ref}}
    if update.ref_name == MAIN_BRANCH:
        values.update(_make_current(metadata, snapshot, changes))
    return metadata.model_copy(update=values)


def _make_current(metadata: TableMetadata, snapshot: Snapshot, changes: _Changes) -> dict[str, Any]:
    """Moving main changes the current snapshot and appends to the snapshot log.

    The entry's time is the snapshot's own for a snapshot added in this commit (as in Java) and
    ``now_ms`` otherwise (a rollback), never before the previous entry so the log stays sorted.
    """
    added = snapshot.snapshot_id in changes.added_snapshot_ids
    timestamp_ms = snapshot.timestamp_ms if added else changes.now_ms
    if metadata.snapshot_log:
        timestamp_ms = max(timestamp_ms, metadata.snapshot_log[-1].timestamp_ms)
    if added:
        changes.main_snapshot_ids.append(snapshot.snapshot_id)
    entry = SnapshotLogEntry(snapshot_id=snapshot.snapshot_id, timestamp_ms=timestamp_ms)
    return {"current_snapshot_id": snapshot.snapshot_id, "snapshot_log": [*metadata.snapshot_log, entry]}


def _remove_snapshots(metadata: TableMetadata, update: RemoveSnapshotsUpdate, changes: _Changes) -> TableMetadata:
    """Java's ``removeSnapshots``: unknown ids are ignored; refs, statistics and partition
    statistics of removed snapshots go too; remaining snapshots keep their parent ids (PyIceberg
    clears them, losing lineage). The snapshot log is corrected at the end of the commit."""
    known = {snapshot.snapshot_id for snapshot in metadata.snapshots}
    removed = known.intersection(update.snapshot_ids)
    if not removed:
        return metadata
    changes.removed_snapshots = True
    refs = {name: ref for name, ref in metadata.refs.items() if ref.snapshot_id not in removed}
    return metadata.model_copy(
        update={
            "snapshots": [s for s in metadata.snapshots if s.snapshot_id not in removed],
            "refs": refs,
            "current_snapshot_id": metadata.current_snapshot_id if MAIN_BRANCH in refs else None,
            "statistics": [s for s in metadata.statistics if s.snapshot_id not in removed],
            "partition_statistics": [s for s in metadata.partition_statistics if s.snapshot_id not in removed],
        }
    )


def _remove_snapshot_ref(metadata: TableMetadata, update: RemoveSnapshotRefUpdate, _: _Changes) -> TableMetadata:
    if update.ref_name not in metadata.refs:
        return metadata
    return _pyiceberg(metadata, update)


def _set_location(metadata: TableMetadata, update: SetLocationUpdate, _: _Changes) -> TableMetadata:
    if not update.location.strip():
        raise ValueError("Table location must not be empty")
    if update.location == metadata.location:
        return metadata
    return _pyiceberg(metadata, update)


def _set_properties(metadata: TableMetadata, update: SetPropertiesUpdate, _: _Changes) -> TableMetadata:
    _validate_properties(update.updates)
    return _pyiceberg(metadata, update)


def _remove_properties(metadata: TableMetadata, update: RemovePropertiesUpdate, _: _Changes) -> TableMetadata:
    present = [key for key in update.removals if key in metadata.properties]
    if not present:
        return metadata
    return _pyiceberg(metadata, RemovePropertiesUpdate(removals=present))


def _set_statistics(metadata: TableMetadata, update: SetStatisticsUpdate, _: _Changes) -> TableMetadata:
    return _pyiceberg(metadata, update)


def _remove_statistics(metadata: TableMetadata, update: RemoveStatisticsUpdate, _: _Changes) -> TableMetadata:
    if not any(s.snapshot_id == update.snapshot_id for s in metadata.statistics):
        return metadata
    return _pyiceberg(metadata, update)


def _set_partition_statistics(
    metadata: TableMetadata, update: SetPartitionStatisticsUpdate, _: _Changes
) -> TableMetadata:
    return _pyiceberg(metadata, update)


def _remove_partition_statistics(
    metadata: TableMetadata, update: RemovePartitionStatisticsUpdate, _: _Changes
) -> TableMetadata:
    if not any(s.snapshot_id == update.snapshot_id for s in metadata.partition_statistics):
        return metadata
    return _pyiceberg(metadata, update)


def _remove_partition_specs(metadata: TableMetadata, update: RemovePartitionSpecsUpdate, _: _Changes) -> TableMetadata:
    if metadata.default_spec_id in update.spec_ids:
        raise ValueError(f"Cannot remove the default partition spec: {metadata.default_spec_id}")
    present = sorted(set(update.spec_ids).intersection(metadata.specs()))
    if not present:
        return metadata
    return _pyiceberg(metadata, RemovePartitionSpecsUpdate(spec_ids=present))


def _remove_schemas(metadata: TableMetadata, update: RemoveSchemasUpdate, _: _Changes) -> TableMetadata:
    if metadata.current_schema_id in update.schema_ids:
        raise ValueError(f"Cannot remove the current schema: {metadata.current_schema_id}")
    present = sorted(set(update.schema_ids).intersection(s.schema_id for s in metadata.schemas))
    if not present:
        return metadata
    return _pyiceberg(metadata, RemoveSchemasUpdate(schema_ids=present))


def _add_encryption_key(metadata: TableMetadata, update: AddEncryptionKeyUpdate, _: _Changes) -> TableMetadata:
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


def _remove_encryption_key(metadata: TableMetadata, update: RemoveEncryptionKeyUpdate, _: _Changes) -> TableMetadata:
    """Removing an unknown key is a no-op (Java); a key a snapshot still uses cannot go."""
    keys: list[EncryptedKey] = metadata.encryption_keys
    if not any(k.key_id == update.key_id for k in keys):
        return metadata
    users = [s.snapshot_id for s in metadata.snapshots if getattr(s, "key_id", None) == update.key_id]
    if users:
        raise ValueError(f"Cannot remove encryption key {update.key_id}: used by snapshots {users}")
    return metadata.model_copy(update={"encryption_keys": [k for k in keys if k.key_id != update.key_id]})


_Handler = Callable[[Any, Any, _Changes], TableMetadata]
_UPDATE_HANDLERS: dict[type, _Handler] = {
    AssignUUIDUpdate: _assign_uuid,
    UpgradeFormatVersionUpdate: _upgrade_format_version,
    AddSchemaUpdate: _add_schema,
    SetCurrentSchemaUpdate: _set_current_schema,
    AddPartitionSpecUpdate: _add_spec,
    SetDefaultSpecUpdate: _set_default_spec,
    AddSortOrderUpdate: _add_sort_order,
    SetDefaultSortOrderUpdate: _set_default_sort_order,
    AddSnapshotUpdate: _add_snapshot,
    SetSnapshotRefUpdate: _set_snapshot_ref,
    RemoveSnapshotsUpdate: _remove_snapshots,
    RemoveSnapshotRefUpdate: _remove_snapshot_ref,
    SetLocationUpdate: _set_location,
    SetPropertiesUpdate: _set_properties,
    RemovePropertiesUpdate: _remove_properties,
    SetStatisticsUpdate: _set_statistics,
    RemoveStatisticsUpdate: _remove_statistics,
    SetPartitionStatisticsUpdate: _set_partition_statistics,
    RemovePartitionStatisticsUpdate: _remove_partition_statistics,
    RemovePartitionSpecsUpdate: _remove_partition_specs,
    RemoveSchemasUpdate: _remove_schemas,
    AddEncryptionKeyUpdate: _add_encryption_key,
    RemoveEncryptionKeyUpdate: _remove_encryption_key,
}


def _apply_one(metadata: TableMetadata, update: Any, changes: _Changes, index: int) -> TableMetadata:
    handler = next((_UPDATE_HANDLERS[c] for c in type(update).__mro__ if c in _UPDATE_HANDLERS), None)
    if handler is None:
        raise BadRequest(f"Invalid table update #{index}: unsupported update {type(update).__name__}")
    try:
        return handler(metadata, update, changes)
    except _INVALID as exc:
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
    changes = _Changes(now_ms=now_ms, creating=creating)
    metadata = _empty_metadata(updates) if base is None else _as_lossless(base)
    for index, update in enumerate(updates):
        metadata = _apply_one(metadata, update, changes, index)
    if base is None:
        metadata = _complete_new_table(metadata, changes, default_location)
    metadata = _correct_snapshot_log(metadata, changes)
    # Model equality, not a comparison of two dumps: the updates copy only what they change, so
    # the unchanged parts (the snapshot list above all) compare by identity, in O(changes).
    if base is not None and metadata == base:
        return base
    return _finish(base, metadata, base_location=base_location, now_ms=now_ms)


def _empty_metadata(updates: list[Any]) -> TableMetadata:
    """An empty table to build a staged create on; ids -1 until the updates set them."""
    requested = next((u.format_version for u in updates if isinstance(u, UpgradeFormatVersionUpdate)), None)
    format_version = requested if requested in FORMAT_VERSIONS else DEFAULT_FORMAT_VERSION
    values: dict[str, Any] = {
        "format_version": format_version,
        "location": "",
        "table_uuid": uuid.uuid4(),
        "last_updated_ms": 0,
        "last_column_id": 0,
        "current_schema_id": -1,
        "default_spec_id": -1,
        "last_partition_id": PARTITION_FIELD_ID_START - 1,
        "default_sort_order_id": -1,
    }
    if format_version == 1:
        values.update(schema_=Schema(), partition_spec=[])
    return _MODEL_BY_VERSION[format_version].model_construct(**values)


def _complete_new_table(metadata: TableMetadata, changes: _Changes, default_location: str | None) -> TableMetadata:
    """Fill what a staged create may leave out (unpartitioned, unsorted) and check the rest."""
    if not metadata.schemas:
        raise BadRequest("Cannot create a table without a schema: add-schema is required")
    values: dict[str, Any] = {}
    if metadata.schema_by_id(metadata.current_schema_id) is None:
        values["current_schema_id"] = metadata.schemas[-1].schema_id
    if not metadata.partition_specs:
        values.update(partition_specs=[PartitionSpec(spec_id=0)], default_spec_id=0)
    elif metadata.default_spec_id not in metadata.specs():
        values["default_spec_id"] = metadata.partition_specs[-1].spec_id
    if not metadata.sort_orders:
        values.update(sort_orders=[UNSORTED_SORT_ORDER], default_sort_order_id=UNSORTED_SORT_ORDER_ID)
    elif metadata.sort_order_by_id(metadata.default_sort_order_id) is None:
        values["default_sort_order_id"] = metadata.sort_orders[-1].order_id
    if not metadata.location:
        if not default_location:
            raise BadRequest("Cannot create a table without a location: set-location is required")
        values["location"] = default_location
    return metadata.model_copy(update=values)


def _correct_snapshot_log(metadata: TableMetadata, changes: _Changes) -> TableMetadata:
    """Java's ``updateSnapshotLog``: drop intermediate snapshots and history gaps.

    A snapshot added and made current but replaced as current within the same commit never was
    current, so its entry goes. If a logged snapshot was removed, everything before it goes too:
    keeping the later entries would claim the next snapshot was current during the gap.
    """
    intermediate = {sid for sid in changes.main_snapshot_ids if sid != metadata.current_snapshot_id}
    if not intermediate and not changes.removed_snapshots:
        return metadata
    valid = {snapshot.snapshot_id for snapshot in metadata.snapshots}
    log: list[SnapshotLogEntry] = []
    for entry in metadata.snapshot_log:
        if entry.snapshot_id in valid:
            if entry.snapshot_id not in intermediate:
                log.append(entry)
        elif changes.removed_snapshots:
            log.clear()
    return metadata.model_copy(update={"snapshot_log": log})


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
    except _INVALID as exc:
        raise invalid_metadata(f"{problem}: {describe_error(exc)}", exc) from exc
    metadata_log = list(metadata.metadata_log)
    if base is not None and base_location:
        metadata_log = _metadata_log_with(base, base_location, metadata.properties)
    values = {"metadata_log": metadata_log, "last_updated_ms": _last_updated_ms(base, metadata, metadata_log, now_ms)}
    if base is None or type(base) is not type(metadata) or metadata.format_version == 1:
        data = _to_dict(metadata.model_copy(update=values))
        return _metadata_from_dict(data, problem)
    try:
        for check in (check_schemas, check_partition_specs, check_sort_orders):
            check(metadata)
    except _INVALID as exc:
        raise invalid_metadata(f"{problem}: {describe_error(exc)}", exc) from exc
    _check_refs(metadata, problem)
    return metadata.model_copy(update=values)


def _check_ranges(metadata: TableMetadata, problem: str) -> None:
    """Values the rules compute (next ids, row ids, sequence numbers) stay in Java's int/long.

    Request values are range-checked when the body is parsed (``app.ground.limits``); a value at the top
    of its range plus one - ``first-row-id + added-rows``, the next schema id - is caught here.
    """
    longs = {"last-sequence-number": getattr(metadata, "last_sequence_number", None) or 0,  # not in v1
             "last-updated-ms": metadata.last_updated_ms, "next-row-id": getattr(metadata, "next_row_id", None) or 0}
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


# --------------------------------------------------------------------------------------------
# A commit, end to end
# --------------------------------------------------------------------------------------------


def commit(
    base: TableMetadata | None,
    requirements: list[dict[str, Any]],
    updates: list[dict[str, Any]],
    *,
    base_location: str | None,
    now_ms: int,
    default_location: str | None = None,
) -> TableMetadata:
    """Parse, check and apply one CommitTableRequest; what the catalog service calls.

    Deterministic for given inputs, except for the uuid of a created table the client did not
    assign. Returns ``base`` itself when nothing changed. A missing table (``base`` None) is
    only acceptable with ``assert-create`` (a staged create); otherwise NoSuchTable (404), as
    Java's ``CatalogHandlers.updateTable``.
    """
    parsed_requirements = parse_requirements(requirements)
    parsed_updates = parse_updates(updates)
    if base is None and not any(isinstance(r, AssertCreate) for r in parsed_requirements):
        raise NoSuchTable("Table does not exist")
    check_requirements(base, parsed_requirements)
    return apply_updates(
        base, parsed_updates, base_location=base_location, now_ms=now_ms, default_location=default_location
    )


# --------------------------------------------------------------------------------------------
# Metadata files
# --------------------------------------------------------------------------------------------


def metadata_file_name(version: int, properties: dict[str, str], file_uuid: str) -> str:
    """``00001-<uuid>.metadata.json`` or, with ``write.metadata.compression-codec=gzip``,
    ``00001-<uuid>.gz.metadata.json`` (Java's ``newTableMetadataFilePath``). The caller gzips."""
    codec = properties.get(COMPRESSION_CODEC, "none").lower()
    if codec not in _FILE_SUFFIX_BY_CODEC:
        raise BadRequest(f"Unsupported {COMPRESSION_CODEC}: {codec} (use none or gzip)")
    return f"{version:05d}-{file_uuid}{_FILE_SUFFIX_BY_CODEC[codec]}"


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


def metadata_directory(metadata: TableMetadata) -> str:
    """Where metadata files go: ``write.metadata.path``, else ``<location>/metadata``."""
    configured = metadata.properties.get(METADATA_PATH)
    if configured:
        return configured.rstrip("/")
    return f"{metadata.location.rstrip('/')}/metadata"


def metadata_files_to_delete(old: TableMetadata, new: TableMetadata) -> list[str]:
    """Previous metadata files that fell out of the log, when the table asks for their deletion.

    Java's ``CatalogUtil.deleteRemovedMetadataFiles``: only when
    ``write.metadata.delete-after-commit.enabled`` is true (default false) in the new metadata.
    """
    if new.properties.get(DELETE_AFTER_COMMIT, "false").strip().lower() != "true":
        return []
    kept = {entry.metadata_file for entry in new.metadata_log}
    dropped = [entry.metadata_file for entry in old.metadata_log if entry.metadata_file not in kept]
    return list(dict.fromkeys(dropped))


def refs_only(metadata_json: dict[str, Any]) -> dict[str, Any]:
    """``loadTable?snapshots=refs``: only the snapshots a branch or tag points to; all else as is."""
    refs = metadata_json.get("refs") or {}
    wanted = {ref.get("snapshot-id") for ref in refs.values() if isinstance(ref, dict)}
    current = metadata_json.get("current-snapshot-id")
    if current is not None and current != -1:
        wanted.add(current)  # v1 metadata may have a current snapshot and no refs
    if "snapshots" not in metadata_json:
        return dict(metadata_json)
    snapshots = [s for s in metadata_json["snapshots"] or [] if s.get("snapshot-id") in wanted]
    return {**metadata_json, "snapshots": snapshots}


def table_uuid(metadata: TableMetadata) -> str:
    return str(metadata.table_uuid)


def current_location(metadata: TableMetadata) -> str:
    """The table's base location."""
    return metadata.location
