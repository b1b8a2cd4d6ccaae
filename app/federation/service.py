"""Federated warehouses (issue 50, docs/federation.md): the catalog operations of a warehouse whose
tables live in another Iceberg REST catalog, served by that catalog.

The dispatcher (app/edge/dispatch.py) runs its one pipeline first - the route, the read of the
yaml's parameters and body, Growler's authentication and the operation's RULES row, by names, as
for a native warehouse - and then, in its call stage, asks ``remote_of`` whether the path's
warehouse is federated. The answer comes from the warehouse directory's per-request lookup
(``WarehouseDirectory.get``: cached, and read again whenever a management change bumps
``auth_state.version``), so a native warehouse pays one dictionary lookup and a changed or
deleted federated warehouse is never served from stale settings. For a federated one,
``forward`` sends the request on: the path rewritten to the remote's prefix and namespace
separator, the body as the client sent it, and Growler's own credential toward the remote in
place of the caller's.

What comes back is checked before it is passed on (app/federation/answers.py): listings are
filtered by the caller's grants (a principal sees what Growler allows, whatever the remote's
credential reaches), the remote's Iceberg errors keep their status, type and message, an answer
that is not the spec's shape is a 502, and loadTable's ``config`` loses any credential of the
remote's own REST session (``token``, ``credential``): storage access is what the remote vends for
the table (its ``config`` and ``storage-credentials``), never Growler's access to the remote.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlencode

import urllib3

from app.events import changes as change_events
from app.federation.answers import AnswerCheck
from app.federation.breaker import CircuitBreaker
from app.federation.cache import LoadedTables, loaded_key, variant_of
from app.federation.changes import NEEDS_UUID, Namespace, changes_of, identified, kind_of
from app.federation.moved import MovedCopies
from app.federation.operations import (
    FORWARDED,
    FORWARDED_HEADERS,
    GUARDED,
    JSON_TYPE,
    NAMESPACE_PATH,
    OWN_STORAGE_ANSWERS,
    READS,
    TABLE_PATH,
    VIEW_PATH,
    WRITES,
)
from app.federation.own_storage import OwnStorageAccess
from app.federation.remote import Answer, RemoteCatalog, RemoteSettings, Route
from app.federation.restricted import RemoteRestrictions
from app.federation.settings import DEFAULT_BREAKER_COOLDOWN_MS, DEFAULT_BREAKER_FAILURES, DEFAULT_TIMEOUT_MS
from app.federation.translation import (
    answered_table,
    guarded_action,
    header,
    json_body,
    remote_levels,
    remote_path,
    remote_query,
    segment_of,
)
from app.federation.versions import RemoteVersions
from app.ground import metrics
from app.ground.errors import (
    CatalogError,
    Forbidden,
    NoSuchWarehouse,
    Protected,
    ServiceUnavailable,
    UnsupportedOperation,
)
from app.ground.secrets import SecretBox
from app.ground.text import UNIT_SEPARATOR
from app.namespaces.warehouses import WarehouseDirectory
from app.rules.identifiers import parse_namespace
from app.storage_access.delegation import Delegation
from app.tables.access import StorageScopeOf
from storage.protection_rows import ProtectionRows
from storage.warehouses import WarehouseRow


class RemoteRefused(CatalogError):
    """The remote's Iceberg error, as ``forward`` passes it on: its status, type and message."""

    def __init__(self, status: int, body: Any) -> None:
        error = body.get("error") if isinstance(body, dict) else None
        found = error if isinstance(error, dict) else {}
        super().__init__(str(found.get("message") or f"The remote catalog answered {status}"))
        self.code = status
        self.error_type = str(found.get("type") or "RemoteCatalogException")


