"""The table-metadata models: PyIceberg's, widened so that nothing a client sends is silently dropped.

The three metadata versions, the update and requirement unions a commit request is parsed into,
the spec's encryption-key updates PyIceberg lacks, and the table properties the rules read.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter, field_serializer
from pyiceberg.exceptions import ValidationError as IcebergValidationError
from pyiceberg.table.metadata import (
    TableMetadata,
    TableMetadataV1,
    TableMetadataV2,
    TableMetadataV3,
)
from pyiceberg.table.snapshots import Snapshot
from pyiceberg.table.statistics import BlobMetadata, StatisticsFile
from pyiceberg.table.update import (
    AddPartitionSpecUpdate,
    AddSchemaUpdate,
    AddSnapshotUpdate,
    AddSortOrderUpdate,
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
)
from pyiceberg.typedef import IcebergBaseModel

from app.ground.lru import LruCache

FORMAT_VERSIONS = (1, 2, 3)


DEFAULT_FORMAT_VERSION = 2  # Java's default since Iceberg 1.4


FORMAT_VERSION_PROPERTY = "format-version"


PREVIOUS_VERSIONS_MAX = "write.metadata.previous-versions-max"


PREVIOUS_VERSIONS_MAX_DEFAULT = 100


DELETE_AFTER_COMMIT = "write.metadata.delete-after-commit.enabled"


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


# What PyIceberg and pydantic raise for bad input (pydantic's ValidationError is a ValueError).
INVALID = (ValueError, KeyError, TypeError, IcebergValidationError)


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


class Lossless(IcebergBaseModel):
    """Fields and serialisers shared by the three metadata versions below."""

    snapshots: list[_Snapshot] = Field(default_factory=list)
    statistics: list[_StatisticsFile] = Field(default_factory=list)
    encryption_keys: list[EncryptedKey] = Field(alias="encryption-keys", default_factory=list)

    def snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        """The snapshot with this id; through an index instead of PyIceberg's scan of the list,
        so the lookups of a commit (parent, duplicate id, ref target) do not grow with history."""
        return _snapshot_index(self.snapshots).get(snapshot_id)

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


_SNAPSHOT_INDEXES: LruCache[int, tuple[list[Snapshot], dict[int, Snapshot]]] = LruCache(32)
_latest_index: tuple[list[Snapshot], dict[int, Snapshot]] = ([], {})


def _snapshot_index(snapshots: list[Snapshot]) -> dict[int, Snapshot]:
    """Snapshots by id, for this very list (models are immutable: updates make new lists).

    Kept by the list's identity and checked against it, so a reused ``id`` can never serve
    another list's index; a miss costs building it, never a wrong answer. A list that extends
    the one indexed last (an added snapshot) copies that index and adds the new ones.
    """
    global _latest_index
    cached = _SNAPSHOT_INDEXES.get(id(snapshots))
    if cached is not None and cached[0] is snapshots:
        return cached[1]
    base, base_index = _latest_index
    extends = starts_with_same(snapshots, base)
    # reversed: with a (malformed) repeated id, the first one wins, as in PyIceberg's scan
    index = {snapshot.snapshot_id: snapshot for snapshot in reversed(snapshots[len(base) :] if extends else snapshots)}
    if extends:
        index.update(base_index)
    _SNAPSHOT_INDEXES.put(id(snapshots), (snapshots, index))
    _latest_index = (snapshots, index)
    return index


def starts_with_same(items: Sequence[Any], prefix: Sequence[Any]) -> bool:
    """Whether ``items`` starts with the very objects of ``prefix`` (identity, compared in C)."""
    return len(prefix) <= len(items) and all(map(operator.is_, prefix, items))


class _TableMetadataV1(Lossless, TableMetadataV1):  # type: ignore[misc]
    pass


class _TableMetadataV2(Lossless, TableMetadataV2):  # type: ignore[misc]
    pass


class _TableMetadataV3(Lossless, TableMetadataV3):  # type: ignore[misc]
    next_row_id: int = Field(alias="next-row-id", default=0)  # type: ignore[assignment]

    def model_dump_json(self, **kwargs: Any) -> str:  # type: ignore[override]
        # PyIceberg 0.12 raises NotImplementedError for v3; the JSON itself is fine.
        return IcebergBaseModel.model_dump_json(self, **kwargs)


MODEL_BY_VERSION: dict[int, type[TableMetadata]] = {1: _TableMetadataV1, 2: _TableMetadataV2, 3: _TableMetadataV3}


METADATA_ADAPTER: TypeAdapter[TableMetadata] = TypeAdapter(
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


UPDATE_ADAPTER: TypeAdapter[Any] = TypeAdapter(TableUpdate)


REQUIREMENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(TableRequirement)
