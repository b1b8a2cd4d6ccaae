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
class DeletionPolicy:
    """A warehouse's deletion settings as written (migration 0017)."""

    mode: str = "soft"
    retention_s: int = 604_800
    refuse_deletes: bool = False


@dataclass(frozen=True)
class WarehouseRow:
    id: int
    name: str
    location: str
    storage: dict[str, Any]
    # extra prefixes where tables and views may live (see app.ground.locations / Entries)
    allowed_locations: tuple[str, ...] = field(default=())
    # The warehouse's own storage keys, encrypted (app/ground/secrets.py); None: the environment's.
    storage_secret: bytes | None = field(default=None, repr=False, compare=False)
    # What a drop does (migration 0017): "soft" keeps it in the bin for retention_s, "hard" removes it
    deletion_policy: str = "soft"
    retention_s: int = 604_800
    # refuse to sign DELETE requests and vend credentials without s3:DeleteObject
    refuse_deletes: bool = False
    protected: bool = False
    # A federated warehouse's remote (migration 0029): its non-secret settings; None: native.
    federation: dict[str, Any] | None = None
    # The credential toward the remote, encrypted (app/ground/secrets.py); None: none stored.
    federation_secret: bytes | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "allowed_locations", tuple(self.allowed_locations or ()))
        for name in ("storage_secret", "federation_secret"):
            value = getattr(self, name)
            if isinstance(value, memoryview):
                object.__setattr__(self, name, bytes(value))


_COLUMNS = (
    "id, name, location, storage, allowed_locations, storage_secret, deletion_policy, retention_s, refuse_deletes,"
    " protected, federation, federation_secret"
)
_BUMP = "UPDATE auth_state SET version = version + 1"
KEEP = object()  # update_warehouse: leave the stored secret as it is


