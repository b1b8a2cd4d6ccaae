"""Seeding and the workloads W1-W12, the same for every target (bench/targets.py).

Namespaces: exactly 100 top-level ones, ``ns000`` .. ``ns099`` (so W2 lists 100), each with a
few properties. Some hold the workloads' tables:

  ns000  W1 (loadNamespaceMetadata)
  ns001  W3/W4: ``wide``, 40 columns, 100 snapshots (appended over HTTP)
  ns002  W5: createTable targets
  ns003  W6: ``w6``, one writer
  ns004  W7: ``w7``, 8 concurrent writers
  ns005  W8: ``bulk_00001`` .. (10,000 tables; Growler: one SQL INSERT, see GrowlerTarget.bulk_tables;
         the peer has no database to write to, so it gets them over HTTP)
  ns006  W8: ``t000`` .. ``t099`` (100 tables, over HTTP)
  ns099  W12: ``planned``, 2,000 data files in its manifests (PyIceberg; bench/planning.py)

Reads (W1-W4, W8) are driven by wrk; W5-W7 by bench/load.py in its own process. Every workload has
a warm-up whose results are thrown away.
"""

from __future__ import annotations

import json
import random
import resource
import subprocess
import sys
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from bench import bodies, history, planning, random_tables, tails, wrk
from bench.growler_target import GrowlerTarget
from bench.targets import REPO, Target, http_json

NAMESPACES = [f"ns{i:03d}" for i in range(100)]
NS_W1, NS_W3, NS_W5, NS_W6, NS_W7, NS_W8_BIG, NS_W8_SMALL = NAMESPACES[:7]
NAMESPACE_PROPERTIES = {"owner": "bench", "comment": "growler benchmark namespace", "retention-days": "30"}


@dataclass(frozen=True)
class Plan:
    quick: bool
    seed: int
    concurrency: int
    wrk_threads: int
    warmup_s: int
    duration_s: int
    wide_columns: int
    wide_snapshots: int
    w5_count: int
    w5_warmup: int
    w6_count: int
    w6_warmup: int
    w7_writers: int
    w7_count: int
    w7_warmup: int
    w8_big: int
    w8_small: int
    seed_concurrency: int
    # W10 (bench/tails.py): seconds measured after a start or a recycle
    tail_s: int = 10
    # W11 (bench/history.py): snapshot counts, appends and seconds of loads measured at each
    history_levels: tuple[int, ...] = (100, 1000, 4000)
    history_commits: int = 40
    history_load_s: int = 5
    w12_files: int = 2000
    w12_commits: int = 4
    w12_concurrency: int = 4
    w12_count: int = 200
    w12_warmup: int = 20
    # W13 (bench/random_tables.py): a catalog of w13_tables in w13_namespaces, measured w13_s seconds
    w13_tables: int = 100_000
    w13_namespaces: int = 100
    w13_s: int = 60
    only: tuple[str, ...] = ()  # BENCH_ONLY: the workloads to run (W1 .. W12); empty: all

    @classmethod
    def make(cls, quick: bool, seed: int, wrk_threads: int, only: tuple[str, ...] = ()) -> Plan:
        if quick:
            return cls(
                quick,
                seed,
                16,
                wrk_threads,
                0,
                1,
                40,
                100,
                32,
                16,
                10,
                2,
                8,
                2,
                1,
                300,
                100,
                16,
                tail_s=2,
                history_levels=(20, 100),
                history_commits=5,
                history_load_s=1,
                w12_count=40,
                w12_warmup=8,
                w13_tables=2_000,
                w13_namespaces=10,
                w13_s=3,
                only=only,
            )
        return cls(
            quick, seed, 16, wrk_threads, 5, 20, 40, 100, 2000, 160, 300, 20, 8, 40, 2, 10_000, 100, 16, only=only
        )

    def runs(self, workload: str) -> bool:
        name = workload.upper()  # BENCH_ONLY is read upper-cased: W10_start must match W10_START
        return not self.only or name in self.only or name.split("_")[0] in self.only

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- seeding -----------------------------------------------------------------------------------


def _parallel(fn, items: list[Any], workers: int) -> list[Any]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def _expect(response: httpx.Response, *ok: int) -> httpx.Response:
    if response.status_code not in ok:
        raise RuntimeError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: {response.text[:300]}"
        )
    return response


