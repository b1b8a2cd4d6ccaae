"""Exclusive locations: every storage location is owned by exactly one entry, enforced in PostgreSQL.

A table's or view's location and metadata directory, a table's data path (``write.data.path``
when set) and a staged table's may not be at, under or above another live entry's or stage's,
nor overlap another namespace's location (its explicit ``location`` property, else the
warehouse's default layout) - only its own namespace and that namespace's ancestors may contain
it, and it may contain none of them. Signing and STS serve exactly these folders of a table, so
ownership is what keeps one principal's grant from reaching another's data.

A dropped entry in the recycle bin owns nothing a new entry wants (a create or registration at its
location is a take-over, as on a catalog without a bin: docs/recycle-bin.md), except while its
purge runs: the purge is deleting there. Its undrop claims its locations back (``reclaim``):
refused while a live entry or stage holds one, so there are never two live owners.

Race-free without serialising every create: a claim takes hierarchical advisory locks in the
transaction that writes the entry - shared on every proper ancestor prefix of each claimed
location, exclusive on the location itself - always in order of depth. Two claims of which one
contains the other (or which are equal) conflict on the shallower one's prefix, so the second
waits for the first to commit and then sees its row; siblings take no conflicting lock.

A namespace's location (its explicit ``location``, else the warehouse's default layout) is claimed
the same way (``claim_namespaces``) when the namespace is created, when its ``location`` is set
or removed, and when it comes back from the recycle bin: it may contain the tables, views, stages
and namespaces of its own subtree, lie inside its ancestors', and overlap nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import psycopg

from app.ground.errors import BadRequest
from app.ground.locations import InvalidLocation, Location, safe_segment
from storage.housekeeping_rows import bare
from storage.rows import EntryRow

Path = tuple[str, ...]

_LOCK_SEED = 0x67726F77  # hashtextextended's seed: Growler's location locks apart from other keys


@dataclass(frozen=True)
class Claim:
    """Locations one entry (or stage) is about to own, and whose they may share: its own row
    (``entry_id``, a commit or an overwrite) and its own name's stages (a staged create)."""

    roots: tuple[Location, ...]
    warehouse_id: int
    namespace: tuple[str, ...]
    name: str
    entry_id: int | None = None
    what: str = field(default="table")

    def shown(self) -> str:
        return f"{self.what} {'.'.join((*self.namespace, self.name))} at {', '.join(r.uri for r in self.roots)}"


@dataclass(frozen=True)
class Holder:
    """A live entry (or stage) holding a location an undrop wants back."""

    kind: str  # table, view, staged table
    warehouse_id: int
    namespace: tuple[str, ...]
    name: str


def claim(conn: psycopg.Connection, claims: list[Claim]) -> None:
    """Lock and check ``claims`` inside the caller's transaction; BadRequest (the transaction rolls
    back: nothing written) when a location is taken. The message names no other entry, and says
    what to do next. A binned entry is passed over unless its purge runs (docs/recycle-bin.md).

    Two round trips for a claim: the locks with the warehouses' locations, then the entries,
    stages and namespaces it may meet, read together after the locks (``claim_lookup``)."""
    roots = [root for c in claims for root in c.roots]
    bases = _bases(_send_locks(conn, roots, sorted({c.warehouse_id for c in claims})))
    for c in claims:
        base = bases[c.warehouse_id]
        _refuse_if_taken(c, _lookup_rows(_send_lookup(conn, c, base), c, base))


