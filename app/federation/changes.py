"""The change feed's record of a write made through Growler to a federated warehouse (issue 50,
docs/federation.md "The change feed"): the event types a native warehouse records, on the
federated warehouse's own stream, built from the request the client sent and the remote's answer.

Pure: the service hands in what it has. A table's or view's uuid comes from the remote's answer
(creates, registers, commits, replaces) or, for a drop or a rename, from a load the service asks
the remote for first (``needs_uuid``); a transaction's tables name theirs in an
``assert-table-uuid`` requirement when the client sent one (Java's and PyIceberg's do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.events import changes as change_events
from app.events.changes import Change

# Operations whose event names an entry's uuid the request and its answer do not carry.
NEEDS_UUID = frozenset({"dropTable", "renameTable", "dropView", "renameView"})
Namespace = tuple[str, ...]


def changes_of(
    operation_id: str,
    namespace: Namespace | None,
    name: str | None,
    body: Any,
    answer: Any,
    uuid_of: Callable[[str, Namespace, str], str | None],
) -> list[Change]:
    """The changes one successful write made (none for a staged create: nothing is committed).

    ``uuid_of(kind, namespace, name)``: the uuid the service learnt before the write (drops, renames)."""
    body = body if isinstance(body, dict) else {}
    answer = answer if isinstance(answer, dict) else {}
    if operation_id == "createNamespace":
        created = tuple(body.get("namespace") or ())
        properties = answer.get("properties") or body.get("properties") or {}
        return [change_events.namespace_change("create-namespace", created, properties=properties)]
    if operation_id == "dropNamespace" and namespace is not None:
        return [change_events.namespace_change("drop-namespace", namespace)]
    if operation_id == "updateProperties" and namespace is not None:
        summary = {key: list(answer.get(key) or ()) for key in ("updated", "removed", "missing")}
        return [change_events.namespace_change("update-namespace-properties", namespace, **summary)]
    if operation_id in ("createTable", "registerTable", "createView", "registerView"):
        return _created(operation_id, namespace, body, answer)
    if operation_id in ("updateTable", "replaceView") and namespace is not None and name is not None:
        return [_committed("table" if operation_id == "updateTable" else "view", namespace, name, body, answer)]
    if operation_id in ("dropTable", "dropView") and namespace is not None and name is not None:
        kind = kind_of(operation_id)
        return [change_events.entry_change(f"drop-{kind}", kind, namespace, name, uuid_of(kind, namespace, name))]
    if operation_id in ("renameTable", "renameView"):
        return _renamed(kind_of(operation_id), body, uuid_of)
    if operation_id == "commitTransaction":
        return [_transaction_change(change) for change in body.get("table-changes") or () if isinstance(change, dict)]
    return []


def kind_of(operation_id: str) -> str:
    """The kind of entry a table or view operation is about (``dropView``: a view)."""
    return "view" if operation_id.endswith("View") else "table"


def identified(body: Any) -> tuple[Namespace, str] | None:
    """A request body's identifier (a rename's source, a transaction's table)."""
    if not isinstance(body, dict) or not isinstance(body.get("name"), str):
        return None
    return tuple(body.get("namespace") or ()), body["name"]


def _created(operation_id: str, namespace: Namespace | None, body: dict, answer: dict) -> list[Change]:
    if namespace is None or body.get("stage-create") or not isinstance(answer.get("metadata"), dict):
        return []
    kind = kind_of(operation_id)
    metadata = answer["metadata"]
    entry_uuid = metadata.get(f"{kind}-uuid")
    change = change_events.created(kind, namespace, str(body.get("name")), entry_uuid, metadata)
    if operation_id == "registerTable":  # the proposal's own type; a registered view is created
        change = Change(
            "register-table", change.object_type, change.operation, change.namespace, change.name, change.uuid
        )
    return [change]


def _committed(kind: str, namespace: Namespace, name: str, body: dict, answer: dict) -> Change:
    metadata = answer.get("metadata") if isinstance(answer.get("metadata"), dict) else {}
    return change_events.committed(
        kind,
        namespace,
        name,
        metadata.get(f"{kind}-uuid"),
        list(body.get("requirements") or ()),
        list(body.get("updates") or ()),
        None,  # the remote's previous metadata location is not in its answer
        answer.get("metadata-location"),
    )


def _renamed(kind: str, body: dict, uuid_of: Callable[[str, Namespace, str], str | None]) -> list[Change]:
    source, destination = identified(body.get("source")), identified(body.get("destination"))
    if source is None or destination is None:
        return []
    return [change_events.renamed(kind, source, destination)(uuid_of(kind, *source))]


def _transaction_change(change: dict) -> Change:
    namespace, name = identified(change.get("identifier")) or ((), "")
    requirements = [req for req in change.get("requirements") or () if isinstance(req, dict)]
    entry_uuid = next((req.get("uuid") for req in requirements if req.get("type") == "assert-table-uuid"), None)
    updates = list(change.get("updates") or ())
    return change_events.committed("table", namespace, name, entry_uuid, requirements, updates, None, None)
