"""The warehouse directory: warehouse rows by name, cached briefly, and the object store that
serves each location (a warehouse with storage of its own gets an S3 client of its own).

Its own module because every service resolves warehouses through it and the object store
routes through it (``storage.objects.RoutingObjectStore``); the namespace service only owns it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from app.ground.errors import BadRequest, CatalogError, NoSuchWarehouse, ServiceUnavailable
from app.ground.locations import Location
from app.ground.secrets import SecretBox
from app.ground.settings import S3Settings, Settings
from storage.objects import ObjectStore, S3ObjectStore
from storage.repository import CatalogRepository
from storage.warehouses import WarehouseRow

WAREHOUSE_CACHE_TTL_S = 30.0


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
        return cached if cached is not None else self.read(name)

    def read(self, name: str) -> WarehouseRow:
        """The row as the database has it now (and cached): for a decision a cached row may be a
        moment late for, such as a protection mark set just before a drop."""
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
