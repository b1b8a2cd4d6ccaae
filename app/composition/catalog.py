"""The catalog's capabilities: namespaces, tables, views, the recycle bin, protection marks,
functions, scan planning, remote signing, idempotency and the console's previews."""

from __future__ import annotations

from dataclasses import dataclass

import urllib3

from app.authorization import Authorizer
from app.catalog.entries import Entries
from app.composition.storage import Foundation
from app.federation.answers import AnswerCheck
from app.federation.cache import LoadedTables
from app.federation.mirror import EventMirror, MirroredWarehouses
from app.federation.moved import MovedCopies
from app.federation.own_storage import OwnStorageAccess
from app.federation.restricted import RemoteRestrictions
from app.federation.service import FederationService
from app.federation.versions import RemoteVersions
from app.functions import FunctionService, function_metadata_schema
from app.ground.errors import NoSuchTable, NoSuchView
from app.ground.page_tokens import PageTokens
from app.ground.secrets import SecretBox
from app.ground.settings import Settings
from app.idempotency import IdempotencyService
from app.namespaces.service import NamespaceService
from app.namespaces.warehouses import WarehouseDirectory
from app.planning.service import PlanningConfig, PlanningService
from app.previews.service import PreviewService
from app.protection.service import ProtectionService
from app.recycle_bin.service import RecycleBinService
from app.rules import table as table_rules
from app.storage_access.signing import RemoteSigner
from app.tables.access import TABLE, TableStorageAccess
from app.tables.committing import AfterCommit, TableCommitter
from app.tables.loading import TableLoader
from app.tables.memory import HeldDocuments, IssuedETags, ParsedMetadataCache
from app.tables.metrics_reports import MetricsReports
from app.tables.service import TableService
from app.views.service import VIEW, ViewService
from storage.db import Database
from storage.federated_events import MirrorCursors
from storage.federated_versions import FederatedVersions
from storage.functions import FunctionRepository
from storage.idempotency import IdempotencyRepository
from storage.objects import RoutingObjectStore
from storage.plans import PlanRepository
from storage.protection_rows import ProtectionRows
from storage.repository import CatalogRepository
from storage.staged import StagedTables
from storage.table_moves import TableMoveRows
from storage.view_definers import ViewDefiners


@dataclass(frozen=True)
class Catalog:
    namespaces: NamespaceService
    tables: TableService
    views: ViewService
    recycle_bin: RecycleBinService
    protection: ProtectionService
    functions: FunctionService
    planning: PlanningService
    signer: RemoteSigner
    idempotency: IdempotencyService
    idempotency_keys: IdempotencyRepository  # the housekeeper expires them
    previews: PreviewService
    federation: FederationService
    event_mirror: EventMirror  # the remotes' change feeds, read by the housekeeper


# Connections kept to the remotes of federated warehouses: pools per remote host, each this large.
FEDERATION_POOLS, FEDERATION_POOL_SIZE = 32, 8


def build_catalog(base: Foundation, spec: dict, *, after_commit: AfterCommit) -> Catalog:
    """``after_commit``: told (entry id, snapshots, its properties) after each table
    commit lands (maintenance's trigger, app/composition/maintenance.py)."""
    settings, repository, objects, warehouses = base.settings, base.repository, base.objects, base.warehouses
    shared = {"authorizer": base.authorizer, "page_tokens": base.page_tokens}
    namespaces = NamespaceService(settings, repository, objects, warehouses, **shared)
    tables = build_tables(base, after_commit=after_commit)
    views = ViewService(
        repository,
        warehouses,
        Entries(VIEW, NoSuchView, settings, repository, objects, warehouses, **shared),
        ViewDefiners(base.database),
    )
    recycle_bin = RecycleBinService(
        settings,
        repository,
        warehouses,
        tables.owned_metadata_files,
        tables.purge_requested,
        rights=base.rights,
        page_tokens=base.page_tokens,
    )
    idempotency_keys = IdempotencyRepository(base.database)
    mirrored = MirroredWarehouses()
    protection_rows = ProtectionRows(base.database)
    federation = FederationService(
        warehouses,
        AnswerCheck(base.authorizer),
        urllib3.PoolManager(num_pools=FEDERATION_POOLS, maxsize=FEDERATION_POOL_SIZE),
        secrets=SecretBox(settings.secrets_key) if settings.secrets_key else None,
        namespace_separator=settings.namespace_separator,
        versions=RemoteVersions(FederatedVersions(base.database), mirrored),
        moved=MovedCopies(TableMoveRows(base.database), settings.namespace_separator),
        restricted=RemoteRestrictions(base.authorizer),
        protection=protection_rows,
        loaded=LoadedTables(),
        own_storage=OwnStorageAccess(settings, tables.access, protection_rows),
    )
    return Catalog(
        namespaces=namespaces,
        tables=tables,
        views=views,
        recycle_bin=recycle_bin,
        protection=ProtectionService(
            protection_rows, warehouses, rights=base.rights, remote_exists=federation.require_exists
        ),
        functions=build_functions(settings, base.database, repository, objects, warehouses, spec, **shared),
        planning=PlanningService(tables, PlanRepository(base.database), PlanningConfig.from_env()),
        signer=RemoteSigner(settings, tables.access, federated_scope=federation.storage_scope),
        idempotency=IdempotencyService(idempotency_keys, settings.idempotency_lifetime_s),
        idempotency_keys=idempotency_keys,
        previews=PreviewService(tables),
        federation=federation,
        event_mirror=EventMirror(MirrorCursors(base.database), federation.remote_of, mirrored),
    )


def build_tables(base: Foundation, *, after_commit: AfterCommit) -> TableService:
    """The table service and its parts, each given what it needs: the table entries, storage
    access, the loader and the committer share one parsed-metadata cache and one ETag memory."""
    settings, repository, warehouses = base.settings, base.repository, base.warehouses
    entries = Entries(
        TABLE,
        NoSuchTable,
        settings,
        repository,
        base.objects,
        warehouses,
        authorizer=base.authorizer,
        page_tokens=base.page_tokens,
    )
    access = TableStorageAccess(settings, warehouses, base.authorizer, entries, StagedTables(repository.db))
    loader = TableLoader(settings, warehouses, entries, access, IssuedETags())
    snapshot_json = table_rules.SnapshotJson()
    parsed = ParsedMetadataCache(snapshot_json=snapshot_json)
    committer = TableCommitter(
        repository,
        warehouses,
        entries,
        parsed,
        snapshot_json,
        after_commit=after_commit,
        planning_mode=settings.scan_planning_mode,
    )
    return TableService(
        warehouses, entries, access, loader, committer, held=HeldDocuments(), reports=MetricsReports(repository)
    )


def build_functions(
    settings: Settings,
    database: Database,
    repository: CatalogRepository,
    objects: RoutingObjectStore,
    warehouses: WarehouseDirectory,
    spec: dict,
    *,
    authorizer: Authorizer,
    page_tokens: PageTokens,
) -> FunctionService:
    """The function service (the app and ``scripts.functions`` build it the same way; each says
    which authorizer and page token key: the app's, or the script's explicit allow-all and a key
    of its own process)."""
    return FunctionService(
        settings,
        FunctionRepository(database),
        repository,
        objects,
        warehouses,
        function_metadata_schema(spec),
        authorizer=authorizer,
        page_tokens=page_tokens,
    )
