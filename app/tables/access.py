"""How a table's storage is reached: the config and credentials loadTable and loadCredentials
answer with, the staged tables that signing and STS serve before their create commits, and what a
table's name holds for them (``storage_scope``). A part ``TableService`` is given at
construction (app/composition/catalog.py); the loader uses it too, scan planning and signing
reach it through ``TableService.access``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.authorization import Authorizer
from app.catalog.entries import Entries
from app.ground.callers import current_principal
from app.ground.errors import Forbidden
from app.ground.settings import Settings
from app.namespaces.warehouses import WarehouseDirectory
from app.rules import table as rules
from app.rules.identifiers import format_namespace
from app.rules.privileges import EffectiveGrants, Kind, Privilege, Securable
from app.rules.restrictions.policies import Restrictions, untrusted_message
from app.rules.restrictions.views import parse_referenced_by
from app.storage_access.delegation import (
    STS,
    Delegation,
    answer_with,
    client_storage_config,
    credentials_mode,
    refresh_config,
    signing_config,
    storage_credentials,
)
from storage.rows import EntryRow
from storage.staged import StagedTable, StagedTables, StoragePlaces
from storage.warehouses import WarehouseRow

TABLE = "table"


@dataclass(frozen=True)
class StorageScopeOf:
    """Where one table's objects are, for signing and vending: the folders it owns
    (``rules.stored_roots``: its location first), or each of its live stages' (oldest first)."""

    places: tuple[tuple[str, ...], ...]
    staged: bool
    # a protection mark covers the table (on it, a namespace or the warehouse): nothing signed or
    # vended deletes its files (docs/recycle-bin.md "Protection")
    protected: bool = False

    @property
    def locations(self) -> tuple[str, ...]:
        """Every folder of the scope (what signing serves)."""
        return tuple(root for roots in self.places for root in roots)


