"""The Python load generator, for workloads whose bodies must differ per request (W5-W7).

Run as its own process (``python -m bench.load '<json spec>'``) so the orchestrator's work does not
share its CPU time; prints one ``BENCH_JSON {...}`` line with the same statistics bench/lua/report.lua
gives for wrk runs (requests, duration, latency percentiles, errors) plus the workload's own.

Modes (``spec["mode"]``):

- ``create``: ``count`` createTable requests (after ``warmup`` untimed ones) from ``concurrency``
  connections, each with a new name.
- ``append``: one writer commits ``count`` appends to one table, one after the other.
- ``append_concurrent``: ``writers`` writers each commit ``count`` appends to the same table. A
  writer behaves like PyIceberg/Java: assert-ref-snapshot-id on the parent it knows; on 409 it
  reloads the table and tries again. Afterwards every acknowledged snapshot must be in main's
  lineage ("lost" counts those that are not).
- ``plan``: ``count`` scan plans (after ``warmup`` untimed ones) from ``concurrency`` clients: planTableScan
  with ``filter``, fetchPlanningResult every ``poll_s`` while ``submitted``, fetchScanTasks for every plan
  task (bench/planning.py). Latency is per plan; a plan that does not yield ``expected_tasks`` tasks is an error.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import sys
import time
from collections import Counter
from typing import Any

import httpx

from bench import bodies

MAX_ATTEMPTS = 200  # per append, for a writer losing every race; far above what a fair server needs


def percentile(sorted_values: list[float], p: float) -> float | None:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return None
    rank = max(1, int(round(p / 100.0 * len(sorted_values) + 0.4999)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


def summarize(latencies_s: list[float], duration_s: float, statuses: Counter, errors: int) -> dict[str, Any]:
    ordered = sorted(latencies_s)
    ms = [v * 1000 for v in ordered]
    return {
        "requests": len(ordered),
        "duration_s": round(duration_s, 3),
        "rps": round(len(ordered) / duration_s, 1) if duration_s > 0 else None,
        "latency_ms": {
            "p50": _round(percentile(ms, 50)),
            "p90": _round(percentile(ms, 90)),
            "p99": _round(percentile(ms, 99)),
            "mean": _round(sum(ms) / len(ms)) if ms else None,
            "max": _round(ms[-1]) if ms else None,
        },
        "errors": errors,
        "statuses": dict(sorted((str(k), v) for k, v in statuses.items())),  # codes and exception names
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


class Recorder:
    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.statuses: Counter = Counter()
        self.errors = 0

    async def request(self, client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        start = time.perf_counter()
        try:
            response = await client.request(method, url, **kwargs)
        except httpx.HTTPError as exc:
            self.latencies.append(time.perf_counter() - start)
            self.statuses[type(exc).__name__] += 1
            self.errors += 1
            return None
        self.latencies.append(time.perf_counter() - start)
        self.statuses[response.status_code] += 1
        return response


SENT = Counter()  # every request sent, warm-ups, reloads and checks included (for CPU per request)


async def _count(_request: httpx.Request) -> None:
    SENT["all"] += 1


def _client(spec: dict[str, Any], connections: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=spec["base_url"],
        headers=spec.get("headers") or {},
        timeout=httpx.Timeout(60.0),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
        event_hooks={"request": [_count]},
    )


# -- W5 createTable ----------------------------------------------------------------------------


async def run_create(spec: dict[str, Any]) -> dict[str, Any]:
    concurrency, count, warmup = spec["concurrency"], spec["count"], spec.get("warmup", 0)
    url = f"namespaces/{spec['namespace']}/tables"
    rng = random.Random(spec["seed"])
    run_tag = f"{rng.randrange(16**6):06x}"
    async with _client(spec, concurrency) as client:

        async def phase(prefix: str, n: int, recorder: Recorder) -> float:
            next_index = iter(range(n))

            async def worker() -> None:
                for i in next_index:
                    response = await recorder.request(
                        client, "POST", url, json=bodies.create_table(f"{prefix}_{run_tag}_{i:06d}")
                    )
                    if response is not None and response.status_code != 200:
                        recorder.errors += 1

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return time.perf_counter() - start

        if warmup:
            await phase("warm", warmup, Recorder())
        recorder = Recorder()
        duration = await phase("t", count, recorder)
    return summarize(recorder.latencies, duration, recorder.statuses, recorder.errors)


# -- W6 / W7 appends ---------------------------------------------------------------------------


class Writer:
    """Appends to one table like a real client: knows its base, reloads on 409."""

    def __init__(self, client: httpx.AsyncClient, url: str, rng: random.Random, recorder: Recorder) -> None:
        self.client, self.url, self.rng, self.recorder = client, url, rng, recorder
        self.location = ""
        self.parent: int | None = None
        self.sequence = 0
        self.acknowledged: list[int] = []
        self.conflicts = 0
        self.reloads = 0
        self.unknown = 0
        self.gave_up = 0
        self.append_latencies: list[float] = []

    def _adopt(self, metadata: dict[str, Any]) -> None:
        self.location, self.parent, self.sequence = bodies.table_state(metadata)

    async def reload(self) -> dict[str, Any] | None:
        self.reloads += 1
        response = await self.client.get(self.url)
        if response.status_code != 200:
            return None
        metadata = response.json()["metadata"]
        self._adopt(metadata)
        return metadata

    async def append(self, recorded: bool = True) -> None:
        snapshot = bodies.snapshot_id(self.rng)
        start = time.perf_counter()
        for _attempt in range(MAX_ATTEMPTS):
            body = bodies.append(self.location, snapshot, self.sequence + 1, self.parent)
            recorder = self.recorder if recorded else Recorder()
            response = await recorder.request(self.client, "POST", self.url, json=body)
            if response is not None and response.status_code == 200:
                self._adopt(response.json()["metadata"])
                self.acknowledged.append(snapshot)
                self.append_latencies.append(time.perf_counter() - start)
                return
            if response is not None and response.status_code == 409:
                self.conflicts += 1
                await self.reload()
                continue
            # 5xx, timeout, reset: the outcome is unknown; look before trying again
            if recorded:
                recorder.errors += 1
            self.unknown += 1
            metadata = await self.reload()
            if metadata and any(s["snapshot-id"] == snapshot for s in metadata.get("snapshots") or []):
                self.acknowledged.append(snapshot)
                self.append_latencies.append(time.perf_counter() - start)
                return
            await asyncio.sleep(0.05)
        self.gave_up += 1


def lineage(metadata: dict[str, Any]) -> list[int]:
    """Snapshot ids from main's head back to its root."""
    by_id = {s["snapshot-id"]: s for s in metadata.get("snapshots") or []}
    _, current, _ = bodies.table_state(metadata)
    chain: list[int] = []
    while current is not None and current in by_id and len(chain) <= len(by_id):
        chain.append(current)
        current = by_id[current].get("parent-snapshot-id")
    return chain


