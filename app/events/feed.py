"""The change feed's read side: ``POST /v1/{prefix}/events`` (openapi/events.yaml), and retention.

A caller reads the warehouse's events in position order (commit order, storage/events.py) after
the position its continuation token stands at. The token is the position, sealed like every page
token (app/ground/page_tokens.py) for this warehouse's feed: the caller can neither read nor
forge it, and it stays valid whatever filters the next request sends. Every answer carries one,
so a client polls by sending back what it got: an empty page leaves it where the feed ends.

Per object: a caller sees the events of what it may read - READ on the table or view (either
name of a rename), any grant on, under or above a namespace for namespace events - decided from
the worker's cached grants (no query per event). A page is filled from several batches when
filters or grants hide events, up to ``MAX_BATCHES``; the token then stands where the scan got
to, so a short page never means the end and hidden events are never counted.

Retention: housekeeping deletes events older than ``GROWLER_EVENTS_RETENTION_S`` and records per
warehouse how far it went; a token before that is 410 (the events after it may be gone), and the
client must start again without one.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from app.authorization import Authorizer
from app.ground.errors import BadRequest, Gone
from app.ground.page_tokens import PageTokens, scope
from app.ground.settings import Settings
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.privileges import Kind, Privilege, Securable
from app.rules.requests.events import QueryEventsRequest
from storage.events import EventQuery, EventRows, StoredEvent

DEFAULT_PAGE_SIZE = 100
MAX_BATCHES = 10  # fetches one request makes at most to fill a page the caller's grants thin out


@dataclass(frozen=True)
class EventsPage:
    events: list[dict[str, Any]]
    continuation_token: str


def rendered(event: StoredEvent) -> dict[str, Any]:
    """An event as the proposal's ``Event`` object."""
    body: dict[str, Any] = {
        "event-id": event.event_id,
        "request-id": event.request_id,
        "request-event-count": event.request_event_count,
        "timestamp-ms": int(event.created_at.timestamp() * 1000),
        "operation": event.operation,
    }
    if event.actor is not None:
        body["actor"] = event.actor
    return body


class EventFeed:
    def __init__(
        self,
        settings: Settings,
        rows: EventRows,
        warehouses: WarehouseDirectory,
        *,
        authorizer: Authorizer,
        page_tokens: PageTokens,
    ) -> None:
        self.settings = settings
        self.rows = rows
        self.warehouses = warehouses
        self.authorizer = authorizer
        self.page_tokens = page_tokens

    def query(self, prefix: str, request: QueryEventsRequest) -> EventsPage:
        found, token = self.read(prefix, request)
        return EventsPage([rendered(event) for event in found], token)

    def read(self, prefix: str, request: QueryEventsRequest) -> tuple[list[StoredEvent], str]:
        """A page of the events the caller may read, as stored, and its continuation token: the
        endpoint renders them, the console's events page shows them (one reading for both)."""
        warehouse = self.warehouses.get(prefix)
        if request.custom_filters:
            raise BadRequest("custom-filters are not supported by this catalog")
        listing = scope("queryEvents", warehouse.name)
        token = request.continuation_token
        after = self._position(listing, token)
        if token and after < self.rows.pruned_through(warehouse.id):
            raise Gone("The continuation token is older than the event retention; start again without one")
        size = min(request.page_size or DEFAULT_PAGE_SIZE, self.settings.max_page_size)
        since = request.since_timestamp_ms
        base = EventQuery(
            stream=warehouse.id,
            after=after,
            limit=size,
            since=datetime.fromtimestamp(since / 1000, UTC) if since is not None else None,
            operation_types=request.operation_types,
            object_types=request.object_types,
            uuids=request.catalog_objects_by_uuid,
            name_prefixes=request.catalog_objects_by_name,
        )
        found: list[StoredEvent] = []
        for _ in range(MAX_BATCHES):
            wanted = size - len(found)
            batch, covered = self.rows.read(replace(base, after=after, limit=wanted))
            found += self.visible(prefix, batch)
            after = covered
            if len(batch) < wanted or len(found) >= size:
                break
        return found, self.page_tokens.seal(listing, [str(after)])

    def timeline(self, prefix: str, object_uuid: str, limit: int) -> list[StoredEvent]:
        """A table's or view's newest events, newest first (the console's timeline), filtered by
        what the caller may read like every page of the feed; the caller passed ``queryEvents``."""
        warehouse = self.warehouses.get(prefix)
        found = self.rows.latest_of(warehouse.id, object_uuid, min(limit, self.settings.max_page_size))
        return self.visible(prefix, found)

    def _position(self, listing: bytes, token: str | None) -> int:
        if not token:
            return 0
        key = self.page_tokens.open(listing, token)
        if not (isinstance(key, list) and len(key) == 1 and key[0].isdigit()):  # sealed by us: never
            raise BadRequest("Invalid continuation-token")
        return int(key[0])

    def visible(self, prefix: str, events: list[StoredEvent]) -> list[StoredEvent]:
        """The events about what the caller may read (decided on its cached grants)."""
        if self.authorizer.repository is None or self.authorizer.grants().admin:
            return events
        return [event for event in events if any(self._readable(prefix, event))]

    def _readable(self, prefix: str, event: StoredEvent) -> list[bool]:
        namespace = tuple(event.namespace or ())
        if event.object_type == "namespace":
            return [self.authorizer.sees(Securable.of_namespace(prefix, namespace))]
        if event.object_type not in ("table", "view") or event.name is None:
            return [False]  # management events are not served here
        kind = Kind(event.object_type)
        names = [(namespace, event.name)]
        destination = event.operation.get("destination")
        if isinstance(destination, dict):  # a rename: readable under either name
            names.append((tuple(destination.get("namespace") or ()), str(destination.get("name"))))
        return [self._may_read(Securable.of_entry(kind, prefix, ns, name)) for ns, name in names]

    def _may_read(self, entry: Securable) -> bool:
        """READ on the entry, and for a table the right to its metadata: an event carries what
        loadTable would (snapshots with their summaries, schemas, properties), which a caller
        restricted on the table reads only as a trusted engine (docs/read-restrictions.md)."""
        grants = self.authorizer.grants()
        if not grants.holds(Privilege.READ, entry):
            return False
        return entry.kind is not Kind.TABLE or grants.trusted_engine or grants.restrictions_on(entry) is None
