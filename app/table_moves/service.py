"""Moving a table home (issue 50, docs/federation.md "Moving a table home"): a table of a
federated warehouse becomes a table of a native one, its files where they are.

A move is two commits in two catalogs, so it is ordered for a reader and recorded between them:

1. The remote's table is loaded; its current metadata is registered in the native warehouse with
   the registerTable rules (its locations must be ones the native warehouse allows, and become
   that entry's own), and in the same transaction the move's row (storage/table_moves.py) and its
   ``x-move-table-home`` event. From then on the remote's copy is read-only through Growler: every
   write the federated warehouse would forward for it is refused (app/federation/service.py), so
   the two copies cannot diverge through Growler. A reader sees the table in both warehouses, the
   same metadata in each.
2. With ``remote: drop`` (the default) the remote drops its copy without purging (its files are
   now the native table's) and the row goes, in the federated warehouse's change feed as a
   dropTable. If the remote fails here, the move stays recorded (``drop-pending``): the same
   request again finishes it, ``undoTableMove`` takes it back. With ``remote: keep`` the copy
   stays, read-only, until the move is undone or finished with ``drop``.

Undoing unregisters the native table, only while its metadata location is still the one the
move registered (a commit since would be lost to the remote's copy: 409) and while the remote
still holds that same version (else it is gone there, and the move is final).

With ``files: copy`` the table's files are first copied into the native warehouse's storage under a
new location (app/table_moves/copying.py) and the copy is registered instead: the native table owns
its files, the remote's stay the remote's. A refused register removes the copy; an undo
unregisters it and removes its files.
"""

from __future__ import annotations

import uuid
from typing import Any

from app.events.changes import management_events
from app.federation.operations import TABLE_PATH
from app.federation.service import FederationService, RemoteRefused
from app.ground.errors import AlreadyExists, BadGateway, BadRequest, CatalogError, NotFound, TableMoved
from app.ground.text import UNIT_SEPARATOR
from app.management.rights import ManagementRights
from app.namespaces.service import NamespaceService
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.contract.management import MoveNamespaceRequest, MoveTableRequest, TableMoveSource, TableMoveTarget
from app.rules.identifiers import check_name
from app.rules.privileges import Kind, Privilege, Securable
from app.rules.requests.tables import RegisterTableRequest
from app.table_moves.copying import TableCopy
from app.tables.service import TableService
from storage.table_moves import MovedFrom, TableMoveRow, TableMoveRows
from storage.warehouses import WarehouseRow

MAX_NAMESPACE_TABLES = 1000  # a namespace's move is one request: more tables are moved one by one
MAX_NESTED_NAMESPACES = 100  # namespaces a nested move walks in one request


class MoveUnfinished(CatalogError):
    """The register committed and the remote's drop did not: the remote's status, with what to do."""

    def __init__(self, message: str, cause: CatalogError) -> None:
        super().__init__(message)
        self.code, self.error_type = cause.code, cause.error_type
        self._headers = cause.headers()

    def headers(self) -> dict[str, str]:
        return self._headers


def _metadata_location_of(prefix: str, loaded: dict[str, Any]) -> str:
    location = loaded.get("metadata-location")
    if not isinstance(location, str) or not location:
        raise BadGateway(
            f"The remote catalog of warehouse {prefix} answered loadTable without a metadata-location:"
            " a staged table cannot be moved"
        )
    return location


def _relative(moved: dict[str, Any], namespace: tuple[str, ...]) -> str:
    """A moved table's name below the namespace a nested move started from (``orders``, ``sub.orders``)."""
    source = moved["source"]
    return ".".join((*source["namespace"][len(namespace) :], source["name"]))


def _dotted(namespace: tuple[str, ...], name: str) -> str:
    return ".".join((*namespace, name))


def move_view(source_warehouse: str, row: TableMoveRow, dropped: bool = False) -> dict[str, Any]:
    state = "dropped" if dropped else "kept" if row.remote == "keep" else "drop-pending"
    view: dict[str, Any] = {
        "source": {"warehouse": source_warehouse, "namespace": list(row.source_namespace), "name": row.source_name},
        "target": {
            "warehouse": row.target_warehouse,
            "namespace": list(row.target_namespace),
            "name": row.target_name,
        },
        "metadata-location": row.metadata_location,
        **({"source-metadata-location": row.source_metadata_location} if row.source_metadata_location else {}),
        "remote": state,
        "moved-at": row.moved_at.isoformat(),
    }
    if row.moved_by is not None:
        view["moved-by"] = row.moved_by
    return view


