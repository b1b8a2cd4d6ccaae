"""loadTable parsed once, and table and view answers rendered once, into bytes and headers.

Both ways to loadTable - on the event loop in front of connexion (``app.edge.loop_reads``) and the
handler behind it - call
``parse_load_table`` on what they took from the request and ``render_table`` on what the service
answered, so they cannot disagree (the equivalence tests compare their bytes). The bodies are
assembled around the stored metadata text without parsing it. Nothing here knows the transport:
a ``Rendered`` is what a handler returns and what the dispatcher sends (``app.edge.dispatch``).

``HttpRequest`` is the other way: what a handler may read of the request besides its declared
parameters (headers the yaml does not pass, the raw body for the idempotency fingerprint), given
to the handlers that name an ``http`` parameter - no framework request object, no request context.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from app.rules.identifiers import parse_namespace, table_name
from app.rules.table.answers import LoadedTable, NotModified
from app.storage_access.delegation import Delegation, remote_signing_config
from app.tables.loading import LoadTableRequest
from app.views.service import LoadedView

JSON = "application/json"


@dataclass(frozen=True)
class Rendered:
    """Status, body and headers; ``Content-Type`` is among the headers when there is a body."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def no_content() -> Rendered:
    """204 with no body and no content type."""
    return Rendered(204)


def render_result(result: Any, serialize: Callable[[Any], str]) -> Rendered:
    """A handler's answer as the response to send: a ``Rendered`` as it is; a table or a view as
    the service answered it (``render_table``, ``render_view``); a ``(data, status[, headers])``
    tuple or a bare value (status 200) as JSON, serialised with the app's ``serialize``
    (connexion's Jsonifier, compact); a None body stays empty."""
    if isinstance(result, Rendered):
        return result
    if isinstance(result, (LoadedTable, NotModified)):
        return render_table(result)
    if isinstance(result, LoadedView):
        return render_view(result)
    data, status, extra = (*result, {})[:3] if isinstance(result, tuple) else (result, 200, {})
    body = serialize(data).encode() if data is not None else b""
    return Rendered(status, body, {"Content-Type": JSON, **extra})


def takes(handler: Callable[..., Any] | None, parameter: str) -> bool:
    """Whether a handler (or a decorator around it, ``functools.wraps``'s chain) names
    ``parameter``: the dispatcher passes ``http`` (the ``HttpRequest``) and ``services`` (the one
    ``Services``) to the handlers that name them."""
    while handler is not None:
        code = getattr(handler, "__code__", None)
        if code is not None and parameter in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]:
            return True
        handler = getattr(handler, "__wrapped__", None)
    return False


@dataclass(frozen=True)
class HttpRequest:
    """The request as a handler may read it: method, decoded path, raw query, headers (names in
    lower case, as ASGI carries them) and the body's bytes."""

    method: str
    path: str
    query: bytes = b""
    headers: dict[bytes, list[bytes]] = field(default_factory=dict)
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of a header, or None."""
        values = self.headers.get(name.lower().encode("latin-1"))
        return values[0].decode("latin-1") if values else None

    def header_values(self, name: str) -> list[str]:
        """Every value of a header, in the order sent."""
        return [value.decode("latin-1") for value in self.headers.get(name.lower().encode("latin-1"), ())]

    def query_pairs(self) -> list[tuple[str, str]]:
        """The query's key-value pairs in order, repeated keys kept (as Flask's ``args.items(multi=True)``)."""
        return parse_qsl(
            self.query.decode("utf-8", "replace"), keep_blank_values=True, encoding="utf-8", errors="replace"
        )


def parse_load_table(
    prefix: str,
    namespace: str,
    table: str,
    *,
    snapshots: str | None,
    delegation: str | None,
    if_none_match: str | None,
    separator: str,
    referenced_by: str | None = None,
) -> LoadTableRequest:
    """The service's loadTable request from the path segments, ``snapshots`` and the headers."""
    return LoadTableRequest(
        prefix,
        parse_namespace(namespace, separator),
        table_name(table),
        snapshots=snapshots,
        delegation=Delegation.parse(delegation),
        if_none_match=if_none_match,
        referenced_by=referenced_by,
    )


def render_table(answer: LoadedTable | NotModified) -> Rendered:
    """loadTable's 200 (LoadTableResult, with its ETag) or 304; also createTable, registerTable, updateTable.

    The stored document goes into the body as it is, encoded once: it is most of the body (1.4 MB
    at 4,000 snapshots), and every further copy of it showed in a commit's profile.
    """
    if isinstance(answer, NotModified):
        return Rendered(304, b"", {"ETag": answer.etag})
    head = "{"
    if answer.metadata_location is not None:
        head += f'"metadata-location":{json.dumps(answer.metadata_location)},'
    tail = f',"config":{json.dumps(answer.config)}'
    if answer.credentials:
        tail += f',"storage-credentials":{json.dumps(answer.credentials)}'
    signing = remote_signing_config(answer.config)
    if signing is not None:
        tail += f',"remote-signing-config":{json.dumps(signing)}'
    if answer.read_restrictions:  # a trusted engine's (docs/read-restrictions.md)
        tail += f',"read-restrictions":{json.dumps(answer.read_restrictions)}'
    headers = {"Content-Type": JSON}
    if answer.etag:
        headers["ETag"] = answer.etag
    body = b"".join((f'{head}"metadata":'.encode(), answer.metadata.encode(), f"{tail}}}".encode()))
    return Rendered(200, body, headers)


def render_unregistered(answer: LoadedTable) -> Rendered:
    """The UnregisterTableResult: the location and the stored metadata text."""
    body = f'{{"metadata-location":{json.dumps(answer.metadata_location)},"metadata":{answer.metadata}}}'
    return Rendered(200, body.encode(), {"Content-Type": JSON})


def render_view(answer: LoadedView) -> Rendered:
    """The LoadViewResult (loadView, createView, registerView, replaceView)."""
    body = (
        f'{{"metadata-location":{json.dumps(answer.metadata_location)},'
        f'"metadata":{answer.metadata},"config":{json.dumps(answer.config)}}}'
    )
    return Rendered(200, body.encode(), {"Content-Type": JSON})
