"""Namespace and name parsing, and the window of a paged list. Pure functions, no I/O.

Page tokens themselves are sealed by app/ground/page_tokens.py."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import unquote

from app.ground.errors import BadRequest
from app.ground.text import UNIT_SEPARATOR, has_control_characters

MAX_LEVEL_LENGTH = 255
MAX_LEVELS = 16


@lru_cache(maxsize=16)  # one or two values per process, on the path of every loadTable and signRequest
def decoded_separator(advertised: str) -> str:
    """The advertised ``namespace-separator`` is URL-encoded (e.g. ``%1F``)."""
    return unquote(advertised)


def check_name(name: str, what: str = "name") -> str:
    """A namespace level, table or view name: non-empty, printable, bounded."""
    if not isinstance(name, str) or name == "":
        raise BadRequest(f"Invalid {what}: must be a non-empty string")
    if len(name) > MAX_LEVEL_LENGTH:
        raise BadRequest(f"Invalid {what}: longer than {MAX_LEVEL_LENGTH} characters")
    if has_control_characters(name):
        raise BadRequest(f"Invalid {what}: control characters are not allowed")
    return name


def table_name(raw: str) -> str:
    """A table name from the path, held to the rules of created names (a NUL must not reach the database)."""
    return check_name(raw, "table name")


def view_name(raw: str) -> str:
    """A view name from the path, held to the rules of created names."""
    return check_name(raw, "view name")


def check_namespace(levels: list[str] | tuple[str, ...], separator: str = UNIT_SEPARATOR) -> tuple[str, ...]:
    """Validate the levels of a namespace given as a list (request bodies)."""
    if not levels:
        raise BadRequest("Invalid namespace: it must have at least one level")
    if len(levels) > MAX_LEVELS:
        raise BadRequest(f"Invalid namespace: more than {MAX_LEVELS} levels")
    for level in levels:
        check_name(level, "namespace level")
        if separator and separator in level:
            raise BadRequest(f"Invalid namespace level {level!r}: it contains the namespace separator")
    return tuple(levels)


def parse_namespace(raw: str, advertised_separator: str) -> tuple[str, ...]:
    """A namespace from a path or query parameter.

    Levels are split on the unit separator (0x1F) and on the separator we advertise, as the
    spec requires for compatibility with older clients.
    """
    separator = decoded_separator(advertised_separator)
    text = raw.replace(separator, UNIT_SEPARATOR) if separator != UNIT_SEPARATOR else raw
    return check_namespace(text.split(UNIT_SEPARATOR), separator)


def format_namespace(levels: tuple[str, ...] | list[str]) -> str:
    return ".".join(levels)


def page_window(page_token: str | None, page_size: int | None, max_page_size: int) -> tuple[bool, int | None]:
    """(paginate?, limit) for a list request.

    Without ``pageToken`` the whole list is returned (clients that do not paginate get
    everything); an empty ``pageToken`` starts paging. ``pageSize`` is bounded either way so a
    nonsense value is a clear 400 rather than a silent truncation.
    """
    if page_size is not None and not 1 <= page_size <= max_page_size:
        raise BadRequest(f"pageSize must be between 1 and {max_page_size}")
    if page_token is None:
        return False, None
    return True, page_size or max_page_size