class PipelinedClaim:
    """``claim`` of one entry's locations in a pipelined transaction (``storage.db.pipelined``), its
    statements sent with the transaction's own: made, it sends the locks (read with the statement
    before them, the entry's insert), ``look_up`` sends the lookup once the entry's id is known,
    ``check`` reads it (with whatever was sent meanwhile: the pending record's settling) and refuses
    as ``claim`` does. A create's claim costs no round trip of its own (issue 47)."""

    def __init__(self, conn: psycopg.Connection, placed: Claim) -> None:
        self._conn = conn
        self._placed = placed
        self._locks = _send_locks(conn, list(placed.roots), [placed.warehouse_id])
        self._lookup: tuple[psycopg.Cursor, Claim, Location] | None = None

    def look_up(self, entry_id: int | None) -> None:
        base = _bases(self._locks)[self._placed.warehouse_id]
        placed = replace(self._placed, entry_id=entry_id)
        self._lookup = (_send_lookup(self._conn, placed, base), placed, base)

    def check(self) -> None:
        if self._lookup is None:
            raise RuntimeError("look_up() first")
        cursor, placed, base = self._lookup
        _refuse_if_taken(placed, _lookup_rows(cursor, placed, base))


_Found = tuple[list[tuple[EntryRow, bool]], list["StageRow"], list[tuple[Path, Location]]]


def _refuse_if_taken(c: Claim, lookup: _Found) -> None:
    found, stages, places = lookup
    if any(not binned for _, binned in found) or _stage_in_the_way(c, stages) or _namespace_in_the_way(c, places):
        raise BadRequest(
            f"Cannot place {c.shown()}: the location is another table's, view's, staged table's or "
            "namespace's, or overlaps one. Give it a location of its own, or none for a new folder "
            "under its namespace's location"
        )
    if found:
        raise BadRequest(
            f"Cannot place {c.shown()}: a dropped table's files there are being purged (the warehouse's "
            "recycle bin lists it as purging). Try again once its purge finished, or give it another location"
        )


def _send_lookup(conn: psycopg.Connection, c: Claim, base: Location) -> psycopg.Cursor:
    """What ``_overlaps`` (purging binned entries), ``_overlapping_stages`` and ``_namespace_places``
    read for one claim, in one statement (migration 0027's ``claim_lookup`` calls their functions)."""
    lookup = outermost(list(c.roots))  # the rows found are compared with every root
    above, lo, hi = _holder_keys(lookup)
    paths, ns_lo, ns_hi = _namespace_keys(base, namespace_lookup_roots(base, list(c.roots)))
    return conn.execute(
        "SELECT * FROM claim_lookup(%s, %s, %s, %s, 'purging', %s, %s, %s, %s, %s, %s)",
        (above, lo, hi, c.entry_id, _stage_keys(lookup), c.warehouse_id, paths, ns_lo, ns_hi, _SEP),
    )


def _lookup_rows(cursor: psycopg.Cursor, c: Claim, base: Location) -> _Found:
    by_source: dict[str, list[dict]] = {"entry": [], "stage": [], "namespace": []}
    for row in cursor.fetchall():
        by_source[row.pop("source")].append(row)
    entries = [
        {key: row[key] for key in ("id", "kind", "uuid", "location", "metadata_location", "data_path", "binned")}
        for row in by_source["entry"]
    ]
    return (
        _holders_from(entries, list(c.roots)),
        _stages_from(by_source["stage"]),
        _places_from(by_source["namespace"], base),
    )


def lock(conn: psycopg.Connection, roots: list[Location]) -> None:
    """The claims' locks on ``roots``, for a transaction that must not race a claim over them
    (the start of a purge: a claim then waits, and sees it purging)."""
    _lock(conn, roots)


def reclaim(conn: psycopg.Connection, claims: list[Claim]) -> tuple[Claim, Holder] | None:
    """An undrop's claim of its entries' locations, locked like any claim (all at once, in the one
    order), inside the caller's transaction: the first claim whose location a live entry or stage
    holds now (a take-over since the drop; the undrop is refused) and that holder, else None.
    Other binned entries do not count; nor do namespaces' locations - the entry had its place when
    it was dropped, and comes back to it."""
    _lock(conn, [root for c in claims for root in c.roots])
    for c in claims:
        live = _overlaps(conn, list(c.roots), c.entry_id, binned="none")
        if live:
            row = conn.execute(
                "SELECT e.kind, n.warehouse_id, n.path, e.name FROM catalog_entry e"
                " JOIN namespace n ON n.id = e.namespace_id WHERE e.id = %s",
                (live[0][0].id,),
            ).fetchone()
            return c, Holder(row["kind"], row["warehouse_id"], tuple(row["path"]), row["name"])
        stage = _stage_holder(conn, c)
        if stage is not None:
            return c, stage
    return None


