"""Run wrk (Debian's package) with the scripts in bench/lua and read their JSON report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

LUA_DIR = Path(__file__).resolve().parent / "lua"


def wrk_binary() -> str:
    found = shutil.which("wrk")
    if not found:
        raise RuntimeError("wrk not found: `make bench` installs it (Debian package wrk)")
    return found


def wrk_version() -> str:
    out = subprocess.run([wrk_binary(), "--version"], capture_output=True, text=True, check=False)
    return (out.stdout or out.stderr).splitlines()[0].strip() if (out.stdout or out.stderr) else "?"


def run(
    url: str,
    *,
    duration_s: float,
    connections: int,
    threads: int,
    script: str = "get.lua",
    headers: dict[str, str] | None = None,
    paths_file: Path | None = None,
    seed: int = 1,
    timeout_s: int = 10,
    body_file: Path | None = None,
) -> dict[str, Any]:
    """One wrk run; returns the normalized statistics (see bench/load.py ``summarize``)."""
    argv = [
        wrk_binary(),
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(duration_s))}s",
        f"--timeout={timeout_s}s",
        "-s",
        str(LUA_DIR / script),
    ]
    for name, value in (headers or {}).items():
        argv += ["-H", f"{name}: {value}"]
    argv.append(url)
    env = dict(os.environ, BENCH_LUA_DIR=str(LUA_DIR), BENCH_SEED=str(seed))
    if paths_file is not None:
        env["BENCH_PATHS"] = str(paths_file)
    if body_file is not None:
        env["BENCH_BODY"] = str(body_file)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=duration_s + 60, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH_JSON ")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {' '.join(argv)}\n{proc.stdout}\n{proc.stderr}")
    raw = json.loads(line.removeprefix("BENCH_JSON "))
    seconds = raw["duration_us"] / 1e6
    lat = raw["latency_us"]
    errors = sum(raw["errors"].values())
    return {
        "requests": raw["requests"],
        "duration_s": round(seconds, 3),
        "rps": round(raw["requests"] / seconds, 1) if seconds > 0 else None,
        "latency_ms": {k: round(lat[k] / 1000, 2) for k in ("p50", "p90", "p99", "p999", "mean", "max")},
        "errors": errors,
        "error_detail": {k: v for k, v in raw["errors"].items() if v},
        "bytes": raw["bytes"],
    }
