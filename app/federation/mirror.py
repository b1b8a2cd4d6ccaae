"""The remote's change feed mirrored into Growler's (issue 50, docs/federation.md "The change feed").

Where a federated warehouse's remote serves the events endpoint (``POST /v1/{prefix}/events``, as
Growler does; the proposal of apache/iceberg pull request 12584), the housekeeping thread reads it
a page at a time and records, on the warehouse's own stream, every change made **behind Growler's
back**: the remote's event as it is (operation, identifier, uuid, updates), with a fresh event id
and the actor ``{"source": "remote-catalog", "remote-event-id": ...}``.

- **Once, none skipped**: a page's events and the cursor's move are one transaction on the
  warehouse's locked cursor row (storage/federated_events.py); one worker of the fleet mirrors a
  warehouse at a time.
- **Not twice for Growler's own writes**: a write through Growler is recorded by Growler when the
  remote answers (app/federation/changes.py), and Growler sends the remote its request id
  (``X-Request-Id``); the remote's events of that request carry it and are passed over.
- **Instead of finding changes at load**: in a mirrored warehouse a load does not compare versions
  (app/federation/versions.py): the mirror records each change exactly, where the load would have
  recorded several commits as one. The mirror moves the versions a load would compare with, so if
  the remote stops serving events the loads pick up from there.
- **Where it starts**: at the remote's head when first mirrored (no history is replayed). A
  continuation token the remote no longer knows (410: older than its retention) starts again at
  its head, the gap logged and counted (``growler_federation_mirror_gaps_total``).
- **A remote without the endpoint** (404, 405, 406, 501, or a 400 naming the operation) is asked
  again every ``UNSERVED_RETRY_S``; loads find its changes meanwhile. Failures (unreachable, 5xx,
  garbage) are retried after ``FAILED_RETRY_S``, under the remote's circuit breaker.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.federation.remote import RemoteCatalog
from app.ground import metrics
from app.ground.errors import CatalogError
from storage.events import ChangeEvent
from storage.federated_events import MirrorClaim, MirrorCursors
from storage.federated_versions import Table

log = logging.getLogger(__name__)

PAGE_SIZE = 100  # events asked for per request to the remote
PAGES_PER_ROUND = 20  # pages mirrored per warehouse per housekeeping round, at most
WAREHOUSES_PER_ROUND = 50
FAILED_RETRY_S = 30.0
UNSERVED_RETRY_S = 600.0
# Growler's own writes are found among the events recorded this long before the remote's event
# (the two are recorded moments apart; the margin covers the two hosts' clocks).
OWN_WRITE_WINDOW = timedelta(hours=1)
MAX_EVENT_BYTES = 1024 * 1024  # a remote event larger than this is passed over (logged)
UNSERVED = frozenset({404, 405, 406, 501})
KINDS = {"table": "table", "view": "view", "namespace": "namespace"}


@dataclass(frozen=True)
class MirroredPage:
    events: list[ChangeEvent]
    versions: list[tuple[Table, str]]  # the tables' metadata locations the events moved
    skipped: int  # malformed or oversized events passed over


def mirrored_event(stream: int, remote_event: Any) -> tuple[ChangeEvent, tuple[Table, str] | None] | None:
    """One remote event as Growler's feed records it (None: not an event Growler can record), and
    the table version it moved. Pure."""
    if not isinstance(remote_event, dict):
        return None
    operation = remote_event.get("operation")
    if not isinstance(operation, dict) or len(json.dumps(remote_event)) > MAX_EVENT_BYTES:
        return None
    operation_type = operation.get("operation-type")
    if not isinstance(operation_type, str) or operation_type == "custom":
        return None
    kind = KINDS.get(operation_type.rsplit("-", 1)[-1])
    if kind is None:
        return None
    namespace, name = _located(kind, operation)
    if namespace is None:
        return None
    object_uuid = operation.get(f"{kind}-uuid") if kind != "namespace" else None
    event = ChangeEvent(
        stream=stream,
        event_id=str(uuid.uuid4()),
        request_id=str(remote_event.get("request-id") or uuid.uuid4().hex)[:200],
        request_event_count=_count(remote_event.get("request-event-count")),
        operation_type=operation_type,
        object_type=kind,
        operation=operation,
        namespace=namespace,
        name=name,
        uuid=object_uuid if isinstance(object_uuid, str) else None,
        actor={"source": "remote-catalog", "remote-event-id": str(remote_event.get("event-id") or "")[:200]},
    )
    location = operation.get("metadata-location")
    moved = None
    if kind == "table" and name is not None and isinstance(location, str) and location:
        if operation_type in ("create-table", "register-table", "update-table"):
            moved = ((namespace, name), location)
    return event, moved


def _located(kind: str, operation: dict[str, Any]) -> tuple[tuple[str, ...] | None, str | None]:
    """The namespace and name the event is about (a rename: where the object went)."""
    if kind == "namespace":
        levels = operation.get("namespace")
        return (tuple(levels), None) if _levels(levels) else (None, None)
    identifier = operation.get("destination") if operation.get("operation-type", "").startswith("rename") else None
    identifier = identifier or operation.get("identifier")
    if not isinstance(identifier, dict):
        return None, None
    levels, name = identifier.get("namespace"), identifier.get("name")
    if not _levels(levels) or not isinstance(name, str) or not name:
        return None, None
    return tuple(levels), name


def _levels(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(level, str) and level for level in value)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and 1 <= value <= 10_000 else 1


def mirrored_page(stream: int, remote_events: list[Any], own_requests: set[str]) -> MirroredPage:
    """A page's events as recorded: Growler's own writes passed over, malformed ones skipped. Pure."""
    events, versions, skipped = [], [], 0
    for remote_event in remote_events:
        found = mirrored_event(stream, remote_event)
        if found is None:
            skipped += 1
            continue
        event, moved = found
        if event.request_id in own_requests:
            continue
        events.append(event)
        if moved is not None:
            versions.append(moved)
    return MirroredPage(events, versions, skipped)


class MirroredWarehouses:
    """The federated warehouses whose remote's feed is mirrored, as this worker's last round found
    them: the mirror sets it, the loads read it (RemoteVersions: no version comparison there)."""

    def __init__(self) -> None:
        self._ids: frozenset[int] = frozenset()

    def found(self, ids: frozenset[int]) -> None:
        self._ids = ids

    def covers(self, warehouse_id: int) -> bool:
        return warehouse_id in self._ids


class EventMirror:
    def __init__(
        self,
        cursors: MirrorCursors,
        remote_of: Callable[[str], RemoteCatalog | None],
        mirrored: MirroredWarehouses,
    ) -> None:
        self.cursors = cursors
        self.remote_of = remote_of  # FederationService.remote_of: the warehouse's remote, as configured now
        self.mirrored = mirrored

    def run_due(self) -> int:
        """One housekeeping round: every due federated warehouse's new events; returns how many."""
        recorded, done = 0, []
        self.cursors.enrol()
        for _ in range(WAREHOUSES_PER_ROUND):
            with self.cursors.claim_next(done) as claim:
                if claim is None:
                    break
                done.append(claim.cursor.warehouse_id)
                recorded += self._mirror(claim)
        self.mirrored.found(self.cursors.mirrored())
        return recorded

    def _mirror(self, claim: MirrorClaim) -> int:
        cursor = claim.cursor
        try:
            remote = self.remote_of(cursor.warehouse)
        except CatalogError:
            remote = None
        if remote is None:
            claim.later(FAILED_RETRY_S)
            return 0
        token, recorded = cursor.continuation_token, 0
        for _ in range(PAGES_PER_ROUND):
            try:
                answer = self._page(remote, token)
            except CatalogError as exc:
                log.info("mirroring warehouse %s: %s", cursor.warehouse, exc)
                claim.later(FAILED_RETRY_S)
                return recorded
            if answer is None:  # the remote serves no events endpoint
                claim.later(UNSERVED_RETRY_S, served=False)
                return recorded
            status, data = answer
            if status == 410 and token is not None:
                log.warning(
                    "mirroring warehouse %s: the remote forgot where the mirror stood; from its head on",
                    cursor.warehouse,
                )
                metrics.FEDERATION_MIRROR_GAPS.inc()
                token = None
                continue
            next_token = data.get("continuation-token") if isinstance(data, dict) else None
            events = data.get("events") if isinstance(data, dict) else None
            if status != 200 or not isinstance(next_token, str) or not isinstance(events, list):
                log.info("mirroring warehouse %s: the remote answered %s", cursor.warehouse, status)
                claim.later(FAILED_RETRY_S)
                return recorded
            request_ids = [str(event.get("request-id")) for event in events if isinstance(event, dict)]
            own = claim.recorded_requests(request_ids, datetime.now(UTC) - OWN_WRITE_WINDOW)
            page = mirrored_page(cursor.warehouse_id, events, own)
            if page.skipped:
                log.warning("mirroring warehouse %s: %d malformed events passed over", cursor.warehouse, page.skipped)
            claim.advance(page.events, page.versions, next_token)
            recorded += len(page.events)
            if not events:
                return recorded
            token = next_token
        return recorded

    def _page(self, remote: RemoteCatalog, token: str | None) -> tuple[int, Any] | None:
        """The remote's next page after ``token`` (None: from now on), or None if it has no feed."""
        body: dict[str, Any] = {"page-size": PAGE_SIZE}
        if token is not None:
            body["continuation-token"] = token
        else:
            body["since-timestamp-ms"] = int(time.time() * 1000)
        answer = remote.send("POST", "events", "", {"content-type": "application/json"}, json.dumps(body).encode())
        if answer.status in UNSERVED or (answer.status == 400 and "events" in json.dumps(answer.data)[:2000].lower()):
            return None
        return answer.status, answer.data