def _prefixes(root: Location) -> list[str]:
    base = f"{root.scheme}://{root.bucket}" if root.scheme == "s3" else f"{root.scheme}:"
    return [base + "/" + "/".join(root.segments[:depth]) for depth in range(0, len(root.segments) + 1)]


def _lock(conn: psycopg.Connection, roots: list[Location]) -> None:
    _send_locks(conn, roots).fetchone()


def _send_locks(conn: psycopg.Connection, roots: list[Location], warehouses: list[int] | None = None) -> psycopg.Cursor:
    """Take the claims' locks on ``roots``; with them, in the same statement, the locations of
    ``warehouses`` (a claim needs its warehouse's for the namespaces' default layout: ``_bases``)."""
    modes: dict[str, tuple[int, bool]] = {}  # prefix -> (depth, exclusive)
    for root in roots:
        prefixes = _prefixes(root)
        for depth, prefix in enumerate(prefixes):
            exclusive = depth == len(prefixes) - 1
            known = modes.get(prefix)
            modes[prefix] = (depth, exclusive or (known is not None and known[1]))
    ordered = sorted(modes.items(), key=lambda item: (item[1][0], item[0]))
    return conn.execute(
        "SELECT lock_locations(%s, %s, %s),"  # migration 0024: one round trip, in this order
        " (SELECT coalesce(json_object_agg(id, location), '{}') FROM warehouse WHERE id = ANY(%s)) AS bases",
        ([prefix for prefix, _ in ordered], [exclusive for _, (_, exclusive) in ordered], _LOCK_SEED, warehouses or []),
    )


def _bases(locks: psycopg.Cursor) -> dict[int, Location]:
    return {int(key): Location.parse(location.rstrip("/")) for key, location in locks.fetchone()["bases"].items()}


def outermost(roots: list[Location]) -> list[Location]:
    """The roots no other root contains (of equal ones, one): what a lookup of the rows at,
    under or above ``roots`` needs. A row at, under or above a root inside another root is at or
    under that outer root, or above it - the keys of the outer one find it. A table's metadata
    directory inside its location was a second set of range scans on every create, half the claim's
    lookup time (issue 47). The rows found are still compared with every root."""
    kept: list[Location] = []
    for root in roots:
        if not any(root.is_within(outer) for outer in kept):
            kept = [*(inner for inner in kept if not inner.is_within(root)), root]
    return kept


def namespace_lookup_roots(base: Location, roots: list[Location]) -> list[Location]:
    """The outermost of the roots inside the warehouse location ``base`` (``_namespace_keys`` looks
    up by those only: the namespaces' default layout lies there)."""
    return outermost([root for root in roots if root.is_within(base) and root != base])


def _stage_keys(roots: list[Location]) -> list[str]:
    return [bare(root) for root in roots]


StageRow = tuple[int, Path, str, "list[Location] | None"]  # warehouse, namespace, name, places (None: unparsable)


def _stage_holder(conn: psycopg.Connection, c: Claim) -> Holder | None:
    """A live stage other than one of the claim's own name overlapping a root."""
    return _stage_in_the_way(c, _overlapping_stages(conn, list(c.roots)))


def _stage_in_the_way(c: Claim, stages: list[StageRow]) -> Holder | None:
    for warehouse_id, path, name, places in stages:
        if (warehouse_id, path, name) != (c.warehouse_id, c.namespace, c.name):
            if places is None or any(place.overlaps(root) for place in places for root in c.roots):
                return Holder("staged table", warehouse_id, path, name)
    return None


def _overlapping_stages(conn: psycopg.Connection, roots: list[Location]) -> list[StageRow]:
    """Live stages whose location, metadata path or data path is at, under or above one of
    ``roots`` by text (the caller compares the parsed places)."""
    rows = conn.execute(
        "SELECT warehouse_id, path, name, location, metadata_path, data_path FROM stages_overlapping(%s)",
        (_stage_keys(outermost(roots)),),  # migration 0027: a scan of the live stages, planned once
    ).fetchall()
    return _stages_from(rows)


def _stages_from(rows: list[dict]) -> list[StageRow]:
    found: list[StageRow] = []
    for row in rows:
        try:
            places: list[Location] | None = [
                Location.parse(text) for text in (row["location"], row["metadata_path"], row["data_path"]) if text
            ]
        except InvalidLocation:
            places = None
        found.append((row["warehouse_id"], tuple(row["path"]), row["name"], places))
    return found


def _namespace_in_the_way(c: Claim, places: list[tuple[Path, Location]]) -> bool:
    """Another namespace's location overlapping a root, or a root containing its own namespace's
    (or an ancestor's) location."""
    for path, place in places:
        own_line = c.namespace[: len(path)] == path
        for root in c.roots:
            if place.is_within(root) or (not own_line and root.is_within(place)):
                return True
    return False


def namespace_place(warehouse_location: str, path: Path, explicit: str | None) -> Location:
    """A namespace's location: its explicit ``location`` property, else the default layout (the
    warehouse location and the levels as ``safe_segment`` makes them). InvalidLocation when the
    stored property does not parse (set before namespace locations were checked)."""
    text = explicit or (warehouse_location.rstrip("/") + "/" + "/".join(safe_segment(level) for level in path))
    return Location.parse(text.rstrip("/"), "namespace location")


def _namespace_places(
    conn: psycopg.Connection, warehouse_id: int, roots: list[Location]
) -> list[tuple[Path, Location]]:
    """The namespaces of the warehouse whose location may overlap one of ``roots``, with it."""
    warehouse = conn.execute("SELECT location FROM warehouse WHERE id = %s", (warehouse_id,)).fetchone()
    base = Location.parse(warehouse["location"].rstrip("/"))
    paths, lo, hi = _namespace_keys(base, namespace_lookup_roots(base, roots))
    rows = conn.execute(
        "SELECT path, explicit FROM namespace_places(%s, %s, %s, %s, %s)",  # migration 0024: index lookups
        (warehouse_id, paths, lo, hi, _SEP),
    ).fetchall()
    return _places_from(rows, base)


def _namespace_keys(base: Location, roots: list[Location]) -> tuple[list[str], list[str], list[str]]:
    """Read narrowly: the namespaces with an explicit location (always), and by the layout those
    whose path is a root's path under the warehouse location or a prefix of it (index lookups) or
    starts with it (an index range). A level whose name ``safe_segment`` changes is matched by its
    folder's name. (paths, range starts, range ends), levels joined by ``_SEP``."""
    paths, ranges = set(), []
    for root in roots:
        if root.is_within(base) and root != base:
            levels = list(root.segments[len(base.segments) :])
            paths.update(_SEP.join(levels[:depth]) for depth in range(1, len(levels) + 1))
            ranges.append((_SEP.join(levels), _SEP.join([*levels[:-1], levels[-1] + "\x01"])))
    return sorted(paths), [lo for lo, _ in ranges], [hi for _, hi in ranges]


def _places_from(rows: list[dict], base: Location) -> list[tuple[Path, Location]]:
    places = []
    for row in rows:
        path = tuple(row["path"])
        try:
            places.append((path, namespace_place(base.uri, path, row["explicit"])))
        except InvalidLocation:
            continue
    return places


# -- namespaces ------------------------------------------------------------------------------


