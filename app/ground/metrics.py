"""Every Prometheus metric Growler exports, defined once, and the ``/metrics`` rendering.

No app imports here (storage/ records object-store calls through this module too).

Under gunicorn the values live in files under ``PROMETHEUS_MULTIPROC_DIR`` (gunicorn.conf.py
sets it up, empties it at start and marks dead workers), so a scrape answered by any worker
reports the sum over all of them. Without that variable (unit/API tests, a single process) the
same metrics work in-process. prometheus_client picks the mode when it is first imported, so the
variable must be set before the app is imported - gunicorn.conf.py runs first, in the master.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

# Catalog calls are usually milliseconds; commits on a slow store can take tens of seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

REQUESTS = Counter(
    "growler_http_requests",
    "HTTP requests answered, by OpenAPI operationId (or healthz/readyz/metrics/unmatched) and status",
    ["operation", "status"],
)
REQUEST_SECONDS = Histogram(
    "growler_http_request_duration_seconds",
    "Time from request to the end of the response, by operationId and status",
    ["operation", "status"],
    buckets=LATENCY_BUCKETS,
)
REQUESTS_IN_PROGRESS = Gauge(
    "growler_http_requests_in_progress", "Requests being served now", multiprocess_mode="livesum"
)

COMMITS = Counter(
    "growler_commits",
    "Table commits (kind table or transaction) by outcome: committed, conflict (409), "
    "unknown (CommitStateUnknown), rejected (other 4xx), failed (5xx)",
    ["kind", "outcome"],
)
COMMIT_RETRIES = Counter(
    "growler_commit_retries", "Commit attempts that lost the compare-and-set race and were retried", ["kind"]
)

OBJECT_STORE_SECONDS = Histogram(
    "growler_object_store_duration_seconds",
    "Object store (S3) call latency by operation",
    ["operation"],
    buckets=LATENCY_BUCKETS,
)
OBJECT_STORE_ERRORS = Counter(
    "growler_object_store_errors",
    "Failed object store (S3) calls by operation and S3 error code (or exception type)",
    ["operation", "error"],
)

AUDIT_BATCHES = Histogram(
    "growler_audit_batch_records",
    "Records per group commit of the audit trail (app/audit/writer.py)",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 500),
)
AUDIT_FAILURES = Counter(
    "growler_audit_write_failures",
    "Audit records that could not be committed (each request answered 503)",
)
FEDERATION_MIRROR_GAPS = Counter(
    "growler_federation_mirror_gaps",
    "Times a federated warehouse's mirror found the remote had forgotten its position (410): events lost",
)
FEDERATION_TABLE_LOADS = Counter(
    "growler_federation_table_loads",
    "loadTable answers of federated warehouses by where they came from (app/federation/cache.py): remote"
    " (the remote's full answer), validated (the remote's 304 to the kept answer's ETag), kept (within the"
    " warehouse's cache-ttl-ms, the remote not asked)",
    ["source"],
)
HOUSEKEEPING_FAILURES = Counter(
    "growler_housekeeping_failures",
    "Housekeeping steps that failed and will be retried: sweep (one pending object), purge (one job), "
    "expire-keys, and round (a whole step, e.g. the database was down)",
    ["task"],
)

# The recycle bin and protection (issue 35): every drop, undrop, expiry, purge and mark change.
BIN_EVENTS = Counter(
    "growler_recycle_bin_events",
    "Recycle bin changes: action drop (soft: into the bin; hard: removed at once), undrop, expire, purge; "
    "kind table, view or namespace",
    ["action", "kind", "policy"],
)
PROTECTION_EVENTS = Counter(
    "growler_protection_events",
    "Protection marks set (protect) or removed (unprotect), and destructive operations refused (refused)",
    ["action", "kind"],
)
EVENTS_DELIVERED = Counter(
    "growler_events_delivered",
    "Change feed events pushed to a sink and acknowledged (app/publisher/service.py)",
    ["sink"],
)
EVENTS_DELIVERY_FAILURES = Counter(
    "growler_events_delivery_failures",
    "Failed attempts to push a change feed event to a sink, and events given up on (outcome dead-letter)",
    ["sink", "outcome"],
)
EVENTS_LAG_SECONDS = Gauge(
    "growler_events_delivery_lag_seconds",
    "Age of the oldest change feed event a sink has not been delivered yet (0: none pending)",
    ["sink"],
    multiprocess_mode="livemax",
)

IDEMPOTENCY_REPLAYS = Counter(
    "growler_idempotency_replays", "Responses replayed for a repeated Idempotency-Key", ["operation"]
)

POOL_CONNECTIONS = Gauge(
    "growler_db_pool_connections",
    "PostgreSQL pool connections summed over workers: min, max, size (open), available (idle), in_use",
    ["state"],
    multiprocess_mode="livesum",
)
POOL_WAITING = Gauge(
    "growler_db_pool_requests_waiting", "Requests waiting for a pooled connection now", multiprocess_mode="livesum"
)
POOL_EVENTS = Counter(
    "growler_db_pool_events",
    "PostgreSQL pool events: requests (checkouts), queued (had to wait), errors (timed out), "
    "bad_returns, connects, connect_errors, connections_lost",
    ["event"],
)
POOL_WAIT_SECONDS = Counter("growler_db_pool_wait_seconds", "Total time spent waiting for a pooled connection")

_POOL_GAUGES = {"pool_min": "min", "pool_max": "max", "pool_size": "size", "pool_available": "available"}
_POOL_COUNTERS = {
    "requests_num": "requests",
    "requests_queued": "queued",
    "requests_errors": "errors",
    "returns_bad": "bad_returns",
    "connections_num": "connects",
    "connections_errors": "connect_errors",
    "connections_lost": "connections_lost",
}
POOL_REFRESH_S = 1.0

_pool_stats: Callable[[], dict[str, int]] | None = None
_pool_lock = threading.Lock()
_pool_refreshed = float("-inf")  # never (the monotonic clock starts near 0 at boot)


def watch_pool(pop_stats: Callable[[], dict[str, int]] | None) -> None:
    """Report this pool (psycopg_pool ``pop_stats``: gauges now, counters since the last call)."""
    global _pool_stats, _pool_refreshed
    with _pool_lock:
        _pool_stats, _pool_refreshed = pop_stats, float("-inf")


def refresh_pool(max_age_s: float = POOL_REFRESH_S) -> None:
    """Copy the pool's numbers into the metrics, at most once per ``max_age_s`` per process.

    Called after requests and on every scrape: each worker's gauges are as fresh as its last
    request (idle workers' pools do not change much).
    """
    global _pool_refreshed
    with _pool_lock:
        now = time.monotonic()
        if _pool_stats is None or now - _pool_refreshed < max_age_s:
            return
        _pool_refreshed = now
        stats = _pool_stats()
    for key, state in _POOL_GAUGES.items():
        POOL_CONNECTIONS.labels(state).set(stats.get(key, 0))
    POOL_CONNECTIONS.labels("in_use").set(max(0, stats.get("pool_size", 0) - stats.get("pool_available", 0)))
    POOL_WAITING.set(stats.get("requests_waiting", 0))
    for key, event in _POOL_COUNTERS.items():
        if stats.get(key):
            POOL_EVENTS.labels(event).inc(stats[key])
    if stats.get("requests_wait_ms"):
        POOL_WAIT_SECONDS.inc(stats["requests_wait_ms"] / 1000)


# The children of REQUESTS and REQUEST_SECONDS per (operation, status), looked up once: ``labels``
# validates and locks on every call, a visible share of a small read's CPU. Bounded by the
# operations of the yamls (and the few unrouted names) times the statuses they answer.
_REQUEST_CHILDREN: dict[tuple[str, int], tuple[Any, Any]] = {}


def observe_request(operation: str, status: int, seconds: float) -> None:
    children = _REQUEST_CHILDREN.get((operation, status))
    if children is None:
        label = str(status)
        children = (REQUESTS.labels(operation, label), REQUEST_SECONDS.labels(operation, label))
        _REQUEST_CHILDREN[(operation, status)] = children
    children[0].inc()
    children[1].observe(seconds)


@contextmanager
def object_store_call(operation: str) -> Iterator[None]:
    """Time one object-store call; count it as an error if it raises (by its S3 code or type)."""
    start = time.perf_counter()
    try:
        yield
    except Exception as exc:
        code: Any = getattr(exc, "code", None)
        OBJECT_STORE_ERRORS.labels(operation, code if isinstance(code, str) else type(exc).__name__).inc()
        raise
    finally:
        OBJECT_STORE_SECONDS.labels(operation).observe(time.perf_counter() - start)


def render() -> tuple[bytes, str]:
    """The exposition text for a scrape (all workers' values in multiprocess mode)."""
    refresh_pool(max_age_s=0.0)
    if MULTIPROCESS:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST
