"""loadTable parsed once, and table and view answers rendered once, into bytes and headers.

Both ways to loadTable - on the event loop in front of connexion (``app.edge.loop_reads``) and the
handler behind it - call
``parse_load_table`` on what they took from the request and ``render_table`` on what the service
answered, so they cannot disagree (the equivalence tests compare their bytes). The bodies are
assembled around the stored metadata text without parsing it. Nothing here knows the transport:
a ``Rendered`` becomes a Flask response in the handlers and ASGI messages in front of connexion.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from app.rules.identifiers import check_name, parse_namespace
from app.storage_access.delegation import Delegation, remote_signing_config
from app.tables.service import LoadedTable, LoadTableRequest, NotModified
from app.views.service import LoadedView

JSON = "application/json"


@dataclass(frozen=True)
class Rendered:
    """Status, body and headers; ``Content-Type`` is among the headers when there is a body."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def table_name(raw: str) -> str:
    """The table name from the path, held to the rules of created names (a NUL must not reach the database)."""
    return check_name(raw, "table name")


def view_name(raw: str) -> str:
    """The view name from the path, held to the rules of created names."""
    return check_name(raw, "view name")


def parse_load_table(
    prefix: str,
    namespace: str,
    table: str,
    *,
    snapshots: str | None,
    delegation: str | None,
    if_none_match: str | None,
    separator: str,
) -> LoadTableRequest:
    """The service's loadTable request from the path segments, ``snapshots`` and the headers."""
    return LoadTableRequest(
        prefix,
        parse_namespace(namespace, separator),
        table_name(table),
        snapshots=snapshots,
        delegation=Delegation.parse(delegation),
        if_none_match=if_none_match,
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
