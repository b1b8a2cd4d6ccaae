"""Namespaces and warehouses: the namespace operations, the warehouse directory, ``/v1/config``
and readiness, and the keyset pagination the listings share.

Handlers call one method here; this module orchestrates the repository (PostgreSQL), the
object store and the pure rules. It never sees psycopg or minio types.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.authorization import Authorizer
from app.ground.errors import (
    BadRequest,
    CatalogError,
    NoSuchNamespace,
    NoSuchWarehouse,
    ServiceUnavailable,
    UnprocessableEntity,
)
from app.ground.locations import Location, safe_segment
from app.ground.page_tokens import PageTokens, scope
from app.ground.secrets import SecretBox
from app.ground.settings import S3Settings, Settings
from app.idempotency import iso8601_duration
from app.rules.identifiers import format_namespace, page_window
from app.rules.privileges import Securable
from storage.objects import ObjectStore, S3ObjectStore
from storage.repository import CatalogRepository
from storage.warehouses import WarehouseRow

WAREHOUSE_CACHE_TTL_S = 30.0
MAX_BATCH = 1000  # rows a listing fetches at most at once while it fills a page (fill_page)


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_page_token: str | None


@dataclass(frozen=True)
class PageWindow:
    """Which items a list request asks for: after which key, how many, and whether the answer
    carries a next-page token (``page_window``). Tokens are sealed for one ``listing``
    (app/ground/page_tokens.py): namespaces are keyed by their path (a list), tables, views and
    functions by their name (a string); a token of another listing, or not ours, is a 400."""

    paginate: bool
    limit: int | None
    after: list[str] | str | None
    tokens: PageTokens
    listing: bytes

    @classmethod
    def of(
        cls,
        page_token: str | None,
        page_size: int | None,
        max_page_size: int,
        keyed_by: type,
        tokens: PageTokens,
        listing: bytes,
    ) -> PageWindow:
        paginate, limit = page_window(page_token, page_size, max_page_size)
        after = tokens.open(listing, page_token) if page_token else None
        if after is not None and not isinstance(after, keyed_by):  # sealed for this listing: never
            raise BadRequest("Invalid pageToken")
        return cls(paginate, limit, after, tokens, listing)

    @property
    def fetch(self) -> int | None:
        """Rows to fetch: one more than the page, to learn whether another page exists."""
        return None if self.limit is None else self.limit + 1

    def page(self, rows: list[Any], key_of: Callable[[Any], list[str] | str] | None = None) -> Page:
        """The page of ``rows`` fetched for this window, with the next page's (sealed) token:
        of the last row's key (``key_of``; by default a name, or a namespace's path)."""
        key = key_of or _key
        seal = self.tokens.seal
        return page_of(rows, self.limit, (lambda last: seal(self.listing, key(last))) if self.paginate else None)


def fill_page(
    window: PageWindow,
    fetch: Callable[[Any, int | None], list[Any]],
    visible: Callable[[list[Any]], list[Any]],
) -> Page:
    """A page of up to ``window.limit`` items the caller may see, fetched in batches.

    A page filtered after one fetch could come out short or empty with a token that still led
    on: a caller paging one item at a time counted the hidden items between the ones it sees,
    and each token stood on a hidden name. Here rows are fetched on (the first batch is the
    window's one-more-than-a-page, so a caller who sees everything costs one query as before;
    later batches double, up to ``MAX_BATCH``) until one visible item more than the page is
    found or the listing ends; the token stands on the page's last visible item. So the pages
    are exactly the visible items, and a token is handed out only when another visible item follows.
    """
    batch = window.fetch
    rows = fetch(window.after, batch)
    found = visible(rows)
    while batch is not None and window.limit is not None and len(found) <= window.limit and len(rows) == batch:
        after = _key(rows[-1])
        batch = min(batch * 2, MAX_BATCH)
        rows = fetch(after, batch)
        found += visible(rows)
    return window.page(found)


def first_batch_page(window: PageWindow, rows: list[Any], visible: Callable[[list[Any]], list[Any]]) -> Page | None:
    """``fill_page``'s answer when its first batch (``rows``) decides it, else None (the event
    loop then leaves the request to the handler, which fetches on in a thread)."""
    found = visible(rows)
    if window.fetch is None or window.limit is None or len(found) > window.limit or len(rows) < window.fetch:
        return window.page(found)
    return None


def _key(item: Any) -> list[str] | str:
    return item if isinstance(item, str) else list(item)


def namespaces_answer(page: Page) -> dict[str, Any]:
    """listNamespaces' body, the same from the handler and from the event loop."""
    return _with_token({"namespaces": [list(path) for path in page.items]}, page)


def identifiers_answer(namespace: tuple[str, ...], page: Page) -> dict[str, Any]:
    """listTables' and listViews' body, the same from the handlers and from the event loop."""
    return _with_token({"identifiers": [{"namespace": list(namespace), "name": name} for name in page.items]}, page)


