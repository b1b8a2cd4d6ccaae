"""Namespaces: the namespace operations, ``/v1/config`` and readiness. The warehouse directory
is app/namespaces/warehouses.py, the keyset pagination the listings share app/catalog/paging.py.

Handlers call one method here; this module orchestrates the repository (PostgreSQL), the
object store and the pure rules. It never sees psycopg or minio types.
"""

from __future__ import annotations

from typing import Any

from app.authorization import Authorizer
from app.catalog.paging import Page, PageWindow, fill_page
from app.events import changes as change_events
from app.ground.errors import BadRequest, NoSuchNamespace, UnprocessableEntity
from app.ground.locations import Location, is_allowed, safe_segment
from app.ground.page_tokens import PageTokens, scope
from app.ground.settings import Settings, parse_retention
from app.idempotency import iso8601_duration
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.identifiers import format_namespace
from app.rules.privileges import Securable
from app.rules.requests.namespaces import UpdateNamespacePropertiesRequest
from storage.events import ChangeEvent
from storage.objects import ObjectStore
from storage.placement import NamespaceClaim
from storage.repository import CatalogRepository
from storage.warehouses import DeletionPolicy, WarehouseRow

MAX_WAREHOUSES_LISTED = 1000


def namespace_answer(warehouse: WarehouseRow, namespace: tuple[str, ...], properties: dict[str, str]) -> dict[str, Any]:
    """loadNamespaceMetadata's answer from the stored properties (the dispatcher's event loop makes it too)."""
    if not properties.get("location"):
        properties = {**properties, "location": default_namespace_location(warehouse, namespace)}
    return {"namespace": list(namespace), "properties": properties}


