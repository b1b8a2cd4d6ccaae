"""loadTable: the parsed request, and its answer (the table, or NotModified: values of
``app.rules.table.answers``, with their ETags) for it.

``TableLoader`` is a part ``TableService`` is given at construction (app/composition/catalog.py).
The handler and the event loop's ``LoadTableOnLoop`` (``app/edge/loop_reads.py``) both answer
through ``TableLoader.answer``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from app.catalog.entries import Entries
from app.ground.settings import Settings
from app.namespaces.warehouses import WarehouseDirectory
from app.rules import table as rules
from app.rules.restrictions.policies import Restrictions, spec_restrictions
from app.rules.table.answers import LoadedTable, NotModified, etag_matches, load_etag
from app.storage_access.delegation import NO_DELEGATION, Delegation
from app.tables.access import TableStorageAccess
from app.tables.memory import IssuedETags
from storage.rows import EntryRow
from storage.warehouses import WarehouseRow


@dataclass(frozen=True)
class LoadTableRequest:
    """A parsed loadTable: the table, the variant of the answer asked for, and the client's ETag."""

    prefix: str
    namespace: tuple[str, ...]
    name: str
    snapshots: str | None = None
    delegation: Delegation = NO_DELEGATION
    if_none_match: str | None = None
    referenced_by: str | None = None  # the views a trusted engine loads it through (outermost first)


class TableLoader:
    def __init__(
        self,
        settings: Settings,
        warehouses: WarehouseDirectory,
        entries: Entries,
        access: TableStorageAccess,
        issued: IssuedETags,
    ) -> None:
        self.settings = settings
        self.warehouses = warehouses
        self.entries = entries
        self.access = access
        self.issued = issued  # lets loadTable on the event loop skip unchanged documents

    def load(self, request: LoadTableRequest) -> LoadedTable | NotModified:
        """loadTable: the table as asked for, or NotModified when the client already has it."""
        warehouse = self.warehouses.get(request.prefix)
        return self.answer(warehouse, self.entries.require_entry(warehouse, request.namespace, request.name), request)

    def answer(self, warehouse: WarehouseRow, row: EntryRow, request: LoadTableRequest) -> LoadedTable | NotModified:
        """loadTable's answer for a row already read (here, or on the event loop: app/edge/loop_reads.py)."""
        not_modified = self.not_modified(row, request)
        if not_modified is not None:
            return not_modified
        metadata = row.metadata
        if request.snapshots == "refs":
            metadata = json.dumps(rules.refs_only(json.loads(metadata)), separators=(",", ":"))
        identifier = (request.namespace, request.name)
        # a restricted caller: a trusted engine gets them in the answer, anyone else a 403
        restrictions = self.access.restrictions_for_storage(
            warehouse.name, request.namespace, request.name, request.referenced_by
        )
        config, credentials = self.access.storage_access(
            warehouse, identifier, self.access.row_roots(row), request.delegation
        )
        etag = self.load_etag(row.metadata_location, request.snapshots, request.delegation, restrictions)
        self.issued.remember(etag, row.metadata_location)
        read_restrictions = None
        if restrictions is not None:
            read_restrictions = spec_restrictions(restrictions, rules.parse_metadata(row.metadata).schema())
        return LoadedTable(row.metadata_location, metadata, config, credentials, etag, read_restrictions)

    def not_modified(self, row: EntryRow, request: LoadTableRequest) -> NotModified | None:
        """NotModified when the client's ETag is that of the answer; needs the row's location only
        (and the caller's restrictions, from its cached grants: they are part of the answer)."""
        restrictions = self.access.restrictions_for_storage(
            request.prefix, request.namespace, request.name, request.referenced_by
        )
        etag = self.load_etag(row.metadata_location, request.snapshots, request.delegation, restrictions)
        if not etag_matches(request.if_none_match, etag):
            return None
        self.issued.remember(etag, row.metadata_location)
        return NotModified(etag, row.metadata_location)

    def load_etag(
        self,
        metadata_location: str,
        snapshots: str | None = None,
        delegation: Delegation = NO_DELEGATION,
        restrictions: Restrictions | None = None,
    ) -> str:
        """The ETag of loadTable's answer (and of the other answers carrying the same metadata)."""
        digest = restrictions.digest if restrictions is not None else None
        return load_etag(metadata_location, snapshots, delegation.variant, self.settings.scan_planning_mode, digest)