class TableStorageAccess:
    def __init__(
        self,
        settings: Settings,
        warehouses: WarehouseDirectory,
        authorizer: Authorizer,
        entries: Entries,
        staged: StagedTables,
    ) -> None:
        self.settings = settings
        self.warehouses = warehouses
        self.authorizer = authorizer
        self.entries = entries  # the table entries: who may write one, and the 404 of a missing one
        self.staged = staged

    def vends(self, warehouse: WarehouseRow, delegation: Delegation) -> bool:
        """Whether answering with this delegation vends credentials: that may call out (STS, the
        warehouse's keys, the caller's grants), so it is no work for an event loop."""
        return answer_with(warehouse, self.settings, delegation) == "credentials"

    def restrictions_for_storage(
        self, warehouse: str, namespace: tuple[str, ...], name: str, referenced_by: str | None = None
    ) -> Restrictions | None:
        """The caller's read restrictions on the table (None: none), from its cached grants; 403
        when it has some and is not a trusted engine: no metadata, credentials or signing for it
        (only a trusted engine applies them; Growler's own readers apply them themselves).

        ``referenced_by``: the views a trusted engine loads the table through (loadTable's
        parameter). Without read on the table itself, the last view's definer reads it, and the
        definer's restrictions on the table apply together with the caller's own. The caller's
        restrictions on those views apply to the table too (docs/read-restrictions.md "Views")."""
        grants = self.authorizer.grants()
        table = Securable.of_entry(Kind.TABLE, warehouse, namespace, name)
        views: list[Securable] = []
        if referenced_by:
            named = parse_referenced_by(referenced_by, self.settings.namespace_separator)
            views = [Securable.of_entry(Kind.VIEW, warehouse, *view) for view in named]
        if referenced_by and not grants.holds(Privilege.READ, table):
            definer = self.authorizer.grants_of(self.authorizer.read_through_views(referenced_by, table))
            added = () if definer.admin else definer.restrictions  # an administrator is restricted by none
            both = EffectiveGrants.build([], restrictions=(*grants.restrictions, *added))
            restrictions = both.restrictions_on(table, through=views)
        else:
            restrictions = grants.restrictions_on(table, through=views)
        if restrictions is not None and not grants.trusted_engine:
            caller = current_principal.get()
            shown = f"{warehouse}:{format_namespace((*namespace, name))}"
            raise Forbidden(untrusted_message(shown, caller.name if caller else None))
        return restrictions

    def refuse_if_restricted(self, warehouse: str, namespace: tuple[str, ...], name: str, action: str) -> None:
        """A caller with read restrictions on the table may not drop or unregister it: the table
        registered again (after a drop or an unregister) is a new entry, without the table's own
        restrictions, so the caller would read past them. 403, nothing written."""
        table = Securable.of_entry(Kind.TABLE, warehouse, namespace, name)
        if self.authorizer.grants().restrictions_on(table) is not None:
            caller = current_principal.get()
            raise Forbidden(
                f"Cannot {action} table {warehouse}:{format_namespace((*namespace, name))}: principal"
                f" {caller.name if caller else ''} reads it under read restrictions, which a table registered again"
                " would not carry; a principal without restrictions on it (a grant manager) may"
            )

    def load_credentials(
        self, prefix: str, namespace: tuple[str, ...], name: str, referenced_by: str | None = None
    ) -> list[dict[str, Any]]:
        """loadCredentials: for the table, or - before its create commits - for its live stages.

        The operation's rule lets in READ on the table or CREATE on its namespace (a stager's
        privilege); which of the two this needs depends on what the name holds, decided here.
        """
        warehouse = self.warehouses.get(prefix)
        scope = self.storage_scope(warehouse, namespace, name)
        if scope.staged:  # one credential: Java's refresh takes exactly one (the newest stage)
            return self.credentials(warehouse, scope.places[-1], True, True, protected=scope.protected)
        table = Securable.of_entry(Kind.TABLE, prefix, namespace, name)
        if referenced_by is None and not self.authorizer.may(Privilege.READ, table):
            raise Forbidden(f"Principal lacks read on table {prefix}:{format_namespace((*namespace, name))}")
        self.restrictions_for_storage(prefix, namespace, name, referenced_by)  # through views: checked there
        write = self.entries.may_write(warehouse.name, namespace, name)
        return self.credentials(warehouse, scope.places[0], True, write, protected=scope.protected)

    def storage_scope(
        self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str, places: StoragePlaces | None = None
    ) -> StorageScopeOf:
        """Where the table's objects are: its row's location, or - while it has no row - those of
        its live stages, which only a caller with CREATE on the namespace may use (else the 404).

        ``places``: what the name holds, read by the caller (on the event loop); else read here,
        one query either way: never a location cached from before a drop, rename or move.
        """
        if places is None:
            places = self.staged.places(warehouse.id, namespace, name)
        if places.kind == TABLE and places.place:
            roots = tuple(rules.stored_roots(*places.place))
            return StorageScopeOf((roots,), staged=False, protected=places.protected)
        if places.kind is None and places.staged and self.may_stage(warehouse.name, namespace):
            staged = tuple(tuple(rules.stored_roots(*place)) for place in places.staged)
            return StorageScopeOf(staged, staged=True, protected=places.protected)
        raise self.entries.missing(namespace, name)

    @staticmethod
    def row_roots(row: EntryRow) -> list[str]:
        """The folders a table's row says it owns (``rules.stored_roots``: location first)."""
        return rules.stored_roots(row.location, row.metadata_location.rsplit("/", 1)[0], row.data_path)

    def may_stage(self, warehouse: str, namespace: tuple[str, ...]) -> bool:
        return self.authorizer.may(Privilege.CREATE, Securable.of_namespace(warehouse, namespace))

    def vend_for(
        self, prefix: str, location: str, identifier: tuple[tuple[str, ...], str] | None = None
    ) -> list[dict[str, Any]]:
        """Credentials for a table location this catalog answered with before (an idempotent replay):
        for the folders the table (or its stage) at that location owns now, else the location alone."""
        warehouse = self.warehouses.get(prefix)
        write = identifier is not None and self.entries.may_write(prefix, *identifier, creating=True)
        roots: list[str] = [location]
        protected = None  # no identifier: nothing to be protected, nothing vended that writes
        if identifier is not None:
            places = self.staged.places(warehouse.id, *identifier)
            protected = places.protected
            for place in [*([places.place] if places.place else []), *places.staged]:
                if place[0] == location:
                    roots = rules.stored_roots(*place)
        return self.credentials(warehouse, roots, True, write, identifier, protected=protected)

    def stage(self, warehouse: WarehouseRow, namespace: tuple[str, ...], name: str, metadata: Any) -> None:
        """Record a staged table (storage/staged.py) so signing and STS serve its location until
        its create commits; refused, with nothing written, where it overlaps a live entry."""
        caller = current_principal.get()
        stage = StagedTable(
            metadata.location,
            rules.metadata_directory(metadata),
            caller.name if caller else None,
            rules.data_path(metadata.properties or {}),
        )
        self.staged.record(warehouse.id, namespace, name, stage, self.settings.stage_lifetime_s)

    def _client_config(
        self, warehouse: WarehouseRow, credentials: list[dict[str, Any]], location: str | None = None
    ) -> dict[str, str]:
        """Where the bytes are, plus - only when this request asked for delegation - the keys.

        The keys travel in ``config`` as well as in ``storage-credentials``: the Java S3FileIO
        deletes through a client for the bucket root, which no table-prefix credential matches,
        and PyIceberg matches credentials against a metadata-location a staged table lacks.
        ``scan-planning-mode`` (``GROWLER_SCAN_PLANNING_MODE``) is where the spec puts it, in the
        table's config; Java's client (1.11+) honours it over its own catalog property.
        """
        config = client_storage_config(warehouse, location)
        if self.settings.scan_planning_mode:
            config["scan-planning-mode"] = self.settings.scan_planning_mode
        return {**config, **credentials[0]["config"]} if credentials else config

    def credentials(
        self,
        warehouse: WarehouseRow,
        roots: Sequence[str],
        vend: bool,
        write: bool,
        identifier: tuple[tuple[str, ...], str] | None = None,
        *,
        protected: bool | None = None,
    ) -> list[dict[str, Any]]:
        """For the folders a table owns (``rules.table_roots``, its location first). ``write``
        False: read-only credentials (an STS session policy without writes).

        ``protected``: whether a protection mark covers the table (its session policy then has no
        s3:DeleteObject, as in a warehouse that refuses deletes); None: read for ``identifier``
        (one query, only when STS credentials that could write are vended: the call to STS that
        follows costs more), never taken from a cache.
        """
        if not vend:
            return []
        if protected is None:
            sts_writer = write and identifier is not None and credentials_mode(warehouse, self.settings) == STS
            protected = sts_writer and self.staged.places(warehouse.id, *identifier).protected
        s3 = self.warehouses.s3_settings(warehouse)
        return storage_credentials(self.settings, warehouse, roots, s3, write=write, delete=not protected)

    def storage_access(
        self,
        warehouse: WarehouseRow,
        identifier: tuple[tuple[str, ...], str],
        roots: Sequence[str],
        delegation: Delegation,
        creating: bool = False,
        protected: bool | None = None,
    ) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """The client config and credentials for the access the request asked for (none, vended
        credentials or remote signing), in the warehouse's credentials mode; credentials serve the
        folders the table owns (``roots``: ``rules.table_roots``, its location first).
        ``protected``: whether a mark covers it, where the caller knows (a federated table's marks
        are kept by path); None: read for the identifier when it matters (``credentials``)."""
        location = roots[0] if roots else None
        answer = answer_with(warehouse, self.settings, delegation, location)
        if not creating:  # an existing table's files (loadTable's): held to the caller's restrictions
            self.restrictions_for_storage(warehouse.name, *identifier)
        if answer == "signing":
            namespace, name = identifier
            config = self._client_config(warehouse, [], location)
            return {**config, **signing_config(self.settings, warehouse.name, namespace, name)}, []
        vend = answer == "credentials"
        write = vend and self.entries.may_write(warehouse.name, *identifier, creating=creating)
        credentials = self.credentials(warehouse, roots, vend, write, identifier, protected=protected)
        config = self._client_config(warehouse, credentials, location)
        if any("s3.session-token-expires-at-ms" in credential["config"] for credential in credentials):
            config.update(refresh_config(self.settings, warehouse.name, *identifier))
        return config, credentials
