"""View operations: list, create, load, replace (commit), drop, rename, register.

The same shape as ``app.tables``: read the row (one query), apply the pure rules
(``app.view_metadata``), write a new metadata object (never overwriting), then compare-and-set
the pointer in PostgreSQL. A lost race re-reads and re-applies while the requirements still hold;
the losing file is deleted. Tables and views share one identifier space (one ``catalog_entry``
row per name): a view is never found as a table, nor a table as a view.
"""

from __future__ import annotations

import logging
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from app import view_metadata as rules
from app.catalog import Page, WarehouseDirectory
from app.errors import (
    AlreadyExists,
    BadRequest,
    CommitFailed,
    CommitStateUnknown,
    NoSuchNamespace,
    NoSuchView,
    ServiceUnavailable,
)
from app.identifiers import (
    check_name,
    check_namespace,
    decode_page_token,
    encode_page_token,
    format_namespace,
    page_window,
)
from app.settings import Settings
from app.tables import decode_metadata, encode_metadata, now_ms
from storage.objects import ObjectNotFound, ObjectStore
from storage.repository import CatalogRepository, CommitOutcomeUnknown, EntryRow, MetadataSwap, NewEntry, WarehouseRow

log = logging.getLogger(__name__)

VIEW = "view"
MAX_COMMIT_ATTEMPTS = 8
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


@dataclass(frozen=True)
class LoadedView:
    """What loadView answers; ``metadata`` is the stored JSON text, not re-parsed."""

    metadata_location: str
    metadata: str
    config: dict[str, str] = field(default_factory=dict)


