"""Reads the operation door answers on the event loop, without a thread: loadTable.

A plain loadTable is what every engine sends before every query, usually several times. Its row
is read with psycopg's asyncio API on the worker's event loop: handing a 1 ms query to a thread
cost more than the query, and the threads' contention for the GIL showed as a long latency tail.

The door (``app.edge.door``) has already routed the request and read its parameters from the
yaml; what is here is only what makes the answer cheap. The rule, the service and the rendering
are the handler's (``handlers/tables.py``): the same ``Authorizer.authorize``, ``parse_load_table``,
``TableService.answer`` and ``render_table``. An error raised here is rendered by connexion's
exception handling, like the handler's. Anything that would need a thread - a caller whose
grants are not cached yet, a warehouse not cached yet, no asyncio pool on this loop (a test
client), a table that is not there, a repeated header - answers None, and the door hands the
request to connexion untouched, whose handler answers it. A caller whose grants are not cached
yet is decided in a thread (one query, then cached), and the read goes on here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from app.authorization import Authorizer
from app.edge.responses import Rendered, parse_load_table, render_table
from app.tables import TABLE, TableService
from storage.repository import AsyncEntryReader

InThread = Callable[..., Awaitable[Any]]  # runs a call in the door's threads, in this request's context
_DELEGATION = b"x-iceberg-access-delegation"
_IF_NONE_MATCH = b"if-none-match"


class LoadTableOnLoop:
    """loadTable's answer, read on the event loop; None leaves the request to connexion."""

    operation_id = "loadTable"

    def __init__(self, tables: TableService, reader: AsyncEntryReader, namespace_separator: str) -> None:
        self.tables = tables
        self.authorizer: Authorizer = tables.authorizer  # the same rule and cache as the handler
        self.reader = reader
        self.separator = namespace_separator

    async def __call__(
        self, kwargs: dict[str, Any], headers: dict[bytes, list[bytes]], in_thread: InThread
    ) -> Rendered | None:
        delegation, if_none_match = headers.get(_DELEGATION), headers.get(_IF_NONE_MATCH)
        if any(values is not None and len(values) != 1 for values in (delegation, if_none_match)):
            return None
        if not self.reader.available():
            return None
        if self.authorizer.cached() is not None:
            self.authorizer.authorize(self.operation_id, kwargs)
        else:
            await in_thread(self.authorizer.authorize, self.operation_id, kwargs)
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
        known = self.tables.issued.location_of(request.if_none_match)
        row = await self.reader.load_entry(warehouse.id, request.namespace, request.name, unless_at=known)
        if row is None or row.kind != TABLE:
            return None  # the handler answers the 404 (and says whether a view has the name)
        if row.metadata_location != known:
            return render_table(self.tables.answer(warehouse, row, request))
        not_modified = self.tables.not_modified(row, request)
        # still at that version, but the client's ETag is for another variant: the handler reads it all
        return render_table(not_modified) if not_modified is not None else None