class FederationService:
    def __init__(
        self,
        warehouses: WarehouseDirectory,
        answers: AnswerCheck,
        http: urllib3.PoolManager,
        *,
        secrets: SecretBox | None,
        namespace_separator: str,
        versions: RemoteVersions,
        moved: MovedCopies,
        restricted: RemoteRestrictions,
        protection: ProtectionRows,
        loaded: LoadedTables,
        own_storage: OwnStorageAccess,
        breaker: Callable[[int, float], CircuitBreaker] = CircuitBreaker,
    ) -> None:
        self.warehouses = warehouses
        self.own_storage = own_storage  # Growler's own vending and signing for its allowed locations
        self.loaded = loaded  # the worker's kept loadTable answers (app/federation/cache.py)
        self.protection = protection  # marks on the remote's objects, by path (migration 0040)
        self.moved = moved  # tables moved home: their remote copies are read-only through Growler
        self.restricted = restricted  # the caller's read restrictions, applied to what is forwarded
        self.versions = versions  # the change feed's: a write's events, an outside change found on load
        self.answers = answers  # the remote's answers checked, listings filtered by the caller's grants
        self.http = http  # one pool for every remote (urllib3: see app/federation/remote.py)
        self._secrets = secrets  # opens the credential toward each remote (GROWLER_SECRETS_KEY)
        self.separator = namespace_separator  # Growler's, as advertised: how the path's namespaces are read
        self._breaker = breaker  # a new one per remote: (threshold, cool-down) -> breaker
        # warehouse id -> (its federation settings and sealed secret, the remote built from them)
        self._remotes: dict[int, tuple[tuple[str, bytes | None], RemoteCatalog]] = {}
        self._lock = threading.Lock()

    # -- which warehouses are federated ----------------------------------------------------------

    def known_native(self, prefix: str) -> bool:
        """True when the directory's cache says the warehouse is native (no I/O: the event loop's
        reads ask this before serving); False when it is federated or not cached."""
        row = self.warehouses.cached(prefix)
        return row is not None and row.federation is None

    def remote_of(self, prefix: str) -> RemoteCatalog | None:
        """The remote serving this warehouse; None for a native (or unknown) one, which the native
        handlers serve (and refuse) as before."""
        try:
            row = self.warehouses.get(prefix)
        except NoSuchWarehouse:
            return None
        if row.federation is None:
            return None
        return self._remote(row)

    def _remote(self, row: WarehouseRow) -> RemoteCatalog:
        key = (json.dumps(row.federation, sort_keys=True), row.federation_secret)
        known = self._remotes.get(row.id)
        if known is not None and known[0] == key:
            return known[1]
        settings = self._settings(row)
        remote = RemoteCatalog(
            row.name, settings, self.http, self._breaker(settings.breaker_failures, settings.breaker_cooldown_s)
        )
        with self._lock:
            self._remotes[row.id] = (key, remote)  # a changed warehouse gets a new remote, breaker and token
        return remote

    def _settings(self, row: WarehouseRow) -> RemoteSettings:
        federation = row.federation or {}
        auth = federation.get("auth") or {}
        secret = None
        if row.federation_secret:
            if self._secrets is None:
                raise ServiceUnavailable(f"Warehouse {row.name} has a remote credential but no GROWLER_SECRETS_KEY")
            try:
                secret = self._secrets.open(row.federation_secret).get("secret")
            except ValueError:
                raise ServiceUnavailable(f"The remote credential of warehouse {row.name} cannot be decrypted") from None
        return RemoteSettings(
            uri=str(federation["uri"]).rstrip("/"),
            warehouse=str(federation["warehouse"]),
            auth=str(auth.get("type") or "none"),
            client_id=auth.get("client-id"),
            token_endpoint=auth.get("token-endpoint"),
            scope=auth.get("scope"),
            read_only=bool(federation.get("read-only")),
            timeout_s=int(federation.get("timeout-ms") or DEFAULT_TIMEOUT_MS) / 1000,
            cache_ttl_s=int(federation.get("cache-ttl-ms") or 0) / 1000,
            breaker_failures=int(federation.get("breaker-failures") or DEFAULT_BREAKER_FAILURES),
            breaker_cooldown_s=int(federation.get("breaker-cooldown-ms") or DEFAULT_BREAKER_COOLDOWN_MS) / 1000,
            secret=secret,
        )

    # -- forwarding ------------------------------------------------------------------------------

    def forward(  # noqa: PLR0913 - the request's parts, as the dispatcher read them
        self,
        remote: RemoteCatalog,
        operation_id: str,
        method: str,
        spec_path: str,
        path_values: dict[str, str],
        query: bytes,
        headers: dict[bytes, list[bytes]],
        body: bytes | None,
        *,
        within_ttl: bool = True,
    ) -> Answer:
        """The operation (already authorized) served by ``remote``: its answer as the client gets it.
        ``within_ttl``: a loadTable may be the worker's kept answer within the warehouse's
        ``cache-ttl-ms`` (app/federation/cache.py); False when the remote's current answer is needed
        (a move registers what it reads), which a 304 to the kept answer's ETag still gives."""
        prefix = path_values["prefix"]
        if operation_id not in FORWARDED:
            raise UnsupportedOperation(f"Operation {operation_id} is not served for federated warehouse {prefix}")
        if operation_id in WRITES and remote.settings.read_only:
            raise Forbidden(f"Warehouse {prefix} is a read-only federation: {operation_id} is refused")
        request = json_body(body) if operation_id in WRITES else None
        if operation_id in GUARDED:
            self._refuse_if_protected(prefix, operation_id, path_values, request)
        if operation_id in WRITES:
            self.moved.refuse_write(self.warehouses.get(prefix).id, prefix, operation_id, path_values, request)
        restrictions = self.restricted.before(prefix, operation_id, path_values, request, self.separator)
        sent = headers if restrictions is None else self.restricted.unvalidated(headers)
        row = self.warehouses.get(prefix)
        own = self.own_storage.serves(row) and operation_id in OWN_STORAGE_ANSWERS
        if own and operation_id == "loadCredentials":
            credentials = self._own_credentials(remote, row, path_values)
            if credentials is not None:
                return credentials
        answer = self._send(
            remote, operation_id, method, spec_path, path_values, query, sent, body, request, within_ttl
        )
        if own and operation_id != "loadCredentials":
            table = answered_table(operation_id, path_values, request, self.separator)
            delegation = Delegation.parse(header(headers, b"x-iceberg-access-delegation"))
            answer = self.own_storage.answered(row, table, answer, delegation, creating=operation_id != "loadTable")
        if restrictions is None:
            return answer
        return self.restricted.applied(restrictions, answer) if operation_id == "loadTable" else answer

    # -- storage access of Growler's own (app/federation/own_storage.py) -------------------------

    def storage_scope(self, row: WarehouseRow, namespace: Namespace, name: str) -> StorageScopeOf:
        """The folders Growler signs for in the remote's table (its load: the kept answer within the
        warehouse's TTL, else validated or fetched); 403 when it has none or the table is missing."""
        if not self.own_storage.serves(row):
            raise Forbidden(f"Remote signing is not enabled for warehouse {row.name}")
        loaded = self._load_table(self._remote(row), row.name, namespace, name)
        if loaded.status != 200:
            raise Forbidden(f"Table does not exist or may not be signed for: {'.'.join(namespace)}.{name}")
        return self.own_storage.scope(row, (namespace, name), loaded)

    def _own_credentials(self, remote: RemoteCatalog, row: WarehouseRow, values: dict[str, str]) -> Answer | None:
        """loadCredentials answered with Growler's own credentials for a table inside the allowed
        locations; None: the remote's answer stands (the table lies elsewhere, or the load failed)."""
        namespace = parse_namespace(values["namespace"], self.separator)
        table = (namespace, segment_of(values["table"]))
        loaded = self._load_table(remote, row.name, *table)
        credentials = self.own_storage.credentials(row, table, loaded) if loaded.status == 200 else None
        if credentials is None:
            return None
        data = {"storage-credentials": credentials}
        return Answer(200, data, json.dumps(data, separators=(",", ":")).encode(), {"Content-Type": JSON_TYPE})

    def _load_table(self, remote: RemoteCatalog, prefix: str, namespace: Namespace, name: str) -> Answer:
        values = {"prefix": prefix, "namespace": UNIT_SEPARATOR.join(namespace), "table": name}
        route = remote.route()
        path = remote_path(TABLE_PATH, values, route, self.separator)
        return self._load(remote, prefix, values, path, "", {}, within_ttl=True)

    def _send(  # noqa: PLR0913 - forward's, once its refusals passed
        self,
        remote: RemoteCatalog,
        operation_id: str,
        method: str,
        spec_path: str,
        path_values: dict[str, str],
        query: bytes,
        headers: dict[bytes, list[bytes]],
        body: bytes | None,
        request: Any,
        within_ttl: bool = True,
    ) -> Answer:
        prefix = path_values["prefix"]
        route = remote.route()
        path = remote_path(spec_path, path_values, route, self.separator)
        sent = {name: found[0].decode("latin-1") for name in FORWARDED_HEADERS if (found := headers.get(name.encode()))}
        if not body:
            sent.pop("content-type", None)
        query_text = remote_query(query, route, self.separator)
        if operation_id == "loadTable":
            return self._load(remote, prefix, path_values, path, query_text, sent, within_ttl)
        known = self._uuids_before(remote, route, operation_id, path_values, request)
        answer = self.answers.checked(
            remote, operation_id, method, prefix, remote.send(method, path, query_text, sent, body or None)
        )
        if operation_id in WRITES and answer.status < 300:  # the remote's refusal changed nothing
            self._record(prefix, operation_id, path_values, request, answer, known)
        elif operation_id == "loadView" and answer.status == 200:  # changed behind Growler's back?
            view = (parse_namespace(path_values["namespace"], self.separator), path_values["view"])
            self.versions.loaded(self.warehouses.get(prefix).id, view, answer.data, kind="view")
        return answer

    def _load(  # noqa: PLR0913 - _send's, for a loadTable
        self,
        remote: RemoteCatalog,
        prefix: str,
        values: dict[str, str],
        path: str,
        query: str,
        sent: dict[str, str],
        within_ttl: bool,
    ) -> Answer:
        """A loadTable: the worker's kept answer when it may be used (app/federation/cache.py), else
        the remote's - a 304 to the kept answer's ETag, or its full answer, then kept. A client's
        own ``If-None-Match`` is the remote's to answer (its 304 passed on), the kept one not used."""
        warehouse_id = self.warehouses.get(prefix).id
        table = (parse_namespace(values["namespace"], self.separator), values["table"])
        key, variant = loaded_key(warehouse_id, *table), variant_of(query, sent)
        kept = None if "if-none-match" in sent else self.loaded.kept(key, variant)
        if kept is not None:
            ttl_s = remote.settings.cache_ttl_s if within_ttl else 0.0
            if self.loaded.fresh(kept, ttl_s) and self.versions.current(warehouse_id, table, kept.metadata_location):
                metrics.FEDERATION_TABLE_LOADS.labels("kept").inc()
                return kept.answer
            if kept.etag is not None:
                sent = {**sent, "if-none-match": kept.etag}
        raw = remote.send("GET", path, query, sent, None)
        if kept is not None and raw.status == 304:
            self.loaded.confirmed(key, kept)
            metrics.FEDERATION_TABLE_LOADS.labels("validated").inc()
            return kept.answer
        answer = self.answers.checked(remote, "loadTable", "GET", prefix, raw)
        if answer.status == 200:
            self.versions.loaded(warehouse_id, table, answer.data)  # changed behind Growler's back?
            self.loaded.keep(key, variant, answer)
            metrics.FEDERATION_TABLE_LOADS.labels("remote").inc()
        return answer

    def read(self, prefix: str, operation_id: str, spec_path: str, values: dict[str, str], **query: str) -> Any:
        """A read of the warehouse's remote for Growler's own decisions (a move, a mark's check;
        already authorized, as the API's): the answer's JSON, filtered by the caller's grants as
        ``forward`` filters the API's, never a kept answer the remote did not confirm; the
        remote's refusal raised with its status, type and message."""
        remote = self.remote_of(prefix)
        if remote is None or operation_id not in READS:
            raise NoSuchWarehouse(f"Warehouse {prefix} is not a federated warehouse")
        params = urlencode({key: value for key, value in query.items() if value}).encode()
        values = {"prefix": prefix, **values}
        answer = self.forward(remote, operation_id, "GET", spec_path, values, params, {}, None, within_ttl=False)
        if answer.status >= 400:
            raise RemoteRefused(answer.status, answer.data)
        return answer.data

    # -- tables moved home (app/table_moves/service.py) ------------------------------------------

    def require_droppable(self, prefix: str, namespace: Namespace, name: str) -> RemoteCatalog:
        """The remote of a federated warehouse whose table a move will drop: refused (nothing
        written) where a dropTable through Growler would be - a read-only federation, a protected
        warehouse."""
        remote = self.remote_of(prefix)
        if remote is None:
            raise NoSuchWarehouse(f"Warehouse {prefix} is not a federated warehouse")
        if remote.settings.read_only:
            raise Forbidden(
                f"Warehouse {prefix} is a read-only federation: its tables cannot be dropped there; move with"
                ' "remote": "keep"'
            )
        reason = self.protection.federated_protection_of(self.warehouses.read(prefix).id, namespace, name)
        if reason is not None:
            raise Protected(
                f"Cannot drop table {'.'.join((*namespace, name))}: {reason}; remove the protection first"
                ' (manage-grants), or move with "remote": "keep"'
            )
        return remote

    def require_exists(self, prefix: str, kind: str, namespace: Namespace, name: str | None) -> None:
        """The remote has the namespace, table or view (a protection mark's check): its refusal
        (``NoSuchTableException``, ...) raised with its status and message."""
        values = {"namespace": UNIT_SEPARATOR.join(namespace)}
        if kind == "namespace":
            self.read(prefix, "loadNamespaceMetadata", NAMESPACE_PATH, values)
        elif kind == "table":
            self.read(prefix, "loadTable", TABLE_PATH, {**values, "table": name or ""})
        else:
            self.read(prefix, "loadView", VIEW_PATH, {**values, "view": name or ""})

    def _refuse_if_protected(self, prefix: str, operation_id: str, values: dict[str, str], request: Any) -> None:
        """A drop, purge or rename of an object a mark covers - its own, one of its namespaces' or
        the warehouse's -, refused for everyone before the remote is asked (409, nothing written)."""
        if operation_id.startswith("rename"):
            found = identified(request.get("source")) if isinstance(request, dict) else None
            namespace, name = found if found is not None else ((), None)
        else:
            namespace = parse_namespace(values["namespace"], self.separator)
            name = values.get("table") or values.get("view")
        reason = self.protection.federated_protection_of(self.warehouses.read(prefix).id, namespace, name)
        if reason is not None:
            action = guarded_action(operation_id, values, namespace, name)
            raise Protected(f"Cannot {action}: {reason}; remove the protection first (manage-grants)")

    def drop_moved(self, prefix: str, namespace: Namespace, name: str) -> None:
        """Drop a table moved home from the remote, its files kept (``purgeRequested=false``): the
        write the moved table's read-only mark refuses to everyone else. The drop enters the
        warehouse's change feed as any dropTable through Growler; a table the remote no longer
        has counts as dropped. RemoteRefused (the remote's error), or forward's 502 and 503."""
        remote = self.require_droppable(prefix, namespace, name)
        values = {"prefix": prefix, "namespace": UNIT_SEPARATOR.join(namespace), "table": name}
        answer = self._send(remote, "dropTable", "DELETE", TABLE_PATH, values, b"purgeRequested=false", {}, None, None)
        if answer.status >= 400 and answer.status != 404:
            raise RemoteRefused(answer.status, answer.data)

    # -- the change feed (app/federation/changes.py) ---------------------------------------------

    def _uuids_before(
        self, remote: RemoteCatalog, route: Route, operation_id: str, values: dict[str, str], request: Any
    ) -> dict[tuple[str, Namespace, str], str | None]:
        """A drop's or a rename's entry uuid, from a load the remote answers first (the event names
        it; the write's own answer does not); None when the remote does not answer it."""
        if operation_id not in NEEDS_UUID:
            return {}
        kind = kind_of(operation_id)
        if operation_id.startswith("rename"):
            found = identified(request.get("source") if isinstance(request, dict) else None)
        else:
            found = (parse_namespace(values["namespace"], self.separator), segment_of(values[kind]))
        if found is None:
            return {}
        namespace, name = found
        levels = remote_levels(namespace, route)
        loaded = remote.send("GET", f"namespaces/{levels}/{kind}s/{quote(name, safe='')}", "", {}, None)
        metadata = loaded.data.get("metadata") if loaded.status == 200 and isinstance(loaded.data, dict) else None
        return {(kind, namespace, name): metadata.get(f"{kind}-uuid") if isinstance(metadata, dict) else None}

    def _record(
        self,
        prefix: str,
        operation_id: str,
        values: dict[str, str],
        request: Any,
        answer: Answer,
        known: dict[tuple[str, Namespace, str], str | None],
    ) -> None:
        """The write's events on the warehouse's stream. The remote has committed: if they cannot
        be written, the client hears 503 saying so (never a success the feed does not hold)."""
        namespace = parse_namespace(values["namespace"], self.separator) if "namespace" in values else None
        kind = "table" if "table" in values else "view" if "view" in values else None
        name = segment_of(values[kind]) if kind is not None else None
        changes = changes_of(
            operation_id, namespace, name, request, answer.data, lambda k, ns, n: known.get((k, ns, n))
        )
        if not changes:
            return
        warehouse_id = self.warehouses.get(prefix).id
        try:
            self.versions.written(
                warehouse_id,
                change_events.events_of(warehouse_id, changes),
                operation_id,
                namespace,
                name,
                request,
                answer.data,
            )
        except Exception as exc:  # noqa: BLE001 - whatever failed, the client must hear the feed lacks it
            raise ServiceUnavailable(
                f"The remote catalog made the change ({operation_id}), but Growler could not record it in its"
                " change feed; check the change in the remote before retrying",
                retry_after=1,
            ) from exc