class WarehouseRows:
    """The warehouse statements; a part of ``CatalogRepository`` and of ``ManagementRows``."""

    db: Database

    def upsert_warehouse(
        self,
        name: str,
        location: str,
        storage: dict[str, Any],
        allowed_locations: list[str] | None = None,
        policy: DeletionPolicy | None = None,
    ) -> WarehouseRow:
        """Create the warehouse, or bring its settings in line with the configuration (its
        protection mark is the management API's: left alone)."""
        allowed = list(allowed_locations or [])
        policy = policy or DeletionPolicy()
        with self.db.connection() as conn:
            row = conn.execute(
                "INSERT INTO warehouse (name, location, storage, allowed_locations, deletion_policy, retention_s,"
                " refuse_deletes) VALUES (%s, %s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (name) DO UPDATE SET location = EXCLUDED.location,"
                " storage = EXCLUDED.storage, allowed_locations = EXCLUDED.allowed_locations,"
                " deletion_policy = EXCLUDED.deletion_policy, retention_s = EXCLUDED.retention_s,"
                " refuse_deletes = EXCLUDED.refuse_deletes, updated_at = now()"
                " WHERE (warehouse.location, warehouse.storage, warehouse.allowed_locations, warehouse.deletion_policy,"
                "  warehouse.retention_s, warehouse.refuse_deletes)"
                "  IS DISTINCT FROM (EXCLUDED.location, EXCLUDED.storage, EXCLUDED.allowed_locations,"
                "  EXCLUDED.deletion_policy, EXCLUDED.retention_s, EXCLUDED.refuse_deletes)"
                f" RETURNING {_COLUMNS}",
                (name, location, Jsonb(storage), allowed, policy.mode, policy.retention_s, policy.refuse_deletes),
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
        policy: DeletionPolicy | None = None,
        *,
        events: Sequence[ChangeEvent],
        federation: dict[str, Any] | None = None,
        federation_secret: bytes | None = None,
    ) -> WarehouseRow | None:
        """The new warehouse; None when the name is taken. Each change here writes its ``events``
        in its transaction (storage/events.py). ``federation``: the remote catalog that serves a
        federated warehouse (its secret sealed in ``federation_secret``)."""
        policy = policy or DeletionPolicy()
        with self.db.transaction() as conn:
            row = conn.execute(
                "INSERT INTO warehouse (name, location, storage, allowed_locations, storage_secret, deletion_policy,"
                " retention_s, refuse_deletes, federation, federation_secret)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (name) DO NOTHING"
                f" RETURNING {_COLUMNS}",
                (
                    name,
                    location,
                    Jsonb(storage),
                    allowed,
                    secret,
                    policy.mode,
                    policy.retention_s,
                    policy.refuse_deletes,
                    Jsonb(federation) if federation is not None else None,
                    federation_secret,
                ),
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
        policy: DeletionPolicy | None = None,
        *,
        events: Sequence[ChangeEvent],
    ) -> WarehouseRow | None:
        """The updated warehouse; None when there is none of that name."""
        keep = secret is KEEP
        policy = policy or DeletionPolicy()
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE warehouse SET location = %s, storage = %s, allowed_locations = %s,"
                " storage_secret = CASE WHEN %s THEN storage_secret ELSE %s END, deletion_policy = %s,"
                " retention_s = %s, refuse_deletes = %s, updated_at = now()"
                f" WHERE name = %s RETURNING {_COLUMNS}",
                (
                    location,
                    Jsonb(storage),
                    allowed,
                    keep,
                    None if keep else secret,
                    policy.mode,
                    policy.retention_s,
                    policy.refuse_deletes,
                    name,
                ),
            ).fetchone()
            if row:
                conn.execute(_BUMP)
                record_events(conn, events)
        return WarehouseRow(**row) if row else None

    def update_federation(
        self,
        name: str,
        federation: dict[str, Any],
        secret: object = KEEP,
        *,
        events: Sequence[ChangeEvent],
        storage: tuple[dict[str, Any], list[str], bytes | None] | None = None,
    ) -> WarehouseRow | None:
        """A federated warehouse's new remote settings (``KEEP``: its sealed credential stays); None
        when there is no federated warehouse of that name. ``storage``: its own storage settings,
        allowed locations and sealed keys, replaced too (None: kept). Bumps the version: every
        worker reads the row again within a poll, and its remote, token and breaker are built anew."""
        keep = secret is KEEP
        own = storage is not None
        settings, allowed, keys = storage if storage is not None else ({}, [], None)
        with self.db.transaction() as conn:
            row = conn.execute(
                "UPDATE warehouse SET federation = %s,"
                " federation_secret = CASE WHEN %s THEN federation_secret ELSE %s END,"
                " storage = CASE WHEN %s THEN %s ELSE storage END,"
                " allowed_locations = CASE WHEN %s THEN %s ELSE allowed_locations END,"
                " storage_secret = CASE WHEN %s THEN %s ELSE storage_secret END, updated_at = now()"
                f" WHERE name = %s AND federation IS NOT NULL RETURNING {_COLUMNS}",
                (
                    *(Jsonb(federation), keep, None if keep else secret),
                    *(own, Jsonb(settings), own, allowed, own, keys),
                    name,
                ),
            ).fetchone()
            if row:
                conn.execute(_BUMP)
                record_events(conn, events)
        return WarehouseRow(**row) if row else None

    def delete_warehouse(self, name: str, *, events: Sequence[ChangeEvent]) -> str:
        """``deleted``, ``missing``, ``protected``, or ``not-empty`` (it still has namespaces, or
        something in its recycle bin: nothing deleted)."""
        with self.db.transaction() as conn:
            row = conn.execute("SELECT id, protected FROM warehouse WHERE name = %s FOR UPDATE", (name,)).fetchone()
            if row is None:
                return "missing"
            if row["protected"]:
                return "protected"
            if conn.execute("SELECT 1 FROM bin_unit WHERE warehouse_id = %s LIMIT 1", (row["id"],)).fetchone():
                return "not-empty"
            # Namespaces are created under a share lock of nothing: the FOR UPDATE above makes a
            # concurrent create wait on its foreign-key check, which then fails once we are gone.
            if conn.execute("SELECT 1 FROM namespace WHERE warehouse_id = %s LIMIT 1", (row["id"],)).fetchone():
                return "not-empty"
            conn.execute("DELETE FROM warehouse WHERE id = %s", (row["id"],))
            conn.execute(_BUMP)
            record_events(conn, events)
        return "deleted"
