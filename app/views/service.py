"""View operations: list, create, load, replace (commit), drop, rename, register.

The same shape as ``app.tables.service``: read the row (one query), apply the pure rules
(``app.rules.view``), write a new metadata object (never overwriting), then compare-and-set
the pointer in PostgreSQL. A lost race re-reads and re-applies while the requirements still hold;
the losing file is deleted. Tables and views share one identifier space (one ``catalog_entry``
row per name): a view is never found as a table, nor a table as a view.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field

from app.catalog.commits import CommitLoop, NewVersion
from app.catalog.deletion import is_soft
from app.catalog.entries import Entries, now_ms
from app.events import changes as change_events
from app.ground.callers import current_principal
from app.ground.locations import Location
from app.namespaces.warehouses import WarehouseDirectory
from app.rules import view as rules
from app.rules.identifiers import (
    check_name,
    format_namespace,
)
from app.rules.metadata_files import metadata_file_location
from app.rules.requests.views import CommitViewRequest, CreateViewRequest, RegisterViewRequest
from storage.entries import NewEntry
from storage.repository import CatalogRepository
from storage.view_definers import Definer, ViewDefiners
from storage.warehouses import WarehouseRow

log = logging.getLogger(__name__)

VIEW = "view"


@dataclass(frozen=True)
class LoadedView:
    """What loadView answers; ``metadata`` is the stored JSON text, not re-parsed."""

    metadata_location: str
    metadata: str
    config: dict[str, str] = field(default_factory=dict)


class ViewService:
    def __init__(
        self, repository: CatalogRepository, warehouses: WarehouseDirectory, entries: Entries, definers: ViewDefiners
    ) -> None:
        self.repository = repository
        self.warehouses = warehouses
        self.entries = entries  # the view entries: names, locations, drops (app/catalog/entries.py)
        # who set each view's definition: whose rights a trusted engine reads its tables with
        # (loadTable's referenced-by: app/authorization.py, docs/read-restrictions.md "Views")
        self.definers = definers
        self.commits = CommitLoop(repository, entries.files, kind=VIEW)
        # What the handlers call of the entries: their own methods (no delegation in between).
        self.list_names = entries.list_names
        self.require_exists = entries.require_exists
        self.rename = entries.rename

    # -- reading ------------------------------------------------------------------------

    def load_view(self, prefix: str, namespace: tuple[str, ...], name: str) -> LoadedView:
        warehouse = self.warehouses.get(prefix)
        row = self.entries.require_entry(warehouse, namespace, name)
        return LoadedView(row.metadata_location, row.metadata)

    # -- creating -----------------------------------------------------------------------

    def create_view(self, prefix: str, namespace: tuple[str, ...], request: CreateViewRequest) -> LoadedView:
        warehouse = self.warehouses.get(prefix)
        name = check_name(request.name, "view name")
        properties = self.entries.require_namespace(warehouse, namespace)
        view_uuid = str(uuid.uuid4())
        location = self.entries.location_for(warehouse, namespace, name, view_uuid, request.location, properties)
        metadata = rules.new_view_metadata(request.definition, location=location, now_ms=now_ms(), view_uuid=view_uuid)
        directory = rules.metadata_directory(metadata)
        self.entries.require_inside_warehouse(warehouse, directory, "write.metadata.path")
        self.entries.require_homes(
            warehouse, namespace, properties, [("write.metadata.path", directory)], [Location.parse(location)]
        )
        self.entries.require_name_free(warehouse, namespace, name)
        text = rules.to_json(metadata)
        metadata_location = self._metadata_location(metadata, rules.next_metadata_version(None))
        entry = NewEntry(name, VIEW, view_uuid, location, metadata_location, text)
        self.entries.insert_new(warehouse, namespace, entry, self.entries.created_events(warehouse, namespace, entry))
        self._defined(warehouse, namespace, name)
        return LoadedView(metadata_location, text)

    def register_view(self, prefix: str, namespace: tuple[str, ...], request: RegisterViewRequest) -> LoadedView:
        """A view from an existing metadata file; ``overwrite`` (a Growler extension, as for
        registerTable) repoints an existing view, never a table."""
        warehouse = self.warehouses.get(prefix)
        name = check_name(request.name, "view name")
        metadata_location = request.metadata_location
        properties = self.entries.require_namespace(warehouse, namespace)
        metadata = rules.parse_view_metadata(self.entries.read_metadata_file(warehouse, metadata_location))
        self.entries.require_inside_warehouse(warehouse, metadata["location"], "location")
        self.entries.require_home(warehouse, namespace, properties, metadata["location"], "location")
        self.entries.require_inside_warehouse(warehouse, rules.metadata_directory(metadata), "write.metadata.path")
        named = [("metadata directory", metadata_location.rsplit("/", 1)[0])]
        self.entries.require_homes(warehouse, namespace, properties, named, [Location.parse(metadata["location"])])
        text = rules.to_json(metadata)
        entry = NewEntry(name, VIEW, metadata["view-uuid"], metadata["location"], metadata_location, text)
        # the proposal has no register-view: a registered view is created, as far as a consumer knows
        events = self.entries.created_events(warehouse, namespace, entry)
        self.definers.clear(warehouse.id, (namespace, name))  # an overwrite: the earlier definer's rights go first
        self.entries.register(warehouse, namespace, entry, request.overwrite, events)
        self._defined(warehouse, namespace, name)
        return LoadedView(metadata_location, text)

    # -- committing ---------------------------------------------------------------------

    def replace_view(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        name: str,
        request: CommitViewRequest,
    ) -> LoadedView:
        warehouse = self.warehouses.get(prefix)
        check_name(name, "view name")
        # No definer while the definition changes: a crash or a race in between leaves the view's
        # tables readable with the caller's own rights only, never the new SQL with the old definer's.
        self.definers.clear(warehouse.id, (namespace, name))
        answer = self.commits.run(
            lambda: self._attempt_replace(warehouse, namespace, name, request),
            f"view {format_namespace((*namespace, name))}",
        )
        self._defined(warehouse, namespace, name)
        return answer

    def _attempt_replace(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        name: str,
        request: CommitViewRequest,
    ) -> LoadedView | None:
        """One optimistic attempt; None when a concurrent commit won the compare-and-set."""
        row = self.entries.require_entry(warehouse, namespace, name)
        base = rules.parse_view_metadata(row.metadata)
        new = rules.commit(base, request.requirements, request.updates, now_ms=now_ms())
        text = rules.to_json(new)
        if text == row.metadata:  # nothing changed: no new version
            return LoadedView(row.metadata_location, row.metadata)
        self.entries.require_inside_warehouse(warehouse, new["location"], "location")
        self.entries.require_inside_warehouse(warehouse, rules.metadata_directory(new), "write.metadata.path")
        location = self._metadata_location(new, rules.next_metadata_version(row.metadata_location))
        named = [("location", new["location"]), ("write.metadata.path", location.rsplit("/", 1)[0])]
        placed = self.entries.moved(warehouse, namespace, name, row, named)
        sent_requirements = [requirement.sent for requirement in request.requirements]
        sent_updates = [update.sent for update in request.updates]
        change = change_events.committed(
            VIEW, namespace, name, row.uuid, sent_requirements, sent_updates, row.metadata_location, location
        )
        events = change_events.events_of(warehouse.id, [change])
        if not self.commits.publish([NewVersion(row, location, text, new["location"], placed)], events):
            return None
        return LoadedView(location, text)

    # -- dropping and renaming ----------------------------------------------------------

    def drop_view(self, prefix: str, namespace: tuple[str, ...], name: str) -> None:
        """Remove the view from the catalog; its metadata files stay (as Java's catalogs do)."""
        warehouse = self.warehouses.get(prefix)
        events = self.entries.dropped_events(warehouse, namespace, name)
        if is_soft(warehouse):
            row = self.entries.drop_into_bin(warehouse, namespace, name, purge=False, action="drop", events=events)
        else:
            row = self.entries.drop_at_once(warehouse, namespace, name, action="drop", events=events)
        if row is None:
            self.entries.require_namespace(warehouse, namespace)
            raise self.entries.missing(namespace, name)

    # -- helpers ------------------------------------------------------------------------

    def _defined(self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str) -> None:
        """The caller becomes the view's definer (none without authentication: nothing is checked)."""
        caller = current_principal.get()
        if caller is not None:
            self.definers.record(warehouse.id, (namespace, name), Definer(caller.name, caller.source, caller.roles))

    def _metadata_location(self, metadata: rules.ViewMetadata, version: int) -> str:
        """Where the view's metadata file of ``version`` goes: a fresh uuid in its name, never an
        existing object."""
        directory = rules.metadata_directory(metadata)
        return metadata_file_location(directory, version, metadata["properties"], str(uuid.uuid4()))
