"""W10: the tails (issue 20, item 1 and 5).

- ``W10_start``: the first ``Plan.tail_s`` seconds after the server started (its workers report
  their app built, nothing else warmed them): loadNamespaceMetadata at the usual concurrency, no
  warm-up, before the benchmark's seeding touches the server;
- ``W10_recycle`` (servers with worker processes): the same right after one worker is told to
  exit, as ``GROWLER_MAX_REQUESTS`` does in production: the others serve while the arbiter starts
  its replacement, whose first requests are then measured too;
- ``W10_64_W1`` / ``W10_64_W3``: p99.9 at 64 connections for W1 and W3, after a warm-up.
"""

from __future__ import annotations

from typing import Any

NAMESPACE = "ns_tails"


def cold(target: Any, plan: Any, run_wrk, http_json) -> dict[str, Any]:
    """W10_start: call before seeding. Creates its own namespace (one request) first."""
    status, _, _ = http_json("POST", target.api("namespaces"), body={"namespace": [NAMESPACE]}, headers=target.headers)
    if status != 200:
        raise RuntimeError(f"{target.name}: createNamespace {NAMESPACE} answered {status}")
    return run_wrk(target, plan, f"namespaces/{NAMESPACE}", duration_s=plan.tail_s, warm=False)


def after_recycle(target: Any, plan: Any, run_wrk) -> dict[str, Any]:
    """W10_recycle: recycle one worker, then measure at once."""
    recycle = getattr(target, "recycle_worker", None)
    if recycle is None:
        return {"n/a": "one process: no workers to recycle"}
    recycle()
    return run_wrk(target, plan, f"namespaces/{NAMESPACE}", duration_s=plan.tail_s, warm=False)


def wide(target: Any, plan: Any, run_wrk, path: str) -> dict[str, Any]:
    """W10_64_*: 64 connections, after the usual warm-up."""
    return run_wrk(target, plan, path, connections=64)