class NamespaceLocationTaken(BadRequest):
    """A namespace's location is another's (400; an undrop answers 409 with its own words)."""

    def __init__(self, placed: NamespaceClaim) -> None:
        super().__init__(
            f"Cannot place namespace {'.'.join(placed.path)} at {placed.root.uri}: the location is another"
            " namespace's, table's, view's or staged table's, or overlaps one. Set its location property to a"
            " folder of its own inside its parent namespace's location"
        )
        self.placed = placed


@dataclass(frozen=True)
class NamespaceClaim:
    """The location a namespace is about to own: its explicit ``location`` property, else its
    default layout (``namespace_place``)."""

    root: Location
    warehouse_id: int
    path: Path


def claim_namespaces(conn: psycopg.Connection, claims: list[NamespaceClaim]) -> None:
    """Lock and check ``claims`` inside the caller's transaction (after the namespace rows are
    written: a namespace is never its own rival); BadRequest (the transaction rolls back: nothing
    written) when a location is taken.

    A namespace's location may contain what its own subtree holds (its tables', views', stages'
    and nested namespaces' locations, strictly inside it), and may lie inside an ancestor's; it may
    not be at, inside or above anything else - another namespace's location, any other table's,
    view's or stage's, in any warehouse - nor at or above an entry of its own (a folder inside a
    table's is not a namespace's home). The message names no other entry."""
    _lock(conn, [c.root for c in claims])
    for c in claims:
        if _entries_in_the_way(conn, c) or _stages_in_the_way(conn, c) or _namespaces_in_the_way(conn, c):
            raise NamespaceLocationTaken(c)


def _under(path: Path, top: Path) -> bool:
    """``path`` is ``top`` or lies below it."""
    return path[: len(top)] == top


def _inside(place: Location, root: Location) -> bool:
    return place.is_within(root) and place != root


def _entries_in_the_way(conn: psycopg.Connection, c: NamespaceClaim) -> bool:
    """Live tables and views overlapping the claim, other than its own subtree's strictly inside it
    (binned ones block no claim: an undrop of theirs finds the location taken)."""
    found = [entry for entry, _ in _overlaps(conn, [c.root], None, binned="none")]
    if not found:
        return False
    live = conn.execute(
        "SELECT e.id, n.warehouse_id = %s AND n.path[1:%s] = %s AS mine"
        " FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id WHERE e.id = ANY(%s)",
        (c.warehouse_id, len(c.path), list(c.path), [entry.id for entry in found]),
    ).fetchall()
    mine = {row["id"]: row["mine"] for row in live}
    for entry in found:
        if entry.id not in mine:
            continue
        if not mine[entry.id]:
            return True
        try:
            places = entry_places(entry)
        except InvalidLocation:
            return True
        if any(place.overlaps(c.root) and not _inside(place, c.root) for place in places):
            return True
    return False


def _stages_in_the_way(conn: psycopg.Connection, c: NamespaceClaim) -> bool:
    for warehouse_id, path, _, places in _overlapping_stages(conn, [c.root]):
        if places is None or warehouse_id != c.warehouse_id or not _under(path, c.path):
            return True
        if any(place.overlaps(c.root) and not _inside(place, c.root) for place in places):
            return True
    return False


def _namespaces_in_the_way(conn: psycopg.Connection, c: NamespaceClaim) -> bool:
    for path, place in _namespace_places(conn, c.warehouse_id, [c.root]):
        if path == c.path:
            continue
        if _under(c.path, path):  # an ancestor: may contain it, may not lie inside it
            taken = place.is_within(c.root)
        elif _under(path, c.path):  # a nested namespace: may lie inside it, may not contain it
            taken = c.root.is_within(place)
        else:
            taken = place.overlaps(c.root)
        if taken:
            return True
    return False


