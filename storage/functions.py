"""Function rows in PostgreSQL (SQL only; the rules live in app/functions.py)."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import errors as pg_errors

from app.ground.errors import AlreadyExists, NoSuchNamespace
from storage.db import Database


@dataclass(frozen=True)
class FunctionRow:
    name: str
    uuid: str
    metadata_location: str
    metadata: str


def _dotted(path: tuple[str, ...]) -> str:
    return ".".join(path)


class FunctionRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def list_names(
        self, warehouse_id: int, namespace: tuple[str, ...], after: str | None, limit: int | None
    ) -> list[str]:
        """Names in byte order after ``after``; NoSuchNamespace when the namespace is missing."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT n.id, f.name FROM namespace n"
                " LEFT JOIN LATERAL (SELECT name FROM catalog_function"
                "   WHERE namespace_id = n.id AND name > coalesce(%(after)s::text, '')"
                "   ORDER BY name LIMIT %(limit)s) f ON true"
                " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s",
                {"wh": warehouse_id, "path": list(namespace), "after": after, "limit": limit},
            ).fetchall()
        if not rows:
            raise NoSuchNamespace(f"Namespace does not exist: {_dotted(namespace)}")
        return [row["name"] for row in rows if row["name"] is not None]

    def load(self, warehouse_id: int, namespace: tuple[str, ...], name: str) -> FunctionRow | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT f.name, f.uuid::text AS uuid, f.metadata_location, f.metadata"
                " FROM catalog_function f JOIN namespace n ON n.id = f.namespace_id"
                " WHERE n.warehouse_id = %s AND n.path = %s AND f.name = %s",
                (warehouse_id, list(namespace), name),
            ).fetchone()
        return FunctionRow(**row) if row else None

    def insert(self, warehouse_id: int, namespace: tuple[str, ...], function: FunctionRow) -> None:
        with self.db.transaction() as conn:
            found = conn.execute(
                "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s FOR SHARE",
                (warehouse_id, list(namespace)),
            ).fetchone()
            if found is None:
                raise NoSuchNamespace(f"Namespace does not exist: {_dotted(namespace)}")
            try:
                conn.execute(
                    "INSERT INTO catalog_function (namespace_id, name, uuid, metadata_location, metadata)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    (found["id"], function.name, function.uuid, function.metadata_location, function.metadata),
                )
            except pg_errors.UniqueViolation as exc:
                qualified = _dotted((*namespace, function.name))
                raise AlreadyExists(f"Function already exists: {qualified}") from exc

    def delete(self, warehouse_id: int, namespace: tuple[str, ...], name: str) -> bool:
        with self.db.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM catalog_function f USING namespace n"
                " WHERE f.namespace_id = n.id AND n.warehouse_id = %s AND n.path = %s AND f.name = %s",
                (warehouse_id, list(namespace), name),
            )
        return cursor.rowcount == 1
