"""Operations the dispatcher answers on the event loop, without a thread: loadTable, loadNamespaceMetadata,
the listings of namespaces, tables and views, and signRequest.

A plain loadTable is what every engine sends before every query, usually several times. Its row
is read with psycopg's asyncio API on the worker's event loop: handing a 1 ms query to a thread
cost more than the query, and the threads' contention for the GIL showed as a long latency tail.
loadNamespaceMetadata is the other read every engine repeats (before creating or listing); the hand-off
to a thread cost about 0.1 ms of CPU, a fifth of its answer.
signRequest comes once per S3 request a job makes; for a table whose grant and location are
cached, signing is pure computation (``app.storage_access.signing``) and needs no I/O at all.

The dispatcher (``app.edge.dispatch``) has already routed the request, read its parameters (and
signRequest's body) from the yaml and authorized it; what is here is only what makes the answer
cheap. The service and the rendering are the handlers' (``handlers/tables.py``): the same
``parse_load_table``, ``TableLoader.answer`` and ``render_table``, ``RemoteSigner.sign`` and the
app's JSON serialiser. An error raised here is rendered by connexion's exception handling, like
the handler's (a missing table: its 404, from the one row read). Anything that would need a
thread - a warehouse not cached yet, no asyncio pool on this loop (a test client), a listing's
grants not cached - answers None, and the dispatcher has the handler answer it in a thread
(without authorizing it again). An answer that vends credentials (STS, the warehouse's keys)
is made in a thread too.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from app.authorization import Authorizer
from app.catalog.entries import Entries
from app.catalog.paging import PageWindow, first_batch_page, identifiers_answer, namespaces_answer
from app.edge.dispatch import InThread
from app.edge.responses import JSON, Rendered, parse_load_table, render_table
from app.ground.errors import CatalogError
from app.namespaces.service import NamespaceService, namespace_answer
from app.rules.identifiers import parse_namespace, table_name
from app.storage_access.signing import RemoteSigner
from app.tables.service import TABLE, TableService
from storage.loop_reads import AsyncEntryReader
from storage.staged import AsyncPlacesReader
from storage.warehouses import WarehouseRow

_DELEGATION = b"x-iceberg-access-delegation"
_IF_NONE_MATCH = b"if-none-match"


class LoadTableOnLoop:
    """loadTable's answer, read on the event loop; None: the handler answers in a thread."""

    operation_id = "loadTable"

    def __init__(self, tables: TableService, reader: AsyncEntryReader, namespace_separator: str) -> None:
        self.tables = tables
        self.reader = reader
        self.separator = namespace_separator

    async def __call__(
        self, kwargs: dict[str, Any], headers: dict[bytes, list[bytes]], in_thread: InThread
    ) -> Rendered | None:
        # both are declared headers: a repeated one: the first, as Flask reads it
        delegation, if_none_match = headers.get(_DELEGATION), headers.get(_IF_NONE_MATCH)
        if not self.reader.available() or "referencedby" in kwargs:  # through views: definers to read
            return None
        request = parse_load_table(
            kwargs["prefix"],
            kwargs["namespace"],
            kwargs["table"],
            snapshots=kwargs.get("snapshots"),
            delegation=delegation[0].decode("latin-1") if delegation else None,
            if_none_match=if_none_match[0].decode("latin-1") if if_none_match else None,
            separator=self.separator,
        )
        warehouse = self.tables.warehouses.cached(request.prefix)
        if warehouse is None:
            return None
        key = (warehouse.id, request.namespace, request.name)
        known = self.tables.issued.location_of(request.if_none_match)
        held = self.tables.held.get(key) if known is None else None
        unless_at = known if held is None else held.location
        row = await self.reader.load_entry(warehouse.id, request.namespace, request.name, unless_at=unless_at)
        if row is None or row.kind != TABLE:
            raise self.tables.entries.missing(request.namespace, request.name)  # the handler's 404, read once
        if held is not None and row.metadata_location == held.location:
            if row.id != held.entry_id:
                return None  # another entry at that version (a name taken again): the handler reads it all
            row = replace(row, metadata=held.text)
        elif row.metadata_location != known:
            self.tables.held.keep(key, row.id, row.metadata_location, row.metadata)
        if row.metadata_location != known:
            if self.tables.access.vends(warehouse, request.delegation):  # may call STS: not on the event loop
                return render_table(await in_thread(self.tables.loader.answer, warehouse, row, request))
            return render_table(self.tables.loader.answer(warehouse, row, request))
        not_modified = self.tables.loader.not_modified(row, request)
        # still at that version, but the client's ETag is for another variant: the handler reads it all
        return render_table(not_modified) if not_modified is not None else None


