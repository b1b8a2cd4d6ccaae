"""What Growler last saw of a federated warehouse's tables and views (migrations 0036, 0041; the
part is app/federation/versions.py). SQL only."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from storage.db import Database
from storage.events import ChangeEvent, record_events

Table = tuple[tuple[str, ...], str]
# The kinds of entries whose versions are kept, and their tables (fixed identifiers, never input).
VERSION_TABLES = {"table": "federated_table_version", "view": "federated_view_version"}


class FederatedVersions:
    def __init__(self, db: Database) -> None:
        self.db = db

    def observe(
        self,
        warehouse_id: int,
        table: Table,
        metadata_location: str,
        changed: Callable[[str], Sequence[ChangeEvent]],
        kind: str = "table",
    ) -> bool:
        """A load answered ``metadata_location``: the first one is remembered; another than the
        one remembered is remembered with ``changed(previous)``'s events, in one transaction (the
        row locked, so one worker records it). True when it was a change."""
        namespace, name, versions = list(table[0]), table[1], VERSION_TABLES[kind]
        with self.db.transaction() as conn:
            row = conn.execute(
                f"SELECT metadata_location FROM {versions}"  # noqa: S608 - a fixed table name
                " WHERE warehouse_id = %s AND namespace = %s AND name = %s FOR UPDATE",
                (warehouse_id, namespace, name),
            ).fetchone()
            if row is None:
                conn.execute(
                    f"INSERT INTO {versions} (warehouse_id, namespace, name, metadata_location)"  # noqa: S608
                    " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (warehouse_id, namespace, name, metadata_location),
                )
                return False
            if row["metadata_location"] == metadata_location:
                return False
            conn.execute(
                f"UPDATE {versions} SET metadata_location = %s"  # noqa: S608 - a fixed table name
                " WHERE warehouse_id = %s AND namespace = %s AND name = %s",
                (metadata_location, warehouse_id, namespace, name),
            )
            record_events(conn, changed(row["metadata_location"]))
        return True

    def remember(self, warehouse_id: int, table: Table, metadata_location: str, kind: str = "table") -> None:
        """A load of a mirrored warehouse's table or view: its version remembered if none is, no
        event (the mirror records the changes, and moves the version with them)."""
        with self.db.connection() as conn:
            conn.execute(
                f"INSERT INTO {VERSION_TABLES[kind]} (warehouse_id, namespace, name, metadata_location)"  # noqa: S608
                " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (warehouse_id, list(table[0]), table[1], metadata_location),
            )

    def holds(self, warehouse_id: int, table: Table, metadata_location: str) -> bool:
        """Whether the table's recorded version is ``metadata_location`` (one index lookup)."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM federated_table_version"
                " WHERE warehouse_id = %s AND namespace = %s AND name = %s AND metadata_location = %s",
                (warehouse_id, list(table[0]), table[1], metadata_location),
            ).fetchone()
        return row is not None

    def write(
        self,
        warehouse_id: int,
        events: Sequence[ChangeEvent],
        now_at: Sequence[tuple[str, Table, str]],
        forget: Sequence[tuple[str, Table]],
    ) -> None:
        """A write through Growler: its events, the versions it made (``now_at``: kind, table or
        view, metadata location) and the entries whose version it changed without saying which
        (``forget``), in one transaction."""
        with self.db.transaction() as conn:
            record_events(conn, events)
            for kind, (namespace, name), location in now_at:
                conn.execute(
                    f"INSERT INTO {VERSION_TABLES[kind]} (warehouse_id, namespace, name, metadata_location)"  # noqa: S608
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (warehouse_id, namespace, name)"
                    " DO UPDATE SET metadata_location = EXCLUDED.metadata_location",
                    (warehouse_id, list(namespace), name, location),
                )
            for kind, versions in VERSION_TABLES.items():
                gone = [entry for entry_kind, entry in forget if entry_kind == kind]
                if not gone:
                    continue
                conn.execute(
                    f"DELETE FROM {versions} v"  # noqa: S608 - a fixed table name
                    " USING unnest(%s::text[], %s::text[]) t(namespace, name)"
                    " WHERE v.warehouse_id = %s AND v.namespace = string_to_array(t.namespace, chr(31))"
                    " AND v.name = t.name",
                    ([chr(31).join(namespace) for namespace, _ in gone], [name for _, name in gone], warehouse_id),
                )
