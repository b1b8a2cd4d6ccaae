"""The change feed's events, as the services describe their changes (issue 36).

Each service builds the events of a change here and hands them to the storage method that makes
the change, which writes them in its own transaction (storage/events.py): nothing committed
without its event, no event without its commit. The operation objects follow the events
endpoint proposed for the REST spec (apache/iceberg pull request 12584; openapi/events.yaml):
``operation-type`` and the fields of that type, the object by ``identifier`` (tables, views) or
``namespace``, and its uuid. Growler adds, for commits, the metadata location before and after
(``metadata-location``, ``previous-metadata-location``); what the proposal has no type for
(the recycle bin's undrop, expiry and purge, management changes) is a ``custom`` operation with an ``x-`` custom type.

All the events of one request share its request id (the ``X-Request-ID`` the edge set, or a
fresh one outside a request) and carry how many there are (``request-event-count``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.ground.callers import current_principal
from app.ground.events import request_id_var
from storage.events import MANAGEMENT_STREAM, ChangeEvent

NAMESPACE, TABLE, VIEW = "namespace", "table", "view"


@dataclass(frozen=True)
class Change:
    """One change of a request, before it becomes an event."""

    operation_type: str
    object_type: str
    operation: dict[str, Any]
    namespace: tuple[str, ...] | None = None
    name: str | None = None
    uuid: str | None = None


def actor() -> dict[str, Any] | None:
    """Who made the change: the authenticated principal (None without authentication)."""
    principal = current_principal.get()
    if principal is None:
        return None
    return {"principal": principal.name, "source": principal.source}


def events_of(stream: int, changes: Sequence[Change]) -> list[ChangeEvent]:
    """The events of one request's changes: one request id, the count, fresh event ids."""
    request_id = request_id_var.get() or uuid.uuid4().hex
    who = actor()
    return [
        ChangeEvent(
            stream=stream,
            event_id=str(uuid.uuid4()),
            request_id=request_id,
            request_event_count=len(changes),
            operation_type=change.operation_type,
            object_type=change.object_type,
            operation={"operation-type": change.operation_type, **change.operation},
            namespace=change.namespace,
            name=change.name,
            uuid=change.uuid,
            actor=who,
        )
        for change in changes
    ]


def identifier(namespace: tuple[str, ...], name: str) -> dict[str, Any]:
    return {"namespace": list(namespace), "name": name}


# -- namespaces ---------------------------------------------------------------------------


def namespace_change(operation_type: str, namespace: tuple[str, ...], **fields: Any) -> Change:
    return Change(operation_type, NAMESPACE, {"namespace": list(namespace), **fields}, namespace)


# -- tables and views ---------------------------------------------------------------------


def entry_change(
    operation_type: str, kind: str, namespace: tuple[str, ...], name: str, entry_uuid: str, **fields: Any
) -> Change:
    """An event about a table or view: its identifier and uuid (``table-uuid`` / ``view-uuid``)."""
    operation = {"identifier": identifier(namespace, name), f"{kind}-uuid": entry_uuid, **fields}
    return Change(operation_type, kind, operation, namespace, name, entry_uuid)


def created(kind: str, namespace: tuple[str, ...], name: str, entry_uuid: str, metadata: dict[str, Any]) -> Change:
    """create-table/create-view: the updates that build the first version from nothing, as a
    client's create transaction sends them (the proposal's ``updates``)."""
    updates: list[dict[str, Any]] = [{"action": "assign-uuid", "uuid": entry_uuid}]
    if metadata.get("location"):
        updates.append({"action": "set-location", "location": metadata["location"]})
    for schema in metadata.get("schemas", []):
        updates.append({"action": "add-schema", "schema": schema})
    if metadata.get("properties"):
        updates.append({"action": "set-properties", "updates": metadata["properties"]})
    return entry_change(f"create-{kind}", kind, namespace, name, entry_uuid, updates=updates)


def committed(
    kind: str,
    namespace: tuple[str, ...],
    name: str,
    entry_uuid: str,
    requirements: list[dict[str, Any]],
    updates: list[dict[str, Any]],
    previous: str | None,
    current: str,
) -> Change:
    """update-table/update-view: the request's updates and requirements, and where the
    metadata was before and is now."""
    return entry_change(
        f"update-{kind}",
        kind,
        namespace,
        name,
        entry_uuid,
        updates=updates,
        requirements=requirements,
        **{"metadata-location": current, "previous-metadata-location": previous},
    )


def renamed(kind: str, source: tuple[tuple[str, ...], str], destination: tuple[tuple[str, ...], str]) -> Any:
    """rename-table/rename-view, once the uuid is known (in the renaming transaction)."""

    def change(entry_uuid: str) -> Change:
        operation = {
            f"{kind}-uuid": entry_uuid,
            "source": identifier(*source),
            "destination": identifier(*destination),
        }
        return Change(f"rename-{kind}", kind, operation, source[0], source[1], entry_uuid)

    return change


# -- the recycle bin (issue 35) -------------------------------------------------------------


def bin_change(
    action: str, kind: str, namespace: tuple[str, ...], name: str | None, entry_uuid: str | None, **fields: Any
) -> Change:
    """An undrop, expiry or purge of a recycle-bin unit (a table, a view or a namespace with
    everything under it): a custom operation ``x-<action>-<kind>``, the proposal having no type.

    A table's or view's carries its uuid (``table-uuid`` / ``view-uuid``) like its drop did: after
    a take-over one name has had two entries, and a reader tells by the uuid which one came back
    or went (the uuid is also what a table's timeline is read by)."""
    where = {"identifier": identifier(namespace, name)} if name is not None else {"namespace": list(namespace)}
    if entry_uuid is not None and kind in ("table", "view"):
        where[f"{kind}-uuid"] = entry_uuid
    operation = {"custom-type": f"x-{action}-{kind}", **where, **fields}
    return Change("custom", kind, operation, namespace, name, entry_uuid if kind in ("table", "view") else None)


# -- management ---------------------------------------------------------------------------


def management_events(custom_type: str, properties: dict[str, Any]) -> list[ChangeEvent]:
    """A management change (principals, roles, grants, warehouses, protection): a custom
    operation on the installation's stream, with what changed (never a secret)."""
    change = Change("custom", "catalog", {"custom-type": custom_type, "properties": properties})
    return events_of(MANAGEMENT_STREAM, [change])