class _JsonReadOnLoop(ABC):
    """A read whose JSON answer the loop makes from rows of its service's repository, with the
    handler's service and serialiser; None: the handler answers in a thread (and every refusal)."""

    operation_id: str

    def __init__(
        self,
        service: NamespaceService | Entries,
        reader: AsyncEntryReader,
        namespace_separator: str,
        serialize: Callable[[Any], str],
    ) -> None:
        self.service = service
        self.authorizer: Authorizer = service.authorizer  # the same rule and cache as the handler
        self.reader = reader
        self.separator = namespace_separator
        self.serialize = serialize  # the app's Jsonifier.dumps: the handler's bytes

    async def __call__(
        self, kwargs: dict[str, Any], headers: dict[bytes, list[bytes]], in_thread: InThread
    ) -> Rendered | None:
        if not self.reader.available():
            return None
        warehouse = self.service.warehouses.cached(kwargs["prefix"])
        if warehouse is None:
            return None
        body = await self._answer(kwargs, warehouse)
        return None if body is None else Rendered(200, self.serialize(body).encode(), {"Content-Type": JSON})

    @abstractmethod
    async def _answer(self, kwargs: dict[str, Any], warehouse: WarehouseRow) -> dict[str, Any] | None:
        """The answer's body from the warehouse's rows; None: the handler answers the request."""


class LoadNamespaceOnLoop(_JsonReadOnLoop):
    """loadNamespaceMetadata's answer, the namespace's row read on the event loop (no such
    namespace: the handler answers the 404)."""

    operation_id = "loadNamespaceMetadata"

    async def _answer(self, kwargs: dict[str, Any], warehouse: WarehouseRow) -> dict[str, Any] | None:
        namespace = parse_namespace(kwargs["namespace"], self.separator)
        properties = await self.reader.namespace_properties(warehouse.id, namespace)
        return None if properties is None else namespace_answer(warehouse, namespace, properties)


class _PageOnLoop(_JsonReadOnLoop):
    """A listing's page: the handler judges an invalid page token, and - when the caller's grants
    are not cached, which the page's filter needs, or when the first batch of rows does not fill
    the page with items the caller sees (``first_batch_page``) - the whole request."""

    async def _answer(self, kwargs: dict[str, Any], warehouse: WarehouseRow) -> dict[str, Any] | None:
        if self.authorizer.cached() is None:
            return None
        try:
            parent, window = self._window(kwargs, warehouse)
        except CatalogError:
            return None  # the handler answers the 400
        return await self._page(kwargs, warehouse, parent, window)

    @abstractmethod
    def _window(self, kwargs: dict[str, Any], warehouse: WarehouseRow) -> tuple[Any, PageWindow]:
        """The listing's parent and window, as the service's handler path makes them."""

    @abstractmethod
    async def _page(
        self, kwargs: dict[str, Any], warehouse: WarehouseRow, parent: Any, window: PageWindow
    ) -> dict[str, Any] | None:
        """The page's body for ``window``; None: the handler answers (no such parent or namespace)."""


