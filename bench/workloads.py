"""The workloads W1-W14, the same for every target (bench/targets.py), on what bench/seeding.py made.

Reads (W1-W4, W8) are driven by wrk; W5-W7 by bench/load.py in its own process. Every workload has
a warm-up whose results are thrown away. After them, unless ``BENCH_ONLY`` chose some, the
capability probe (bench/probe.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import bodies, history, million, planning, random_tables, tails
from bench.growler_target import GrowlerTarget
from bench.measuring import cpu_per_request, run_wrk
from bench.plan import NS_W1, NS_W3, NS_W5, NS_W6, NS_W7, Plan
from bench.probe import probe
from bench.seeding import catalog_client
from bench.targets import REPO, Target, http_json


def run_generator(target: Target, spec: dict[str, Any]) -> dict[str, Any]:
    """bench/load.py in its own process. CPU per request here is over every request it sent
    (warm-up, reloads after a 409 and checks included)."""
    spec = {"base_url": target.api(), "headers": target.headers, **spec}
    before = target.cpu_seconds()
    proc = subprocess.run(
        [sys.executable, "-m", "bench.load", json.dumps(spec)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH_JSON ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"bench.load failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result = json.loads(line.removeprefix("BENCH_JSON "))
    result["cpu_ms_per_request"] = cpu_per_request(
        before, target.cpu_seconds(), result.get("http_requests_total") or result["requests"]
    )
    return result


def not_available(reason: str) -> dict[str, Any]:
    return {"n/a": reason}


def check_get(target: Target, path: str, expect: int = 200, headers: dict[str, str] | None = None) -> Any:
    status, _, body = http_json("GET", target.api(path), headers={**target.headers, **(headers or {})})
    if status != expect:
        raise RuntimeError(f"{target.name}: GET {path} answered {status}, expected {expect}")
    return body


def run_all(target: Target, plan: Plan, seeded: dict[str, Any], work_dir: Path, log) -> dict[str, Any]:
    results: dict[str, Any] = {}

    def step(key: str, fn, *args: Any, **kwargs: Any) -> None:
        if not plan.runs(key):
            return
        log(f"{target.name}: {key}")
        start = time.perf_counter()
        try:
            results[key] = fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others
            results[key] = {"failed": f"{type(exc).__name__}: {exc}"[:2000]}
        results[key]["wall_s"] = round(time.perf_counter() - start, 1)

    def w1() -> dict[str, Any]:
        check_get(target, f"namespaces/{NS_W1}")
        return run_wrk(target, plan, f"namespaces/{NS_W1}")

    def w2() -> dict[str, Any]:
        listed = check_get(target, "namespaces")
        result = run_wrk(target, plan, "namespaces")
        result["namespaces_listed"] = len(listed.get("namespaces") or [])
        return result

    def w3() -> dict[str, Any]:
        check_get(target, f"namespaces/{NS_W3}/tables/wide")
        result = run_wrk(target, plan, f"namespaces/{NS_W3}/tables/wide")
        result["response_bytes"] = seeded.get("wide_bytes")
        return result

    def w4() -> dict[str, Any]:
        etag = seeded.get("etag")
        if not etag:
            return not_available(
                "loadTable sends no ETag, so there is nothing to send in If-None-Match "
                "(a conditional request is answered 200 with the full body)"
            )
        if not seeded.get("etag_304"):
            return not_available("loadTable sends an ETag but does not answer If-None-Match with 304")
        check_get(target, f"namespaces/{NS_W3}/tables/wide", 304, {"If-None-Match": etag})
        return run_wrk(target, plan, f"namespaces/{NS_W3}/tables/wide", headers={"If-None-Match": etag})

    def w5() -> dict[str, Any]:
        return run_generator(
            target,
            {
                "mode": "create",
                "namespace": NS_W5,
                "concurrency": plan.concurrency,
                "count": plan.w5_count,
                "warmup": plan.w5_warmup,
                "seed": plan.seed,
            },
        )

    def appends(namespace: str, table: str, writers: int, count: int, warmup: int) -> dict[str, Any]:
        result = run_generator(
            target,
            {
                "mode": "append" if writers == 1 else "append_concurrent",
                "namespace": namespace,
                "table": table,
                "writers": writers,
                "count": count,
                "warmup": warmup,
                "seed": plan.seed,
                "metrics_url": target.metrics_url,
            },
        )
        location = result.get("final_metadata_location")
        result["final_metadata_file_exists"] = target.object_exists(location) if location else None
        return result

    step("W1", w1)
    step("W2", w2)
    step("W3", w3)
    step("W4", w4)
    step("W5", w5)
    step("W6", appends, NS_W6, "w6", 1, plan.w6_count, plan.w6_warmup)
    step("W7", appends, NS_W7, "w7", plan.w7_writers, plan.w7_count, plan.w7_warmup)

    def w8(which: str) -> dict[str, Any]:
        pages = seeded[f"w8_{which}_pages"]
        result = run_wrk(target, plan, "", paths=pages["paths"], work_dir=work_dir)
        result.update(tables=pages["tables"], pages=pages["pages"])
        return result

    step("W8_big", w8, "big")
    step("W8_small", w8, "small")
    step("W10_64_W1", tails.wide, target, plan, run_wrk, f"namespaces/{NS_W1}")
    step("W10_64_W3", tails.wide, target, plan, run_wrk, f"namespaces/{NS_W3}/tables/wide")
    if plan.runs("W9"):
        results["W9"] = target.memory()
    step("W10_recycle", tails.after_recycle, target, plan, run_wrk)  # after W9: it replaces the workers
    with catalog_client(target, 1) as client:
        step("W11", history.run, target, plan, run_generator, run_wrk, client)
        if not isinstance(target, GrowlerTarget):
            if plan.runs("W11_expiry"):
                results["W11_expiry"] = not_available("no maintenance executor")
        else:
            step("W11_expiry", history.run_with_expiry, target, plan, run_generator, client)

    def w12() -> dict[str, Any]:
        if not planning.supports_planning(target):
            return not_available("no server-side scan planning (planTableScan is not among /v1/config's endpoints)")
        start = time.perf_counter()
        table = planning.seed_table(target, plan.w12_files, plan.w12_commits)
        seeding_s = round(time.perf_counter() - start, 1)
        result = run_generator(target, planning.generator_spec(plan))
        before_total = result.pop("cpu_ms_per_request")
        # run_generator divides by HTTP requests; a plan is several (plan, polls, task pages)
        requests = result.get("http_requests_total") or 1
        result["cpu_ms_per_plan"] = {k: round(v * requests / result["plans_total"], 3) for k, v in before_total.items()}
        result.update(table=table, seeding_s=seeding_s)
        return result

    step("W12", w12)

    if plan.runs("W13"):  # last: it restarts the server's workers
        log(f"{target.name}: W13")
        if not isinstance(target, GrowlerTarget):
            results["W13"] = not_available("its 100,000 tables would be created over HTTP (no database to insert into)")
        else:
            try:
                start = time.perf_counter()
                with catalog_client(target, 1) as client:
                    catalog = random_tables.seed(target, plan, client, bodies)
                seeded["w13_seeding_s"] = round(time.perf_counter() - start, 1)
                seeded["w13_tables"] = catalog["tables"]
                results.update(random_tables.measure(target, plan, run_wrk, catalog["paths"], work_dir))
            except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others
                results["W13"] = {"failed": f"{type(exc).__name__}: {exc}"[:2000]}
    if plan.runs("W14"):  # after W13, whose catalog it grows to 1,000,000 tables
        log(f"{target.name}: W14")
        if not isinstance(target, GrowlerTarget):
            results["W14"] = not_available(
                "its 1,000,000 tables would be created over HTTP (no database to insert into)"
            )
        else:
            try:
                with catalog_client(target, 1) as client:
                    done = plan.w13_namespaces if seeded.get("w13_tables") else 0
                    catalog = million.seed(target, plan, client, bodies, done)
                    pages = million.listing_paths(client, target, plan)
                seeded["w14_seeding_s"] = catalog["seeding_s"]
                seeded["w14_tables"] = catalog["tables"]
                seeded["w14_database"] = million.database_size(target)
                results.update(million.measure(target, plan, run_wrk, catalog, pages, work_dir))
            except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others
                results["W14"] = {"failed": f"{type(exc).__name__}: {exc}"[:2000]}
    if plan.runs("W9"):  # and once more at the very end: the workers after everything (issue 47)
        results["W9_end"] = target.memory()
    if not plan.only:
        log(f"{target.name}: capability probe")
        results["capabilities"] = probe(target)
    return results
