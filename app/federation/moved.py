"""The read-only mark of a table moved home (app/table_moves/service.py): a federated warehouse's
writes that would change the remote's copy of such a table are refused before they are
forwarded, so the copy and the native table cannot diverge through Growler.

``written_tables`` is pure (which existing tables a write changes, from its path and body); the
check costs one statement, and only for writes that name tables.
"""

from __future__ import annotations

from typing import Any

from app.federation.changes import Namespace, identified
from app.ground.errors import Forbidden
from app.rules.identifiers import parse_namespace
from storage.table_moves import TableMoveRows


def written_tables(
    operation_id: str, values: dict[str, str], request: Any, separator: str
) -> list[tuple[Namespace, str]]:
    """The existing tables a forwarded write changes: a commit's or a drop's table, a rename's
    source, a transaction's tables, an overwriting register's name."""
    if operation_id in ("updateTable", "dropTable"):
        return [(parse_namespace(values["namespace"], separator), values["table"])]
    if operation_id == "renameTable":
        found = identified(request.get("source") if isinstance(request, dict) else None)
        return [found] if found is not None else []
    if operation_id == "registerTable" and isinstance(request, dict) and request.get("overwrite"):
        return [(parse_namespace(values["namespace"], separator), str(request.get("name")))]
    if operation_id == "commitTransaction" and isinstance(request, dict):
        changes = request.get("table-changes")
        named = [identified(change.get("identifier")) for change in changes or () if isinstance(change, dict)]
        return [found for found in named if found is not None]
    return []


class MovedCopies:
    def __init__(self, rows: TableMoveRows, separator: str) -> None:
        self.rows = rows
        self.separator = separator  # Growler's namespace separator, as the path's namespaces are read

    def refuse_write(
        self, warehouse_id: int, prefix: str, operation_id: str, values: dict[str, str], request: Any
    ) -> None:
        """403 for a write naming a table moved home whose remote copy is still there."""
        tables = written_tables(operation_id, values, request, self.separator)
        moved = self.rows.any_of(warehouse_id, tables) if tables else None
        if moved is None:
            return
        source = ".".join((*moved.source_namespace, moved.source_name))
        target = ".".join((*moved.target_namespace, moved.target_name))
        raise Forbidden(
            f"Table {source} of warehouse {prefix} was moved to warehouse {moved.target_warehouse} as {target}"
            f" and is read-only here: write to {moved.target_warehouse}.{target}, or undo the move (undoTableMove)"
        )