class ListNamespacesOnLoop(_PageOnLoop):
    """listNamespaces' page, read on the event loop (a missing parent: the handler's 404)."""

    operation_id = "listNamespaces"
    service: NamespaceService

    def _window(self, kwargs: dict[str, Any], warehouse: WarehouseRow) -> tuple[Any, PageWindow]:
        parent = kwargs.get("parent")
        levels = parse_namespace(parent, self.separator) if parent is not None else None
        return levels, self.service.namespaces_window(
            warehouse.name, levels, kwargs.get("pageToken"), kwargs.get("pageSize")
        )

    async def _page(
        self, kwargs: dict[str, Any], warehouse: WarehouseRow, parent: Any, window: PageWindow
    ) -> dict[str, Any] | None:
        rows = await self.reader.list_namespaces(warehouse.id, parent, window.after, window.fetch)
        if rows is None:
            return None
        page = first_batch_page(window, rows, lambda found: self.service.visible(kwargs["prefix"], found))
        return None if page is None else namespaces_answer(page)


class ListEntriesOnLoop(_PageOnLoop):
    """listTables' or listViews' page (``service.kind``), read on the event loop (a missing
    namespace: the handler's 404)."""

    service: Entries

    def __init__(
        self, service: Entries, reader: AsyncEntryReader, namespace_separator: str, serialize: Callable[[Any], str]
    ) -> None:
        super().__init__(service, reader, namespace_separator, serialize)
        self.operation_id = "listTables" if service.kind == TABLE else "listViews"

    def _window(self, kwargs: dict[str, Any], warehouse: WarehouseRow) -> tuple[Any, PageWindow]:
        namespace = parse_namespace(kwargs["namespace"], self.separator)
        return namespace, self.service.names_window(
            warehouse.name, namespace, kwargs.get("pageToken"), kwargs.get("pageSize")
        )

    async def _page(
        self, kwargs: dict[str, Any], warehouse: WarehouseRow, parent: Any, window: PageWindow
    ) -> dict[str, Any] | None:
        names = await self.reader.list_entries(warehouse.id, parent, self.service.kind, window.after, window.fetch)
        if names is None:
            return None
        page = first_batch_page(window, names, lambda found: self.service.visible(kwargs["prefix"], parent, found))
        return None if page is None else identifiers_answer(parent, page)


class SignRequestOnLoop:
    """signRequest's answer: on the event loop when the caller's grants are cached and the pool
    serves the loop (what the name holds is read there, one query), else in a thread; the rule,
    the scope and the signature are the same either way."""

    operation_id = "signRequest"

    def __init__(
        self,
        signer: RemoteSigner,
        reader: AsyncPlacesReader,
        namespace_separator: str,
        serialize: Callable[[Any], str],
    ) -> None:
        self.signer = signer
        self.reader = reader
        self.authorizer: Authorizer = signer.tables.authorizer
        self.warehouses = signer.tables.warehouses
        self.separator = namespace_separator
        self.serialize = serialize  # the app's Jsonifier.dumps: the handler's bytes

    async def __call__(
        self, kwargs: dict[str, Any], headers: dict[bytes, list[bytes]], in_thread: InThread
    ) -> Rendered | None:
        prefix = kwargs["prefix"]
        levels = parse_namespace(kwargs["namespace"], self.separator)
        name = table_name(kwargs["table"])
        warehouse = self.warehouses.cached(prefix)
        if (
            warehouse is not None
            and self.authorizer.cached() is not None
            and self.reader.available()
            and self.signer.signs_without_io(warehouse, kwargs["body"])
        ):
            places = await self.reader.places(warehouse.id, levels, name)
            signed = self.signer.sign(prefix, levels, name, kwargs["body"], places)
        else:
            signed = await in_thread(self.signer.sign, prefix, levels, name, kwargs["body"])
        cache_control = "private" if signed.cacheable else "no-cache"
        body = self.serialize(signed.body()).encode()
        return Rendered(200, body, {"Content-Type": JSON, "Cache-Control": cache_control})