def _with_token(body: dict[str, Any], page: Page) -> dict[str, Any]:
    if page.next_page_token:
        body["next-page-token"] = page.next_page_token
    return body


class WarehouseDirectory:
    """Warehouse rows by name, cached briefly: every request names one, and they rarely change.

    A name not cached is read from PostgreSQL, so a warehouse created a moment ago on another
    worker is served at once; ``invalidate`` (called when ``auth_state.version`` moves, which every
    management change bumps) reads them all again, so an update or a deletion is seen within a poll.

    It also knows which object store serves a location: a warehouse with storage settings of its
    own (another endpoint, or its own keys) gets an S3 client of its own, and every location
    under its location or allowed locations is read and written with it (``store_for``, the
    router of ``storage.objects.RoutingObjectStore``); everything else uses the environment's.
    """

    def __init__(self, repository: CatalogRepository, settings: Settings | None = None) -> None:
        self._repository = repository
        self._settings = settings
        self._box = SecretBox(settings.secrets_key) if settings is not None and settings.secrets_key else None
        self._cache: dict[str, tuple[float, WarehouseRow]] = {}
        self._routes: list[tuple[Location, WarehouseRow]] | None = None
        self._stores: dict[tuple[Any, ...], S3ObjectStore] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> WarehouseRow:
        cached = self.cached(name)
        if cached is not None:
            return cached
        row = self._repository.get_warehouse(name)
        if row is None:
            raise NoSuchWarehouse(f"Warehouse does not exist: {name}")
        self.remember(row)
        return row

    def cached(self, name: str) -> WarehouseRow | None:
        """The row when it is cached and fresh, without going to the database."""
        cached = self._cache.get(name)
        if cached and time.monotonic() - cached[0] < WAREHOUSE_CACHE_TTL_S:
            return cached[1]
        return None

    def remember(self, row: WarehouseRow) -> None:
        with self._lock:
            known = self._cache.get(row.name)
            self._cache[row.name] = (time.monotonic(), row)
            if known is None or known[1] != row or known[1].storage_secret != row.storage_secret:
                self._routes = None  # a warehouse not seen before (or changed): route anew

    def invalidate(self) -> None:
        """Warehouses were created, changed or deleted somewhere: read them all again (one query;
        the cache stays warm for loadTable on the event loop, which serves only cached warehouses),
        or, when that fails, forget them all so each is read again when next named."""
        try:
            rows = self._repository.list_warehouses(None, None)
        except CatalogError:
            rows = None
        now = time.monotonic()
        with self._lock:
            self._cache = {row.name: (now, row) for row in rows} if rows is not None else {}
            self._routes = None

    # -- storage of each warehouse --------------------------------------------------------

    def s3_settings(self, row: WarehouseRow) -> S3Settings:
        """How Growler itself reaches this warehouse's storage: its endpoint, region, addressing
        and keys (decrypted), each falling back to the environment's."""
        default = self._settings.s3 if self._settings is not None else S3Settings()
        if self._is_environments(row):
            return default
        storage = row.storage or {}
        keys = self._open(row) if row.storage_secret else {}
        return S3Settings(
            endpoint=storage.get("endpoint") or default.endpoint,
            access_key=keys.get("access-key-id") or default.access_key,
            secret_key=keys.get("secret-access-key") or default.secret_key,
            region=storage.get("region") or default.region,
            path_style=bool(storage.get("path-style", default.path_style)),
            timeout_s=default.timeout_s,
        )

    def store_for(self, location: Location) -> ObjectStore | None:
        """The store of the warehouse that holds ``location`` (the most specific root wins, among
        every warehouse: one nested in another's root takes its own locations); None for the
        environment's store (no warehouse holds it, or the one that does uses that store)."""
        if location.scheme != "s3":
            return None
        routes = self._routes
        if routes is None:
            routes = self._load_routes()
        best: tuple[int, WarehouseRow] | None = None
        for root, row in routes:
            if location.is_within(root) and (best is None or len(root.segments) > best[0]):
                best = (len(root.segments), row)
        if best is None or not self._has_own_storage(best[1]):
            return None
        return self._store(best[1])

    def _load_routes(self) -> list[tuple[Location, WarehouseRow]]:
        routes = []
        for row in self._repository.list_warehouses(None, None):
            for text in (row.location, *row.allowed_locations):
                try:
                    routes.append((Location.parse(text), row))
                except BadRequest:
                    continue
        with self._lock:
            self._routes = routes
        return routes

    def _has_own_storage(self, row: WarehouseRow) -> bool:
        if self._is_environments(row):
            return False
        default = self._settings.s3 if self._settings is not None else S3Settings()
        endpoint = (row.storage or {}).get("endpoint")
        return row.storage_secret is not None or bool(endpoint and endpoint != default.endpoint)

    def _is_environments(self, row: WarehouseRow) -> bool:
        """The default warehouse is the environment's (GROWLER_WAREHOUSE, GROWLER_S3_*): its storage
        is the environment's, whatever its row says (servers sharing a database may differ)."""
        return self._settings is not None and row.name == self._settings.warehouse

    def _store(self, row: WarehouseRow) -> S3ObjectStore:
        s3 = self.s3_settings(row)
        key = (row.id, s3.endpoint, s3.region, s3.path_style, s3.access_key, s3.secret_key)
        store = self._stores.get(key)
        if store is None:
            store = S3ObjectStore(s3)
            with self._lock:
                self._stores = {k: v for k, v in self._stores.items() if k[0] != row.id}
                self._stores[key] = store
        return store

    def _open(self, row: WarehouseRow) -> dict[str, str]:
        if self._box is None:
            raise ServiceUnavailable(f"Warehouse {row.name} has storage keys but GROWLER_SECRETS_KEY is not set")
        try:
            return self._box.open(row.storage_secret or b"")
        except ValueError as exc:
            raise ServiceUnavailable(f"The storage keys of warehouse {row.name} cannot be decrypted") from exc


