"""Namespaces in PostgreSQL (SQL only): creating, listing, reading, updating and dropping them.

A part of ``CatalogRepository`` (which derives from ``NamespaceRows``). The listing queries and
their helpers are public because the event loop's reader (storage/loop_reads.py) sends the same
statements, and a page of tables or views (storage/entries.py) is found under its namespace the
way a page of child namespaces is (``PAGE_UNDER``). Methods raise ``app.ground.errors``
exceptions; callers never see psycopg.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from psycopg import errors as pg_errors
from psycopg.rows import tuple_row
from psycopg.types.json import Jsonb

from app.ground.errors import AlreadyExists, BadRequest, NamespaceNotEmpty, NoSuchNamespace
from storage.db import Database
from storage.events import ChangeEvent, record_events
from storage.placement import NamespaceClaim, claim_namespaces
from storage.protection_rows import refuse_if_protected

NAMESPACE_PROPERTIES = "SELECT properties FROM namespace WHERE warehouse_id = %s AND path = %s"
# listNamespaces at the top level, after a path, in path order. "parent_id IS NULL", not "IS NOT
# DISTINCT FROM" a parameter: that is no index condition, so every namespace of the warehouse was
# read and sorted for each page; this is one range of namespace_children (warehouse_id, parent_id,
# path) in its order. (Nested levels: LIST_CHILD_NAMESPACES.)
LIST_NAMESPACES = (
    "SELECT path FROM namespace"
    " WHERE warehouse_id = %(wh)s AND parent_id IS NULL"
    # coalesce, not "IS NULL OR": one index range scan even under a generic plan
    "   AND path > coalesce(%(after)s::text[], '{}'::text[])"
    " ORDER BY path LIMIT %(limit)s"
)
# A page of what lies in one namespace, in the round trip that finds the namespace (a listing paid
# two; each cost about as much as the page): no row - no such namespace; one row of NULL - an empty
# page; else the page (``page_under``).
PAGE_UNDER = (
    "SELECT child.item FROM namespace n LEFT JOIN LATERAL ({page}) child ON true"
    " WHERE n.warehouse_id = %(wh)s AND n.path = %(path)s ORDER BY child.item"
)
# listNamespaces under a parent: its direct children after a path, in path order
LIST_CHILD_NAMESPACES = PAGE_UNDER.format(
    page="SELECT path AS item FROM namespace"
    " WHERE warehouse_id = %(wh)s AND parent_id = n.id AND path > coalesce(%(after)s::text[], '{}'::text[])"
    " ORDER BY path LIMIT %(limit)s"
)


def page_under(rows: list[tuple[Any, ...]]) -> list[Any] | None:
    """The items of a ``PAGE_UNDER`` query; None when the namespace is not there."""
    if not rows:
        return None
    return [] if rows[0][0] is None else [item for (item,) in rows]


def list_namespaces_query(
    warehouse_id: int, parent: tuple[str, ...] | None, after: list[str] | None, limit: int | None
) -> tuple[str, dict[str, Any]]:
    if parent:
        return LIST_CHILD_NAMESPACES, {"wh": warehouse_id, "path": list(parent), "after": after, "limit": limit}
    return LIST_NAMESPACES, {"wh": warehouse_id, "after": after, "limit": limit}


def listed_namespaces(rows: list[tuple[Any, ...]], nested: bool) -> list[tuple[str, ...]] | None:
    """The paths of a ``list_namespaces_query``; None when the parent is not there."""
    paths = page_under(rows) if nested else [path for (path,) in rows]
    return None if paths is None else [tuple(path) for path in paths]


def dotted(path: tuple[str, ...] | list[str]) -> str:
    """A namespace (or a name in one) as the messages show it: its parts joined by dots."""
    return ".".join(path)


class NamespaceRows:
    db: Database

    def list_namespaces(
        self,
        warehouse_id: int,
        parent: tuple[str, ...] | None,
        after: list[str] | None,
        limit: int | None,
    ) -> list[tuple[str, ...]]:
        """Direct children of ``parent`` (top level when None), in path order, after ``after``."""
        query, params = list_namespaces_query(warehouse_id, parent, after, limit)
        with self.db.connection() as conn:
            # a page of rows: psycopg builds tuples in C, dicts in Python
            rows = conn.cursor(row_factory=tuple_row).execute(query, params).fetchall()
        paths = listed_namespaces(rows, nested=bool(parent))
        if paths is None:
            raise NoSuchNamespace(f"Namespace does not exist: {dotted(parent or ())}")
        return paths

    def create_namespace(
        self,
        warehouse_id: int,
        path: tuple[str, ...],
        properties: dict[str, str],
        placed: NamespaceClaim | None = None,
        *,
        events: Sequence[ChangeEvent],
    ) -> None:
        """Insert a namespace whose parent (for a nested one) must already exist; ``placed``: its
        location, claimed in the same transaction (storage/placement.py); ``events`` are written in
        the same transaction (storage/events.py)."""
        with self.db.transaction() as conn:
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
                raise AlreadyExists(f"Namespace already exists: {dotted(path)}") from exc
            except pg_errors.ForeignKeyViolation as exc:  # parent dropped concurrently
                raise BadRequest(f"Parent namespace does not exist: {dotted(path[:-1])}") from exc
            if row is not None:
                if placed is not None:  # after the insert: a name already taken is AlreadyExists first
                    claim_namespaces(conn, [placed])
                record_events(conn, events)
        if row is None:
            raise BadRequest(f"Parent namespace does not exist: {dotted(path[:-1])}")

    def namespace_properties(self, warehouse_id: int, path: tuple[str, ...]) -> dict[str, str]:
        with self.db.connection() as conn:
            row = conn.execute(NAMESPACE_PROPERTIES, (warehouse_id, list(path))).fetchone()
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {dotted(path)}")
        return row["properties"]

    def namespace_exists(self, warehouse_id: int, path: tuple[str, ...]) -> bool:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT 1 FROM namespace WHERE warehouse_id = %s AND path = %s",
                (warehouse_id, list(path)),
            ).fetchone()
        return row is not None

    def drop_namespace(self, warehouse_id: int, path: tuple[str, ...], *, events: Sequence[ChangeEvent]) -> None:
        """Delete an empty namespace; the RESTRICT foreign keys make "empty" race-free.
        ``Protected`` when it, an ancestor or its warehouse is protected."""
        with self.db.transaction() as conn:
            refuse_if_protected(conn, "drop", warehouse_id, path)
            try:
                row = conn.execute(
                    "DELETE FROM namespace WHERE warehouse_id = %s AND path = %s RETURNING id",
                    (warehouse_id, list(path)),
                ).fetchone()
            except pg_errors.ForeignKeyViolation as exc:
                raise NamespaceNotEmpty(
                    f"Namespace {dotted(path)} is not empty: it holds namespaces, tables or views"
                ) from exc
            if row is not None:
                record_events(conn, events)
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {dotted(path)}")

    def update_namespace_properties(
        self,
        warehouse_id: int,
        path: tuple[str, ...],
        removals: list[str],
        updates: dict[str, str],
        placed: NamespaceClaim | None = None,
        *,
        events: Callable[[dict[str, str]], Sequence[ChangeEvent]],
    ) -> dict[str, str]:
        """Apply removals then updates in one statement; returns the properties before.
        ``placed``: the namespace's location after the change, claimed in the same transaction
        when the change moves it (its ``location`` set to another value, or removed).
        ``events`` makes the change's events of those (written in the same transaction)."""
        with self.db.transaction() as conn:
            row = conn.execute(
                "WITH old AS ("
                "  SELECT id, properties FROM namespace"
                "  WHERE warehouse_id = %s AND path = %s FOR UPDATE)"
                " UPDATE namespace n SET properties = (old.properties - %s::text[]) || %s::jsonb,"
                "  updated_at = now()"
                " FROM old WHERE n.id = old.id RETURNING old.properties AS before",
                (warehouse_id, list(path), removals, Jsonb(updates)),
            ).fetchone()
            if row is not None:
                if placed is not None and _moves(row["before"], removals, updates):
                    claim_namespaces(conn, [placed])
                record_events(conn, events(row["before"]))
        if row is None:
            raise NoSuchNamespace(f"Namespace does not exist: {dotted(path)}")
        return row["before"]


def _moves(before: dict[str, str], removals: list[str], updates: dict[str, str]) -> bool:
    """Whether a properties change gives the namespace another location (an empty one is none)."""
    if "location" in updates:
        after: str | None = updates["location"]
    elif "location" in removals:
        after = None
    else:
        return False
    return (after or None) != (before.get("location") or None)
