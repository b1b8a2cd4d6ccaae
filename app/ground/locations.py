"""One model of every storage location Growler reads, writes, lists or deletes. Pure, no I/O.

A location is text from a client (``location``, ``write.metadata.path``, ``metadata-location``,
metadata-log entries, manifest lists) or from configuration. Before it reaches the object store
it is parsed into a ``Location``: ``s3`` (also spelled ``s3a``/``s3n``, as Spark writes them)
with a bucket and a key, or ``file`` with an absolute path. The store API takes only
``Location``, so raw text cannot reach S3 or the file system.

The parser refuses rather than normalises whatever could make the object a client names differ
from the object Growler touches: ``?`` and ``#`` (a URL parser cuts the key there), ``%``
(clients disagree on whether to percent-decode), ``\\``, control characters, empty, ``.`` and
``..`` segments, anything not valid UTF-8, and keys longer than S3 allows. What is accepted has
one meaning: its key is its text after ``bucket/``, and ``uri`` gives that text back.

Containment is decided on segments, never on string prefixes: ``.../vic`` is not under
``.../victim``, nor the reverse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.ground.errors import BadRequest

S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
MAX_KEY_BYTES = 1024  # S3's limit on an object key
MAX_LOCATION_CHARS = 2048
# Characters that a URL parser, a client or a shell treats specially, or that cannot be written
# back unchanged: refused anywhere in a location.
_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f?#%\\\"<>^`{|}]")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


class InvalidLocation(BadRequest):
    """A location the model refuses; a 400 wherever it comes from a request."""


@dataclass(frozen=True, order=True)
class Location:
    """``s3``: ``bucket`` and ``key`` (no leading ``/``; ``""`` is the bucket root).
    ``file``: ``bucket`` is ``""`` and ``key`` is the absolute path without its leading ``/``.

    Build one with ``Location.parse`` (or ``child``); the fields are always valid segments.
    """

    scheme: str
    bucket: str
    key: str

    @classmethod
    def parse(cls, text: object, what: str = "location") -> Location:
        """The location named by ``text``, or ``InvalidLocation`` (400)."""
        if not isinstance(text, str) or not text:
            raise InvalidLocation(f"The {what} must be a non-empty string")
        if len(text) > MAX_LOCATION_CHARS:
            raise InvalidLocation(f"The {what} is longer than {MAX_LOCATION_CHARS} characters")
        shown = _shown(text)
        bad = _FORBIDDEN.search(text)
        if bad:
            raise InvalidLocation(f"The {what} {shown} contains a character not allowed in a location: {bad.group()!r}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidLocation(f"The {what} {shown} is not valid UTF-8") from exc
        match = _SCHEME.match(text)
        scheme = match.group(1).lower() if match else ""
        if scheme in S3_SCHEMES:
            rest = text[match.end() :]
            if not rest.startswith("//"):
                raise InvalidLocation(f"The {what} {shown} is not s3://bucket/key")
            bucket, _, key = rest[2:].partition("/")
            if not _BUCKET.match(bucket) or ".." in bucket:
                raise InvalidLocation(f"The {what} {shown} does not name a valid bucket")
            location = cls("s3", bucket, _key(key, what, shown))
        elif scheme == "file":
            rest = text[match.end() :]
            if rest.startswith("///"):
                path = rest[3:]
            elif rest.startswith("/") and not rest.startswith("//"):
                path = rest[1:]
            else:  # file://host/... names another machine's file
                raise InvalidLocation(f"The {what} {shown} is not file:/absolute/path or file:///absolute/path")
            location = cls("file", "", _key(path, what, shown))
        else:
            raise InvalidLocation(f"The {what} {shown} is not an s3:// or file: location")
        if len(location.key.encode("utf-8")) > MAX_KEY_BYTES:
            raise InvalidLocation(f"The {what} {shown} has a key longer than {MAX_KEY_BYTES} bytes")
        return location

    @property
    def segments(self) -> tuple[str, ...]:
        return tuple(self.key.split("/")) if self.key else ()

    @property
    def uri(self) -> str:
        """The canonical text: ``s3://bucket/key`` or ``file:///path``; parses back to ``self``."""
        if self.scheme == "file":
            return f"file:///{self.key}"
        return f"s3://{self.bucket}/{self.key}"

    def __str__(self) -> str:
        return self.uri

    @property
    def path(self) -> str:
        """The local path of a ``file`` location."""
        if self.scheme != "file":
            raise InvalidLocation(f"{self.uri} is not a local file")
        return "/" + self.key

    def child(self, *names: str) -> Location:
        """This location with more segments (each checked as a parsed one would be)."""
        key = "/".join([*self.segments, *names])
        return Location.parse(self._root() + key)

    def _root(self) -> str:
        return "file:///" if self.scheme == "file" else f"s3://{self.bucket}/"

    @property
    def parent(self) -> Location:
        if not self.key:
            return self
        return Location(self.scheme, self.bucket, "/".join(self.segments[:-1]))

    def is_within(self, root: Location) -> bool:
        """At or under ``root``, segment by segment."""
        if (self.scheme, self.bucket) != (root.scheme, root.bucket):
            return False
        mine, theirs = self.segments, root.segments
        return mine[: len(theirs)] == theirs

    def overlaps(self, other: Location) -> bool:
        """One is at or under the other (a prefix in either direction)."""
        return self.is_within(other) or other.is_within(self)


