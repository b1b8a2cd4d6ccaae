"""``python -m bench.first_seconds``: W1 in a worker's first seconds, and where the load landed.

A shorter probe than ``make bench``'s W10, for before/after comparisons of start-up changes: start
Growler as the bench does (2 workers), then loadNamespaceMetadata at 16 connections for 10 s from
the first request (cold), 10 s more (warm), and 10 s right after one worker was recycled. Each
line also gives the CPU seconds each worker spent meanwhile: connections that all landed on one
worker show as one busy worker and one idle one (docs/benchmarks.md, "The first seconds of a worker").
"""

from __future__ import annotations

import json

from bench import wrk
from bench.growler_target import GrowlerTarget
from bench.tails import with_worker_shares
from bench.targets import http_json, make_root, remove_root

NAMESPACE = "ns_tails"
SECONDS = 10
CONNECTIONS = 16


def _measure(target: GrowlerTarget, url: str) -> dict:
    def run() -> dict:
        result = wrk.run(url, duration_s=SECONDS, connections=CONNECTIONS, threads=1, headers=target.headers)
        return {key: result[key] for key in ("rps", "latency_ms", "errors")}

    return with_worker_shares(target, run)


def main() -> None:
    root = make_root()
    target = GrowlerTarget(root / "growler", 2)
    target.root.mkdir(parents=True)
    try:
        target.start()
        body = {"namespace": [NAMESPACE]}
        status, _, _ = http_json("POST", target.api("namespaces"), body=body, headers=target.headers)
        if status != 200:
            raise RuntimeError(f"createNamespace answered {status}")
        url = target.api(f"namespaces/{NAMESPACE}")
        print("cold", json.dumps(_measure(target, url)), flush=True)
        print("warm", json.dumps(_measure(target, url)), flush=True)
        target.recycle_worker()
        print("recycle", json.dumps(_measure(target, url)), flush=True)
    finally:
        target.stop()
        remove_root(root)


if __name__ == "__main__":
    main()
