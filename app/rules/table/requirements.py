"""A commit's requirements, checked against the current metadata with Java's wording (409 when
one does not hold)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.update import (
    AssertCreate,
    AssertCurrentSchemaId,
    AssertDefaultSortOrderId,
    AssertDefaultSpecId,
    AssertLastAssignedFieldId,
    AssertLastAssignedPartitionId,
    AssertRefSnapshotId,
    AssertTableUUID,
    TableRequirement,
)

from app.ground.errors import CommitFailed


def _requirement_failed(what: str) -> NoReturn:
    """Java's ``UpdateRequirement`` wording (``Requirement failed: current schema changed: ...``):
    clients and people search for these messages."""
    raise CommitFailed(f"Requirement failed: {what}")


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
        _requirement_failed(f"current schema changed: expected id {req.current_schema_id} != {base.current_schema_id}")


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


# -- the same checks on a stored document, before it is parsed ---------------------------------


@dataclass(frozen=True)
class _Ref:
    snapshot_id: int
    snapshot_ref_type: SnapshotRefType


@dataclass(frozen=True)
class DocumentFields:
    """The fields the checks read, as the parsed model would hold them."""

    table_uuid: uuid.UUID
    refs: dict[str, _Ref]
    last_column_id: int
    current_schema_id: int
    last_partition_id: int
    default_spec_id: int
    default_sort_order_id: int


_INT_FIELDS = ("last-column-id", "current-schema-id", "last-partition-id", "default-spec-id", "default-sort-order-id")


def refute_with_document(document: dict[str, Any], requirements: Iterable[TableRequirement]) -> None:
    """Raise what ``check_requirements`` would raise against ``document`` parsed, when the decoded
    JSON document decides it; return when it does not.

    A commit that another writer's commit made hopeless is refused before its base is parsed
    into the model, which costs more than anything else in a commit and grows with the table's
    history. The document decides only when every field the checks read is there as format v2
    and v3 require, with the type the model would give it (the refs filled in as the model
    fills them in); otherwise the full parse and ``check_requirements`` decide, as before.
    """
    refute_with_fields(document_fields(document), requirements)


def refute_with_fields(fields: DocumentFields | None, requirements: Iterable[TableRequirement]) -> None:
    """``refute_with_document`` on the fields read from a document before (``document_fields``)."""
    if fields is not None:
        check_requirements(fields, requirements)  # type: ignore[arg-type]  # the same attributes


def document_fields(document: dict[str, Any]) -> DocumentFields | None:
    """The fields the requirement checks read, from a decoded document; None when the document
    does not decide them (the full parse and ``check_requirements`` then do)."""
    if document.get("format-version") not in (2, 3):
        return None
    ints = [document.get(name) for name in _INT_FIELDS]
    refs, current, raw_uuid = document.get("refs"), document.get("current-snapshot-id"), document.get("table-uuid")
    if not all(_is_int(value) for value in ints) or not isinstance(refs, dict) or not isinstance(raw_uuid, str):
        return None
    if current is not None and not _is_int(current):
        return None
    parsed_refs = {}
    for name, ref in refs.items():
        if not isinstance(ref, dict) or not _is_int(ref.get("snapshot-id")) or ref.get("type") not in ("branch", "tag"):
            return None
        parsed_refs[name] = _Ref(ref["snapshot-id"], SnapshotRefType(ref["type"]))
    if current is not None and current != -1 and MAIN_BRANCH not in parsed_refs:
        parsed_refs[MAIN_BRANCH] = _Ref(current, SnapshotRefType.BRANCH)  # as the model's construct_refs
    try:
        table_uuid = uuid.UUID(raw_uuid)
    except ValueError:
        return None
    return DocumentFields(table_uuid, parsed_refs, *ints)


def _is_int(value: Any) -> bool:
    return type(value) is int
