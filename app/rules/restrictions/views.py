"""loadTable's ``referenced-by`` (the REST spec): the chain of views, outermost first, through which
an engine loads a table. Pure: parsing and its limits; the decision is the authorizer's
(``Authorizer.read_through_views``), which reads the views' definers."""

from __future__ import annotations

from app.ground.errors import BadRequest
from app.rules.identifiers import check_name, check_namespace, decoded_separator

MAX_VIEWS = 16  # a chain longer than this is refused: each hop costs a decision
ViewName = tuple[tuple[str, ...], str]  # (namespace levels, view name)


def parse_referenced_by(raw: str, advertised_separator: str) -> list[ViewName]:
    """Comma-separated views, each its namespace and name joined by the namespace separator (split
    at the last one); a comma inside a name comes as %2C (decoded here, after the split)."""
    separator = decoded_separator(advertised_separator)
    views: list[ViewName] = []
    for part in raw.split(","):
        text = part.replace("\x1f", separator) if separator != "\x1f" else part
        namespace, found, name = text.rpartition(separator)
        if not found or not namespace or not name:
            raise BadRequest(f"Invalid referenced-by entry {part[:200]!r}: a view's namespace and name")
        levels = [level.replace("%2C", ",") for level in namespace.split(separator)]
        views.append((check_namespace(levels, separator), check_name(name.replace("%2C", ","), "view name")))
    if len(views) > MAX_VIEWS:
        raise BadRequest(f"Invalid referenced-by: more than {MAX_VIEWS} views")
    return views
