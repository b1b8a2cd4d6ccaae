"""What Growler last saw of a federated warehouse's tables (migration 0036; the part is
app/federation/versions.py). SQL only."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from storage.db import Database
from storage.events import ChangeEvent, record_events

Table = tuple[tuple[str, ...], str]


class FederatedVersions:
    def __init__(self, db: Database) -> None:
        self.db = db

    def observe(
        self,
        warehouse_id: int,
        table: Table,
        metadata_location: str,
        changed: Callable[[str], Sequence[ChangeEvent]],
    ) -> bool:
        """A load answered ``metadata_location``: the first one is remembered; another than the
        one remembered is remembered with ``changed(previous)``'s events, in one transaction (the
        row locked, so one worker records it). True when it was a change."""
        namespace, name = list(table[0]), table[1]
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT metadata_location FROM federated_table_version"
                " WHERE warehouse_id = %s AND namespace = %s AND name = %s FOR UPDATE",
                (warehouse_id, namespace, name),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO federated_table_version (warehouse_id, namespace, name, metadata_location)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (warehouse_id, namespace, name, metadata_location),
                )
                return False
            if row["metadata_location"] == metadata_location:
                return False
            conn.execute(
                "UPDATE federated_table_version SET metadata_location = %s"
                " WHERE warehouse_id = %s AND namespace = %s AND name = %s",
                (metadata_location, warehouse_id, namespace, name),
            )
            record_events(conn, changed(row["metadata_location"]))
        return True

    def remember(self, warehouse_id: int, table: Table, metadata_location: str) -> None:
        """A load of a mirrored warehouse's table: its version remembered if none is, no event (the
        mirror records the changes, and moves the version with them)."""
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO federated_table_version (warehouse_id, namespace, name, metadata_location)"
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
        now_at: Sequence[tuple[Table, str]],
        forget: Sequence[Table],
    ) -> None:
        """A write through Growler: its events, the versions it made (``now_at``) and the tables
        whose version it changed without saying which (``forget``), in one transaction."""
        with self.db.transaction() as conn:
            record_events(conn, events)
            for (namespace, name), location in now_at:
                conn.execute(
                    "INSERT INTO federated_table_version (warehouse_id, namespace, name, metadata_location)"
                    " VALUES (%s, %s, %s, %s) ON CONFLICT (warehouse_id, namespace, name)"
                    " DO UPDATE SET metadata_location = EXCLUDED.metadata_location",
                    (warehouse_id, list(namespace), name, location),
                )
            if forget:
                conn.execute(
                    "DELETE FROM federated_table_version v USING unnest(%s::text[], %s::text[]) t(namespace, name)"
                    " WHERE v.warehouse_id = %s AND v.namespace = string_to_array(t.namespace, chr(31))"
                    " AND v.name = t.name",
                    (
                        [chr(31).join(namespace) for namespace, _ in forget],
                        [name for _, name in forget],
                        warehouse_id,
                    ),
                )