async def run_append(spec: dict[str, Any]) -> dict[str, Any]:
    writers_n, count, warmup = spec.get("writers", 1), spec["count"], spec.get("warmup", 0)
    url = f"namespaces/{spec['namespace']}/tables/{spec['table']}"
    recorder = Recorder()
    async with _client(spec, writers_n + 1) as client:
        writers = [Writer(client, url, random.Random(spec["seed"] * 1000 + i), recorder) for i in range(writers_n)]
        for writer in writers:
            if await writer.reload() is None:
                raise SystemExit(f"cannot load {url}")

        async def phase(writer: Writer, n: int, recorded: bool) -> None:
            for _ in range(n):
                await writer.append(recorded)

        if warmup:
            await asyncio.gather(*(phase(w, warmup, False) for w in writers))
            for w in writers:
                w.acknowledged.clear()
                w.append_latencies.clear()
                w.conflicts = w.reloads = w.unknown = w.gave_up = 0
                await w.reload()
        before = await server_counters(client, spec.get("metrics_url"))
        start = time.perf_counter()
        await asyncio.gather(*(phase(w, count, True) for w in writers))
        duration = time.perf_counter() - start
        after = await server_counters(client, spec.get("metrics_url"))

        response = await client.get(url)
        final = response.json()
    stats = summarize(recorder.latencies, duration, recorder.statuses, recorder.errors)
    acknowledged = [s for w in writers for s in w.acknowledged]
    in_lineage = set(lineage(final["metadata"]))
    appends = sorted(v * 1000 for w in writers for v in w.append_latencies)
    stats.update(
        {
            "writers": writers_n,
            "commits": len(acknowledged),
            "commits_per_s": round(len(acknowledged) / duration, 1) if duration > 0 else None,
            "conflicts_409": sum(w.conflicts for w in writers),
            "unknown_outcomes": sum(w.unknown for w in writers),
            "gave_up": sum(w.gave_up for w in writers),
            "lost": len([s for s in acknowledged if s not in in_lineage]),
            "append_latency_ms": {"p50": _round(percentile(appends, 50)), "p99": _round(percentile(appends, 99))},
            "server": {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(before) | set(after))} or None,
            "server_retries": (after.get("server_retries", 0) - before.get("server_retries", 0)) if after else None,
            "final_metadata_location": final.get("metadata-location"),
            "final_snapshots": len(final["metadata"].get("snapshots") or []),
        }
    )
    return stats


