"""A client's request to a federated warehouse, translated for its remote (app/federation/service.py):
the path after the remote's prefix with the remote's namespace separator, the query, each name as
one path segment, and what of the request the forwarding reads (its JSON body, a header). Pure:
no I/O.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl, quote

from app.federation.changes import Namespace
from app.federation.remote import Route
from app.ground.errors import BadRequest
from app.rules.identifiers import parse_namespace


def remote_path(spec_path: str, values: dict[str, str], route: Route, separator: str) -> str:
    """The path after the remote's prefix: each parameter encoded, namespaces with its separator
    (``separator``: Growler's, as the client's path has them)."""
    parts = []
    for segment in spec_path.strip("/").split("/")[2:]:  # after "v1" and "{prefix}"
        if not (segment.startswith("{") and segment.endswith("}")):
            parts.append(segment)
        elif segment == "{namespace}":
            parts.append(remote_namespace(values["namespace"], route, separator))
        else:
            parts.append(quote(segment_of(values[segment[1:-1]]), safe=""))
    return "/".join(parts)


def remote_namespace(raw: str, route: Route, separator: str) -> str:
    return remote_levels(parse_namespace(raw, separator), route)


def remote_levels(levels: Namespace, route: Route) -> str:
    return route.separator.join(quote(segment_of(level), safe="") for level in levels)


def remote_query(query: bytes, route: Route, separator: str) -> str:
    pairs = []
    for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        encoded = remote_namespace(value, route, separator) if key == "parent" and value else quote(value, safe="")
        pairs.append(f"{quote(key, safe='')}={encoded}")
    return "&".join(pairs)


def answered_table(operation_id: str, values: dict[str, str], request: Any, separator: str) -> tuple[Namespace, str]:
    """The table a load-shaped answer is for: the path's (loadTable), or the name the create's or
    register's body gives."""
    namespace = parse_namespace(values["namespace"], separator)
    if operation_id == "loadTable":
        return namespace, values["table"]
    name = request.get("name") if isinstance(request, dict) else None
    return namespace, str(name or "")


def guarded_action(operation_id: str, values: dict[str, str], namespace: Namespace, name: str | None) -> str:
    """``drop table a.t`` / ``rename table a.t``: the refusal's words, as a native one's."""
    kind = operation_id.removeprefix("rename").removeprefix("drop").lower()
    verb = "rename" if operation_id.startswith("rename") else "drop"
    if not namespace:  # a rename without a readable source
        return f"{verb} a {kind} in warehouse {values['prefix']}"
    return f"{verb} {kind} {'.'.join((*namespace, *([name] if name else [])))}"


def segment_of(value: str) -> str:
    """A name as one path segment of the remote's URL. "." and ".." are refused: an HTTP client or
    server removes them as dot segments, and the request would reach another route than the one
    authorized (a dropTable of ".." would drop its namespace)."""
    if value in (".", ".."):
        raise BadRequest(f"{value!r} cannot be a name in a federated warehouse")
    return value


def json_body(body: bytes | None) -> Any:
    """The client's JSON body (validated already by the dispatcher), for the write's events."""
    try:
        return json.loads(body) if body else None
    except ValueError:
        return None


def header(headers: dict[bytes, list[bytes]], name: bytes) -> str | None:
    found = headers.get(name)
    return found[0].decode("latin-1") if found else None