def _shown(text: str) -> str:
    """The location as quoted in an error message: bounded, control characters escaped."""
    return repr(text if len(text) <= 200 else text[:200] + "...")


def _key(raw: str, what: str, shown: str) -> str:
    """A key from the text after ``bucket/`` (or after the file root): one trailing ``/`` (a
    directory written as such) is dropped; any other empty, ``.`` or ``..`` segment is refused."""
    if raw == "":
        return ""
    if raw.endswith("/"):
        raw = raw[:-1]
    for segment in raw.split("/"):
        if segment in ("", ".", ".."):
            raise InvalidLocation(f"The {what} {shown} has an empty, '.' or '..' path segment")
    return raw


def parse(text: object, what: str = "location") -> Location:
    return Location.parse(text, what)


def is_allowed(location: Location, roots: list[Location] | tuple[Location, ...]) -> bool:
    """Strictly under one of ``roots``: a root itself is a container, never a table's place."""
    return any(location.is_within(root) and location != root for root in roots)


def safe_segment(name: str) -> str:
    """A namespace level or a name as one path segment of a location Growler makes up.

    Names may hold characters a location may not (``/``, ``?``, ``%``...); those become ``_``.
    Two names may map to one segment: Growler's generated table folders carry a uuid, so they
    never share files for that.
    """
    segment = _FORBIDDEN.sub("_", name.replace("/", "_"))
    return "_" + segment if segment in (".", "..") else segment


class ForeignFile(BadRequest):
    """A file a table's metadata names outside the table's own locations (``TableFiles``): Growler
    neither reads it nor hands it out on the table's behalf (docs/security.md, "What Growler reads
    on a table's behalf")."""


@dataclass(frozen=True)
class TableFiles:
    """Where one table's files may be: the folders the table owns exclusively.

    Those are its roots (``app.rules.table.table_roots``: its location, the directory of its
    metadata file and its data path, ``write.data.path``, when set) - exactly what
    storage/placement.py claims for it (no other table, view, stage or namespace may overlap
    them), and what signing and vended credentials serve. A file strictly under one of them is the
    table's own; anything else (another table's folder or data path, another bucket, a local file)
    is not, whatever the table's metadata says: a commit may name only its own manifest lists, and
    every server-side reader (the console's preview, scan planning, maintenance) opens or hands out
    only such files. Build one with ``app.rules.table.files`` (``table_files``, ``files_of_entry``):
    one definition.
    """

    roots: tuple[Location, ...]

    @classmethod
    def of(cls, location: str, *more: str) -> TableFiles:
        """A table at ``location`` that owns the folders ``more`` too (its metadata directory and
        data path: ``app.rules.table.stored_roots``). One of ``more`` that does not parse (stored
        before locations were checked) owns nothing: the table's other files stay readable."""
        places = [Location.parse(location, "table location")]
        for text in more:
            try:
                places.append(Location.parse(text, "table folder"))
            except InvalidLocation:
                continue
        # one inside another (the default: the metadata directory in the location) is one root
        roots = dict.fromkeys(p for p in places if not any(p != q and p.is_within(q) for q in places))
        return cls(tuple(roots))

    @property
    def shown(self) -> str:
        return ", ".join(root.uri for root in self.roots)

    def owns(self, text: object) -> bool:
        """Whether ``text`` is a valid location strictly under one of the table's roots."""
        try:
            location = Location.parse(text)
        except InvalidLocation:
            return False
        return is_allowed(location, self.roots)

    def require(self, text: object, what: str, doing: str = "") -> Location:
        """``text`` parsed, when it is the table's own; ``ForeignFile`` (400) naming it and the
        table's locations when not. ``doing`` prefixes the message (``"Cannot plan the scan"``)."""
        prefix = f"{doing}: " if doing else ""
        try:
            location = Location.parse(text, what)
        except InvalidLocation as exc:
            raise ForeignFile(f"{prefix}{exc.message}") from None
        if not is_allowed(location, self.roots):
            opening = f"{prefix}{'the' if prefix else 'The'} {what} {_shown(str(text))}"
            raise ForeignFile(
                f"{opening} is outside the table's locations ({self.shown}). Growler reads and lists only a "
                "table's own files on its behalf, as signing and vended credentials serve only them: write the "
                "table's files under its location (or its metadata directory or data path), or register the "
                "table at a location that holds its files"
            )
        return location
