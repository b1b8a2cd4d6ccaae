"""W14: a catalog of 1,000,000 tables (issue 47): loadTable of random tables and listing pages.

W13's catalog (bench/random_tables.py: namespaces ``ns098.r000`` .. of 1,000 tables each, rows
inserted by SQL into storage's own table from one real table's row) grown to ``Plan.w14_tables``
in ``Plan.w14_namespaces`` namespaces: the namespaces over HTTP, the tables by the same one
INSERT ... SELECT over generate_series (``GrowlerTarget.random_tables``), a few hundred thousand
rows a minute on 2 cores instead of hours of createTable calls.

Measured on the shipped defaults (authentication, recycling, logging), 16 connections, wrk:

- ``W14_load``: loadTable of a table chosen at random for each request out of all of them;
- ``W14_list``: listTables pages of 100 in 1,000-table namespaces, a page chosen at random out of
  every page of ``Plan.w14_listed_namespaces`` namespaces chosen at random (each with its pageToken).

``python -m bench.million``: W14 alone on a fresh server (seeds the whole catalog itself); it prints
the figures and writes ``bench/results/<time>-w14.json``. ``BENCH_QUICK=1``: 5,000 tables.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from bench import random_tables


def seed(target: Any, plan: Any, client: Any, bodies: Any, seeded_children: int) -> dict[str, Any]:
    """The namespaces and tables W13 did not make (``seeded_children`` of its namespaces exist, the
    template table in the first); the paths of every table."""
    per = plan.w14_tables // plan.w14_namespaces
    timings: dict[str, float] = {}
    start = time.perf_counter()
    if seeded_children == 0:
        client.post("namespaces", json={"namespace": [random_tables.NAMESPACE_PARENT]})
        first = "%1F".join(random_tables.namespace(0))
        response = client.post("namespaces", json={"namespace": list(random_tables.namespace(0))})
        if response.status_code != 200:
            raise RuntimeError(f"createNamespace answered {response.status_code}: {response.text}")
        response = client.post(f"namespaces/{first}/tables", json=bodies.create_table(random_tables.TEMPLATE, 8))
        if response.status_code != 200:
            raise RuntimeError(f"createTable answered {response.status_code}: {response.text}")
    new = [random_tables.namespace(i) for i in range(max(seeded_children, 1), plan.w14_namespaces)]
    for ns in new:
        response = client.post("namespaces", json={"namespace": list(ns)})
        if response.status_code != 200:
            raise RuntimeError(f"createNamespace {ns} answered {response.status_code}: {response.text}")
    timings["namespaces"] = round(time.perf_counter() - start, 1)
    children = [child for _, child in new]
    if seeded_children == 0:
        children.insert(0, random_tables.namespace(0)[1])
    start = time.perf_counter()
    # batches of 100 namespaces (100,000 rows): one statement's WAL and memory stay bounded
    for i in range(0, len(children), 100):
        target.random_tables(
            random_tables.NAMESPACE_PARENT,
            children[i : i + 100],
            per,
            random_tables.TEMPLATE,
            template_child=random_tables.namespace(0)[1],
        )
    timings["tables"] = round(time.perf_counter() - start, 1)
    base = target.api().removeprefix(target.base_url)
    # not a million paths: bench/lua/random_tables.lua makes each from the pattern
    pattern = f"{base}namespaces/{random_tables.NAMESPACE_PARENT}%1Fr|{plan.w14_namespaces}|{per}"
    return {"tables": plan.w14_namespaces * per, "pattern": pattern, "seeding_s": timings}


def listing_paths(client: Any, target: Any, plan: Any) -> list[str]:
    """Every page (of 100) of ``w14_listed_namespaces`` namespaces chosen at random (seeded)."""
    from bench.seeding import page_paths

    rng = random.Random(plan.seed)
    chosen = rng.sample(range(plan.w14_namespaces), plan.w14_listed_namespaces)
    paths: list[str] = []
    for i in chosen:
        ns = f"{random_tables.NAMESPACE_PARENT}%1F{random_tables.namespace(i)[1]}"
        paths.extend(page_paths(client, target, ns, 100)["paths"])
    return paths


def measure(
    target: Any, plan: Any, run_wrk: Any, catalog: dict[str, Any], pages: list[str], work_dir: Path
) -> dict[str, Any]:
    load = run_wrk(
        target,
        plan,
        "",
        paths=[catalog["pattern"]],
        work_dir=work_dir,
        duration_s=plan.w14_s,
        script="random_tables.lua",
    )
    load["tables"] = catalog["tables"]
    listing = run_wrk(target, plan, "", paths=pages, work_dir=work_dir, duration_s=plan.w14_s)
    listing["pages"] = len(pages)
    return {"W14_load": load, "W14_list": listing}


def database_size(target: Any) -> dict[str, Any]:
    """What 1,000,000 tables take in PostgreSQL (the figure shared_buffers is sized against)."""
    import psycopg

    with psycopg.connect(target.postgres.url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pg_total_relation_size('catalog_entry'), pg_indexes_size('catalog_entry'),"
            " pg_database_size(current_database()), current_setting('shared_buffers')"
        ).fetchone()
    return {
        "catalog_entry_mb": round(row[0] / 2**20),
        "catalog_entry_indexes_mb": round(row[1] / 2**20),
        "database_mb": round(row[2] / 2**20),
        "shared_buffers": row[3],
    }


def main() -> None:
    import datetime
    import json
    import os

    import httpx

    from bench import bodies
    from bench.growler_target import GrowlerTarget
    from bench.machine import RESULTS_DIR, machine
    from bench.measuring import run_wrk
    from bench.plan import Plan
    from bench.targets import make_root, remove_root

    quick = os.environ.get("BENCH_QUICK", "") == "1"
    plan = Plan.make(quick, int(os.environ.get("BENCH_SEED", "7")), 1)
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    doc: dict[str, Any] = {"started_at": started, "kind": "w14", "machine": machine()}
    root = make_root()
    target = GrowlerTarget(root / "growler", int(os.environ.get("GROWLER_WORKERS") or 2))
    target.root.mkdir(parents=True)
    try:
        target.start()
        with httpx.Client(base_url=target.api(), headers=target.headers, timeout=60.0) as client:
            catalog = seed(target, plan, client, bodies, 0)
            pages = listing_paths(client, target, plan)
        work_dir = root / "work"
        work_dir.mkdir()
        doc["seeding_s"] = catalog["seeding_s"]
        doc["database"] = database_size(target)
        doc["results"] = measure(target, plan, run_wrk, catalog, pages, work_dir)
        doc["memory"] = target.memory()
    finally:
        target.stop()
        if os.environ.get("BENCH_KEEP") == "1":
            print(f"kept {root}")
        else:
            remove_root(root)
    doc["machine"]["loadavg_after"] = round(os.getloadavg()[0], 2)
    for label, result in doc["results"].items():
        keep = ("rps", "latency_ms", "errors", "tables", "pages", "cpu_ms_per_request")
        print(label, json.dumps({k: result.get(k) for k in keep}), flush=True)
    print("seeding", json.dumps(doc["seeding_s"]), "database", json.dumps(doc["database"]), flush=True)
    RESULTS_DIR.mkdir(exist_ok=True)
    suffix = "-w14-quick" if quick else "-w14"
    out = RESULTS_DIR / f"{started.replace(':', '').replace('-', '')}{suffix}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"results: {out}")


if __name__ == "__main__":
    main()
