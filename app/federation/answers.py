"""A federated warehouse's remote answers, checked before they are passed on (docs/federation.md):
the remote's Iceberg errors keep their status, type and message; an answer that is not the spec's
shape is a 502 (and counts against the remote's breaker); listings are filtered by the caller's
grants (a principal sees what Growler allows, whatever the remote's credential reaches); a load's
``config`` and ``storage-credentials`` lose whatever belongs to Growler's own session with the
remote (``token``, ``credential``, or a value equal to Growler's credential).
"""

from __future__ import annotations

import json
from typing import Any

from app.authorization import Authorizer
from app.federation.remote import JSON, Answer, RemoteCatalog
from app.ground.errors import BadGateway, CatalogError, error_body
from app.rules.privileges import Kind, Securable

# Answered without a body (204) by the spec: a remote's 200 without one is taken too.
_NO_BODY = frozenset(
    {"dropNamespace", "dropTable", "dropView", "renameTable", "renameView", "commitTransaction", "reportMetrics"}
) | frozenset({"namespaceExists", "tableExists", "viewExists", "cancelPlanning"})
# Answers that carry a table's or a view's metadata and its client config.
_LOADS = frozenset({"loadTable", "createTable", "registerTable", "updateTable", "loadView", "createView"})
_LOADS |= frozenset({"registerView", "replaceView"})
# Keys of a load answer's config that belong to the remote's REST session: never passed on.
SESSION_KEYS = frozenset({"token", "credential"})
_LISTED = frozenset({"listTables", "listViews"})
# Loads a client may validate with If-None-Match (the spec's 304 for loadTable; a view's alike).
_VALIDATED = frozenset({"loadTable", "loadView"})


class AnswerCheck:
    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer  # the caller's grants, for the listings

    def checked(self, remote: RemoteCatalog, operation_id: str, method: str, prefix: str, answer: Answer) -> Answer:
        """The remote's answer as the client gets it (already the remote's 4xx/5xx: its error kept)."""
        status, data = answer.status, answer.data
        if status >= 400:
            return self._error(remote, answer)
        if status == 304 and operation_id in _VALIDATED:  # the client's If-None-Match, passed on: its copy is current
            return Answer(304, None, b"", {k: v for k, v in answer.headers.items() if k == "ETag"})
        if not 200 <= status < 300:  # redirects are not followed: Growler's credential stays with this remote
            raise self._garbage(remote, operation_id, f"{status}, which is not an answer of the spec")
        if data is None:  # 204, or a HEAD
            if method != "HEAD" and operation_id not in _NO_BODY:
                raise self._garbage(remote, operation_id, "an empty body")
            return Answer(status, None, b"", answer.headers)
        if not isinstance(data, dict):
            raise self._garbage(remote, operation_id, "not a JSON object")
        if operation_id == "listNamespaces":
            data = {**data, "namespaces": self._visible_namespaces(remote, prefix, data.get("namespaces"))}
        elif operation_id in _LISTED:
            kind = Kind.TABLE if operation_id == "listTables" else Kind.VIEW
            data = {**data, "identifiers": self._visible_entries(remote, prefix, kind, data)}
        elif operation_id in _LOADS:
            data = self._load(remote, operation_id, data)
        body = json.dumps(data, separators=(",", ":")).encode()
        return Answer(status, data, body, {"Content-Type": JSON, **answer.headers})

    def _error(self, remote: RemoteCatalog, answer: Answer) -> Answer:
        """The remote's Iceberg error, its status, type and message kept (bounded); 502 for a body
        that is not one. A HEAD's error has no body: its status is the answer."""
        headers = {k: v for k, v in answer.headers.items() if k == "Retry-After"}
        if not answer.body:
            return Answer(answer.status, None, b"", headers)
        error = answer.data.get("error") if isinstance(answer.data, dict) else None
        if not isinstance(error, dict) or not isinstance(error.get("message"), str):
            raise self._garbage(remote, None, f"{answer.status} without an Iceberg error body")
        kind = error.get("type") if isinstance(error.get("type"), str) else "RemoteCatalogException"
        data = error_body(error["message"], kind, answer.status)
        body = json.dumps(data, separators=(",", ":")).encode()
        return Answer(answer.status, data, body, {"Content-Type": JSON, **headers})

    def _visible_namespaces(self, remote: RemoteCatalog, prefix: str, listed: Any) -> list[list[str]]:
        if not isinstance(listed, list) or not all(_levels(item) for item in listed):
            raise self._garbage(remote, "listNamespaces", "namespaces is not a list of namespaces")
        return self.authorizer.filter(listed, lambda levels: Securable.of_namespace(prefix, tuple(levels)))

    def _visible_entries(self, remote: RemoteCatalog, prefix: str, kind: Kind, data: dict[str, Any]) -> list[Any]:
        listed = data.get("identifiers")
        if not isinstance(listed, list) or not all(
            isinstance(item, dict) and _levels(item.get("namespace")) and isinstance(item.get("name"), str)
            for item in listed
        ):
            raise self._garbage(remote, None, "identifiers is not a list of identifiers")
        return self.authorizer.filter(
            listed, lambda item: Securable.of_entry(kind, prefix, tuple(item["namespace"]), item["name"])
        )

    def _load(self, remote: RemoteCatalog, operation_id: str, data: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(data.get("metadata"), dict):
            raise self._garbage(remote, operation_id, "no metadata object")
        own = remote.own_credentials()
        config = data.get("config")
        if isinstance(config, dict):
            kept = {k: v for k, v in config.items() if k not in SESSION_KEYS and not _secret(v, own)}
            data = {**data, "config": kept}
        credentials = data.get("storage-credentials")
        if isinstance(credentials, list):  # a remote echoing Growler's own credential: never passed on
            data = {
                **data,
                "storage-credentials": [
                    {**item, "config": {k: v for k, v in item["config"].items() if not _secret(v, own)}}
                    if isinstance(item, dict) and isinstance(item.get("config"), dict)
                    else item
                    for item in credentials
                ],
            }
        return data

    @staticmethod
    def _garbage(remote: RemoteCatalog, operation_id: str | None, what: str) -> CatalogError:
        remote.breaker.failed()
        answered = f" to {operation_id}" if operation_id else ""
        return BadGateway(f"The remote catalog of warehouse {remote.name} answered{answered} {what}")


def _secret(value: Any, own: frozenset[str]) -> bool:
    return isinstance(value, str) and value in own


def _levels(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(level, str) for level in value)
