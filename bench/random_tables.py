"""W13: loadTable of random tables over a catalog of 100,000, with tokens, on the shipped defaults
(issue 40: the tail a deployment sees, worker recycling included).

The catalog: 100 namespaces ``ns098.r000`` .. ``ns098.r099`` (nested, so W2 still lists 100
top-level ones) of 1,000 tables each. One real table is created over HTTP; the others are rows
inserted by one SQL statement (``GrowlerTarget.random_tables``), each with its own uuid, location,
metadata location and metadata document (the real one's, with its uuid and location replaced), as
a created table's row looks. Their metadata files are not written to S3: loadTable answers from
the document in the row and never reads the file.

Measured (wrk, 16 connections, a path chosen at random for each request out of the 100,000, the
bench's token on every request):

- ``W13_first``: the first ``Plan.tail_s`` seconds of freshly started workers (gunicorn restarted,
  nothing warmed them but their own start-up);
- ``W13``: ``Plan.w13_s`` seconds (60) on the shipped defaults (recycling as shipped);
- ``W13_no_recycle``: the same with every recycling guard off, the steady state W13 is held to.

Each result says how many workers booted meanwhile (gunicorn's "Booting worker" lines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

NAMESPACE_PARENT = "ns098"
NAMESPACES = 100
TABLES_PER_NAMESPACE = 1000
TEMPLATE = "template"


def namespace(index: int) -> tuple[str, str]:
    return (NAMESPACE_PARENT, f"r{index:03d}")


def table(index: int) -> str:
    return f"t{index:05d}"


def seed(target: Any, plan: Any, client: Any, bodies: Any) -> dict[str, Any]:
    """Namespaces over HTTP, one real table, then the rest in SQL; the absolute paths to load."""
    namespaces = plan.w13_namespaces
    per = plan.w13_tables // namespaces
    client.post("namespaces", json={"namespace": [NAMESPACE_PARENT]})  # seeded already in a full run
    for i in range(namespaces):
        response = client.post("namespaces", json={"namespace": list(namespace(i))})
        if response.status_code != 200:
            raise RuntimeError(f"createNamespace {namespace(i)} answered {response.status_code}: {response.text}")
    first = "%1F".join(namespace(0))
    response = client.post(f"namespaces/{first}/tables", json=bodies.create_table(TEMPLATE, 8))
    if response.status_code != 200:
        raise RuntimeError(f"createTable {TEMPLATE} answered {response.status_code}: {response.text}")
    target.random_tables(NAMESPACE_PARENT, [namespace(i)[1] for i in range(namespaces)], per, TEMPLATE)
    base = target.api().removeprefix(target.base_url)
    paths = [
        f"{base}namespaces/{NAMESPACE_PARENT}%1F{namespace(i)[1]}/tables/{table(j)}"
        for i in range(namespaces)
        for j in range(per)
    ]
    return {"tables": len(paths), "paths": paths}


def measure(target: Any, plan: Any, run_wrk: Any, paths: list[str], work_dir: Path) -> dict[str, Any]:
    """W13_first, W13 and W13_no_recycle (each restarts the server's gunicorn, keeping its data)."""
    results: dict[str, Any] = {}

    def one(label: str, duration_s: int, overrides: dict[str, str], reason: str) -> None:
        target.restart(overrides)
        booted = target.workers_booted()
        result = run_wrk(target, plan, "", paths=paths, work_dir=work_dir, duration_s=duration_s, warm=False)
        result["workers_booted"] = target.workers_booted() - booted
        result["settings_changed"] = {"values": overrides, "reason": reason} if overrides else {}
        results[label] = result

    one("W13_first", plan.tail_s, {}, "")
    one("W13", plan.w13_s, {}, "")
    one(
        "W13_no_recycle",
        plan.w13_s,
        {"GROWLER_MAX_REQUESTS": "0", "GROWLER_MAX_WORKER_RSS_MB": "0"},
        "the steady state W13 is compared with: no worker is ever replaced",
    )
    target.restart({})  # the shipped defaults again for whatever runs next
    return results


def main() -> None:
    """``python -m bench.random_tables``: W13 alone, on a fresh server (A/B comparisons; a full
    ``make bench`` runs it after W12). BENCH_QUICK=1: the quick plan's small catalog."""
    import json
    import os

    import httpx

    from bench import bodies
    from bench.growler_target import GrowlerTarget
    from bench.measuring import run_wrk
    from bench.plan import Plan
    from bench.targets import make_root, remove_root

    quick = os.environ.get("BENCH_QUICK", "") == "1"
    # BENCH_W13_ENV='{"GROWLER_MAX_WORKER_RSS_MB": "130"}': settings on every line (experiments only)
    extra = json.loads(os.environ.get("BENCH_W13_ENV") or "{}")
    plan = Plan.make(quick, int(os.environ.get("BENCH_SEED", "7")), 1)
    root = make_root()
    target = GrowlerTarget(root / "growler", int(os.environ.get("GROWLER_WORKERS") or 2))
    target.root.mkdir(parents=True)
    try:
        target.start()
        target.env.update(extra)
        with httpx.Client(base_url=target.api(), headers=target.headers, timeout=60.0) as client:
            catalog = seed(target, plan, client, bodies)
        work_dir = root / "work"
        work_dir.mkdir()
        for label, result in measure(target, plan, run_wrk, catalog["paths"], work_dir).items():
            keep = ("rps", "latency_ms", "errors", "workers_booted")
            print(label, json.dumps({k: result[k] for k in keep}), extra or "", flush=True)
        print("memory", json.dumps(target.memory()), flush=True)
    finally:
        target.stop()
        if os.environ.get("BENCH_KEEP") == "1":
            print(f"kept {root}")
        else:
            remove_root(root)


if __name__ == "__main__":
    main()
