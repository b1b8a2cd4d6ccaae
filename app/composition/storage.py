"""Storage, authentication and the authorizer: what every capability below is built on."""

from __future__ import annotations

from dataclasses import dataclass

from app.authorization import Authorizer
from app.edge.auth import Authentication, AuthSettings
from app.ground.page_tokens import PageTokens
from app.ground.settings import Settings
from app.management.rights import ManagementRights
from app.namespaces.warehouses import WarehouseDirectory
from storage.build import object_store, open_database
from storage.db import Database
from storage.grants import GrantRepository
from storage.management_rows import ManagementRows
from storage.objects import RoutingObjectStore
from storage.repository import CatalogRepository
from storage.view_definers import ViewDefiners


@dataclass(frozen=True)
class Foundation:
    settings: Settings
    database: Database
    repository: CatalogRepository
    warehouses: WarehouseDirectory  # the warehouses and their object stores
    objects: RoutingObjectStore  # routed by ``warehouses`` (storage.objects.StoreRouter)
    auth: Authentication
    authorizer: Authorizer
    page_tokens: PageTokens
    rights: ManagementRights  # the management API's rights, on ``authorizer``'s grants


def build_foundation(settings: Settings, auth_settings: AuthSettings) -> Foundation:
    database, repository = open_database(settings)
    # Object I/O goes to the store of the warehouse holding the location: the directory is handed
    # to the object store as its router; every management change (a bump of auth_state.version,
    # seen by the poll) drops the directory's cached warehouses and routes.
    warehouses = WarehouseDirectory(repository, settings)
    objects = object_store(settings, warehouses)
    auth = Authentication(auth_settings, database, listeners=(warehouses.invalidate,))
    # Who may do what (app/authorization.py): its cache follows the version the auth state polls.
    # Every service takes it in its constructor (none has a default to fall back on).
    if auth_settings.enabled:
        authorizer = Authorizer(
            GrantRepository(database),
            lambda: auth.state.version,
            namespace_separator=settings.namespace_separator,
            default_warehouse=settings.warehouse,
            definers=ViewDefiners(database),  # a trusted engine reading tables through views
        )
    else:  # GROWLER_AUTH=none (loopback only, AuthSettings.from_env): no caller, nothing to enforce
        authorizer = Authorizer.allow_all()
    # Page tokens are sealed with the installation's key (kept in PostgreSQL: storage/page_keys.py),
    # so a token one worker or replica hands out is read by any other, and after a restart; start-up
    # installs the key (until then, a listing is refused). Every service that pages takes it.
    rights = ManagementRights(authorizer, ManagementRows(database))
    return Foundation(settings, database, repository, warehouses, objects, auth, authorizer, PageTokens(), rights)
