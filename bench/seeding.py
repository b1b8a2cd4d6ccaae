"""Seeding, the same for every target (bench/targets.py): the namespaces and tables of bench/plan.py,
created over HTTP (Growler's 10,000 W8 tables with one SQL INSERT: GrowlerTarget.bulk_tables), and
the page paths W8 lists."""

from __future__ import annotations

import random
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench import bodies
from bench.growler_target import GrowlerTarget
from bench.plan import NAMESPACE_PROPERTIES, NAMESPACES, NS_W3, NS_W6, NS_W7, NS_W8_BIG, NS_W8_SMALL, Plan
from bench.targets import Target


def _parallel(fn, items: list[Any], workers: int) -> list[Any]:
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def _expect(response: httpx.Response, *ok: int) -> httpx.Response:
    if response.status_code not in ok:
        raise RuntimeError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: {response.text[:300]}"
        )
    return response


def catalog_client(target: Target, connections: int = 16) -> httpx.Client:
    """An HTTP client on the target's catalog prefix, with its headers (the peer's bearer token)."""
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

    with catalog_client(target, plan.seed_concurrency) as client:

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

        if plan.runs("W8"):  # BENCH_ONLY without W8: not 10,000 creates over HTTP on a peer

            def create_small(i: int) -> None:
                _expect(client.post(f"namespaces/{NS_W8_SMALL}/tables", json=bodies.create_table(f"t{i:03d}")), 200)

            timed("w8_small_tables", _parallel, create_small, list(range(plan.w8_small)), plan.seed_concurrency)

            if isinstance(target, GrowlerTarget):
                info["w8_big_seeded_by"] = timed(
                    "w8_big_tables", target.bulk_tables, NS_W8_BIG, NS_W8_SMALL, "t000", plan.w8_big
                )
            else:

                def create_bulk(i: int) -> None:
                    _expect(
                        client.post(f"namespaces/{NS_W8_BIG}/tables", json=bodies.create_table(f"bulk_{i:05d}")), 200
                    )

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
