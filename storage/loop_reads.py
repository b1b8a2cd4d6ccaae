"""The rows the dispatcher reads on the event loop, through the async pool.

The statements are those of ``CatalogRepository`` (storage/namespaces.py, storage/entries.py),
so the loop and the worker threads answer alike; only the way they are sent differs. A missing
namespace is a None here, not NoSuchNamespace: the dispatcher (app/edge/loop_reads.py) then has
the handler answer the request, and the error.
"""

from __future__ import annotations

from storage.db import AsyncDatabase
from storage.entries import LIST_ENTRIES, load_entry_query
from storage.namespaces import NAMESPACE_PROPERTIES, list_namespaces_query, listed_namespaces, page_under
from storage.rows import EntryRow


class AsyncEntryReader:
    """Rows the dispatcher reads on the event loop: ``CatalogRepository.load_entry`` (loadTable),
    ``namespace_properties`` (loadNamespaceMetadata), ``list_namespaces`` and ``list_entries``
    (listNamespaces, listTables, listViews)."""

    def __init__(self, db: AsyncDatabase) -> None:
        self.db = db

    def available(self) -> bool:
        return self.db.serves_running_loop()

    async def load_entry(
        self, warehouse_id: int, namespace: tuple[str, ...], name: str, unless_at: str | None = None
    ) -> EntryRow | None:
        """The entry; with ``unless_at``, its ``metadata`` is empty when it is still at that location."""
        row = await self.db.fetch_one(*load_entry_query(warehouse_id, namespace, name, unless_at))
        return EntryRow(**row) if row else None

    async def namespace_properties(self, warehouse_id: int, path: tuple[str, ...]) -> dict[str, str] | None:
        """The namespace's stored properties; None when there is no such namespace."""
        row = await self.db.fetch_one(NAMESPACE_PROPERTIES, (warehouse_id, list(path)))
        return row["properties"] if row else None

    async def list_entries(
        self, warehouse_id: int, namespace: tuple[str, ...], kind: str, after: str | None, limit: int | None
    ) -> list[str] | None:
        """``CatalogRepository.list_entries``; None (not NoSuchNamespace) when the namespace is missing."""
        params = {"wh": warehouse_id, "path": list(namespace), "kind": kind, "after": after, "limit": limit}
        return page_under(await self.db.fetch_all(LIST_ENTRIES, params))

    async def list_namespaces(
        self, warehouse_id: int, parent: tuple[str, ...] | None, after: list[str] | None, limit: int | None
    ) -> list[tuple[str, ...]] | None:
        """``CatalogRepository.list_namespaces``; None (not NoSuchNamespace) when the parent is missing."""
        query, params = list_namespaces_query(warehouse_id, parent, after, limit)
        return listed_namespaces(await self.db.fetch_all(query, params), nested=bool(parent))
