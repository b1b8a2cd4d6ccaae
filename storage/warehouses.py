"""Warehouses in PostgreSQL (SQL only): the row type and every statement on the warehouse table.

Two services write warehouses: startup brings the configured one in line with the environment
(``upsert_warehouse``, through ``CatalogRepository``) and the management API creates, changes and
deletes managed ones (through ``ManagementRows``); both derive from ``WarehouseRows`` so that the
columns a row is read with are written once. A managed change bumps ``auth_state.version`` in
the same transaction (``_BUMP``), so every worker reads its warehouses again within a poll
(app/edge/auth/state.py).
Listings are keyset-paginated: ``after`` is the last name of the previous page, ``limit`` rows at most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from psycopg.types.json import Jsonb

from storage.db import Database
from storage.events import ChangeEvent, record_events


@dataclass(frozen=True)
class WarehouseRow:
    id: int
    name: str
    location: str
    storage: dict[str, Any]
    # extra prefixes where tables and views may live (see app.ground.locations / EntryService)
    allowed_locations: tuple[str, ...] = field(default=())
    # The warehouse's own storage keys, encrypted (app/ground/secrets.py); None: the environment's.
    storage_secret: bytes | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allowed_locations", tuple(self.allowed_locations or ()))
        if isinstance(self.storage_secret, memoryview):
            object.__setattr__(self, "storage_secret", bytes(self.storage_secret))


_COLUMNS = "id, name, location, storage, allowed_locations, storage_secret"
_BUMP = "UPDATE auth_state SET version = version + 1"
KEEP = object()  # update_warehouse: leave the stored secret as it is


class WarehouseRows:
    """The warehouse statements; a part of ``CatalogRepository`` and of ``ManagementRows``."""

    db: Database

    def upsert_warehouse(
        self, name: str, location: str, storage: dict[str, Any], allowed_locations: list[str] | None = None
    ) -> WarehouseRow:
        """Create the warehouse, or bring its settings in line with the configuration."""
        allowed = list(allowed_locations or [])
        with self.db.connection() as conn:
            row = conn.execute(
                "INSERT INTO warehouse (name, location, storage, allowed_locations) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (name) DO UPDATE SET location = EXCLUDED.location,"
                " storage = EXCLUDED.storage, allowed_locations = EXCLUDED.allowed_locations, updated_at = now()"
                " WHERE (warehouse.location, warehouse.storage, warehouse.allowed_locations)"
                "  IS DISTINCT FROM (EXCLUDED.location, EXCLUDED.storage, EXCLUDED.allowed_locations)"
                f" RETURNING {_COLUMNS}",
                (name, location, Jsonb(storage), allowed),
            ).fetchone()
            if row is None:  # unchanged: the conditional upsert returned nothing
                row = conn.execute(f"SELECT {_COLUMNS} FROM warehouse WHERE name = %s", (name,)).fetchone()
        return WarehouseRow(**row)

    def get_warehouse(self, name: str) -> WarehouseRow | None:
        with self.db.connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM warehouse WHERE name = %s", (name,)).fetchone()
        return WarehouseRow(**row) if row else None

    def list_warehouses(self, after: str | None, limit: int | None) -> list[WarehouseRow]:
        with self.db.connection() as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM warehouse WHERE %(after)s::text IS NULL OR name > %(after)s"
                " ORDER BY name LIMIT %(limit)s",
                {"after": after, "limit": limit},
            ).fetchall()
        return [WarehouseRow(**row) for row in rows]

    def create_warehouse(
        self,
        name: str,
        location: str,
        storage: dict[str, Any],
        allowed: list[str],
        secret: bytes | None,
        *,
        events: Sequence[ChangeEvent],
    ) -> WarehouseRow | None:
        """The new warehouse; None when the name is taken. Each change here writes its ``events``
        in its transaction (storage/events.py)."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO warehouse (name, location, storage, allowed_locations, storage_secret)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING"
                f" RETURNING {_COLUMNS}",
                (name, location, Jsonb(storage), allowed, secret),
            ).fetchone()
            if row:
                conn.execute(_BUMP)
                record_events(conn, events)
        return WarehouseRow(**row) if row else None

    def update_warehouse(
        self,
        name: str,
        location: str,
        storage: dict[str, Any],
        allowed: list[str],
        secret: object = KEEP,
        *,
        events: Sequence[ChangeEvent],
    ) -> WarehouseRow | None:
        """The updated warehouse; None when there is none of that name."""
        keep = secret is KEEP
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE warehouse SET location = %s, storage = %s, allowed_locations = %s,"
                " storage_secret = CASE WHEN %s THEN storage_secret ELSE %s END, updated_at = now()"
                f" WHERE name = %s RETURNING {_COLUMNS}",
                (location, Jsonb(storage), allowed, keep, None if keep else secret, name),
            ).fetchone()
            if row:
                conn.execute(_BUMP)
                record_events(conn, events)
        return WarehouseRow(**row) if row else None

    def delete_warehouse(self, name: str, *, events: Sequence[ChangeEvent]) -> str:
        """``deleted``, ``missing``, or ``not-empty`` (it still has namespaces: nothing deleted)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT id FROM warehouse WHERE name = %s FOR UPDATE", (name,)).fetchone()
            if row is None:
                return "missing"
            # Namespaces are created under a share lock of nothing: the FOR UPDATE above makes a
            # concurrent create wait on its foreign-key check, which then fails once we are gone.
            if conn.execute("SELECT 1 FROM namespace WHERE warehouse_id = %s LIMIT 1", (row["id"],)).fetchone():
                return "not-empty"
            conn.execute("DELETE FROM warehouse WHERE id = %s", (row["id"],))
            conn.execute(_BUMP)
            record_events(conn, events)
        return "deleted"
