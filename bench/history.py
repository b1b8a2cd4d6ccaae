"""W11: what a commit and a load cost as a table's history grows (issue 20, item 4).

One table with W3's 40 columns is grown to each level of ``Plan.history_levels`` snapshots; at
each level the same single writer commits ``Plan.history_commits`` appends (bench/load.py's
``append`` mode, its own process, CPU measured per request) and wrk loads the table for
``Plan.history_load_s`` seconds. Growth between levels is seeded in batches: one updateTable with
many ``add-snapshot`` updates (each the parent of the next, sequence numbers rising) and one
``set-snapshot-ref``, a commit every catalog must accept, so reaching 4,000 snapshots takes a few
requests instead of thousands.
"""

from __future__ import annotations

import random
from typing import Any

import httpx

from bench import bodies

NAMESPACE = "ns_history"
TABLE = "grown"
SEED_BATCH = 250  # snapshots per seeding commit: ~100 KB bodies


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


def _brief(result: dict[str, Any]) -> dict[str, Any]:
    keep = ("requests", "rps", "latency_ms", "errors", "cpu_ms_per_request")
    return {key: result[key] for key in keep if key in result}