def _client(target: Target, connections: int = 16) -> httpx.Client:
    return httpx.Client(
        base_url=target.api(),
        headers=target.headers,
        timeout=60.0,
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


def append_sequentially(client: httpx.Client, url: str, count: int, rng: random.Random) -> dict[str, Any]:
    metadata = _expect(client.get(url), 200).json()["metadata"]
    for _ in range(count):
        location, parent, sequence = bodies.table_state(metadata)
        body = bodies.append(location, bodies.snapshot_id(rng), sequence + 1, parent)
        metadata = _expect(client.post(url, json=body), 200).json()["metadata"]
    return metadata


def seed(target: Target, plan: Plan, work_dir: Path) -> dict[str, Any]:
    """Create what the workloads read and write; returns what they need (paths, ETag, timings)."""
    rng = random.Random(plan.seed)
    timings: dict[str, float] = {}
    info: dict[str, Any] = {"timings_s": timings}

    def timed(label: str, fn, *args: Any) -> Any:
        start = time.perf_counter()
        result = fn(*args)
        timings[label] = round(time.perf_counter() - start, 2)
        return result

    with _client(target, plan.seed_concurrency) as client:

        def create_namespace(name: str) -> None:
            _expect(client.post("namespaces", json={"namespace": [name], "properties": NAMESPACE_PROPERTIES}), 200)

        timed("namespaces", _parallel, create_namespace, NAMESPACES, plan.seed_concurrency)

        def create_wide() -> dict[str, Any]:
            _expect(client.post(f"namespaces/{NS_W3}/tables", json=bodies.create_table("wide", plan.wide_columns)), 200)
            return append_sequentially(client, f"namespaces/{NS_W3}/tables/wide", plan.wide_snapshots, rng)

        wide = timed("wide_table", create_wide)
        info["wide"] = {"columns": len(wide["schemas"][-1]["fields"]), "snapshots": len(wide.get("snapshots") or [])}
        for ns, name in ((NS_W6, "w6"), (NS_W7, "w7")):
            _expect(client.post(f"namespaces/{ns}/tables", json=bodies.create_table(name)), 200)

        def create_small(i: int) -> None:
            _expect(client.post(f"namespaces/{NS_W8_SMALL}/tables", json=bodies.create_table(f"t{i:03d}")), 200)

        timed("w8_small_tables", _parallel, create_small, list(range(plan.w8_small)), plan.seed_concurrency)

        if isinstance(target, GrowlerTarget):
            info["w8_big_seeded_by"] = timed(
                "w8_big_tables", target.bulk_tables, NS_W8_BIG, NS_W8_SMALL, "t000", plan.w8_big
            )
        else:

            def create_bulk(i: int) -> None:
                _expect(client.post(f"namespaces/{NS_W8_BIG}/tables", json=bodies.create_table(f"bulk_{i:05d}")), 200)

            timed("w8_big_tables", _parallel, create_bulk, list(range(1, plan.w8_big + 1)), plan.seed_concurrency)
            info["w8_big_seeded_by"] = "http"

        info["w8_big_pages"] = page_paths(client, target, NS_W8_BIG, 100)
        info["w8_small_pages"] = page_paths(client, target, NS_W8_SMALL, 100)
        info["w8_big_tables"] = info["w8_big_pages"]["tables"]
        info["w8_small_tables"] = info["w8_small_pages"]["tables"]

        response = _expect(client.get(f"namespaces/{NS_W3}/tables/wide"), 200)
        info["wide_bytes"] = len(response.content)
        info["etag"] = response.headers.get("etag")
        if info["etag"]:
            conditional = client.get(f"namespaces/{NS_W3}/tables/wide", headers={"If-None-Match": info["etag"]})
            info["etag_304"] = conditional.status_code == 304
    return info


def page_paths(client: httpx.Client, target: Target, namespace: str, size: int) -> dict[str, Any]:
    """Walk listTables page by page; the absolute path of every page (each with its own token)."""
    base = urllib.parse.urlsplit(target.api()).path
    token = ""
    paths: list[str] = []
    tables = 0
    while True:
        query = urllib.parse.urlencode({"pageToken": token, "pageSize": size})
        relative = f"namespaces/{namespace}/tables?{query}"
        page = _expect(client.get(relative), 200).json()
        found = len(page.get("identifiers") or [])
        if found:  # a server may hand out a token for an empty last page
            paths.append(base + relative)
        tables += found
        token = page.get("next-page-token")
        if not token or not found or len(paths) > 100_000 // size:
            break
    return {"paths": paths, "tables": tables, "pages": len(paths)}


# -- running -----------------------------------------------------------------------------------


def run_wrk(
    target: Target,
    plan: Plan,
    path: str,
    headers: dict[str, str] | None = None,
    paths: list[str] | None = None,
    work_dir: Path | None = None,
    *,
    duration_s: float | None = None,
    connections: int | None = None,
    warm: bool = True,
) -> dict[str, Any]:
    """wrk against ``path`` (or ``paths``); ``warm=False`` measures from the first request (W10)."""
    url = target.api(path) if path else target.base_url + "/"
    kwargs: dict[str, Any] = {
        "connections": connections or plan.concurrency,
        "threads": plan.wrk_threads,
        "headers": {**target.headers, **(headers or {})},
        "seed": plan.seed,
    }
    if paths:
        paths_file = work_dir / f"paths-{target.name}-{abs(hash(tuple(paths))) % 10**8}.txt"
        paths_file.write_text("\n".join(paths) + "\n")
        kwargs.update(script="pages.lua", paths_file=paths_file)
    if warm and plan.warmup_s:
        wrk.run(url, duration_s=plan.warmup_s, **kwargs)  # warm-up, thrown away
    elif warm:  # quick mode: a few requests instead of wrk's shortest run (1 s)
        for path in (paths or [urllib.parse.urlsplit(url).path])[:20]:
            http_json("GET", target.base_url + path, headers=kwargs["headers"])
    before, generator_before = target.cpu_seconds(), _children_cpu()
    result = wrk.run(url, duration_s=duration_s or plan.duration_s, **kwargs)
    after, generator_after = target.cpu_seconds(), _children_cpu()
    result["cpu_ms_per_request"] = cpu_per_request(before, after, result["requests"])
    result["cpu_ms_per_request"]["generator"] = round(
        (generator_after - generator_before) * 1000 / max(result["requests"], 1), 3
    )
    return result


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_per_request(before: dict[str, float], after: dict[str, float], requests: int) -> dict[str, float]:
    """Server CPU milliseconds per request, by part, and their total (less noisy than req/s on a busy box)."""
    per = {k: round((after[k] - before[k]) * 1000 / max(requests, 1), 3) for k in after}
    per["server_total"] = round(sum(per.values()), 3)
    return per


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
    with _client(target, 1) as client:
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
                with _client(target, 1) as client:
                    catalog = random_tables.seed(target, plan, client, bodies)
                seeded["w13_seeding_s"] = round(time.perf_counter() - start, 1)
                seeded["w13_tables"] = catalog["tables"]
                results.update(random_tables.measure(target, plan, run_wrk, catalog["paths"], work_dir))
            except Exception as exc:  # noqa: BLE001 - one broken workload must not lose the others
                results["W13"] = {"failed": f"{type(exc).__name__}: {exc}"[:2000]}
    if not plan.only:
        log(f"{target.name}: capability probe")
        results["capabilities"] = probe(target)
    return results


# -- what each server does (after the workloads: the probe changes state) ----------------------


def probe(target: Target) -> dict[str, bool | None]:
    """Cheap yes/no checks of features around the workloads, for the fairness notes."""
    h = target.headers
    api = target.api
    found: dict[str, bool | None] = {}

    def status(method: str, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        code, hdrs, parsed = http_json(method, api(path), body, headers={**h, **(headers or {})})
        return code, (hdrs, parsed)

    wide = f"namespaces/{NS_W3}/tables/wide"
    code, (hdrs, full) = status("GET", wide)
    found["loadTable ETag + If-None-Match -> 304"] = (
        bool({k.lower() for k in hdrs} & {"etag"})
        and status("GET", wide, headers={"If-None-Match": hdrs.get("ETag") or hdrs.get("etag") or '"x"'})[0] == 304
    )
    found["/v1/config lists its endpoints"] = bool(getattr(target, "config", {}).get("endpoints"))
    code, (_, refs) = status("GET", wide + "?snapshots=refs")
    found["loadTable snapshots=refs"] = bool(
        code == 200
        and full
        and refs
        and len(refs["metadata"].get("snapshots") or []) < len(full["metadata"].get("snapshots") or [])
    )
    code, (_, page) = status("GET", f"namespaces/{NS_W8_SMALL}/tables?pageToken=&pageSize=10")
    found["listTables pagination"] = bool(code == 200 and page and page.get("next-page-token"))
    code, (_, page) = status("GET", "namespaces?pageToken=&pageSize=10")
    found["listNamespaces pagination"] = bool(code == 200 and page and page.get("next-page-token"))
    code, _ = status("POST", "namespaces", {"namespace": [NS_W1, "child"]})
    found["nested namespaces"] = code == 200 and status("GET", f"namespaces?parent={NS_W1}")[0] == 200
    code, _ = status("POST", f"namespaces/{NS_W1}/properties", {"updates": {"k": "v"}, "removals": []})
    found["updateNamespaceProperties"] = code == 200
    code, _ = status("HEAD", wide)
    found["tableExists (HEAD)"] = code in (200, 204)
    code, (hdrs, body) = status("GET", wide, headers={"X-Iceberg-Access-Delegation": "vended-credentials"})
    found["vended credentials"] = bool(
        body and (body.get("storage-credentials") or any("secret-access-key" in k for k in (body.get("config") or {})))
    )
    code, _ = status(
        "POST",
        "tables/rename",
        {
            "source": {"namespace": [NS_W8_SMALL], "name": "t099"},
            "destination": {"namespace": [NS_W8_SMALL], "name": "t099_renamed"},
        },
    )
    found["renameTable"] = code == 204
    code, _ = status(
        "POST",
        "transactions/commit",
        {
            "table-changes": [
                {
                    "identifier": {"namespace": [NS_W8_SMALL], "name": "t001"},
                    "requirements": [],
                    "updates": [{"action": "set-properties", "updates": {"bench": "1"}}],
                },
                {
                    "identifier": {"namespace": [NS_W8_SMALL], "name": "t002"},
                    "requirements": [],
                    "updates": [{"action": "set-properties", "updates": {"bench": "1"}}],
                },
            ]
        },
    )
    found["multi-table transactions"] = code in (200, 204)
    code, _ = status("GET", f"namespaces/{NS_W1}/views")
    found["views (listViews)"] = code == 200
    return found
