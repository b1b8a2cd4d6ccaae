"""A commit's requirements, checked against the current metadata with Java's wording (409 when
one does not hold)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NoReturn

from pyiceberg.table.metadata import (
    TableMetadata,
)
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
