"""Snapshots, refs and statistics: the update handlers that add, point to and remove them, and
the correction of the snapshot log at the end of a commit."""

from __future__ import annotations

from typing import Any

from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRef, SnapshotRefType
from pyiceberg.table.snapshots import Snapshot, SnapshotLogEntry
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    RemovePartitionStatisticsUpdate,
    RemoveSnapshotRefUpdate,
    RemoveSnapshotsUpdate,
    RemoveStatisticsUpdate,
    SetPartitionStatisticsUpdate,
    SetSnapshotRefUpdate,
    SetStatisticsUpdate,
)

from app.rules.table.changes import Changes, Handler, apply_with_pyiceberg


def _require_non_negative(value: int | None, what: str) -> None:
    """Snapshot ids and sequence numbers are never negative: Java makes snapshot ids from a uuid's
    bits with the sign bit cleared, sequence numbers count up from 0, and ``-1`` stands for "no
    snapshot" in metadata (``current-snapshot-id``) and in clients. A negative one in an update
    is a broken or hostile writer, refused before it reaches the table's history."""
    if value is not None and value < 0:
        raise ValueError(f"Invalid {what}: {value} (must not be negative)")


def _add_snapshot(metadata: TableMetadata, update: AddSnapshotUpdate, changes: Changes) -> TableMetadata:
    snapshot = update.snapshot
    _require_non_negative(snapshot.snapshot_id, "snapshot id")
    _require_non_negative(snapshot.parent_snapshot_id, "parent snapshot id")
    _require_non_negative(snapshot.sequence_number, "sequence number")
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


def _set_snapshot_ref(metadata: TableMetadata, update: SetSnapshotRefUpdate, changes: Changes) -> TableMetadata:
    _require_non_negative(update.snapshot_id, "snapshot id")
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


def _make_current(metadata: TableMetadata, snapshot: Snapshot, changes: Changes) -> dict[str, Any]:
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


def _remove_snapshots(metadata: TableMetadata, update: RemoveSnapshotsUpdate, changes: Changes) -> TableMetadata:
    """Java's ``removeSnapshots``: unknown ids are ignored; refs, statistics and partition
    statistics of removed snapshots go too; remaining snapshots keep their parent ids (PyIceberg
    clears them, losing lineage). The snapshot log is corrected at the end of the commit."""
    for snapshot_id in update.snapshot_ids:
        _require_non_negative(snapshot_id, "snapshot id")
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


def _remove_snapshot_ref(metadata: TableMetadata, update: RemoveSnapshotRefUpdate, _: Changes) -> TableMetadata:
    if update.ref_name not in metadata.refs:
        return metadata
    return apply_with_pyiceberg(metadata, update)


def _set_statistics(metadata: TableMetadata, update: SetStatisticsUpdate, _: Changes) -> TableMetadata:
    _require_non_negative(update.statistics.snapshot_id, "snapshot id")
    return apply_with_pyiceberg(metadata, update)


def _remove_statistics(metadata: TableMetadata, update: RemoveStatisticsUpdate, _: Changes) -> TableMetadata:
    _require_non_negative(update.snapshot_id, "snapshot id")
    if not any(s.snapshot_id == update.snapshot_id for s in metadata.statistics):
        return metadata
    return apply_with_pyiceberg(metadata, update)


def _set_partition_statistics(
    metadata: TableMetadata, update: SetPartitionStatisticsUpdate, _: Changes
) -> TableMetadata:
    _require_non_negative(update.partition_statistics.snapshot_id, "snapshot id")
    return apply_with_pyiceberg(metadata, update)


def _remove_partition_statistics(
    metadata: TableMetadata, update: RemovePartitionStatisticsUpdate, _: Changes
) -> TableMetadata:
    _require_non_negative(update.snapshot_id, "snapshot id")
    if not any(s.snapshot_id == update.snapshot_id for s in metadata.partition_statistics):
        return metadata
    return apply_with_pyiceberg(metadata, update)


def correct_snapshot_log(metadata: TableMetadata, changes: Changes) -> TableMetadata:
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


SNAPSHOT_UPDATES: dict[type, Handler] = {
    AddSnapshotUpdate: _add_snapshot,
    SetSnapshotRefUpdate: _set_snapshot_ref,
    RemoveSnapshotsUpdate: _remove_snapshots,
    RemoveSnapshotRefUpdate: _remove_snapshot_ref,
    SetStatisticsUpdate: _set_statistics,
    RemoveStatisticsUpdate: _remove_statistics,
    SetPartitionStatisticsUpdate: _set_partition_statistics,
    RemovePartitionStatisticsUpdate: _remove_partition_statistics,
}
