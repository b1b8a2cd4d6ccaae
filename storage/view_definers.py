"""Views' definers (migration 0032): who last set a view's definition, read when a trusted engine
loads a table through views (loadTable's ``referenced-by``, app/authorization.py). SQL only."""

from __future__ import annotations

from dataclasses import dataclass

from storage.db import Database


@dataclass(frozen=True)
class Definer:
    principal: str
    source: str  # app.ground.callers' OWN or IDP
    roles: tuple[str, ...] = ()


ViewName = tuple[tuple[str, ...], str]  # (namespace levels, view name)

_ENTRY = (
    "SELECT e.id FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id"
    " WHERE n.warehouse_id = %s AND n.path = %s AND e.name = %s AND e.kind = 'view'"
)


class ViewDefiners:
    def __init__(self, db: Database) -> None:
        self.db = db

    def clear(self, warehouse_id: int, view: ViewName) -> None:
        """Before a replace: the view has no definer until the new definition's is written."""
        with self.db.connection() as conn:
            conn.execute(
                f"DELETE FROM view_definer WHERE entry_id = ({_ENTRY})", (warehouse_id, list(view[0]), view[1])
            )

    def record(self, warehouse_id: int, view: ViewName, definer: Definer) -> None:
        """After a create, register or replace landed: its definer (none if the view is gone)."""
        with self.db.connection() as conn:
            conn.execute(
                "INSERT INTO view_definer (entry_id, principal, source, roles)"
                f" SELECT id, %s, %s, %s FROM ({_ENTRY}) v"
                " ON CONFLICT (entry_id) DO UPDATE SET principal = excluded.principal, source = excluded.source,"
                " roles = excluded.roles, set_at = now()",
                (definer.principal, definer.source, list(definer.roles), warehouse_id, list(view[0]), view[1]),
            )

    def of(self, warehouse: str, views: list[ViewName]) -> dict[ViewName, Definer]:
        """The definers of these views of a warehouse (by name: one query); a view without one (or
        no such view) is absent."""
        if not views:
            return {}
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT n.path, e.name, d.principal, d.source, d.roles"
                " FROM unnest(%s::text[], %s::text[]) AS v(path, name)"
                " JOIN warehouse w ON w.name = %s"
                " JOIN namespace n ON n.warehouse_id = w.id AND n.path = string_to_array(v.path, chr(31))"
                " JOIN catalog_entry e ON e.namespace_id = n.id AND e.name = v.name AND e.kind = 'view'"
                " JOIN view_definer d ON d.entry_id = e.id",
                (["\x1f".join(ns) for ns, _ in views], [name for _, name in views], warehouse),
            ).fetchall()
        return {
            (tuple(row["path"]), row["name"]): Definer(row["principal"], row["source"], tuple(row["roles"]))
            for row in rows
        }
