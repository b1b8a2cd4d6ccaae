"""Protection marks in PostgreSQL (SQL only): set, clear, list, and the check every destructive
statement runs inside its own transaction (``protection_of``), so a mark set concurrently is
either seen or waits for the drop to finish - never missed.

The marks are columns (warehouse, namespace, catalog_entry ``protected``), migration 0017: a
property would not do, since any writer may change properties.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from app.ground.errors import NoSuchNamespace, NotFound, Protected
from storage.db import Database
from storage.events import ChangeEvent, record_events


@dataclass(frozen=True)
class ProtectionMark:
    kind: str  # warehouse, namespace, table, view
    namespace: tuple[str, ...]
    name: str | None


def _dotted(parts: tuple[str, ...]) -> str:
    return ".".join(parts)


def protection_of(
    conn: psycopg.Connection,
    warehouse_id: int,
    namespace: tuple[str, ...],
    name: str | None = None,
    *,
    below: bool = False,
) -> str | None:
    """What protects ``namespace`` (or the entry ``name`` in it), described; None when nothing.

    Its warehouse, each of its namespaces (the chain from the top), the entry itself; with
    ``below`` (a recursive drop) also every namespace and entry under ``namespace``.
    """
    row = conn.execute("SELECT name, protected FROM warehouse WHERE id = %s", (warehouse_id,)).fetchone()
    if row is not None and row["protected"]:
        return f"warehouse {row['name']} is protected"
    found = _protected_ancestor(conn, warehouse_id, namespace) if namespace else None
    if found is not None:
        return f"namespace {_dotted(tuple(found['path']))} is protected"
    if name is not None:
        entry = conn.execute(
            "SELECT e.kind FROM namespace n JOIN catalog_entry e ON e.namespace_id = n.id"
            " WHERE n.warehouse_id = %s AND n.path = %s AND e.name = %s AND e.protected",
            (warehouse_id, list(namespace), name),
        ).fetchone()
        if entry is not None:
            return f"{entry['kind']} {_dotted((*namespace, name))} is protected"
    if below:
        under = conn.execute(
            "SELECT n.path, e.name, e.kind FROM namespace n LEFT JOIN catalog_entry e"
            " ON e.namespace_id = n.id AND e.protected"
            " WHERE n.warehouse_id = %s AND n.path[1:%s] = %s AND (n.protected OR e.id IS NOT NULL)"
            " ORDER BY n.path LIMIT 1",
            (warehouse_id, len(namespace), list(namespace)),
        ).fetchone()
        if under is not None:
            if under["name"] is not None:
                return f"{under['kind']} {_dotted((*under['path'], under['name']))} is protected"
            return f"namespace {_dotted(tuple(under['path']))} is protected"
    return None


def _protected_ancestor(
    conn: psycopg.Connection, warehouse_id: int, namespace: tuple[str, ...]
) -> dict[str, Any] | None:
    """The shallowest protected namespace of the chain (one statement: the levels unnested)."""
    return conn.execute(
        "SELECT n.path FROM namespace n, generate_series(1, %(depth)s) d"
        " WHERE n.warehouse_id = %(wh)s AND n.path = (%(path)s::text[])[1:d] AND n.protected"
        " ORDER BY d LIMIT 1",
        {"depth": len(namespace), "wh": warehouse_id, "path": list(namespace)},
    ).fetchone()


def refuse_if_protected(
    conn: psycopg.Connection,
    action: str,
    warehouse_id: int,
    namespace: tuple[str, ...],
    name: str | None = None,
    *,
    below: bool = False,
) -> None:
    """Raise ``Protected`` (the transaction rolls back: nothing written) when something protects it."""
    reason = protection_of(conn, warehouse_id, namespace, name, below=below)
    if reason is not None:
        what = _dotted((*namespace, name)) if name is not None else _dotted(namespace)
        raise Protected(f"Cannot {action} {what}: {reason}; remove the protection first (manage-grants)")


def entry_protection(conn: psycopg.Connection, entry_id: int) -> tuple[str, str] | None:
    """(the entry's dotted name, what protects it) for a live entry a mark covers - on it, one of
    its namespaces or its warehouse -, else None; one statement (a commit's path runs it)."""
    row = conn.execute(
        "SELECT e.kind, e.name, e.protected, n.path, w.name AS warehouse, w.protected AS warehouse_protected,"
        " (SELECT a.path FROM generate_series(1, cardinality(n.path)) d JOIN namespace a"
        "   ON a.warehouse_id = n.warehouse_id AND a.path = n.path[1:d] WHERE a.protected ORDER BY d LIMIT 1)"
        " AS marked FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id"
        " JOIN warehouse w ON w.id = n.warehouse_id WHERE e.id = %s",
        (entry_id,),
    ).fetchone()
    if row is None:
        return None
    what = _dotted((*row["path"], row["name"]))
    if row["warehouse_protected"]:
        return what, f"warehouse {row['warehouse']} is protected"
    if row["marked"] is not None:
        return what, f"namespace {_dotted(tuple(row['marked']))} is protected"
    if row["protected"]:
        return what, f"{row['kind']} {what} is protected"
    return None


def refuse_entry_if_protected(conn: psycopg.Connection, action: str, entry_id: int) -> None:
    """``refuse_if_protected`` for an entry known by its id (a commit's swap)."""
    found = entry_protection(conn, entry_id)
    if found is not None:
        what, reason = found
        raise Protected(f"Cannot {action} {what}: {reason}; remove the protection first (manage-grants)")


class ProtectionRows:
    def __init__(self, db: Database) -> None:
        self.db = db

    def set_mark(
        self,
        warehouse_id: int,
        kind: str,
        namespace: tuple[str, ...],
        name: str | None,
        protected: bool,
        *,
        events: Sequence[ChangeEvent],
    ) -> None:
        """Set or clear one mark, with its ``events``; NotFound when the thing does not exist."""
        with self.db.transaction() as conn:
            if kind == "warehouse":
                cursor = conn.execute("UPDATE warehouse SET protected = %s WHERE id = %s", (protected, warehouse_id))
            elif kind == "namespace":
                cursor = conn.execute(
                    "UPDATE namespace SET protected = %s WHERE warehouse_id = %s AND path = %s",
                    (protected, warehouse_id, list(namespace)),
                )
                if cursor.rowcount == 0:
                    raise NoSuchNamespace(f"Namespace does not exist: {_dotted(namespace)}")
            else:
                cursor = conn.execute(
                    "UPDATE catalog_entry e SET protected = %s FROM namespace n WHERE e.namespace_id = n.id"
                    " AND n.warehouse_id = %s AND n.path = %s AND e.name = %s AND e.kind = %s",
                    (protected, warehouse_id, list(namespace), name, kind),
                )
            if cursor.rowcount == 0:
                raise NotFound(f"{kind.capitalize()} does not exist: {_dotted((*namespace, name or ''))}")
            record_events(conn, events)

    def set_federated_mark(
        self,
        warehouse_id: int,
        kind: str,
        namespace: tuple[str, ...],
        name: str | None,
        protected: bool,
        *,
        events: Sequence[ChangeEvent],
    ) -> None:
        """Set or clear one mark on an object of a federated warehouse (kept by path: the object is
        the remote's, whose existence the caller checked), with its ``events``."""
        with self.db.transaction() as conn:
            if protected:
                conn.execute(
                    "INSERT INTO federated_protection (warehouse_id, kind, namespace, name) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT DO NOTHING",
                    (warehouse_id, kind, list(namespace), name or ""),
                )
            else:
                conn.execute(
                    "DELETE FROM federated_protection"
                    " WHERE warehouse_id = %s AND kind = %s AND namespace = %s AND name = %s",
                    (warehouse_id, kind, list(namespace), name or ""),
                )
            record_events(conn, events)

    def federated_protection_of(self, warehouse_id: int, namespace: tuple[str, ...], name: str | None) -> str | None:
        """What protects the federated object ``name`` in ``namespace`` (or the namespace itself),
        described as ``protection_of`` does; None when nothing. One statement: the warehouse's mark,
        the namespace chain's, the object's."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT w.name AS warehouse, w.protected, (SELECT p.namespace FROM federated_protection p"
                "  WHERE p.warehouse_id = w.id AND p.kind = 'namespace' AND p.name = ''"
                "  AND p.namespace = (%(path)s::text[])[1:cardinality(p.namespace)]"
                "  ORDER BY cardinality(p.namespace) LIMIT 1) AS marked,"
                " (SELECT p.kind FROM federated_protection p WHERE p.warehouse_id = w.id AND p.kind <> 'namespace'"
                "  AND p.namespace = %(path)s AND p.name = %(name)s LIMIT 1) AS entry"
                " FROM warehouse w WHERE w.id = %(wh)s",
                {"wh": warehouse_id, "path": list(namespace), "name": name or ""},
            ).fetchone()
        if row is None:
            return None
        if row["protected"]:
            return f"warehouse {row['warehouse']} is protected"
        if row["marked"] is not None:
            return f"namespace {_dotted(tuple(row['marked']))} is protected"
        if name is not None and row["entry"] is not None:
            return f"{row['entry']} {_dotted((*namespace, name))} is protected"
        return None

    def marks(self, warehouse_id: int) -> list[ProtectionMark]:
        """Every mark in the warehouse, the warehouse's own first (a federated warehouse's by path)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT 'warehouse' AS kind, '{}'::text[] AS path, NULL::text AS name, 0 AS o"
                " FROM warehouse WHERE id = %(wh)s AND protected"
                " UNION ALL SELECT 'namespace', path, NULL, 1 FROM namespace WHERE warehouse_id = %(wh)s AND protected"
                " UNION ALL SELECT e.kind, n.path, e.name, 2 FROM namespace n JOIN catalog_entry e"
                "  ON e.namespace_id = n.id WHERE n.warehouse_id = %(wh)s AND e.protected"
                " UNION ALL SELECT kind, namespace, nullif(name, ''),"
                "  CASE kind WHEN 'namespace' THEN 1 ELSE 2 END FROM federated_protection WHERE warehouse_id = %(wh)s"
                " ORDER BY o, path, name LIMIT 10000",
                {"wh": warehouse_id},
            ).fetchall()
        return [ProtectionMark(row["kind"], tuple(row["path"]), row["name"]) for row in rows]
