"""One wrk measurement of a target: warm-up, the run, and the CPU it cost per request.

Its own module so that the workloads (bench/workloads.py) and W13 run alone
(``python -m bench.random_tables``) both use it without importing each other.
"""

from __future__ import annotations

import resource
import urllib.parse
from pathlib import Path
from typing import Any

from bench import wrk
from bench.plan import Plan
from bench.targets import Target, http_json


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
    script: str = "pages.lua",
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
        kwargs.update(script=script, paths_file=paths_file)
    if warm and plan.warmup_s:
        wrk.run(url, duration_s=plan.warmup_s, **kwargs)  # warm-up, thrown away
    elif warm:  # quick mode: a few requests instead of wrk's shortest run (1 s)
        listed = paths if paths and script == "pages.lua" else [urllib.parse.urlsplit(url).path]
        for path in listed[:20]:
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
