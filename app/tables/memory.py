"""What a worker remembers about tables to skip work, never to answer from: the metadata documents
it parsed recently, the version of each table it saw last (a commit skips reading and parsing a
document it already has), the document of each table it answered last (a load skips reading it
again), and the ETags it issued (a revalidation skips reading the document when the table has
not moved). Each is checked against the database's current row before use."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.ground.lru import LruCache
from app.rules import table as rules

EntryKey = tuple[int, tuple[str, ...], str]  # warehouse id, namespace, name


@dataclass(frozen=True)
class Seen:
    """One version of a catalog entry as this worker saw it."""

    entry_id: int
    location: str
    text: str
    metadata: Any


class ParsedMetadataCache:
    """Recently parsed metadata documents of this worker, by metadata location.

    Parsing a table's metadata is the largest cost of a commit and grows with its history; the
    next commit to a table almost always starts from the version the previous one wrote or read.
    An entry is used only when the stored text is identical, so a stale entry can cost a parse,
    never a wrong answer. Models are immutable here: commits copy, never modify, what they get.

    It also knows, per table name, the version it holds last (``latest``): a commit then asks
    the database for the document only if the table has moved on since (``unless_at``). That
    is safe because an entry's metadata location names a file written once, whose text the
    entry stored with it; the entry id guards against a dropped table's name taken again.
    """

    def __init__(self, capacity: int = 8, snapshot_json: rules.SnapshotJson | None = None) -> None:
        self.snapshot_json = snapshot_json  # snapshots serialised before are reused when parsing
        self._entries: LruCache[str, tuple[str, Any]] = LruCache(capacity)
        self._latest: LruCache[EntryKey, tuple[int, str]] = LruCache(capacity)  # entry id, location
        # The requirement fields of documents screened but not parsed (their commits were hopeless):
        # the next hopeless commit against the same version - with N writers on a table, up to
        # N-1 of them after every commit - is refused without decoding the document again.
        self._screened: LruCache[str, tuple[str, rules.DocumentFields | None]] = LruCache(capacity)

    def parse(
        self,
        location: str,
        text: str,
        seen: tuple[EntryKey, int] | None = None,
        screen: rules.Screen | None = None,
    ) -> Any:
        """The parsed document; ``seen`` (the entry's name and id) makes it the entry's latest;
        ``screen`` decides on the document's requirement fields first when the document is not
        held here (``rules.parse_metadata``), on the fields held when they are."""
        cached = self._entries.get(location)
        if cached is not None and cached[0] == text:
            metadata = cached[1]
        else:
            metadata = rules.parse_metadata(text, self._screening(location, text, screen), self.snapshot_json)
        self.remember(location, text, metadata, seen)
        return metadata

    def _screening(
        self, location: str, text: str, screen: rules.Screen | None
    ) -> Callable[[dict[str, Any]], None] | None:
        """``screen`` on the fields held for this version, else a hook that reads and keeps them."""
        if screen is None:
            return None
        held = self._screened.get(location)
        if held is not None and held[0] == text:
            screen.refute(held[1])  # passes: the requirements hold, the parse follows
            return None

        def hook(document: dict[str, Any]) -> None:
            fields = rules.document_fields(document)
            self._screened.put(location, (text, fields))
            screen.refute(fields)

        return hook

    def remember(self, location: str, text: str, metadata: Any, seen: tuple[EntryKey, int] | None = None) -> None:
        self._entries.put(location, (text, metadata))
        if seen is not None:
            self._latest.put(seen[0], (seen[1], location))

    def latest(self, key: EntryKey) -> Seen | None:
        """The version of the entry under this name seen last here, while its document is still
        held (the documents alone take memory: nothing is kept for a name beyond them)."""
        found = self._latest.get(key)
        document = self._entries.get(found[1]) if found is not None else None
        if found is None or document is None:
            return None
        return Seen(found[0], found[1], document[0], document[1])


class IssuedETags:
    """The metadata location behind each ETag this worker recently sent (ETags are one-way hashes)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._locations: LruCache[str, str] = LruCache(capacity)

    def remember(self, etag: str, location: str) -> None:
        self._locations.put(etag, location)

    def location_of(self, if_none_match: str | None) -> str | None:
        return self._locations.get(if_none_match.strip()) if if_none_match else None


@dataclass(frozen=True)
class HeldDocument:
    entry_id: int
    location: str
    text: str


class HeldDocuments:
    """The document of the version of each table this worker answered last, within a byte budget.

    loadTable then asks the database for the document only if the table has moved on since
    (``unless_at``): a table loaded again and again costs PostgreSQL neither decompressing nor
    sending a document this worker already holds. The row itself is always read, so the answer
    is the table's current version; a metadata location names a file written once, so the text
    held for it is that version's text. The entry id guards against a dropped table's name
    taken again (its row is then read in full).
    """

    def __init__(self, budget_bytes: int = 16 * 1024 * 1024) -> None:
        self._budget = budget_bytes
        self._held: OrderedDict[EntryKey, HeldDocument] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: EntryKey) -> HeldDocument | None:
        with self._lock:
            held = self._held.get(key)
            if held is not None:
                self._held.move_to_end(key)
            return held

    def keep(self, key: EntryKey, entry_id: int, location: str, text: str) -> None:
        """Hold ``text`` in place of the table's older one (a document larger than an eighth of
        the budget is not held: it would evict the rest)."""
        with self._lock:
            old = self._held.pop(key, None)
            if old is not None:
                self._bytes -= len(old.text)
            if len(text) > self._budget // 8:
                return
            self._held[key] = HeldDocument(entry_id, location, text)
            self._bytes += len(text)
            while self._bytes > self._budget:
                _, evicted = self._held.popitem(last=False)
                self._bytes -= len(evicted.text)
