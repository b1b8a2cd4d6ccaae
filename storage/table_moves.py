"""Moves of tables from federated warehouses into native ones (migration 0035; the service is
app/table_moves/service.py). SQL only.

A move's row is written in the transaction that registers the table in the native warehouse
(``EntryRows.insert_entry`` calls ``insert_move``), so the native entry and the remote copy's
read-only mark appear together or not at all. While it stands the native entry cannot be deleted
(ON DELETE RESTRICT, translated by storage/db.py): undoing the move deletes both in one
transaction (``EntryRows.delete_entry`` calls ``end_move``), guarded by the metadata location.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from psycopg import Connection

from storage.db import Database
from storage.events import ChangeEvent, record_events


@dataclass(frozen=True)
class MovedFrom:
    """Where a table being registered comes from: written with its entry (``insert_move``)."""

    source_warehouse_id: int
    source_namespace: tuple[str, ...]
    source_name: str
    metadata_location: str
    remote: str  # "keep" (the remote's copy stays, read-only through Growler) | "drop" (until dropped there)
    moved_by: str | None
    # a move with a copy of the files: the remote's version copied (``metadata_location``: the copy's)
    source_metadata_location: str | None = None


@dataclass(frozen=True)
class TableMoveRow:
    source_warehouse_id: int
    source_namespace: tuple[str, ...]
    source_name: str
    entry_id: int
    target_warehouse: str
    target_namespace: tuple[str, ...]
    target_name: str
    target_metadata_location: str  # the native entry's current one: moved-back is refused once it differs
    metadata_location: str  # the one the move registered
    remote: str
    moved_by: str | None
    moved_at: datetime
    source_metadata_location: str | None = None  # a copy's: the remote's version it was made of


_SELECT = (
    "SELECT m.source_warehouse_id, m.source_namespace, m.source_name, m.entry_id, w.name AS target_warehouse,"
    " n.path AS target_namespace, e.name AS target_name, e.metadata_location AS target_metadata_location,"
    " m.metadata_location, m.remote, m.moved_by, m.moved_at, m.source_metadata_location"
    " FROM table_move m JOIN catalog_entry e ON e.id = m.entry_id JOIN namespace n ON n.id = e.namespace_id"
    " JOIN warehouse w ON w.id = n.warehouse_id"
)


def insert_move(conn: Connection, moved: MovedFrom, entry_id: int) -> None:
    """The move's row, in the caller's (the register's) transaction, and the read restrictions on
    the remote's table (kept by its path, migration 0038) moved onto the native entry: a move never
    sheds them (those on the remote's namespaces stay there, like its grants)."""
    conn.execute(
        "UPDATE read_restriction SET warehouse_id = n.warehouse_id, namespace_id = n.id, entry_id = e.id,"
        " remote_path = NULL, remote_name = NULL FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id"
        " WHERE e.id = %s AND read_restriction.warehouse_id = %s AND read_restriction.securable = 'table'"
        " AND read_restriction.remote_path = %s AND read_restriction.remote_name = %s",
        (entry_id, moved.source_warehouse_id, list(moved.source_namespace), moved.source_name),
    )
    conn.execute(
        "INSERT INTO table_move (source_warehouse_id, source_namespace, source_name, entry_id, metadata_location,"
        " remote, moved_by, source_metadata_location) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (
            moved.source_warehouse_id,
            list(moved.source_namespace),
            moved.source_name,
            entry_id,
            moved.metadata_location,
            moved.remote,
            moved.moved_by,
            moved.source_metadata_location,
        ),
    )


def end_move(
    conn: Connection, warehouse_id: int, namespace: tuple[str, ...], name: str, metadata_location: str
) -> None:
    """The move's row of the native entry, in the caller's transaction that deletes the entry (an
    undone move: the row holds the entry, ON DELETE RESTRICT), while it is at ``metadata_location``;
    the table's read restrictions go back to the remote's path with it."""
    ended = conn.execute(
        "DELETE FROM table_move m USING catalog_entry e, namespace n WHERE m.entry_id = e.id"
        " AND e.namespace_id = n.id AND n.warehouse_id = %s AND n.path = %s AND e.name = %s"
        " AND e.metadata_location = %s RETURNING m.entry_id, m.source_warehouse_id, m.source_namespace, m.source_name",
        (warehouse_id, list(namespace), name, metadata_location),
    ).fetchone()
    if ended is not None:
        conn.execute(
            "UPDATE read_restriction SET warehouse_id = %s, namespace_id = NULL, entry_id = NULL, remote_path = %s,"
            " remote_name = %s WHERE entry_id = %s",
            (ended["source_warehouse_id"], ended["source_namespace"], ended["source_name"], ended["entry_id"]),
        )


def _row(found: dict) -> TableMoveRow:
    levels = {key: tuple(found[key]) for key in ("source_namespace", "target_namespace")}
    return TableMoveRow(**{**found, **levels})


class TableMoveRows:
    def __init__(self, db: Database) -> None:
        self.db = db

    def of(self, source_warehouse_id: int, namespace: tuple[str, ...], name: str) -> TableMoveRow | None:
        with self.db.connection() as conn:
            found = conn.execute(
                f"{_SELECT} WHERE m.source_warehouse_id = %s AND m.source_namespace = %s AND m.source_name = %s",
                (source_warehouse_id, list(namespace), name),
            ).fetchone()
        return _row(found) if found else None

    def any_of(self, source_warehouse_id: int, tables: Sequence[tuple[tuple[str, ...], str]]) -> TableMoveRow | None:
        """The first of ``tables`` (of the federated warehouse) moved home, if any: one statement."""
        if not tables:
            return None
        with self.db.connection() as conn:
            found = conn.execute(
                f"{_SELECT} JOIN unnest(%s::text[], %s::text[]) t(namespace, name)"
                " ON m.source_namespace = string_to_array(t.namespace, chr(31)) AND m.source_name = t.name"
                " WHERE m.source_warehouse_id = %s ORDER BY m.source_namespace, m.source_name LIMIT 1",
                (
                    [chr(31).join(namespace) for namespace, _ in tables],
                    [name for _, name in tables],
                    source_warehouse_id,
                ),
            ).fetchone()
        return _row(found) if found else None

    def in_warehouse(self, source_warehouse_id: int) -> list[TableMoveRow]:
        with self.db.connection() as conn:
            rows = conn.execute(
                f"{_SELECT} WHERE m.source_warehouse_id = %s ORDER BY m.source_namespace, m.source_name",
                (source_warehouse_id,),
            ).fetchall()
        return [_row(found) for found in rows]

    def finish(
        self, source_warehouse_id: int, namespace: tuple[str, ...], name: str, *, events: Sequence[ChangeEvent]
    ) -> None:
        """The remote dropped its copy: the move is over (nothing left to undo), with ``events``."""
        with self.db.transaction() as conn:
            conn.execute(
                "DELETE FROM table_move WHERE source_warehouse_id = %s AND source_namespace = %s AND source_name = %s",
                (source_warehouse_id, list(namespace), name),
            )
            record_events(conn, events)
