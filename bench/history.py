"""W11: what a commit and a load cost as a table's history grows (issue 20, item 4).

One table with W3's 40 columns is grown to each level of ``Plan.history_levels`` snapshots; at
each level the same single writer commits ``Plan.history_commits`` appends (bench/load.py's
``append`` mode, its own process, CPU measured per request) and wrk loads the table for
``Plan.history_load_s`` seconds. Growth between levels is seeded in batches: one updateTable with
many ``add-snapshot`` updates (each the parent of the next, sequence numbers rising) and one
``set-snapshot-ref``, a commit every catalog must accept, so reaching 4,000 snapshots takes a few
requests instead of thousands.

W11_expiry (issue 37, Growler only: the peer executes no maintenance): the same growth to the top
level on a second table with a snapshot-expiry policy keeping ``EXPIRY_KEEP`` attached through the
management API. The growth's commits make the table due (app/maintenance/trigger.py) and the
server's housekeeping expires it; the workload waits (polling the table) until it is back to the
policy's count, then the same writer commits the same appends as W11, measured. A commit there
must cost what a commit at ``EXPIRY_KEEP`` snapshots costs.
"""

from __future__ import annotations

import random
import time
from typing import Any

import httpx

from bench import bodies
from bench.targets import WAREHOUSE

NAMESPACE = "ns_history"
TABLE = "grown"
SEED_BATCH = 250  # snapshots per seeding commit: ~100 KB bodies
KEPT_TABLE = "grown_kept"
EXPIRY_KEEP = 100
EXPIRY_WAIT_S = 180.0  # the trigger looks at a table at most every 30 s per worker, housekeeping every 10 s
EXPIRY_MIN_LEVEL = 600  # above the trigger's snapshot threshold (500), for BENCH_QUICK's small levels


def append_batch(location: str, rng: random.Random, sequence: int, parent: int | None, count: int) -> dict[str, Any]:
    """One commit adding ``count`` snapshots in a chain and moving main to the last of them."""
    updates: list[dict[str, Any]] = []
    head = parent
    for offset in range(1, count + 1):
        snapshot = bodies.snapshot_id(rng)
        single = bodies.append(location, snapshot, sequence + offset, head)
        updates.append(single["updates"][0])
        head = snapshot
    return {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": parent}],
        "updates": [
            *updates,
            {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": head},
        ],
    }


def grow(client: httpx.Client, url: str, snapshots: int, rng: random.Random) -> int:
    """Add snapshots until the table has ``snapshots`` of them; returns how many it has."""
    metadata = _ok(client.get(url)).json()["metadata"]
    have = len(metadata.get("snapshots") or [])
    while have < snapshots:
        location, parent, sequence = bodies.table_state(metadata)
        batch = min(SEED_BATCH, snapshots - have)
        metadata = _ok(client.post(url, json=append_batch(location, rng, sequence, parent, batch))).json()["metadata"]
        have = len(metadata.get("snapshots") or [])
    return have


def _ok(response: httpx.Response) -> httpx.Response:
    if response.status_code != 200:
        raise RuntimeError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: {response.text[:300]}"
        )
    return response


def run(target: Any, plan: Any, run_generator, run_wrk, client: httpx.Client) -> dict[str, Any]:
    """W11 for one target: {"levels": [{snapshots, commit: {...}, load: {...}}, ...]}."""
    rng = random.Random(plan.seed + 11)
    _ok(client.post("namespaces", json={"namespace": [NAMESPACE]}))
    _ok(client.post(f"namespaces/{NAMESPACE}/tables", json=bodies.create_table(TABLE, plan.wide_columns)))
    url = f"namespaces/{NAMESPACE}/tables/{TABLE}"
    levels = []
    for level in plan.history_levels:
        have = grow(client, url, level, rng)
        commit = run_generator(
            target,
            {
                "mode": "append",
                "namespace": NAMESPACE,
                "table": TABLE,
                "writers": 1,
                "count": plan.history_commits,
                "warmup": 2,
                "seed": plan.seed + level,
            },
        )
        load = run_wrk(target, plan, url, duration_s=plan.history_load_s)
        response_bytes = len(_ok(client.get(url)).content)
        levels.append(
            {"snapshots": have, "commit": _brief(commit), "load": _brief(load), "load_response_bytes": response_bytes}
        )
    return {"levels": levels}


def run_with_expiry(target: Any, plan: Any, run_generator, client: httpx.Client) -> dict[str, Any]:
    """W11_expiry for Growler: {grown_to, converged_s, snapshots_before, snapshots_after, commit}."""
    rng = random.Random(plan.seed + 111)
    client.post("namespaces", json={"namespace": [NAMESPACE]})  # (W11 made it, unless BENCH_ONLY=W11_expiry)
    _ok(client.post(f"namespaces/{NAMESPACE}/tables", json=bodies.create_table(KEPT_TABLE, plan.wide_columns)))
    policy = {
        "policy-type": "system.snapshot-expiry",
        "securable": {"type": "table", "warehouse": WAREHOUSE, "namespace": [NAMESPACE], "name": KEPT_TABLE},
        "content": {"enable": True, "config": {"min_snapshot_to_keep": EXPIRY_KEEP, "max_snapshot_age_days": 0}},
    }
    _ok(httpx.put(f"{target.base_url}/management/v1/maintenance/policies", json=policy, headers=target.headers))
    url = f"namespaces/{NAMESPACE}/tables/{KEPT_TABLE}"
    top = max(max(plan.history_levels), EXPIRY_MIN_LEVEL)
    grown_to = grow(client, url, top, rng)
    start = time.monotonic()
    have = grown_to
    while have > EXPIRY_KEEP:
        if time.monotonic() - start > EXPIRY_WAIT_S:
            raise RuntimeError(f"still {have} snapshots {EXPIRY_WAIT_S:.0f} s after the growth: never expired")
        time.sleep(0.5)
        have = len(_ok(client.get(url)).json()["metadata"].get("snapshots") or [])
    # ... and the run that expired it is over (its deletes follow its commit): measured, the
    # commits then are those of a table that keeps a short history, not of one being maintained
    maintenance = f"{target.base_url}/management/v1/maintenance/warehouses/{WAREHOUSE}"
    runs = f"{maintenance}/namespaces/{NAMESPACE}/tables/{KEPT_TABLE}/runs"
    while any(run["status"] == "running" for run in _ok(httpx.get(runs, headers=target.headers)).json()["runs"]):
        if time.monotonic() - start > EXPIRY_WAIT_S:
            raise RuntimeError(f"the expiry run was still running {EXPIRY_WAIT_S:.0f} s after the growth")
        time.sleep(0.5)
    converged_s = round(time.monotonic() - start, 1)
    finished = _ok(httpx.get(runs, headers=target.headers)).json()["runs"]
    commit = run_generator(
        target,
        {
            "mode": "append",
            "namespace": NAMESPACE,
            "table": KEPT_TABLE,
            "writers": 1,
            "count": plan.history_commits,
            "warmup": 2,
            "seed": plan.seed + 4011,
        },
    )
    after = len(_ok(client.get(url)).json()["metadata"].get("snapshots") or [])
    return {
        "grown_to": grown_to,
        "kept": EXPIRY_KEEP,
        "converged_s": converged_s,
        "snapshots_before": have,
        "snapshots_after": after,
        "runs": [{k: run.get(k) for k in ("trigger", "status", "files-removed")} for run in finished],
        "commit": _brief(commit),
    }


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    keep = ("requests", "rps", "latency_ms", "errors", "cpu_ms_per_request")
    return {key: result[key] for key in keep if key in result}
