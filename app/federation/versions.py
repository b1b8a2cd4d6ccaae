"""Changes made behind Growler's back, found when loaded (issue 50, docs/federation.md "The change
feed"): what Growler last saw of each table and view of a federated warehouse
(storage/federated_versions.py) against what a loadTable or loadView answers.

A write through Growler records its events and moves the table's version in one transaction (a
commit's own new version is never taken for an outside change); a load that answers another
metadata location than the one seen records an ``update-table`` (``update-view``) event for it - no updates or
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
from app.federation.changes import Namespace, identified, kind_of
from app.federation.mirror import MirroredWarehouses
from app.ground.lru import LruCache
from storage.events import ChangeEvent
from storage.federated_versions import FederatedVersions, Table

log = logging.getLogger(__name__)

SEEN_PER_WORKER = 10_000  # tables whose last confirmed version a worker keeps
OUTSIDE = {"source": "remote-catalog"}


def versions_written(
    operation_id: str, namespace: Namespace | None, name: str | None, request: Any, answer: Any
) -> tuple[list[tuple[str, Table, str]], list[tuple[str, Table]]]:
    """What a successful write through Growler did to the tables' and views' versions: the
    versions it made (kind, entry, its answer's metadata location) and the entries it changed
    without saying to what (kind, entry)."""
    body = request if isinstance(request, dict) else {}
    location = answer.get("metadata-location") if isinstance(answer, dict) else None
    made = isinstance(location, str) and bool(location)
    kind = kind_of(operation_id)
    entry: Table | None = None
    if operation_id in ("createTable", "registerTable", "createView", "registerView") and namespace is not None:
        entry = (namespace, str(body.get("name")))
    elif operation_id in _NAMED_WRITES and namespace is not None and name is not None:
        entry = (namespace, name)
    if entry is not None:
        dropped = operation_id.startswith("drop")
        return ([(kind, entry, location)], []) if made and not dropped else ([], [(kind, entry)])
    if operation_id in ("renameTable", "renameView"):
        found = [identified(body.get(end)) for end in ("source", "destination")]
        return [], [(kind, entry) for entry in found if entry is not None]
    if operation_id == "commitTransaction":
        changes = body.get("table-changes") or ()
        found = [identified(change.get("identifier")) for change in changes if isinstance(change, dict)]
        return [], [("table", entry) for entry in found if entry is not None]
    return [], []


# Writes that name their entry in the path.
_NAMED_WRITES = frozenset({"updateTable", "dropTable", "replaceView", "dropView"})


def outside_change(
    stream: int, table: Table, entry_uuid: str | None, previous: str, current: str, kind: str = "table"
) -> list[ChangeEvent]:
    namespace, name = table
    change = change_events.committed(kind, namespace, name, entry_uuid, [], [], previous, current)
    return [replace(event, actor=OUTSIDE) for event in change_events.events_of(stream, [change])]


class RemoteVersions:
    def __init__(self, rows: FederatedVersions, mirrored: MirroredWarehouses) -> None:
        self.rows = rows
        self.mirrored = mirrored  # warehouses whose changes the mirror records (app/federation/mirror.py)
        self._seen: LruCache[tuple[int, str, Table], str] = LruCache(SEEN_PER_WORKER)  # (warehouse, kind, entry)

    def loaded(self, warehouse_id: int, table: Table, answer: Any, kind: str = "table") -> None:
        """A loadTable's (or, ``kind`` view, a loadView's) answer: an outside change recorded if it is one."""
        location = answer.get("metadata-location") if isinstance(answer, dict) else None
        if not isinstance(location, str) or not location or self._seen.get((warehouse_id, kind, table)) == location:
            return
        metadata = answer.get("metadata")
        entry_uuid = metadata.get(f"{kind}-uuid") if isinstance(metadata, dict) else None
        try:
            if self.mirrored.covers(warehouse_id):  # the mirror records each change, exactly
                self.rows.remember(warehouse_id, table, location, kind)  # a version for kept answers' checks
            else:
                self.rows.observe(
                    warehouse_id,
                    table,
                    location,
                    lambda previous: outside_change(warehouse_id, table, entry_uuid, previous, location, kind),
                    kind,
                )
        except Exception as exc:  # noqa: BLE001 - the load is answered; a later load finds the change
            log.warning("cannot compare a federated %s's version: %s", kind, type(exc).__name__)
            return
        self._seen.put((warehouse_id, kind, table), location)

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
        for kind, entry, location in now_at:
            self._seen.put((warehouse_id, kind, entry), location)
        for kind, entry in forget:
            self._seen.put((warehouse_id, kind, entry), "")  # no location is empty: the next load asks