class ViewService:
    def __init__(
        self,
        settings: Settings,
        repository: CatalogRepository,
        objects: ObjectStore,
        warehouses: WarehouseDirectory,
    ) -> None:
        self.settings = settings
        self.repository = repository
        self.objects = objects
        self.warehouses = warehouses

    # -- reading ------------------------------------------------------------------------

    def list_views(
        self, prefix: str, namespace: tuple[str, ...], page_token: str | None, page_size: int | None
    ) -> Page:
        warehouse = self.warehouses.get(prefix)
        paginate, limit = page_window(page_token, page_size, self.settings.max_page_size)
        after = decode_page_token(page_token) if page_token else None
        if after is not None and not isinstance(after, str):
            raise BadRequest("Invalid pageToken")
        names = self.repository.list_entries(
            warehouse.id, namespace, VIEW, after, None if limit is None else limit + 1
        )
        if limit is not None and len(names) > limit:
            names = names[:limit]
            return Page(names, encode_page_token(names[-1]) if paginate else None)
        return Page(names, None)

    def load_view(self, prefix: str, namespace: tuple[str, ...], name: str) -> LoadedView:
        warehouse = self.warehouses.get(prefix)
        row = self._require_view(warehouse, namespace, name)
        return LoadedView(row.metadata_location, row.metadata)

    def require_view(self, prefix: str, namespace: tuple[str, ...], name: str) -> None:
        warehouse = self.warehouses.get(prefix)
        if not self.repository.entry_exists(warehouse.id, namespace, name, VIEW):
            raise NoSuchView(f"View does not exist: {format_namespace((*namespace, name))}")

    # -- creating -----------------------------------------------------------------------

    def create_view(self, prefix: str, namespace: tuple[str, ...], request: dict[str, Any]) -> LoadedView:
        warehouse = self.warehouses.get(prefix)
        name = check_name(request["name"], "view name")
        self._require_namespace(warehouse, namespace)
        view_uuid = str(uuid.uuid4())
        location = self._view_location(warehouse, namespace, name, view_uuid, request.get("location"))
        metadata = rules.new_view_metadata(request, location=location, now_ms=now_ms(), view_uuid=view_uuid)
        self._require_inside_warehouse(warehouse, rules.metadata_directory(metadata), "write.metadata.path")
        if self.repository.load_entry(warehouse.id, namespace, name) is not None:
            raise AlreadyExists(f"Table or view already exists: {format_namespace((*namespace, name))}")
        text = rules.to_json(metadata)
        metadata_location = self._metadata_location(metadata, rules.next_metadata_version(None))
        self._write_metadata(metadata_location, text)
        entry = NewEntry(name, VIEW, view_uuid, location, metadata_location, text)
        try:
            self.repository.insert_entry(warehouse.id, namespace, entry)
        except Exception:
            self._forget_files([metadata_location])
            raise
        return LoadedView(metadata_location, text)

    def register_view(self, prefix: str, namespace: tuple[str, ...], request: dict[str, Any]) -> LoadedView:
        """A view from an existing metadata file; ``overwrite`` (a Growler extension, as for
        registerTable) repoints an existing view, never a table."""
        warehouse = self.warehouses.get(prefix)
        name = check_name(request["name"], "view name")
        metadata_location = request["metadata-location"]
        self._require_inside_warehouse(warehouse, metadata_location, "metadata-location")
        self._require_namespace(warehouse, namespace)
        try:
            text = decode_metadata(self.objects.read(metadata_location))
        except ObjectNotFound as exc:
            raise BadRequest(f"Metadata file does not exist: {metadata_location}") from exc
        except (UnicodeDecodeError, OSError, EOFError) as exc:
            raise BadRequest(f"Not a valid view metadata file: {metadata_location}") from exc
        metadata = rules.parse_view_metadata(text)
        self._require_inside_warehouse(warehouse, metadata["location"], "location")
        text = rules.to_json(metadata)
        entry = NewEntry(name, VIEW, metadata["view-uuid"], metadata["location"], metadata_location, text)
        if request.get("overwrite") is True:
            self.repository.replace_entry(warehouse.id, namespace, entry)
        else:
            self.repository.insert_entry(warehouse.id, namespace, entry)
        return LoadedView(metadata_location, text)

    # -- committing ---------------------------------------------------------------------

    def replace_view(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        name: str,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
    ) -> LoadedView:
        warehouse = self.warehouses.get(prefix)
        check_name(name, "view name")
        for attempt in range(MAX_COMMIT_ATTEMPTS):
            outcome = self._attempt_replace(warehouse, namespace, name, requirements, updates)
            if outcome is not None:
                return outcome
            # Another writer swapped the pointer first: back off, re-read, re-check, re-apply.
            time.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))
        raise CommitFailed(
            f"Commit to view {format_namespace((*namespace, name))} lost {MAX_COMMIT_ATTEMPTS} races "
            "with concurrent writers; refresh and retry"
        )

    def _attempt_replace(
        self,
        warehouse: WarehouseRow,
        namespace: tuple[str, ...],
        name: str,
        requirements: list[dict[str, Any]],
        updates: list[dict[str, Any]],
    ) -> LoadedView | None:
        """One optimistic attempt; None when a concurrent commit won the compare-and-set."""
        row = self._require_view(warehouse, namespace, name)
        base = rules.parse_view_metadata(row.metadata)
        new = rules.commit(base, requirements, updates, now_ms=now_ms())
        text = rules.to_json(new)
        if text == row.metadata:  # nothing changed: no new version
            return LoadedView(row.metadata_location, row.metadata)
        self._require_inside_warehouse(warehouse, new["location"], "location")
        self._require_inside_warehouse(warehouse, rules.metadata_directory(new), "write.metadata.path")
        location = self._metadata_location(new, rules.next_metadata_version(row.metadata_location))
        self._write_metadata(location, text)
        swap = MetadataSwap(row.id, row.metadata_location, location, text, new["location"])
        if not self._swap(swap):
            self._forget_files([location])
            return None
        return LoadedView(location, text)

    def _swap(self, swap: MetadataSwap) -> bool:
        try:
            return self.repository.swap_metadata([swap])
        except CommitOutcomeUnknown:
            return self._outcome_after_failure(swap)

    def _outcome_after_failure(self, swap: MetadataSwap) -> bool:
        """The connection broke after the swap was sent: look whether it took effect.

        A view's metadata does not list its previous files, so when the pointer has moved on to
        a third file the outcome cannot be told apart; the client must then not clean up.
        """
        try:
            current = self.repository.current_metadata_location(swap.entry_id)
        except ServiceUnavailable as exc:
            raise CommitStateUnknown(
                "The catalog database failed while the commit was being applied; its outcome is unknown"
            ) from exc
        if current == swap.new_location:
            return True
        if current in (swap.expected_location, None):
            return False
        raise CommitStateUnknown("The view changed while the commit was being applied; its outcome is unknown")

    # -- dropping and renaming ----------------------------------------------------------

    def drop_view(self, prefix: str, namespace: tuple[str, ...], name: str) -> None:
        """Remove the view from the catalog; its metadata files stay (as Java's catalogs do)."""
        warehouse = self.warehouses.get(prefix)
        if self.repository.delete_entry(warehouse.id, namespace, name, VIEW, None) is None:
            self._require_namespace(warehouse, namespace)
            raise NoSuchView(f"View does not exist: {format_namespace((*namespace, name))}")

    def rename_view(self, prefix: str, source: dict[str, Any], destination: dict[str, Any]) -> None:
        warehouse = self.warehouses.get(prefix)
        src = (check_namespace(source["namespace"]), check_name(source["name"], "view name"))
        dst = (check_namespace(destination["namespace"]), check_name(destination["name"], "view name"))
        if not self.repository.rename_entry(warehouse.id, src, dst, VIEW):
            self._require_namespace(warehouse, src[0])
            raise NoSuchView(f"View does not exist: {format_namespace((*src[0], src[1]))}")

    # -- helpers ------------------------------------------------------------------------

    def _require_view(self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str) -> EntryRow:
        row = self.repository.load_entry(warehouse.id, namespace, name)
        if row is None or row.kind != VIEW:
            if row is None:
                self._require_namespace(warehouse, namespace)
            raise NoSuchView(f"View does not exist: {format_namespace((*namespace, name))}")
        return row

    def _require_namespace(self, warehouse: WarehouseRow, namespace: tuple[str, ...]) -> None:
        if not self.repository.namespace_exists(warehouse.id, namespace):
            raise NoSuchNamespace(f"Namespace does not exist: {format_namespace(namespace)}")

    def _view_location(
        self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str, view_uuid: str, requested: Any
    ) -> str:
        if requested:
            location = str(requested).rstrip("/")
            self._require_inside_warehouse(warehouse, location, "location")
            return location
        # The uuid suffix keeps a re-created view from ever sharing files with a dropped one.
        base = warehouse.location.rstrip("/")
        return f"{base}/{'/'.join(namespace)}/{name}-{view_uuid.replace('-', '')}"

    @staticmethod
    def _require_inside_warehouse(warehouse: WarehouseRow, location: str, what: str) -> None:
        root = warehouse.location.rstrip("/") + "/"
        if not location.startswith(root) or ".." in location.split("/") or _CONTROL.search(location):
            raise BadRequest(f"The {what} {location!r} is outside the warehouse storage location {root}")

    @staticmethod
    def _metadata_location(metadata: rules.ViewMetadata, version: int) -> str:
        file_name = rules.metadata_file_name(version, metadata["properties"], str(uuid.uuid4()))
        return f"{rules.metadata_directory(metadata)}/{file_name}"

    def _write_metadata(self, location: str, text: str) -> None:
        """Record the object as pending (durably, first), then write it; the commit settles it."""
        self.repository.record_pending([location])
        try:
            self.objects.write_new(location, encode_metadata(text, location))
        except Exception:
            self._forget_files([location])
            raise

    def _forget_files(self, locations: list[str]) -> None:
        """Best-effort cleanup of files no commit points to; what fails here the sweeper reclaims."""
        try:
            self.objects.delete(locations)
            self.repository.settle_pending(locations)
        except Exception as exc:  # noqa: BLE001 - cleanup must not turn a result into an error
            log.warning("could not delete %d unreferenced view metadata files: %s", len(locations), type(exc).__name__)
