"""W10: the tails (issue 20, item 1 and 5).

- ``W10_start``: the first ``Plan.tail_s`` seconds after the server started (its workers report
  their app built, nothing else warmed them): loadNamespaceMetadata at the usual concurrency, no
  warm-up, before the benchmark's seeding touches the server;
- ``W10_recycle`` (servers with worker processes): the same right after one worker is told to
  exit (SIGTERM, as ``GROWLER_MAX_REQUESTS`` or a crash replaces a worker): the others serve while
  the arbiter starts its replacement, whose first requests are then measured too (the memory
  guard's hand-over starts the successor first instead: app/edge/recycling.py);
- ``W10_64_W1`` / ``W10_64_W3``: p99.9 at 64 connections for W1 and W3, after a warm-up.

W10_start and W10_recycle also give each worker's CPU seconds during the window
(``worker_cpu_s``): connections all accepted by one worker show as one busy worker and one idle,
and explain a low figure better than any timing (docs/benchmarks.md, "The first seconds of a worker").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.processes import children, cpu_seconds

NAMESPACE = "ns_tails"


def with_worker_shares(target: Any, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``measure()``, plus the CPU seconds each of the target's worker processes spent meanwhile
    (a worker that exited meanwhile: None). Targets of one process add nothing."""
    server = getattr(target, "gunicorn", None)
    if server is None:
        return measure()
    before = {pid: cpu_seconds(pid, with_children=False) for pid in children(server.pid)}
    result = measure()
    alive = set(children(server.pid))
    result["worker_cpu_s"] = {
        str(pid): round(cpu_seconds(pid, with_children=False) - cpu, 1) if pid in alive else None
        for pid, cpu in before.items()
    }
    return result


def cold(target: Any, plan: Any, run_wrk, http_json) -> dict[str, Any]:
    """W10_start: call before seeding. Creates its own namespace (one request) first."""
    status, _, _ = http_json("POST", target.api("namespaces"), body={"namespace": [NAMESPACE]}, headers=target.headers)
    if status != 200:
        raise RuntimeError(f"{target.name}: createNamespace {NAMESPACE} answered {status}")
    return with_worker_shares(
        target, lambda: run_wrk(target, plan, f"namespaces/{NAMESPACE}", duration_s=plan.tail_s, warm=False)
    )


def after_recycle(target: Any, plan: Any, run_wrk) -> dict[str, Any]:
    """W10_recycle: recycle one worker, then measure at once."""
    recycle = getattr(target, "recycle_worker", None)
    if recycle is None:
        return {"n/a": "one process: no workers to recycle"}
    recycle()
    result = with_worker_shares(
        target, lambda: run_wrk(target, plan, f"namespaces/{NAMESPACE}", duration_s=plan.tail_s, warm=False)
    )
    # The exiting worker's CPU time leaves the process tree in the window: CPU per request would
    # come out short, even negative. ``worker_cpu_s`` gives what the survivors spent instead.
    result.pop("cpu_ms_per_request", None)
    return result


def wide(target: Any, plan: Any, run_wrk, path: str) -> dict[str, Any]:
    """W10_64_*: 64 connections, after the usual warm-up."""
    return run_wrk(target, plan, path, connections=64)
