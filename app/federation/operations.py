"""Which operations of a federated warehouse its remote serves, which Growler answers itself, and
what of a request reaches the remote (app/federation/service.py). Constants only."""

from __future__ import annotations

from app.federation.own_storage import LOAD_RESULTS

# The spec's operations a remote serves; Growler's own (functions, signing, the change feed,
# unregister) are not federated in this slice: refused with 406.
READS = frozenset(
    {
        "listNamespaces",
        "loadNamespaceMetadata",
        "namespaceExists",
        "listTables",
        "loadTable",
        "tableExists",
        "loadCredentials",
        "reportMetrics",
        "planTableScan",
        "fetchPlanningResult",
        "fetchScanTasks",
        "cancelPlanning",
        "listViews",
        "loadView",
        "viewExists",
    }
)
WRITES = frozenset(
    {
        "createNamespace",
        "dropNamespace",
        "updateProperties",
        "createTable",
        "registerTable",
        "updateTable",
        "dropTable",
        "renameTable",
        "commitTransaction",
        "createView",
        "registerView",
        "replaceView",
        "dropView",
        "renameView",
    }
)
FORWARDED = READS | WRITES
# Answers that carry storage access, where the warehouse's own (app/federation/own_storage.py) replaces the remote's.
OWN_STORAGE_ANSWERS = LOAD_RESULTS | {"loadCredentials"}
JSON_TYPE = "application/json"
# What Growler answers itself for a federated warehouse: its change feed (the writes made through
# Growler: app/federation/changes.py), and signing with its own storage settings (refused where the
# warehouse has none: app/federation/own_storage.py).
SERVED_BY_GROWLER = frozenset({"queryEvents", "signRequest"})
# What a protection mark refuses, as on a native one - the warehouse's, or one kept by path on a
# remote namespace, table or view (migration 0040): read fresh, not cached.
GUARDED = frozenset({"dropTable", "dropView", "dropNamespace", "renameTable", "renameView"})
# What of the client's request reaches the remote (never its Authorization).
# x-request-id: the request's id (given or made: app/edge/http.py), so that a remote with a change
# feed records Growler's writes under it and the mirror knows them (app/federation/mirror.py)
FORWARDED_HEADERS = (
    "content-type",
    "x-iceberg-access-delegation",
    "idempotency-key",
    "if-none-match",
    "accept",
    "x-request-id",
)
TABLE_PATH = "/v1/{prefix}/namespaces/{namespace}/tables/{table}"
VIEW_PATH = "/v1/{prefix}/namespaces/{namespace}/views/{view}"
NAMESPACE_PATH = "/v1/{prefix}/namespaces/{namespace}"