# -- W12 scan planning -------------------------------------------------------------------------


class PlanError(Exception):
    pass


async def plan_once(client: httpx.AsyncClient, spec: dict[str, Any]) -> tuple[int, int]:
    """One scan plan, as a client runs it; (tasks, polls)."""
    base = f"namespaces/{spec['namespace']}/tables/{spec['table']}"

    def ok(response: httpx.Response) -> dict[str, Any]:
        if response.status_code != 200:
            raise PlanError(f"{response.request.method} {response.request.url.path}: {response.status_code}")
        return response.json()

    answer = ok(await client.post(f"{base}/plan", json={"filter": spec["filter"]}))
    plan_id, polls = answer.get("plan-id"), 0
    while answer["status"] == "submitted":
        await asyncio.sleep(spec.get("poll_s", 0.005))
        polls += 1
        answer = ok(await client.get(f"{base}/plan/{plan_id}"))
    if answer["status"] != "completed":
        raise PlanError(f"plan {plan_id} ended {answer['status']}")
    tasks = len(answer.get("file-scan-tasks") or [])
    pending = list(answer.get("plan-tasks") or [])
    while pending:
        page = ok(await client.post(f"{base}/tasks", json={"plan-task": pending.pop()}))
        tasks += len(page.get("file-scan-tasks") or [])
        pending += page.get("plan-tasks") or []
    return tasks, polls


async def run_plan(spec: dict[str, Any]) -> dict[str, Any]:
    concurrency, count, warmup = spec["concurrency"], spec["count"], spec.get("warmup", 0)
    async with _client(spec, concurrency) as client:

        async def phase(n: int) -> tuple[float, list[float], list[int], Counter]:
            remaining = iter(range(n))
            latencies: list[float] = []
            polls: list[int] = []
            outcomes: Counter = Counter()

            async def worker() -> None:
                for _ in remaining:
                    start = time.perf_counter()
                    try:
                        tasks, polled = await plan_once(client, spec)
                    except (PlanError, httpx.HTTPError) as exc:
                        outcomes[type(exc).__name__] += 1
                        continue
                    latencies.append(time.perf_counter() - start)
                    polls.append(polled)
                    outcomes["completed" if tasks == spec["expected_tasks"] else "wrong_task_count"] += 1

            start = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            return time.perf_counter() - start, latencies, polls, outcomes

        if warmup:
            await phase(warmup)
        duration, latencies, polls, outcomes = await phase(count)
    errors = sum(v for k, v in outcomes.items() if k != "completed")
    stats = summarize(latencies, duration, outcomes, errors)
    stats["plans_per_s"] = stats.pop("rps")
    stats["plans"] = stats.pop("requests")
    stats["plans_total"] = warmup + count
    stats["tasks_per_plan"] = spec["expected_tasks"]
    stats["polls_per_plan"] = round(sum(polls) / len(polls), 1) if polls else None
    return stats


_COUNTER = re.compile(r"^(growler_commit_retries_total|growler_commits_total)\{([^}]*)\} ([0-9.e+]+)$")


def commit_counters(text: str) -> dict[str, float]:
    """Growler's table-commit counters from its /metrics text (all workers summed)."""
    counters: dict[str, float] = {}
    for line in text.splitlines():
        m = _COUNTER.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if labels.get("kind") != "table":
            continue
        key = "server_retries" if m.group(1) == "growler_commit_retries_total" else f"commits_{labels['outcome']}"
        counters[key] = counters.get(key, 0) + float(m.group(3))
    return counters


async def server_counters(client: httpx.AsyncClient, url: str | None) -> dict[str, float]:
    if not url:
        return {}
    response = await client.get(url)
    return commit_counters(response.text) if response.status_code == 200 else {}


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    mode = spec["mode"]
    if mode == "create":
        result = asyncio.run(run_create(spec))
    elif mode in ("append", "append_concurrent"):
        result = asyncio.run(run_append(spec))
    elif mode == "plan":
        result = asyncio.run(run_plan(spec))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    result["http_requests_total"] = SENT["all"]
    print("BENCH_JSON " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
