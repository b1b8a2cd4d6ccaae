"""The recycle bin in PostgreSQL (SQL only): moving tables, views and namespace units out of the
name space and back, and starting their purge (migration 0017; the rules are app/recycle_bin/service.py).

A part of ``CatalogRepository``. Each change is one transaction: ``bin_entry`` (a soft drop),
``bin_namespace`` (a recursive drop), ``undrop_unit`` and ``start_purge``. Rows keep their ids,
so the grants copied with them (``bin_grant``) point at the same things when they come back. A
new entry may take a binned one's location over (storage/placement.py) until its purge starts:
``start_purge`` takes the claims' locks on what it will purge, and ``undrop_unit`` claims the
locations back, refused while a live entry or stage holds one. Callers never see psycopg.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from app.ground.errors import AlreadyExists, LocationTaken, NoSuchNamespace, NotFound, Protected, PurgeStarted
from app.ground.locations import InvalidLocation, Location
from storage.db import Database
from storage.events import ChangeEvent, record_events
from storage.placement import Claim, Holder, NamespaceLocationTaken, claim_restored_namespaces, lock, reclaim
from storage.protection_rows import protection_of, refuse_if_protected
from storage.restriction_rows import bin_restrictions, restore_restrictions
from storage.rows import EntryRow


@dataclass(frozen=True)
class BinDrop:
    """Who drops, for how long, and whether the files go at the end."""

    dropped_by: str | None
    retention_s: int
    purge_requested: bool


@dataclass(frozen=True)
class BinUnitRow:
    id: int
    warehouse_id: int
    kind: str  # table, view, namespace
    namespace: tuple[str, ...]  # an entry's namespace; a namespace unit's own path
    name: str | None
    dropped_at: datetime
    dropped_by: str | None
    expires_at: datetime
    purge_requested: bool
    purging_since: datetime | None
    metadata_location: str | None = None  # an entry's last metadata file
    uuid: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "namespace", tuple(self.namespace))


@dataclass(frozen=True)
class BinnedTable:
    """What a purge of a binned table is planned from."""

    id: int
    location: str
    metadata_location: str
    metadata: str


@dataclass(frozen=True)
class PurgePlan:
    bin_entry_id: int
    location: str
    metadata_path: str | None
    extra_objects: list[str]


class TakenOver(LocationTaken):
    """An undrop refused: ``entry`` (kind and qualified name) of the unit has a location that
    ``holder`` (a live entry or stage) holds now. The service words the message for its caller."""

    def __init__(self, unit_id: int, entry: str, location: str, holder: Holder) -> None:
        super().__init__(f"Cannot undrop {unit_id}: the location of {entry} ({location}) was taken over since its drop")
        self.unit_id, self.entry, self.location, self.holder = unit_id, entry, location, holder


_UNIT = (
    "SELECT u.id, u.warehouse_id, u.kind, u.namespace, u.name, u.dropped_at, u.dropped_by, u.expires_at,"
    " u.purge_requested, u.purging_since,"
    " (SELECT b.metadata_location FROM bin_entry b WHERE b.unit_id = u.id AND u.kind <> 'namespace' LIMIT 1)"
    "  AS metadata_location,"
    " (SELECT b.uuid::text FROM bin_entry b WHERE b.unit_id = u.id AND u.kind <> 'namespace' LIMIT 1) AS uuid"
    " FROM bin_unit u"
)
# A unit a protection mark holds in the bin: on its warehouse, or on the namespace it was dropped
# from or one above it (for a namespace unit: one above it - the namespace itself is gone).
_HELD = (
    "(EXISTS (SELECT 1 FROM warehouse w WHERE w.id = u.warehouse_id AND w.protected)"
    " OR EXISTS (SELECT 1 FROM generate_series(1, cardinality(u.namespace) - (u.kind = 'namespace')::int) d"
    "  JOIN namespace a ON a.warehouse_id = u.warehouse_id AND a.path = u.namespace[1:d] WHERE a.protected))"
)
_ENTRY_COLUMNS = (
    "namespace_id, name, kind, uuid, location, metadata_location, metadata, version, created_at, updated_at, data_path"
)
_GRANT_COLUMNS = "role_id, privilege, securable, warehouse_id, namespace_id, entry_id, created_at"


def _new_unit(
    conn: psycopg.Connection, warehouse_id: int, kind: str, namespace: tuple[str, ...], name: str | None, drop: BinDrop
) -> int:
    row = conn.execute(
        "INSERT INTO bin_unit (warehouse_id, kind, namespace, name, dropped_by, expires_at, purge_requested)"
        " VALUES (%s, %s, %s, %s, %s, now() + make_interval(secs => %s), %s) RETURNING id",
        (warehouse_id, kind, list(namespace), name, drop.dropped_by, drop.retention_s, drop.purge_requested),
    ).fetchone()
    return row["id"]


class BinRows:
    db: Database

    # -- into the bin ----------------------------------------------------------------------

    def bin_entry(
        self,
        warehouse_id: int,
        namespace: tuple[str, ...],
        name: str,
        kind: str,
        drop: BinDrop,
        action: str,
        *,
        events: Callable[[EntryRow], Sequence[ChangeEvent]],
    ) -> EntryRow | None:
        """A soft drop: the entry leaves the name space with its grants, in one transaction with
        the drop's ``events`` (of the removed row); None when there is no such entry.
        ``Protected`` (nothing written) when it is protected."""
        with self.db.transaction() as conn:
            found = conn.execute(
                "SELECT e.id FROM namespace n JOIN catalog_entry e ON e.namespace_id = n.id"
                " WHERE n.warehouse_id = %s AND n.path = %s AND e.name = %s AND e.kind = %s FOR UPDATE OF e",
                (warehouse_id, list(namespace), name, kind),
            ).fetchone()
            if found is None:
                return None
            refuse_if_protected(conn, action, warehouse_id, namespace, name)
            unit = _new_unit(conn, warehouse_id, kind, namespace, name, drop)
            conn.execute(
                f"INSERT INTO bin_grant (id, unit_id, {_GRANT_COLUMNS})"
                f" SELECT id, %s, {_GRANT_COLUMNS} FROM role_grant WHERE entry_id = %s",
                (unit, found["id"]),
            )
            bin_restrictions(conn, unit, "entry_id", found["id"])
            conn.execute(
                f"INSERT INTO bin_entry (id, unit_id, {_ENTRY_COLUMNS})"
                f" SELECT id, %s, {_ENTRY_COLUMNS} FROM catalog_entry WHERE id = %s",
                (unit, found["id"]),
            )
            row = conn.execute(
                "DELETE FROM catalog_entry WHERE id = %s"
                " RETURNING id, kind, uuid::text AS uuid, location, metadata_location, metadata, data_path",
                (found["id"],),
            ).fetchone()
            record_events(conn, events(EntryRow(**row)))
        return EntryRow(**row)

    def bin_namespace(
        self, warehouse_id: int, path: tuple[str, ...], drop: BinDrop, *, events: Sequence[ChangeEvent]
    ) -> BinUnitRow:
        """A recursive drop: the namespace, its nested namespaces and every table, view and
        function in them leave as one unit, with their grants and the drop's ``events``.
        NoSuchNamespace; ``Protected``."""
        with self.db.transaction() as conn:
            spaces = conn.execute(
                "SELECT id, path FROM namespace WHERE warehouse_id = %s AND path[1:%s] = %s ORDER BY path FOR UPDATE",
                (warehouse_id, len(path), list(path)),
            ).fetchall()
            if not spaces:
                raise NoSuchNamespace(f"Namespace does not exist: {'.'.join(path)}")
            refuse_if_protected(conn, "drop", warehouse_id, path, below=True)
            ids = [row["id"] for row in spaces]
            conn.execute("SELECT 1 FROM catalog_entry WHERE namespace_id = ANY(%s) FOR UPDATE", (ids,))
            unit = _new_unit(conn, warehouse_id, "namespace", path, None, drop)
            conn.execute(
                f"INSERT INTO bin_grant (id, unit_id, {_GRANT_COLUMNS})"
                f" SELECT id, %s, {_GRANT_COLUMNS} FROM role_grant WHERE namespace_id = ANY(%s)",
                (unit, ids),
            )
            bin_restrictions(conn, unit, "namespace_id", ids)
            conn.execute(
                "INSERT INTO bin_namespace (id, unit_id, path, parent_id, properties, created_at, updated_at)"
                " SELECT id, %s, path, parent_id, properties, created_at, updated_at FROM namespace WHERE id = ANY(%s)",
                (unit, ids),
            )
            conn.execute(
                f"INSERT INTO bin_entry (id, unit_id, {_ENTRY_COLUMNS})"
                f" SELECT id, %s, {_ENTRY_COLUMNS} FROM catalog_entry WHERE namespace_id = ANY(%s)",
                (unit, ids),
            )
            conn.execute(
                "INSERT INTO bin_function (id, unit_id, namespace_id, name, uuid, metadata_location, metadata,"
                " created_at)"
                " SELECT id, %s, namespace_id, name, uuid, metadata_location, metadata, created_at"
                " FROM catalog_function WHERE namespace_id = ANY(%s)",
                (unit, ids),
            )
            conn.execute("DELETE FROM catalog_entry WHERE namespace_id = ANY(%s)", (ids,))
            conn.execute("DELETE FROM catalog_function WHERE namespace_id = ANY(%s)", (ids,))
            for depth in sorted({len(row["path"]) for row in spaces}, reverse=True):  # children first (RESTRICT)
                level = [row["id"] for row in spaces if len(row["path"]) == depth]
                conn.execute("DELETE FROM namespace WHERE id = ANY(%s)", (level,))
            record_events(conn, events)
            return self._unit(conn, warehouse_id, unit)

    # -- reading the bin -------------------------------------------------------------------

    def bin_units(
        self, warehouse_id: int, namespace: tuple[str, ...] | None, after: int | None, limit: int | None
    ) -> list[BinUnitRow]:
        """The warehouse's units (under ``namespace`` when given), oldest first, after id ``after``."""
        with self.db.connection() as conn:
            rows = conn.execute(
                f"{_UNIT} WHERE u.warehouse_id = %(wh)s AND u.id > coalesce(%(after)s, 0)"
                " AND (%(ns)s::text[] IS NULL OR u.namespace[1:cardinality(%(ns)s::text[])] = %(ns)s::text[])"
                " ORDER BY u.id LIMIT %(limit)s",
                {"wh": warehouse_id, "after": after, "ns": list(namespace) if namespace else None, "limit": limit},
            ).fetchall()
        return [BinUnitRow(**row) for row in rows]

    def bin_unit(self, warehouse_id: int, unit_id: int) -> BinUnitRow | None:
        with self.db.connection() as conn:
            return self._unit(conn, warehouse_id, unit_id)

    @staticmethod
    def _unit(conn: psycopg.Connection, warehouse_id: int, unit_id: int) -> BinUnitRow | None:
        row = conn.execute(f"{_UNIT} WHERE u.warehouse_id = %s AND u.id = %s", (warehouse_id, unit_id)).fetchone()
        return BinUnitRow(**row) if row else None

    def binned_tables(self, unit_id: int) -> list[BinnedTable]:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT id, location, metadata_location, metadata FROM bin_entry"
                " WHERE unit_id = %s AND kind = 'table' ORDER BY id",
                (unit_id,),
            ).fetchall()
        return [BinnedTable(**row) for row in rows]

    def due_units(self, limit: int) -> list[BinUnitRow]:
        """Units whose retention ended and whose purge has not begun, the oldest first; not those a
        protection mark holds (``_HELD``: they wait, without keeping the others from their turn)."""
        with self.db.connection() as conn:
            rows = conn.execute(
                f"{_UNIT} WHERE u.purging_since IS NULL AND u.expires_at <= now() AND NOT {_HELD}"
                " ORDER BY u.expires_at LIMIT %s",
                (limit,),
            ).fetchall()
        return [BinUnitRow(**row) for row in rows]

    # -- out of the bin --------------------------------------------------------------------

    def undrop_unit(
        self,
        warehouse_id: int,
        unit_id: int,
        namespace: tuple[str, ...],
        name: str | None,
        *,
        events: Sequence[ChangeEvent],
    ) -> BinUnitRow:
        """Bring a unit back, at ``namespace`` (an entry's namespace, a namespace unit's new path)
        and ``name`` (entries), in one transaction, with its ids, grants and the undrop's ``events``.

        NotFound (not in the bin), PurgeStarted, NoSuchNamespace (the target's namespace or parent
        is missing), AlreadyExists (the name is taken): nothing written.
        """
        with self.db.transaction() as conn:
            unit = conn.execute(
                "SELECT id, kind, namespace, purging_since FROM bin_unit WHERE warehouse_id = %s AND id = %s"
                " FOR UPDATE",
                (warehouse_id, unit_id),
            ).fetchone()
            if unit is None:
                raise NotFound(f"Nothing in the bin with id {unit_id}")
            if unit["purging_since"] is not None:
                raise PurgeStarted(f"Cannot undrop {unit_id}: its purge started at {unit['purging_since'].isoformat()}")
            self._reclaim(conn, warehouse_id, unit_id)
            before = self._unit(conn, warehouse_id, unit_id)
            try:
                if unit["kind"] == "namespace":
                    self._restore_namespace(conn, warehouse_id, unit_id, tuple(unit["namespace"]), namespace)
                    try:  # its namespaces' locations may have been taken meanwhile (binned ones block nothing)
                        claim_restored_namespaces(conn, warehouse_id, namespace)
                    except NamespaceLocationTaken as exc:
                        raise AlreadyExists(
                            f"Cannot undrop {unit_id}: the location of namespace {'.'.join(exc.placed.path)}"
                            f" ({exc.placed.root.uri}) is another namespace's, table's, view's or staged table's"
                            " now, or overlaps one. Free that folder first, or undrop the unit under another"
                            " namespace path if that namespace's location is its default one"
                        ) from None
                else:
                    self._restore_entry(conn, warehouse_id, unit_id, namespace, str(name))
            except pg_errors.UniqueViolation as exc:
                what = ".".join((*namespace, name)) if name is not None else ".".join(namespace)
                raise AlreadyExists(f"Cannot undrop {unit_id}: {what} already exists") from exc
            conn.execute("DELETE FROM bin_unit WHERE id = %s", (unit_id,))
            record_events(conn, events)
        assert before is not None
        return before

    @staticmethod
    def _reclaim(conn: psycopg.Connection, warehouse_id: int, unit_id: int) -> None:
        """The unit's entries claim their locations back (storage/placement.py): TakenOver when a
        live entry or stage holds one now - a take-over since the drop - and nothing is written."""
        rows = conn.execute(
            "SELECT b.id, b.kind, b.name, b.location, b.metadata_location, b.data_path,"
            " coalesce(bn.path, u.namespace) AS path"
            " FROM bin_entry b JOIN bin_unit u ON u.id = b.unit_id"
            " LEFT JOIN bin_namespace bn ON bn.unit_id = b.unit_id AND bn.id = b.namespace_id"
            " WHERE b.unit_id = %s ORDER BY b.id",
            (unit_id,),
        ).fetchall()
        claims, entries = [], {}
        for row in rows:
            roots = _roots([row])
            if not roots:  # stored before locations were checked: nothing to claim
                continue
            # no namespace nor name of its own: a stage of the same name holds its place too
            claims.append(Claim(tuple(roots), warehouse_id, (), "", row["id"], row["kind"]))
            # its location first, then its folders outside it
            shown = ", ".join(r.uri for r in roots if not any(r != o and r.is_within(o) for o in roots))
            entries[row["id"]] = (f"{row['kind']} {'.'.join((*row['path'], row['name']))}", shown)
        taken = reclaim(conn, claims)
        if taken is not None:
            claimed, holder = taken
            raise TakenOver(unit_id, *entries[claimed.entry_id], holder)

    @staticmethod
    def _restore_entry(
        conn: psycopg.Connection, warehouse_id: int, unit_id: int, namespace: tuple[str, ...], name: str
    ) -> None:
        ns = conn.execute(
            "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s FOR SHARE", (warehouse_id, list(namespace))
        ).fetchone()
        if ns is None:
            raise NoSuchNamespace(f"Namespace does not exist: {'.'.join(namespace)}")
        conn.execute(
            "INSERT INTO catalog_entry (id, namespace_id, name, kind, uuid, location, metadata_location, metadata,"
            " version, created_at, updated_at, data_path) OVERRIDING SYSTEM VALUE"
            " SELECT id, %s, %s, kind, uuid, location, metadata_location, metadata, version, created_at, now(),"
            " data_path FROM bin_entry WHERE unit_id = %s",
            (ns["id"], name, unit_id),
        )
        conn.execute(
            f"INSERT INTO role_grant (id, {_GRANT_COLUMNS})"
            " OVERRIDING SYSTEM VALUE SELECT id, role_id, privilege, securable, warehouse_id, %s, entry_id, created_at"
            " FROM bin_grant WHERE unit_id = %s ON CONFLICT DO NOTHING",
            (ns["id"], unit_id),
        )
        restore_restrictions(conn, unit_id, ns["id"])

    @staticmethod
    def _restore_namespace(
        conn: psycopg.Connection, warehouse_id: int, unit_id: int, old: tuple[str, ...], new: tuple[str, ...]
    ) -> None:
        parent = None
        if len(new) > 1:
            row = conn.execute(
                "SELECT id FROM namespace WHERE warehouse_id = %s AND path = %s FOR SHARE",
                (warehouse_id, list(new[:-1])),
            ).fetchone()
            if row is None:
                raise NoSuchNamespace(f"Parent namespace does not exist: {'.'.join(new[:-1])}")
            parent = row["id"]
        conn.execute(
            "INSERT INTO namespace (id, warehouse_id, path, parent_id, properties, created_at, updated_at)"
            " OVERRIDING SYSTEM VALUE SELECT id, %(wh)s, %(new)s::text[] || path[%(skip)s:],"
            " CASE WHEN cardinality(path) = %(depth)s THEN %(parent)s ELSE parent_id END,"
            " properties, created_at, now() FROM bin_namespace WHERE unit_id = %(unit)s",
            {
                "wh": warehouse_id,
                "new": list(new),
                "skip": len(old) + 1,
                "depth": len(old),
                "parent": parent,
                "unit": unit_id,
            },
        )
        conn.execute(
            f"INSERT INTO catalog_entry (id, {_ENTRY_COLUMNS}) OVERRIDING SYSTEM VALUE"
            f" SELECT id, {_ENTRY_COLUMNS} FROM bin_entry WHERE unit_id = %s",
            (unit_id,),
        )
        conn.execute(
            "INSERT INTO catalog_function (id, namespace_id, name, uuid, metadata_location, metadata, created_at)"
            " OVERRIDING SYSTEM VALUE SELECT id, namespace_id, name, uuid, metadata_location, metadata, created_at"
            " FROM bin_function WHERE unit_id = %s",
            (unit_id,),
        )
        conn.execute(
            f"INSERT INTO role_grant (id, {_GRANT_COLUMNS}) OVERRIDING SYSTEM VALUE"
            f" SELECT id, {_GRANT_COLUMNS} FROM bin_grant WHERE unit_id = %s ON CONFLICT DO NOTHING",
            (unit_id,),
        )
        restore_restrictions(conn, unit_id)

    # -- purge and expiry ------------------------------------------------------------------

    def start_purge(
        self,
        warehouse_id: int,
        unit_id: int,
        plans: list[PurgePlan],
        *,
        due_only: bool,
        events: Sequence[ChangeEvent],
        held: bool = True,
    ) -> bool:
        """Forget a unit, with ``events``, queueing a purge job for each of ``plans`` (its tables whose
        files go): those stay in the bin, owning their locations, until their purge finished; the rest of
        the unit goes now. ``due_only``: only when its retention ended. False when the unit is
        gone, already purging, or (``due_only``) not due or held: nothing written.

        ``held``: a protection mark on the namespace the unit was dropped from (or one above it) or
        on its warehouse holds it in the bin: ``Protected`` (nothing written), or False for an
        expiry, which waits for the mark's removal. Only a hard drop's own purge passes False
        (its drop checked the marks)."""
        with self.db.transaction() as conn:
            unit = conn.execute(
                "SELECT id, kind, namespace, name FROM bin_unit WHERE warehouse_id = %s AND id = %s"
                " AND purging_since IS NULL AND (NOT %s OR expires_at <= now()) FOR UPDATE",
                (warehouse_id, unit_id, due_only),
            ).fetchone()
            if unit is None:
                return False
            if held:
                path = tuple(unit["namespace"])
                reason = protection_of(conn, warehouse_id, path[:-1] if unit["kind"] == "namespace" else path)
                if reason is not None:
                    if due_only:
                        return False
                    what = ".".join((*path, unit["name"]) if unit["name"] is not None else path)
                    raise Protected(
                        f"Cannot purge {unit['kind']} {what} from the bin: {reason}; remove the protection first"
                        " (manage-grants)"
                    )
            keep = [plan.bin_entry_id for plan in plans]
            # A claim over a table to purge waits for this transaction, then finds it purging; one
            # that came first is a live entry the purge leaves alone (app/housekeeping.py).
            purged = conn.execute(
                "SELECT location, metadata_location, data_path FROM bin_entry WHERE id = ANY(%s)", (keep,)
            ).fetchall()
            lock(conn, _roots(purged))
            for plan in plans:
                conn.execute(
                    "INSERT INTO purge_job (location, extra_objects, metadata_path, bin_entry_id)"
                    " VALUES (%s, %s, %s, %s)",
                    (plan.location, plan.extra_objects, plan.metadata_path, plan.bin_entry_id),
                )
            conn.execute("DELETE FROM bin_entry WHERE unit_id = %s AND id <> ALL(%s)", (unit_id, keep))
            for table in ("bin_namespace", "bin_function", "bin_grant"):
                conn.execute(f"DELETE FROM {table} WHERE unit_id = %s", (unit_id,))  # noqa: S608 - fixed names
            if keep:
                conn.execute("UPDATE bin_unit SET purging_since = now() WHERE id = %s", (unit_id,))
            else:
                conn.execute("DELETE FROM bin_unit WHERE id = %s", (unit_id,))
            record_events(conn, events)
        return True


def _roots(rows: list[dict[str, Any]]) -> list[Location]:
    """Binned entries' folders (location, metadata directory and data path:
    ``app.rules.table.stored_roots``), as a claim finds them."""
    roots: list[Location] = []
    for row in rows:
        try:
            roots += [Location.parse(row["location"]), Location.parse(row["metadata_location"]).parent]
        except InvalidLocation:  # stored before locations were checked: the purge deletes nothing there
            continue
        try:
            roots += [Location.parse(row["data_path"])] if row.get("data_path") else []
        except InvalidLocation:  # a data path stored before locations were checked owns nothing
            pass
    return list(dict.fromkeys(roots))