def claim_restored_namespaces(conn: psycopg.Connection, warehouse_id: int, top: Path) -> None:
    """An undrop of a namespace unit: once its rows are back (at ``top`` and below), the location of
    each of its namespaces is claimed again - it may have been taken while they were in the bin."""
    warehouse = conn.execute("SELECT location FROM warehouse WHERE id = %s", (warehouse_id,)).fetchone()
    rows = conn.execute(
        "SELECT path, properties->>'location' AS explicit FROM namespace"
        " WHERE warehouse_id = %s AND path[1:%s] = %s ORDER BY path",
        (warehouse_id, len(top), list(top)),
    ).fetchall()
    claims = []
    for row in rows:
        try:
            place = namespace_place(warehouse["location"], tuple(row["path"]), row["explicit"])
        except InvalidLocation:  # stored before namespace locations were checked: owns nothing
            continue
        claims.append(NamespaceClaim(place, warehouse_id, tuple(row["path"])))
    claim_namespaces(conn, claims)


_SEP = "\x1f"  # joins a path's levels into one text (levels hold no control characters)


def _overlaps(
    conn: psycopg.Connection, roots: list[Location], exclude_id: int | None, binned: str
) -> list[tuple[EntryRow, bool]]:
    """(entry, binned) of the live and (``binned``: all, purging, none) binned tables and views
    (any warehouse) whose location, metadata directory (that of its current metadata file) or data
    path overlaps one of ``roots``.

    SQL narrows the rows by text, on the key columns of 0027 (scheme spellings and trailing slashes
    ignored); the model decides. The documents themselves are not read.
    """
    if not roots:
        return []
    above, lo, hi = _holder_keys(outermost(roots))
    rows = conn.execute(
        "SELECT id, kind, uuid, location, metadata_location, data_path, binned"
        " FROM location_holders(%s, %s, %s, %s, %s)",
        (above, lo, hi, exclude_id, binned),
    ).fetchall()
    return _holders_from(rows, roots)


def _holder_keys(roots: list[Location]) -> tuple[list[str], list[str], list[str]]:
    """At or above a root: the key is one of its prefixes; under root i: the key lies in
    [key_i + "/", key_i + "0") - "0" follows "/" in byte order. Index scans only, whatever the
    table's size, each of them a statement of migration 0027's function, planned once."""
    keys = [bare(root) for root in roots]
    above = sorted({"/".join(key.split("/")[:depth]) for key in keys for depth in range(1, key.count("/") + 2)})
    return above, [key + "/" for key in keys], [key + "0" for key in keys]


def _holders_from(rows: list[dict], roots: list[Location]) -> list[tuple[EntryRow, bool]]:
    found: dict[int, tuple[EntryRow, bool]] = {}
    for row in rows:
        is_binned = row.pop("binned")
        entry = EntryRow(**row, metadata="")
        try:
            places = entry_places(entry)
        except InvalidLocation:  # stored before locations were checked: counts as overlapping
            found[entry.id] = (entry, is_binned)
            continue
        if any(place.overlaps(root) for place in places for root in roots):
            found[entry.id] = (entry, is_binned)
    return list(found.values())


def overlapping_entries(
    conn: psycopg.Connection, roots: list[Location], exclude_id: int | None = None
) -> list[EntryRow]:
    """Live and binned tables and views (any warehouse) whose location, metadata directory (that of
    its current metadata file) or data path is at, under or above one of ``roots``, compared by
    segments, read on a connection the caller holds: what a purge or a maintenance run must leave
    alone (a binned entry may still be undropped; its files are its own until it is forgotten or
    purged)."""
    return [entry for entry, _ in _overlaps(conn, roots, exclude_id, binned="all")]


def entry_places(entry: EntryRow) -> list[Location]:
    """The folders a table's or view's row says it owns: its location, its metadata directory (that
    of its current file) and its data path when set (``app.rules.table.stored_roots``, parsed).
    InvalidLocation when one does not parse (stored before locations were checked)."""
    places = [Location.parse(entry.location), Location.parse(entry.metadata_location).parent]
    if entry.data_path:
        places.append(Location.parse(entry.data_path))
    return places