class TableMoveService:
    def __init__(
        self,
        rows: TableMoveRows,
        federation: FederationService,
        tables: TableService,
        warehouses: WarehouseDirectory,
        copier: TableCopy,
        namespaces: NamespaceService,
        *,
        rights: ManagementRights,
    ) -> None:
        self.rows = rows
        self.copier = copier  # a move with a copy of the files (app/table_moves/copying.py)
        self.namespaces = namespaces  # the native namespaces a nested move creates
        self.federation = federation  # the remote's load and drop
        self.tables = tables  # the native register and unregister
        self.warehouses = warehouses
        self.rights = rights

    def list(self, prefix: str) -> list[dict[str, Any]]:
        source = self._federated(prefix)
        return [move_view(prefix, row) for row in self.rows.in_warehouse(source.id)]

    def move(self, prefix: str, request: MoveTableRequest) -> dict[str, Any]:
        source = self._federated(prefix)
        namespace, name = tuple(request.namespace), check_name(request.name, "table name")
        to = request.target
        to_namespace, to_name = tuple(to.namespace), check_name(to.name or name, "table name")
        target = self.warehouses.get(to.warehouse)
        if target.federation is not None:
            raise BadRequest(f"Warehouse {to.warehouse} is federated: a table moves home into a native warehouse")
        audit = {
            "warehouse": prefix,
            "namespace": list(namespace),
            "name": name,
            "target": {"warehouse": to.warehouse, "namespace": list(to_namespace), "name": to_name},
            "remote": request.remote,
        }
        who = self._require_source(prefix, namespace, name, "move-table-home", audit, Privilege.READ)
        source_table = Securable.of_entry(Kind.TABLE, prefix, namespace, name)
        self.rights.require_unrestricted_within(
            "move-table-home",
            audit,
            source_table,
            f"Cannot move table {_dotted(namespace, name)} of warehouse {prefix}: the caller reads it under read"
            " restrictions, which a move must not shed; a principal without restrictions on it (a grant manager)"
            " may",
        )
        self.rights.require_privilege(
            "move-table-home", audit, Privilege.CREATE, Securable.of_namespace(to.warehouse, to_namespace)
        )
        moved = self.rows.of(source.id, namespace, name)
        if moved is not None:  # a move recorded before: finished (drop) or answered again (keep)
            if (moved.target_warehouse, moved.target_namespace, moved.target_name) != (
                to.warehouse,
                to_namespace,
                to_name,
            ):
                raise TableMoved(
                    f"Table {_dotted(namespace, name)} of warehouse {prefix} was moved to warehouse"
                    f" {moved.target_warehouse} as {_dotted(moved.target_namespace, moved.target_name)} already:"
                    " undo that move first (undoTableMove)"
                )
            if request.remote == "keep":
                return move_view(prefix, moved)
            return self._drop_remote(prefix, moved)
        if request.remote == "drop":  # refused before anything is written, as a dropTable would be
            self.federation.require_droppable(prefix, namespace, name)
        loaded = self._remote_table(prefix, namespace, name)
        remote_location = _metadata_location_of(prefix, loaded)
        copied = None
        if request.files == "copy":
            copied = self._copy(source, loaded, target, to_namespace, to_name)
        metadata_location = copied or remote_location
        described = {**audit, "files": request.files, "metadata-location": metadata_location}
        if copied is not None:
            described["source-metadata-location"] = remote_location
        events = management_events("x-move-table-home", {**described, **({"by": who} if who else {})})
        moved_from = MovedFrom(
            source.id, namespace, name, metadata_location, request.remote, who, remote_location if copied else None
        )
        try:
            self.tables.register_table(
                to.warehouse,
                to_namespace,
                RegisterTableRequest(name=to_name, metadata_location=metadata_location),
                moved_from=moved_from,
                move_events=events,
            )
        except CatalogError:
            if copied is not None:  # the copy is nobody's: gone with the refusal
                self.copier.remove(target, copied)
            raise
        recorded = self.rows.of(source.id, namespace, name)
        if recorded is None:  # dropped or unregistered in the native warehouse in the meantime
            raise TableMoved(
                f"Table {_dotted(to_namespace, to_name)} of warehouse {to.warehouse} was dropped while it was moved;"
                " its remote copy is kept"
            )
        if request.remote == "keep":
            return move_view(prefix, recorded)
        return self._drop_remote(prefix, recorded)

    def move_namespace(self, prefix: str, request: MoveNamespaceRequest) -> list[dict[str, Any]]:
        """Every table of the remote's namespace the caller may see, moved one at a time (each as
        ``move``, with its own checks) - with ``nested``, those of every namespace below it too,
        each into the native namespace of the same relative path under the target (created where
        missing). The first that cannot be moved stops it, with what moved before; the same
        request again moves the rest."""
        self._federated(prefix)
        namespace, target = tuple(request.namespace), tuple(request.target.namespace)
        places = self._remote_namespaces(prefix, namespace) if request.nested else [()]
        plan = [(relative, self._remote_tables(prefix, (*namespace, *relative))) for relative in places]
        total = sum(len(names) for _, names in plan)
        if total > MAX_NAMESPACE_TABLES:
            raise BadRequest(
                f"Namespace {'.'.join(namespace)} and those below it hold more than {MAX_NAMESPACE_TABLES} tables:"
                " move them namespace by namespace (without nested)"
            )
        moved: list[dict[str, Any]] = []
        for relative, names in plan:
            source, into = (*namespace, *relative), (*target, *relative)
            current = ".".join(source)
            try:
                if relative:
                    self._ensure_native(request.target.warehouse, into)
                for name in names:
                    current = name if not relative else ".".join((*relative, name))
                    table = MoveTableRequest(
                        namespace=source,
                        name=name,
                        target=TableMoveTarget(warehouse=request.target.warehouse, namespace=into),
                        remote=request.remote,
                        files=request.files,
                    )
                    moved.append(self.move(prefix, table))
            except CatalogError as exc:
                done = ", ".join(_relative(item, namespace) for item in moved) or "none"
                raise MoveUnfinished(
                    f"{len(moved)} of the {total} tables of namespace {'.'.join(namespace)} moved ({done});"
                    f" table {current}: {exc.message}. The same request again moves the rest",
                    exc,
                ) from exc
        return moved

    def _remote_namespaces(self, prefix: str, namespace: tuple[str, ...]) -> list[tuple[str, ...]]:
        """The namespace and every one below it the caller may see, as paths relative to it (the
        namespace itself first, parents before children), at most ``MAX_NESTED_NAMESPACES``."""
        found: list[tuple[str, ...]] = [()]
        index = 0
        while index < len(found):
            parent = (*namespace, *found[index])
            token = ""
            while True:
                listed = self.federation.read(
                    prefix,
                    "listNamespaces",
                    "/v1/{prefix}/namespaces",
                    {},
                    parent=UNIT_SEPARATOR.join(parent),
                    pageToken=token,
                )
                for child in listed.get("namespaces") or ():
                    levels = tuple(str(level) for level in child)
                    if len(levels) == len(parent) + 1 and levels[: len(parent)] == parent:
                        found.append(levels[len(namespace) :])
                if len(found) > MAX_NESTED_NAMESPACES:
                    raise BadRequest(
                        f"Namespace {'.'.join(namespace)} holds more than {MAX_NESTED_NAMESPACES} namespaces: move"
                        " them one by one (moveNamespaceHome without nested)"
                    )
                token = listed.get("next-page-token") or ""
                if not token:
                    break
            index += 1
        return found

    def _ensure_native(self, warehouse: str, namespace: tuple[str, ...]) -> None:
        """The native namespace a nested one moves into, created where missing (create on its parent)."""
        audit = {"warehouse": warehouse, "namespace": list(namespace)}
        self.rights.require_privilege(
            "move-table-home", audit, Privilege.CREATE, Securable.of_namespace(warehouse, namespace[:-1])
        )
        try:
            self.namespaces.create_namespace(warehouse, namespace, {})
        except AlreadyExists:
            return

    def undo(self, prefix: str, request: TableMoveSource) -> None:
        source = self._federated(prefix)
        namespace, name = tuple(request.namespace), check_name(request.name, "table name")
        moved = self.rows.of(source.id, namespace, name)
        audit = {"warehouse": prefix, "namespace": list(namespace), "name": name}
        self._require_source(prefix, namespace, name, "undo-table-move", audit, Privilege.CREATE)
        if moved is None:
            raise NotFound(
                f"No move of table {_dotted(namespace, name)} of warehouse {prefix} is recorded: it was never moved,"
                " or its move is final (the remote dropped its copy)"
            )
        native = Securable.of_entry(Kind.TABLE, moved.target_warehouse, moved.target_namespace, moved.target_name)
        self.rights.require_privilege("undo-table-move", audit, Privilege.DROP, native)
        here = f"{moved.target_warehouse}.{_dotted(moved.target_namespace, moved.target_name)}"
        if moved.target_metadata_location != moved.metadata_location:
            raise TableMoved(
                f"Table {here} was committed to since the move: the remote's copy lacks those commits, so the move"
                " cannot be undone; finish it with moveTableHome (remote drop), or register the table's current"
                " metadata in the remote yourself"
            )
        remote_version = moved.source_metadata_location or moved.metadata_location
        if self._remote_metadata_location(prefix, namespace, name, missing_ok=True) != remote_version:
            raise TableMoved(
                f"The remote no longer holds table {_dotted(namespace, name)} as it was moved: the move is final;"
                " finish it with moveTableHome (remote drop)"
            )
        events = management_events("x-undo-table-move", {**audit, "target": here})
        self.tables.unregister_table(
            moved.target_warehouse,
            moved.target_namespace,
            moved.target_name,
            only_at=moved.metadata_location,
            also=events,
        )
        if moved.source_metadata_location is not None:  # the copy's files: nobody's now
            self.copier.remove(self.warehouses.get(moved.target_warehouse), moved.metadata_location)

    # -- parts ---------------------------------------------------------------------------

    def _federated(self, prefix: str) -> WarehouseRow:
        row = self.warehouses.get(prefix)
        if row.federation is None:
            raise BadRequest(f"Warehouse {prefix} is not federated: tables move home from a federated warehouse")
        return row

    def _require_source(
        self,
        prefix: str,
        namespace: tuple[str, ...],
        name: str,
        action: str,
        audit: dict[str, Any],
        also: Privilege,
    ) -> str | None:
        """Drop on the remote's table (a move takes it away from there), and ``also``: read (a
        move registers what it reads), create (an undo gives it back)."""
        table = Securable.of_entry(Kind.TABLE, prefix, namespace, name)
        who = self.rights.require_privilege(action, audit, Privilege.DROP, table)
        self.rights.require_privilege(action, audit, also, table)
        return who

    def _remote_table(self, prefix: str, namespace: tuple[str, ...], name: str) -> dict[str, Any]:
        """The remote's loadTable answer (its current metadata), never a kept one it did not confirm."""
        values = {"namespace": UNIT_SEPARATOR.join(namespace), "table": name}
        loaded = self.federation.read(prefix, "loadTable", TABLE_PATH, values)
        return loaded if isinstance(loaded, dict) else {}

    def _remote_metadata_location(
        self, prefix: str, namespace: tuple[str, ...], name: str, missing_ok: bool = False
    ) -> str | None:
        try:
            loaded = self._remote_table(prefix, namespace, name)
        except RemoteRefused as exc:
            if missing_ok and exc.code == 404:
                return None
            raise
        return _metadata_location_of(prefix, loaded)

    def _copy(
        self, source: WarehouseRow, loaded: dict[str, Any], target: WarehouseRow, namespace: tuple[str, ...], name: str
    ) -> str:
        """The table's files copied under a new location of the target namespace (as a createTable
        there would place it): the copy's metadata location."""
        properties = self.tables.entries.require_namespace(target, namespace)
        location = self.tables.entries.location_for(target, namespace, name, str(uuid.uuid4()), None, properties)
        return self.copier.copy(source, loaded, target, location)

    def _remote_tables(self, prefix: str, namespace: tuple[str, ...]) -> list[str]:
        """The names of the remote namespace's tables the caller may see (the listing forwarded
        and filtered by its grants), every page of it, at most ``MAX_NAMESPACE_TABLES``."""
        names: list[str] = []
        token = ""
        while True:
            listed = self.federation.read(
                prefix,
                "listTables",
                "/v1/{prefix}/namespaces/{namespace}/tables",
                {"namespace": UNIT_SEPARATOR.join(namespace)},
                pageToken=token,
            )
            names += [str(item["name"]) for item in listed.get("identifiers") or ()]
            token = listed.get("next-page-token") or ""
            if len(names) > MAX_NAMESPACE_TABLES:
                raise BadRequest(
                    f"Namespace {'.'.join(namespace)} holds more than {MAX_NAMESPACE_TABLES} tables: move them"
                    " one by one (moveTableHome)"
                )
            if not token:
                return names

    def _drop_remote(self, prefix: str, moved: TableMoveRow) -> dict[str, Any]:
        namespace, name = moved.source_namespace, moved.source_name
        try:
            self.federation.drop_moved(prefix, namespace, name)
        except CatalogError as exc:
            raise MoveUnfinished(
                f"Table {_dotted(namespace, name)} is registered in warehouse {moved.target_warehouse} as"
                f" {_dotted(moved.target_namespace, moved.target_name)}, but the remote catalog did not drop its copy:"
                f" {exc.message}. The copy is read-only through Growler until the move ends: retry moveTableHome"
                " to finish it, or undo it (undoTableMove)",
                exc,
            ) from exc
        self.rows.finish(
            self._federated(prefix).id,
            namespace,
            name,
            events=management_events(
                "x-move-table-home-finished",
                {"warehouse": prefix, "namespace": list(namespace), "name": name},
            ),
        )
        return move_view(prefix, moved, dropped=True)