class NamespaceService:
    def __init__(
        self,
        settings: Settings,
        repository: CatalogRepository,
        objects: ObjectStore,
        warehouses: WarehouseDirectory,
        *,
        authorizer: Authorizer,
        page_tokens: PageTokens,
    ) -> None:
        self.settings = settings
        self.repository = repository
        self.objects = objects
        self.authorizer = authorizer  # required: no permissive default (app/authorization.py)
        self.page_tokens = page_tokens  # the installation's key (one for all workers): app/edge/factory.py
        self.warehouses = warehouses  # the same directory routes the object store (app/composition)

    # -- start-up and health ------------------------------------------------------------

    def ensure_default_warehouse(self) -> WarehouseRow:
        s3 = self.settings.s3
        storage = {
            "endpoint": s3.endpoint,
            "region": s3.region,
            "path-style": s3.path_style,
            "credentials-mode": self.settings.storage_credentials_mode,
        }
        policy = DeletionPolicy(
            self.settings.deletion_policy,
            parse_retention(self.settings.deletion_retention),
            self.settings.refuse_deletes,
        )
        row = self.repository.upsert_warehouse(
            self.settings.warehouse,
            self.settings.warehouse_location,
            storage,
            list(self.settings.allowed_locations),
            policy,
        )
        self.warehouses.remember(row)
        return row

    def check_ready(self) -> dict[str, str]:
        """Each dependency's state; raises ServiceUnavailable when one is down."""
        self.repository.ping()
        self.objects.ping()
        return {"database": "ok", "object-storage": "ok"}

    # -- config -------------------------------------------------------------------------

    def config(self, warehouse: str | None, endpoints: list[str]) -> dict[str, Any]:
        row = self.warehouses.get(warehouse or self.settings.warehouse)
        return {
            "defaults": {},
            "overrides": {
                "prefix": row.name,
                "namespace-separator": self.settings.namespace_separator,
            },
            "endpoints": endpoints,
            "idempotency-key-lifetime": iso8601_duration(self.settings.idempotency_lifetime_s),
        }

    def visible_warehouses(self) -> list[str]:
        """The names of the warehouses the caller sees (any grant on, above or below them), for
        the console's first page; at most ``MAX_WAREHOUSES_LISTED`` (an installation has few)."""
        rows = self.repository.list_warehouses(None, MAX_WAREHOUSES_LISTED)
        return self.authorizer.filter([row.name for row in rows], Securable.of_warehouse)

    # -- namespaces ---------------------------------------------------------------------

    def list_namespaces(
        self,
        prefix: str,
        parent: tuple[str, ...] | None,
        page_token: str | None,
        page_size: int | None,
    ) -> Page:
        warehouse = self.warehouses.get(prefix)
        window = self.namespaces_window(warehouse.name, parent, page_token, page_size)
        return fill_page(
            window,
            lambda after, limit: self.repository.list_namespaces(warehouse.id, parent, after, limit),
            lambda rows: self.visible(prefix, rows),
        )

    def namespaces_window(
        self, warehouse: str, parent: tuple[str, ...] | None, page_token: str | None, page_size: int | None
    ) -> PageWindow:
        """listNamespaces' window: its tokens lead on in this warehouse, under this parent only."""
        listing = scope("listNamespaces", warehouse, list(parent) if parent else None)
        return PageWindow.of(page_token, page_size, self.settings.max_page_size, list, self.page_tokens, listing)

    def visible(self, prefix: str, rows: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
        """The namespaces of ``rows`` the caller may see (the event loop's listNamespaces uses it too)."""
        return self.authorizer.filter(rows, lambda path: Securable.of_namespace(prefix, tuple(path)))

    def create_namespace(self, prefix: str, namespace: tuple[str, ...], properties: dict[str, str]) -> dict[str, Any]:
        warehouse = self.warehouses.get(prefix)
        placed = self._placement(warehouse, namespace, properties.get("location"))
        change = change_events.namespace_change("create-namespace", namespace, properties=properties)
        self.repository.create_namespace(
            warehouse.id, namespace, properties, placed, events=change_events.events_of(warehouse.id, [change])
        )
        return {"namespace": list(namespace), "properties": properties}

    def load_namespace(self, prefix: str, namespace: tuple[str, ...]) -> dict[str, Any]:
        """The stored properties, plus a ``location`` for a namespace that has none.

        Clients place tables by it (Trino takes its staged create, with a fresh table location,
        only when the namespace reports one), as other catalogs report it: the warehouse root
        plus the namespace path, where Growler puts the namespace's tables. A user's own
        ``location`` wins; the default is reported, never stored.
        """
        warehouse = self.warehouses.get(prefix)
        return namespace_answer(warehouse, namespace, self.repository.namespace_properties(warehouse.id, namespace))

    def require_namespace(self, prefix: str, namespace: tuple[str, ...]) -> None:
        """HEAD namespace: NoSuchNamespace (404) unless it exists."""
        warehouse = self.warehouses.get(prefix)
        if not self.repository.namespace_exists(warehouse.id, namespace):
            raise NoSuchNamespace(f"Namespace does not exist: {format_namespace(namespace)}")

    def drop_namespace(self, prefix: str, namespace: tuple[str, ...]) -> None:
        warehouse = self.warehouses.get(prefix)
        change = change_events.namespace_change("drop-namespace", namespace)
        self.repository.drop_namespace(warehouse.id, namespace, events=change_events.events_of(warehouse.id, [change]))

    def update_namespace_properties(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        request: UpdateNamespacePropertiesRequest,
    ) -> dict[str, list[str]]:
        removals, updates = request.removals, request.updates
        both = sorted(set(removals) & set(updates))
        if both:
            raise UnprocessableEntity(
                f"Properties cannot be both set and removed in namespace {format_namespace(namespace)}: "
                + ", ".join(both)
            )
        warehouse = self.warehouses.get(prefix)

        def summary(before: dict[str, str]) -> dict[str, list[str]]:
            return {
                "updated": sorted(updates),
                "removed": [key for key in dict.fromkeys(removals) if key in before],
                "missing": [key for key in dict.fromkeys(removals) if key not in before],
            }

        def events(before: dict[str, str]) -> list[ChangeEvent]:
            change = change_events.namespace_change("update-namespace-properties", namespace, **summary(before))
            return change_events.events_of(warehouse.id, [change])

        placed = None
        if "location" in updates or "location" in removals:  # claimed if it moves (storage/namespaces.py)
            placed = self._placement(warehouse, namespace, updates.get("location"))
        before = self.repository.update_namespace_properties(
            warehouse.id, namespace, list(dict.fromkeys(removals)), updates, placed, events=events
        )
        return summary(before)

    def _placement(self, warehouse: WarehouseRow, namespace: tuple[str, ...], explicit: str | None) -> NamespaceClaim:
        """The location a namespace is to own, checked where no database is needed.

        Its explicit ``location`` must lie strictly inside its parent's home (the parent's own
        location, else its default one; the warehouse location for a top-level namespace) or
        inside one of the warehouse's other allowed locations, as an entry's must lie inside its
        namespace's: a grant on one namespace never places anything in another's folder, nor at
        the warehouse root. Without one, the default layout is its location. Either way the
        location is claimed where the namespace is written (storage/placement.py): it overlaps
        nothing but its own subtree and its ancestors.
        """
        if not explicit:
            default = default_namespace_location(warehouse, namespace)
            return NamespaceClaim(Location.parse(default, "namespace location"), warehouse.id, namespace)
        location = Location.parse(explicit, "namespace location")
        others = [Location.parse(text, "allowed location") for text in warehouse.allowed_locations]
        roots = [Location.parse(warehouse.location, "warehouse location"), *others]
        if not is_allowed(location, roots):
            allowed = ", ".join(root.uri for root in roots)
            raise BadRequest(
                f"The namespace location {explicit!r} is outside the warehouse's allowed locations ({allowed})"
            )
        if len(namespace) > 1:
            parent = namespace[:-1]
            try:
                properties = self.repository.namespace_properties(warehouse.id, parent)
            except NoSuchNamespace:
                raise BadRequest(f"Parent namespace does not exist: {format_namespace(parent)}") from None
            home = Location.parse(namespace_home(warehouse, parent, properties), "namespace location")
            whose = f"its parent namespace's location ({home.uri})"
        else:
            home, whose = roots[0], f"the warehouse location ({roots[0].uri})"
        if not is_allowed(location, [home, *others]):
            raise BadRequest(
                f"The namespace location {explicit!r} is outside {whose} and the warehouse's other allowed "
                "locations: choose a folder inside it, or leave the location unset for the default one"
            )
        return NamespaceClaim(location, warehouse.id, namespace)


def default_namespace_location(warehouse: WarehouseRow, namespace: tuple[str, ...]) -> str:
    """The warehouse root plus the namespace path: the directory under which tables created
    without a location land (``Entries.location_for``)."""
    return f"{warehouse.location.rstrip('/')}/{'/'.join(safe_segment(level) for level in namespace)}"


def namespace_home(warehouse: WarehouseRow, namespace: tuple[str, ...], properties: dict[str, str]) -> str:
    """Where what a namespace holds goes: its own ``location`` property, else the default one.
    An entry given a location, and a nested namespace given one, must lie inside it."""
    return str(properties.get("location") or "").rstrip("/") or default_namespace_location(warehouse, namespace)