def namespace_answer(warehouse: WarehouseRow, namespace: tuple[str, ...], properties: dict[str, str]) -> dict[str, Any]:
    """loadNamespaceMetadata's answer from the stored properties (the door's event loop makes it too)."""
    if not properties.get("location"):
        properties = {**properties, "location": default_namespace_location(warehouse, namespace)}
    return {"namespace": list(namespace), "properties": properties}


class NamespaceService:
    def __init__(
        self,
        settings: Settings,
        repository: CatalogRepository,
        objects: ObjectStore,
        *,
        authorizer: Authorizer,
        page_tokens: PageTokens,
    ) -> None:
        self.settings = settings
        self.repository = repository
        self.objects = objects
        self.authorizer = authorizer  # required: no permissive default (app/authorization.py)
        self.page_tokens = page_tokens  # the installation's key (one for all workers): app/edge/factory.py
        self.warehouses = WarehouseDirectory(repository, settings)

    # -- start-up and health ------------------------------------------------------------

    def ensure_default_warehouse(self) -> WarehouseRow:
        s3 = self.settings.s3
        storage = {
            "endpoint": s3.endpoint,
            "region": s3.region,
            "path-style": s3.path_style,
            "credentials-mode": self.settings.storage_credentials_mode,
        }
        row = self.repository.upsert_warehouse(
            self.settings.warehouse, self.settings.warehouse_location, storage, list(self.settings.allowed_locations)
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
        self.repository.create_namespace(warehouse.id, namespace, properties)
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
        self.repository.drop_namespace(warehouse.id, namespace)

    def update_namespace_properties(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        removals: list[str],
        updates: dict[str, str],
    ) -> dict[str, list[str]]:
        both = sorted(set(removals) & set(updates))
        if both:
            raise UnprocessableEntity(
                f"Properties cannot be both set and removed in namespace {format_namespace(namespace)}: "
                + ", ".join(both)
            )
        warehouse = self.warehouses.get(prefix)
        before = self.repository.update_namespace_properties(
            warehouse.id, namespace, list(dict.fromkeys(removals)), updates
        )
        return {
            "updated": sorted(updates),
            "removed": [key for key in dict.fromkeys(removals) if key in before],
            "missing": [key for key in dict.fromkeys(removals) if key not in before],
        }


def default_namespace_location(warehouse: WarehouseRow, namespace: tuple[str, ...]) -> str:
    """The warehouse root plus the namespace path: the directory under which tables created
    without a location land (``EntryService._location_for``)."""
    return f"{warehouse.location.rstrip('/')}/{'/'.join(safe_segment(level) for level in namespace)}"


def names_window(
    operation: str,
    warehouse: str,
    namespace: tuple[str, ...],
    page_token: str | None,
    page_size: int | None,
    max_page_size: int,
    tokens: PageTokens,
) -> PageWindow:
    """The window of a listing of names in one namespace (tables, views, functions): its
    tokens lead on in this listing of this namespace only."""
    listing = scope(operation, warehouse, list(namespace))
    return PageWindow.of(page_token, page_size, max_page_size, str, tokens, listing)


def page_of_names(window: PageWindow, fetch: Callable[[str | None, int | None], list[str]]) -> Page:
    """A page of names keyset-paginated by name: ``fetch(after, limit)`` returns up to ``limit``
    names after ``after`` in byte order."""
    return window.page(fetch(window.after, window.fetch))  # type: ignore[arg-type]


def page_of(rows: list[Any], limit: int | None, token_for: Callable[[Any], str] | None) -> Page:
    """Trim the one extra row fetched to learn whether another page exists.

    ``token_for`` makes the next page's token from the last item; None when not paginating.
    """
    if limit is not None and len(rows) > limit:
        rows = rows[:limit]
        return Page(rows, token_for(rows[-1]) if token_for else None)
    return Page(rows, None)
