"""What the update handlers share: the bookkeeping of one commit's updates, and the call into
PyIceberg's own handler where its rules match Java's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyiceberg.table.metadata import (
    TableMetadata,
)
from pyiceberg.table.update import (
    _apply_table_update,
    _TableMetadataUpdateContext,
)


@dataclass
class Changes:
    """What the updates of one commit did so far (Java's builder keeps the same bookkeeping)."""

    now_ms: int
    creating: bool
    last_added_schema_id: int | None = None
    last_added_spec_id: int | None = None
    last_added_order_id: int | None = None
    added_snapshot_ids: set[int] = field(default_factory=set)
    main_snapshot_ids: list[int] = field(default_factory=list)  # added snapshots made current, in order
    removed_snapshots: bool = False


def apply_with_pyiceberg(metadata: TableMetadata, update: Any) -> TableMetadata:
    """Delegate to PyIceberg's handler for an update whose rules match Java's."""
    return _apply_table_update(update, metadata, _TableMetadataUpdateContext())


def resolve_last_added(requested: int, last_added: int | None, what: str) -> int:
    """-1 means "the one added last in this commit" (also when the add reused an existing id)."""
    if requested != -1:
        return requested
    if last_added is None:
        raise ValueError(f"Cannot set last added {what}: no {what} has been added")
    return last_added


# An update handler: the metadata so far, the update, the commit's bookkeeping -> the new metadata.
Handler = Callable[[Any, Any, Changes], TableMetadata]
