"""Changes made behind Growler's back, found when loaded (issue 50, docs/federation.md "The change
feed"): what Growler last saw of each table of a federated warehouse (storage/federated_versions.py)
against what a load answers.

A write through Growler records its events and moves the table's version in one transaction (a
commit's own new version is never taken for an outside change); a load that answers another
metadata location than the one seen records an ``update-table`` event for it - no updates or
requirements (Growler did not see them), the previous and the new metadata location, the actor
``{"source": "remote-catalog"}`` - once, whichever worker loads it first. A worker remembers what
it last confirmed, so a load of an unchanged table asks the database nothing.

Finding a change is the feed's, not the load's: if it cannot be recorded (the database down) the
load is answered all the same and the change is found at a later load (the version did not move).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from app.events import changes as change_events
from app.federation.changes import Namespace, identified
from app.federation.mirror import MirroredWarehouses
from app.ground.lru import LruCache
from storage.events import ChangeEvent
from storage.federated_versions import FederatedVersions, Table

log = logging.getLogger(__name__)

SEEN_PER_WORKER = 10_000  # tables whose last confirmed version a worker keeps
OUTSIDE = {"source": "remote-catalog"}


def versions_written(
    operation_id: str, namespace: Namespace | None, name: str | None, request: Any, answer: Any
) -> tuple[list[tuple[Table, str]], list[Table]]:
    """What a successful write through Growler did to the tables' versions: the versions it made
    (its answer's metadata location) and the tables it changed without saying to what."""
    body = request if isinstance(request, dict) else {}
    location = answer.get("metadata-location") if isinstance(answer, dict) else None
    made = isinstance(location, str) and bool(location)
    table: Table | None = None
    if operation_id in ("createTable", "registerTable") and namespace is not None:
        table = (namespace, str(body.get("name")))
    elif operation_id in ("updateTable", "dropTable") and namespace is not None and name is not None:
        table = (namespace, name)
    if table is not None:
        return ([(table, location)], []) if made and operation_id != "dropTable" else ([], [table])
    if operation_id == "renameTable":
        found = [identified(body.get(end)) for end in ("source", "destination")]
        return [], [table for table in found if table is not None]
    if operation_id == "commitTransaction":
        changes = body.get("table-changes") or ()
        found = [identified(change.get("identifier")) for change in changes if isinstance(change, dict)]
        return [], [table for table in found if table is not None]
    return [], []


def outside_change(stream: int, table: Table, table_uuid: str | None, previous: str, current: str) -> list[ChangeEvent]:
    namespace, name = table
    change = change_events.committed("table", namespace, name, table_uuid, [], [], previous, current)
    return [replace(event, actor=OUTSIDE) for event in change_events.events_of(stream, [change])]


class RemoteVersions:
    def __init__(self, rows: FederatedVersions, mirrored: MirroredWarehouses) -> None:
        self.rows = rows
        self.mirrored = mirrored  # warehouses whose changes the mirror records (app/federation/mirror.py)
        self._seen: LruCache[tuple[int, Table], str] = LruCache(SEEN_PER_WORKER)

    def loaded(self, warehouse_id: int, table: Table, answer: Any) -> None:
        """A loadTable's answer: an outside change recorded if it is one."""
        location = answer.get("metadata-location") if isinstance(answer, dict) else None
        if not isinstance(location, str) or not location or self._seen.get((warehouse_id, table)) == location:
            return
        metadata = answer.get("metadata")
        table_uuid = metadata.get("table-uuid") if isinstance(metadata, dict) else None
        try:
            if self.mirrored.covers(warehouse_id):  # the mirror records each change, exactly
                self.rows.remember(warehouse_id, table, location)  # a version for kept answers' checks
            else:
                self.rows.observe(
                    warehouse_id,
                    table,
                    location,
                    lambda previous: outside_change(warehouse_id, table, table_uuid, previous, location),
                )
        except Exception as exc:  # noqa: BLE001 - the load is answered; a later load finds the change
            log.warning("cannot compare a federated table's version: %s", type(exc).__name__)
            return
        self._seen.put((warehouse_id, table), location)

    def current(self, warehouse_id: int, table: Table, metadata_location: str | None) -> bool:
        """Whether ``metadata_location`` is the table's version as the catalog records it: what every
        write through Growler moves before its client hears of it (a kept answer's check,
        app/federation/cache.py). False when none is recorded or it cannot be read."""
        if metadata_location is None:
            return False
        try:
            return self.rows.holds(warehouse_id, table, metadata_location)
        except Exception as exc:  # noqa: BLE001 - the remote is asked instead
            log.warning("cannot read a federated table's version: %s", type(exc).__name__)
            return False

    def written(
        self,
        warehouse_id: int,
        events: list[ChangeEvent],
        operation_id: str,
        namespace: Namespace | None,
        name: str | None,
        request: Any,
        answer: Any,
    ) -> None:
        """A write through Growler: its events and the versions it moved, in one transaction."""
        now_at, forget = versions_written(operation_id, namespace, name, request, answer)
        self.rows.write(warehouse_id, events, now_at, forget)
        for table, location in now_at:
            self._seen.put((warehouse_id, table), location)
        for table in forget:
            self._seen.put((warehouse_id, table), "")  # no location is empty: the next load asks
