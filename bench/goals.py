"""The targets a run is judged by, each with what the same run says the stack alone allows.

Two sets: the absolute targets of the first performance pass (W3, W4, W6-W11), and issue 20's
targets against the peer (every read at least 1.0x its req/s with p99 under 20 ms and at most
0.5 ms of CPU; createTable and W7 at least 1.0x, W6 at least 1.3x). A target's ``floor`` says
what no catalog on this stack can beat on this machine, from W0 (``bench/floor.py``) or from the
stores' own share of the same run, so a run tells a target missed by the catalog's code from one
the machine and the fixed stack put out of reach.
"""

from __future__ import annotations

from typing import Any

from bench.report import figure, throughput

# Issue 20: the reads measured against the peer, and the bounds each must hold.
READS_VS_PEER = ("W1", "W2", "W3", "W8_big", "W8_small")
READ_P99_MS = 20.0
READ_CPU_MS = 0.5  # app + PostgreSQL, per request
# (workload, least Growler/peer ratio) for the writes
WRITES_VS_PEER = (("W5", 1.0), ("W6", 1.3), ("W7", 1.0))
W11_COMMIT_P50_MS = 25.0


def _get(result: dict[str, Any], key: str, *path: str) -> Any:
    value: Any = result.get(key) or {}
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def evaluate_targets(
    growler: dict[str, Any], peer: dict[str, Any] | None = None, floor: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """Every target: its goal, what was measured, whether it was met (None: not measured) and,
    where the run can tell, what the stack alone reaches (``floor``)."""
    out: dict[str, dict[str, Any]] = {}

    def check(name: str, goal: str, measured: str, ok: bool | None, floor_text: str | None = None) -> None:
        out[name] = {"goal": goal, "measured": measured, "met": ok}
        if floor_text:
            out[name]["floor"] = floor_text

    def get(key: str, *path: str) -> Any:
        return _get(growler, key, *path)

    w3_rps, w3_p99 = get("W3", "rps"), get("W3", "latency_ms", "p99")
    check(
        "W3",
        ">= 2,000 req/s, p99 <= 20 ms",
        f"{figure(w3_rps)} req/s, p99 {figure(w3_p99, 2)} ms",
        None if w3_rps is None else w3_rps >= 2000 and w3_p99 <= 20,
    )
    w4 = get("W4", "rps")
    check("W4", ">= 3,000 req/s", f"{figure(w4)} req/s", None if w4 is None else w4 >= 3000)
    w6 = get("W6", "latency_ms", "p50")
    check("W6", "p50 <= 25 ms", f"p50 {figure(w6, 2)} ms", None if w6 is None else w6 <= 25)
    w7, lost = get("W7", "commits_per_s"), get("W7", "lost")
    check(
        "W7",
        ">= 60 commits/s, 0 lost",
        f"{figure(w7)} commits/s, {lost} lost",
        None if w7 is None else w7 >= 60 and lost == 0,
    )
    big, small = get("W8_big", "latency_ms", "p99"), get("W8_small", "latency_ms", "p99")
    w8 = round(big / small, 2) if big and small else None
    w8_goal = "p99 (big namespace) <= 1.5 x p99 (100 tables)"
    check("W8", w8_goal, f"{figure(w8, 2)} x", None if w8 is None else w8 <= 1.5)
    workers = (growler.get("W9") or {}).get("workers") or []
    rss = max((w.get("rss_mb") or 0 for w in workers), default=None)
    check("W9", "<= 150 MB per worker", f"max RSS {figure(rss)} MB", None if rss is None else rss <= 150)
    for key in ("W10_start", "W10_recycle"):
        p99 = get(key, "latency_ms", "p99")
        check(key, "p99 <= 20 ms in the first seconds", f"p99 {figure(p99, 2)} ms", None if p99 is None else p99 <= 20)
    out.update(_random_tables(growler))
    levels = {level["snapshots"]: level for level in get("W11", "levels") or []}
    if levels:
        first, last = levels[min(levels)], levels[max(levels)]
        p50_first = (first["commit"].get("latency_ms") or {}).get("p50")
        p50_last = (last["commit"].get("latency_ms") or {}).get("p50")
        put = _get(floor or {}, "W0_put", "latency_ms", "p50")
        check(
            "W11",
            f"commit p50 at {max(levels):,} snapshots <= {W11_COMMIT_P50_MS:.0f} ms"
            f" and <= 2x its p50 at {min(levels):,}",
            f"{figure(p50_last, 2)} ms vs {figure(p50_first, 2)} ms",
            None if not p50_first or not p50_last else p50_last <= W11_COMMIT_P50_MS and p50_last <= 2 * p50_first,
            f"the metadata file's PUT alone: p50 {figure(put, 2)} ms" if put else None,
        )
    if peer:
        out.update(_against_peer(growler, peer, floor or {}))
    return out


def _random_tables(growler: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 40's targets for W13 (bench/random_tables.py): the shipped defaults' tail, their cost
    against the same load with recycling off, and a fresh worker's first seconds."""
    out: dict[str, dict[str, Any]] = {}
    shipped, steady, first = (growler.get(k) or {} for k in ("W13", "W13_no_recycle", "W13_first"))
    p99, p999 = _get(shipped, "latency_ms", "p99"), _get(shipped, "latency_ms", "p999")
    if p99 is not None:
        out["W13"] = {
            "goal": "shipped defaults: p99 <= 20 ms, p99.9 <= 50 ms",
            "measured": f"p99 {figure(p99, 2)} ms, p99.9 {figure(p999, 2)} ms, {shipped.get('workers_booted')} "
            "workers booted",
            "met": p99 <= 20 and p999 <= 50,
        }
    rps, rps_off = shipped.get("rps"), steady.get("rps")
    if rps and rps_off:
        out["W13_recycling"] = {
            "goal": "req/s within 5% of recycling off",
            "measured": f"{figure(rps)} vs {figure(rps_off)} req/s ({rps / rps_off:.2f} x)",
            "met": rps >= 0.95 * rps_off,
        }
    first_p99, steady_p99 = _get(first, "latency_ms", "p99"), _get(steady, "latency_ms", "p99")
    if first_p99 is not None and steady_p99:
        out["W13_first"] = {
            "goal": "fresh workers' first 10 s: p99 <= 2 x steady state",
            "measured": f"p99 {figure(first_p99, 2)} ms vs {figure(steady_p99, 2)} ms ({first_p99 / steady_p99:.2f} x)",
            "met": first_p99 <= 2 * steady_p99,
        }
    return out


def _against_peer(growler: dict[str, Any], peer: dict[str, Any], floor: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 20's targets: Growler/peer ratios from the same run, with the stack's own bounds."""
    out: dict[str, dict[str, Any]] = {}

    def ratio_of(key: str) -> float | None:
        ours, theirs = throughput(growler.get(key) or {}, key), throughput(peer.get(key) or {}, key)
        return round(ours / theirs, 2) if ours and theirs else None

    floor_read = floor.get("W0_read") or {}
    floor_cpu = floor_read.get("cpu_ms_per_request") or {}
    floor_ms = figure((floor_cpu.get("app") or 0) + (floor_cpu.get("postgres") or 0), 2)
    for key in READS_VS_PEER:
        ratio, p99 = ratio_of(key), _get(growler, key, "latency_ms", "p99")
        cpu = _get(growler, key, "cpu_ms_per_request")
        cpu_ms = (cpu.get("app") or 0) + (cpu.get("postgres") or 0) if cpu else None
        met = None
        if ratio is not None and p99 is not None and cpu_ms is not None:
            met = ratio >= 1.0 and p99 < READ_P99_MS and cpu_ms <= READ_CPU_MS
        floor_text = None
        peer_rps = throughput(peer.get(key) or {}, key)
        if floor_read.get("rps") and key == "W1" and peer_rps:  # the floor app answers W1's request
            floor_text = f"the stack alone: {floor_read['rps'] / peer_rps:.2f}x the peer, {floor_ms} ms CPU"
        elif floor_read.get("rps"):
            floor_text = f"the stack alone, W1's one-row read: {floor_ms} ms CPU"
        out[f"{key} vs peer"] = {
            "goal": f">= 1.0x peer, p99 < {READ_P99_MS:.0f} ms, <= {READ_CPU_MS} ms CPU (app + PostgreSQL)",
            "measured": f"{figure(ratio, 2)}x, p99 {figure(p99, 2)} ms, {figure(cpu_ms, 2)} ms CPU",
            "met": met,
            **({"floor": floor_text} if floor_text else {}),
        }
    for key, least in WRITES_VS_PEER:
        ratio = ratio_of(key)
        entry: dict[str, Any] = {
            "goal": f">= {least}x peer",
            "measured": f"{figure(ratio, 2)}x",
            "met": None if ratio is None else ratio >= least,
        }
        ours, theirs = _get(growler, key, "cpu_ms_per_request"), _get(peer, key, "cpu_ms_per_request")
        if key == "W5" and ours and theirs and theirs.get("server_total"):
            stores = (ours.get("postgres") or 0) + (ours.get("s3") or 0)
            entry["floor"] = (
                f"PostgreSQL + S3 alone: {figure(stores, 2)} ms CPU a create "
                f"(the peer: {figure(theirs['server_total'], 2)} in all)"
            )
        out[f"{key} vs peer"] = entry
    return out
