"""Catalog rows in PostgreSQL: plain, parameterised SQL kept together.

Methods return plain dicts/tuples and raise ``app.errors`` exceptions; callers never see psycopg.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg import errors as pg_errors
from psycopg.types.json import Jsonb

from app.errors import AlreadyExists, NamespaceNotEmpty, NoSuchNamespace
from storage.db import Database


@dataclass(frozen=True)
class WarehouseRow:
    id: int
    name: str
    location: str
    storage: dict[str, Any]


def _dotted(path: tuple[str, ...] | list[str]) -> str:
    return ".".join(path)


class CatalogRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- warehouses ---------------------------------------------------------------------

    def upsert_warehouse(self, name: str, location: str, storage: dict[str, Any]) -> WarehouseRow:
        """Create the warehouse, or bring its settings in line with the configuration."""
        with self.db.connection() as conn:
            row = conn.execute(
                "INSERT INTO warehouse (name, location, storage) VALUES (%s, %s, %s)"
                " ON CONFLICT (name) DO UPDATE SET location = EXCLUDED.location,"
                " storage = EXCLUDED.storage, updated_at = now()"
                " WHERE (warehouse.location, warehouse.storage)"
                "  IS DISTINCT FROM (EXCLUDED.location, EXCLUDED.storage)"
                " RETURNING id, name, location, storage",
                (name, location, Jsonb(storage)),
            ).fetchone()
            if row is None:  # unchanged: the conditional upsert returned nothing
                row = conn.execute(
                    "SELECT id, name, location, storage FROM warehouse WHERE name = %s", (name,)
                ).fetchone()
        return WarehouseRow(**row)

    def get_warehouse(self, name: str) -> WarehouseRow | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT id, name, location, storage FROM warehouse WHERE name = %s", (name,)
            ).fetchone()
        return WarehouseRow(**row) if row else None

    # -- namespaces ---------------------------------------------------------------------

    def list_namespaces(
        self,
        warehouse_id: int,
        parent: tuple[str, ...] | None,
        after: list[str] | None,
        limit: int | None,
    ) -> list[tuple[str, ...]]:
        """Direct children of ``parent`` (top level when None), in path order, after ``after``."""
        with self.db.connection() as conn:
            parent_id = None
            if parent:
                found = conn.execute(
                    "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s",
                    (warehouse_id, list(parent)),
                ).fetchone()
                if found is None:
                    raise NoSuchNamespace(f"Namespace does not exist: {_dotted(parent)}")
                parent_id = found["id"]
            rows = conn.execute(
                "SELECT path FROM namespace"
                " WHERE warehouse_id = %(wh)s AND parent_id IS NOT DISTINCT FROM %(parent)s"
                "   AND (%(after)s::text[] IS NULL OR path > %(after)s::text[])"
                " ORDER BY path LIMIT %(limit)s",
                {"wh": warehouse_id, "parent": parent_id, "after": after, "limit": limit},
            ).fetchall()
        return [tuple(row["path"]) for row in rows]

    def create_namespace(
        self, warehouse_id: int, path: tuple[str, ...], properties: dict[str, str]
    ) -> None:
        """Insert a namespace whose parent (for a nested one) must already exist."""
        with self.db.connection() as conn:
            try:
                row = conn.execute(
                    "INSERT INTO namespace (warehouse_id, path, parent_id, properties)"
                    " SELECT %(wh)s, %(path)s, parent.id, %(props)s"
                    " FROM (SELECT NULL) AS one"
                    " LEFT JOIN namespace parent"
                    "   ON parent.warehouse_id = %(wh)s AND parent.path = %(parent)s::text[]"
                    " WHERE %(parent)s::text[] IS NULL OR parent.id IS NOT NULL"
                    " RETURNING id",
                    {
                        "wh": warehouse_id,
                        "path": list(path),
                        "parent": list(path[:-1]) or None,
                        "props": Jsonb(properties),
                    },
                ).fetchone()
            except pg_errors.UniqueViolation as exc:
                raise AlreadyExists(f"Namespace already exists: {_dotted(path)}") from exc
            except pg_errors.ForeignKeyViolation as exc:  # parent dropped concurrently
                raise NoSuchNamespace(f"Parent namespace does not exist: {_dotted(path[:-1])}") from exc
        if row is None:
            raise NoSuchNamespace(f"Parent namespace does not exist: {_dotted(path[:-1])}")

    def namespace_properties(self, warehouse_id: int, path: tuple[str, ...]) -> dict[str, str]:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT properties FROM namespace WHERE warehouse_id = %s AND path = %s",
                (warehouse_id, list(path)),
            ).fetchone()
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(path)}")
        return row["properties"]

    def namespace_exists(self, warehouse_id: int, path: tuple[str, ...]) -> bool:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM namespace WHERE warehouse_id = %s AND path = %s",
                (warehouse_id, list(path)),
            ).fetchone()
        return row is not None

    def drop_namespace(self, warehouse_id: int, path: tuple[str, ...]) -> None:
        """Delete an empty namespace; the RESTRICT foreign keys make "empty" race-free."""
        with self.db.connection() as conn:
            try:
                row = conn.execute(
                    "DELETE FROM namespace WHERE warehouse_id = %s AND path = %s RETURNING id",
                    (warehouse_id, list(path)),
                ).fetchone()
            except pg_errors.ForeignKeyViolation as exc:
                raise NamespaceNotEmpty(
                    f"Namespace {_dotted(path)} is not empty: it holds namespaces, tables or views"
                ) from exc
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(path)}")

    def update_namespace_properties(
        self,
        warehouse_id: int,
        path: tuple[str, ...],
        removals: list[str],
        updates: dict[str, str],
    ) -> dict[str, str]:
        """Apply removals then updates in one statement; returns the properties before."""
        with self.db.connection() as conn:
            row = conn.execute(
                "WITH old AS ("
                "  SELECT id, properties FROM namespace"
                "  WHERE warehouse_id = %s AND path = %s FOR UPDATE)"
                " UPDATE namespace n SET properties = (old.properties - %s::text[]) || %s::jsonb,"
                "  updated_at = now()"
                " FROM old WHERE n.id = old.id RETURNING old.properties AS before",
                (warehouse_id, list(path), removals, Jsonb(updates)),
            ).fetchone()
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(path)}")
        return row["before"]

    # -- health -------------------------------------------------------------------------

    def ping(self) -> None:
        self.db.ping()
