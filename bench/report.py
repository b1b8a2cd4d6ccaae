"""Tables from a results document (bench/results/*.json), for the terminal and for docs/benchmarks.md.

``python -m bench.report [results.json]`` prints the table of a run (default: latest.json);
``python -m bench.report --docs [results.json]`` (or ``--readme``) rewrites docs/benchmarks.md's block
between ``<!-- bench:begin -->`` and ``<!-- bench:end -->`` with it, the README's bench table (between
``<!-- bench-table:begin -->`` and ``<!-- bench-table:end -->``, bench/report_tables.py) and, from
latest-java.json, the Java reference's side-by-side (``<!-- bench-java:begin -->``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.report_tables import (
    README_BEGIN,
    README_END,
    baseline_lines,
    java_lines,
    readme_table,
    replace_block,
    w14_lines,
)

BENCH_DIR = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_DIR / "results"
PAGE = BENCH_DIR.parent / "docs" / "benchmarks.md"
README = BENCH_DIR.parent / "README.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
JAVA_BEGIN, JAVA_END = "<!-- bench-java:begin -->", "<!-- bench-java:end -->"

WORKLOADS = [
    ("W1", "W1 loadNamespaceMetadata"),
    ("W2", "W2 listNamespaces (100)"),
    ("W3", "W3 loadTable (40 cols, 100 snapshots)"),
    ("W4", "W4 loadTable, If-None-Match -> 304"),
    ("W5", "W5 createTable"),
    ("W6", "W6 append commit, 1 writer"),
    ("W7", "W7 appends, 8 writers, 1 table (commits/s)"),
    ("W8_big", "W8 listTables page of 100, {big} tables"),
    ("W8_small", "W8 listTables page of 100, {small} tables"),
    ("W12", "W12 scan plan of a filter, {w12_files} data files (plans/s; per plan)"),
]


def throughput(result: dict[str, Any], key: str) -> float | None:
    if key == "W7":
        return result.get("commits_per_s")
    if key == "W12":
        return result.get("plans_per_s")
    return result.get("rps")


def figure(value: Any, digits: int = 1) -> str:
    """A measured value as the tables print it: thousands separated, `digits` decimals under 100."""
    if value is None:
        return "-"
    if isinstance(value, float) and value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _cells(result: dict[str, Any] | None, key: str) -> list[str]:
    if not result:
        return ["-"] * 5
    if "n/a" in result:
        return ["n/a", "", "", "", ""]
    if "failed" in result:
        return ["failed", "", "", "", ""]
    lat = result.get("latency_ms") or {}
    return [
        figure(throughput(result, key)),
        figure(lat.get("p50"), 2),
        figure(lat.get("p90"), 2),
        figure(lat.get("p99"), 2),
        figure(result.get("errors")),
    ]


def ratio(doc: dict[str, Any], key: str) -> str:
    r = doc.get("ratios", {}).get(key)
    return "-" if r is None else f"{r:.2f}"


def compute_ratios(growler: dict[str, Any], peer: dict[str, Any]) -> dict[str, float | None]:
    ratios: dict[str, float | None] = {}
    for key, _ in WORKLOADS:
        g, p = growler.get(key) or {}, peer.get(key) or {}
        gv, pv = throughput(g, key), throughput(p, key)
        ratios[key] = round(gv / pv, 2) if gv and pv else None
    return ratios


def _machine_line(doc: dict[str, Any]) -> str:
    m = doc.get("machine", {})
    load = m.get("loadavg_before")
    return (
        f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, {m.get('memory_gb', '?')} GB, "
        f"{m.get('os', '?')}; load average before the run {load}"
    )


def render_markdown(doc: dict[str, Any]) -> str:
    res = doc.get("results", {})
    growler, peer = res.get("growler", {}), res.get("peer", {})
    plan = doc.get("settings", {}).get("plan", {})
    seeded = doc.get("seeding", {}).get("growler", {})
    big = seeded.get("w8_big_tables", plan.get("w8_big", "?"))
    small = seeded.get("w8_small_tables", plan.get("w8_small", "?"))
    w12_files = ((growler.get("W12") or {}).get("table") or {}).get("data_files") or plan.get("w12_files", "?")
    w12_files = f"{w12_files:,}" if isinstance(w12_files, int) else w12_files
    lines: list[str] = []
    if doc.get("quick"):
        lines.append(
            "**Smoke run (`BENCH_QUICK=1`): 1-second measurements, no real warm-up, small counts. "
            "Not figures to quote.**"
        )
        lines.append("")
    if doc.get("busy_machine"):
        lines.append(
            f"**Measured on a busy machine (load average {doc['machine'].get('loadavg_before')} on "
            f"{doc['machine'].get('cores')} cores before the run, other jobs sharing the cores): the "
            "figures are low and noisy; CPU per request is the steadier column. Re-run `make bench` on a "
            "quiet machine to refresh them.**"
        )
        lines.append("")
    lines.append(
        f"Run {doc.get('started_at', '?')}, Growler {doc.get('versions', {}).get('growler_commit', '?')}; "
        f"machine: {_machine_line(doc)}."
    )
    lines.append(
        f"Concurrency {plan.get('concurrency')} (W6: 1 writer, W7: {plan.get('w7_writers')} writers), "
        f"{plan.get('warmup_s')} s warm-up + {plan.get('duration_s')} s per read workload, "
        f"Growler with {doc.get('settings', {}).get('growler', {}).get('GROWLER_WORKERS')} workers; "
        f"peer: {doc.get('versions', {}).get('peer', {}).get('weed', '?')}."
    )
    lines.append("")
    lines.append(
        "| workload | Growler req/s | p50 ms | p90 ms | p99 ms | errors "
        "| peer req/s | p50 ms | p90 ms | p99 ms | errors | Growler/peer |"
    )
    lines.append("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for key, label in WORKLOADS:
        label = label.format(
            big=f"{big:,}" if isinstance(big, int) else big,
            small=f"{small:,}" if isinstance(small, int) else small,
            w12_files=w12_files,
        )
        g, p = _cells(growler.get(key), key), _cells(peer.get(key), key)
        lines.append(f"| {label} | " + " | ".join(g) + " | " + " | ".join(p) + f" | {ratio(doc, key)} |")
    lines.append("")
    lines.append(
        "CPU milliseconds per request (Growler: gunicorn workers, PostgreSQL, S3; peer: its one process; "
        "load generator apart). Less disturbed by a busy machine than req/s:"
    )
    lines.append("")
    lines.append("| workload | Growler app | PostgreSQL | S3 | Growler total | peer total | generator |")
    lines.append("|---|--:|--:|--:|--:|--:|--:|")
    for key, label in WORKLOADS:
        g = (growler.get(key) or {}).get("cpu_ms_per_plan") or (growler.get(key) or {}).get("cpu_ms_per_request") or {}
        p = (peer.get(key) or {}).get("cpu_ms_per_plan") or (peer.get(key) or {}).get("cpu_ms_per_request") or {}
        if not g and not p:
            continue
        label = label.format(
            big=f"{big:,}" if isinstance(big, int) else big,
            small=f"{small:,}" if isinstance(small, int) else small,
            w12_files=w12_files,
        )
        cells = [
            g.get("app"),
            g.get("postgres"),
            g.get("s3"),
            g.get("server_total"),
            p.get("server_total"),
            g.get("generator"),
        ]
        lines.append(f"| {label} | " + " | ".join(figure(c, 2) for c in cells) + " |")
    lines.append("")
    w7g, w7p = growler.get("W7") or {}, peer.get("W7") or {}

    def w7_line(name: str, w: dict[str, Any]) -> str:
        if not w or "failed" in w:
            return f"- W7 {name}: {w.get('failed', 'not run')}"
        exists = w.get("final_metadata_file_exists")
        return (
            f"- W7 {name}: {w.get('commits')} commits at {figure(w.get('commits_per_s'))}/s, "
            f"{w.get('conflicts_409')} answered 409 (client reloaded and retried), server-side retries "
            f"{'not reported' if w.get('server_retries') is None else figure(w.get('server_retries'), 0)}, "
            f"{w.get('lost')} lost, current metadata file "
            f"{'present' if exists else 'MISSING' if exists is False else 'not checked'}; "
            f"append incl. retries p50 {figure((w.get('append_latency_ms') or {}).get('p50'), 1)} ms"
        )

    lines.append(w7_line("Growler", w7g))
    if peer:
        lines.append(w7_line("peer", w7p))
    w12 = growler.get("W12") or {}
    if w12.get("plans"):
        lines.append(
            f"- W12 Growler: {w12['plans']} plans from {plan.get('w12_concurrency')} clients, each "
            f"{w12.get('tasks_per_plan')} file scan tasks of {(w12.get('table') or {}).get('data_files')} "
            f"data files, answered `submitted` then polled every 5 ms ({w12.get('polls_per_plan')} polls "
            f"a plan on average); {w12.get('errors')} errors"
        )
    workers = (growler.get("W9") or {}).get("workers") or []
    if workers:
        rss = ", ".join(f"{w.get('rss_mb')} MB" for w in workers)
        pss = ", ".join(f"{w.get('pss_mb')} MB" for w in workers)
        lines.append(
            f"- W9 Growler resident memory per worker after W1-W8: {rss} (PSS {pss}); master "
            f"{(growler['W9'].get('master') or {}).get('rss_mb')} MB"
        )
    end = (growler.get("W9_end") or {}).get("workers") or []
    if end:
        lines.append(
            "- W9 Growler resident memory per worker at the end of the run (after W10-W14; W13 restarted "
            "the workers): " + ", ".join(f"{w.get('rss_mb')} MB (PSS {w.get('pss_mb')} MB)" for w in end)
        )
    weed = ((peer.get("W9") or {}).get("weed") or {}).get("rss_mb")
    if weed:
        lines.append(f"- W9 peer: one `weed mini` process (catalog + S3 + filer + master + volume): {weed} MB")
    lines.extend(_tails_lines(growler, peer))
    lines.extend(_random_tables_lines(growler, doc.get("seeding", {}).get("growler") or {}))
    lines.extend(w14_lines(growler, doc.get("seeding", {}).get("growler") or {}))
    lines.extend(_history_lines(growler, peer))
    lines.extend(_floor_lines(res.get("floor") or {}, growler, peer))
    targets = doc.get("targets") or {}
    if targets:
        lines.append("")
        lines.append("| target | goal | measured | met | what the stack alone reaches (same run) |")
        lines.append("|---|---|---|---|---|")
        for name, t in targets.items():
            met = {True: "yes", False: "**no**", None: "-"}[t["met"]]
            lines.append(f"| {name} | {t['goal']} | {t['measured']} | {met} | {t.get('floor', '')} |")
    lines.extend(baseline_lines(doc.get("baseline")))
    gaps = doc.get("peer_gaps") or []
    if gaps:
        lines.append("")
        lines.append("Peer gaps found by the probe (Growler has them): " + "; ".join(gaps) + ".")
    return "\n".join(lines)


TAILS = [
    ("W10_start", "W10 W1 in the first seconds after start"),
    ("W10_recycle", "W10 W1 in the first seconds after a worker recycle"),
    ("W10_64_W1", "W10 W1 at 64 connections"),
    ("W10_64_W3", "W10 W3 at 64 connections"),
]


def _latency_cells(result: dict[str, Any] | None) -> list[str]:
    if not result:
        return ["-"] * 5
    if "n/a" in result or "failed" in result:
        return ["n/a" if "n/a" in result else "failed", "", "", "", ""]
    lat = result.get("latency_ms") or {}
    return [figure(result.get("rps")), *(figure(lat.get(k), 2) for k in ("p50", "p99", "p999", "max"))]


def _tails_lines(growler: dict[str, Any], peer: dict[str, Any]) -> list[str]:
    if not any(key in growler for key, _ in TAILS):
        return []
    lines = [
        "",
        "Tails (W10): the first seconds after a start (no warm-up) or a worker recycle, and p99.9 at 64 connections:",
        "",
        "| workload | Growler req/s | p50 ms | p99 ms | p99.9 ms | max ms | peer req/s | p50 ms | p99 ms "
        "| p99.9 ms | max ms |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for key, label in TAILS:
        lines.append(
            f"| {label} | " + " | ".join(_latency_cells(growler.get(key)) + _latency_cells(peer.get(key))) + " |"
        )
    shares = {
        label: "/".join("-" if cpu is None else figure(cpu, 1) for cpu in growler[key]["worker_cpu_s"].values())
        for key, label in TAILS
        if isinstance(growler.get(key), dict) and growler[key].get("worker_cpu_s")
    }
    if shares:
        lines += [
            "",
            "CPU seconds of each Growler worker meanwhile (how evenly the connections were spread; '-': the "
            "worker was replaced during the run): "
            + "; ".join(f"{label}: {cpu}" for label, cpu in shares.items())
            + ".",
        ]
    return lines


RANDOM_TABLES = [
    ("W13_first", "W13 first {tail_s} s of fresh workers"),
    ("W13", "W13 shipped defaults, {w13_s} s"),
    ("W13_no_recycle", "W13 recycling off, {w13_s} s"),
]


def _random_tables_lines(growler: dict[str, Any], seeded: dict[str, Any]) -> list[str]:
    """W13 (bench/random_tables.py), Growler only; every setting changed from the shipped defaults
    is printed with its reason."""
    results = [(key, label, growler.get(key)) for key, label in RANDOM_TABLES if growler.get(key)]
    if not results:
        return []
    durations = {
        "tail_s": round((growler.get("W13_first") or {}).get("duration_s") or 0),
        "w13_s": round((growler.get("W13") or {}).get("duration_s") or 0),
    }
    lines = [
        "",
        f"Random tables (W13): loadTable of a table chosen at random for each request out of "
        f"{figure(seeded.get('w13_tables'))}, 16 connections, the bench's token on every request, Growler "
        "restarted before each line; the shipped defaults (authentication, recycling, logging as `make run`) "
        "unless the last column says otherwise:",
        "",
        "| workload | req/s | p50 ms | p99 ms | p99.9 ms | max ms | errors | workers booted | changed from shipped |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for _key, label, result in results:
        changed = (result.get("settings_changed") or {}) if isinstance(result, dict) else {}
        change = (
            ", ".join(f"`{k}={v}`" for k, v in changed["values"].items()) + f": {changed['reason']}"
            if changed
            else "nothing"
        )
        lines.append(
            f"| {label.format(**durations)} | "
            + " | ".join(_latency_cells(result))
            + f" | {figure(result.get('errors'))} | {figure(result.get('workers_booted'))} | {change} |"
        )
    return lines


def _history_lines(growler: dict[str, Any], peer: dict[str, Any]) -> list[str]:
    def by_level(result: dict[str, Any]) -> dict[int, dict[str, Any]]:
        return {level["snapshots"]: level for level in (result.get("W11") or {}).get("levels") or []}

    mine, theirs = by_level(growler), by_level(peer)
    if not mine:
        return []
    lines = [
        "",
        "History (W11): one writer's append commit and loadTable (16 connections) on a 40-column table "
        "as its snapshots grow; CPU ms per request (app + PostgreSQL + S3):",
        "",
        "| snapshots | Growler commit p50 ms | commit CPU ms | load req/s | load p50 ms | load CPU ms "
        "| load bytes | peer commit p50 ms | peer load req/s |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for snapshots, level in sorted(mine.items()):
        other = theirs.get(min(theirs, key=lambda n: abs(n - snapshots))) if theirs else {}
        commit, load = level.get("commit") or {}, level.get("load") or {}
        cells = [
            (commit.get("latency_ms") or {}).get("p50"),
            (commit.get("cpu_ms_per_request") or {}).get("server_total"),
            load.get("rps"),
            (load.get("latency_ms") or {}).get("p50"),
            (load.get("cpu_ms_per_request") or {}).get("server_total"),
            level.get("load_response_bytes"),
            ((other.get("commit") or {}).get("latency_ms") or {}).get("p50"),
            (other.get("load") or {}).get("rps"),
        ]
        lines.append(f"| {snapshots:,} | " + " | ".join(figure(c, 2) for c in cells) + " |")
    kept = growler.get("W11_expiry") or {}
    if kept.get("commit"):
        latency = kept["commit"].get("latency_ms") or {}
        cpu = (kept["commit"].get("cpu_ms_per_request") or {}).get("server_total")
        lines += [
            "",
            f"With a snapshot-expiry policy keeping {kept['kept']} (W11_expiry): grown to {kept['grown_to']:,} "
            f"snapshots, back to {kept['snapshots_before']} {kept['converged_s']} s after the growth (commits "
            f"made it due, housekeeping expired it); then commit p50 {figure(latency.get('p50'), 2)} ms, "
            f"p99 {figure(latency.get('p99'), 2)} ms, CPU {figure(cpu, 2)} ms; {kept['snapshots_after']} "
            "snapshots after the commits.",
        ]
    elif kept.get("failed"):
        lines += ["", f"W11_expiry failed: {kept['failed'][:300]}"]
    return lines


def _floor_lines(floor: dict[str, Any], growler: dict[str, Any], peer: dict[str, Any]) -> list[str]:
    """W0 (bench/floor.py): the stack's own floors next to what Growler and the peer reached."""
    read, put = floor.get("W0_read") or {}, floor.get("W0_put") or {}
    if not read and not put:
        return []
    lines = ["", "Floors of the stack (W0, same run; bench/floor.py):", ""]
    if "failed" in read:
        lines.append(f"- W1 floor: failed ({read['failed'][:200]})")
    elif read:
        cpu = read.get("cpu_ms_per_request") or {}
        lines.append(
            f"- W1 against gunicorn + uvicorn workers + one psycopg_pool query and nothing else: "
            f"{figure(read.get('rps'))} req/s, p99 {figure((read.get('latency_ms') or {}).get('p99'), 2)} ms, "
            f"{figure(cpu.get('app'), 2)} ms app + {figure(cpu.get('postgres'), 2)} ms PostgreSQL CPU a request "
            f"(Growler {figure((growler.get('W1') or {}).get('rps'))}, "
            f"peer {figure((peer.get('W1') or {}).get('rps'))} req/s)"
        )
    if "failed" in put:
        lines.append(f"- metadata-file PUT floor: failed ({put['failed'][:200]})")
    elif put:
        lat = put.get("latency_ms") or {}
        lines.append(
            f"- one PUT of {figure(put.get('bytes'))} bytes (W11's file at its last level) to the embedded "
            f"SeaweedFS with Growler's client, alone: p50 {figure(lat.get('p50'), 2)} ms "
            f"(min {figure(lat.get('min'), 2)}), "
            f"{figure(put.get('s3_cpu_ms_per_put'), 2)} ms of SeaweedFS CPU a PUT"
        )
    return lines


def update_page(doc: dict[str, Any], page: Path = PAGE, readme: Path = README) -> None:
    """docs/benchmarks.md's figures and the README's table from a full run; the Java reference's
    side-by-side from the latest ``make bench-java`` (bench/results/latest-java.json), if any."""
    text = replace_block(page.read_text(), BEGIN, END, render_markdown(doc))
    java = RESULTS_DIR / "latest-java.json"
    if java.exists() and JAVA_BEGIN in text:
        text = replace_block(text, JAVA_BEGIN, JAVA_END, "\n".join(java_lines(json.loads(java.read_text()))))
    page.write_text(text)
    readme.write_text(replace_block(readme.read_text(), README_BEGIN, README_END, readme_table(doc)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.report")
    parser.add_argument("results", nargs="?", default=str(RESULTS_DIR / "latest.json"))
    parser.add_argument(
        "--docs", "--readme", dest="docs", action="store_true", help="rewrite the figures of docs/benchmarks.md"
    )
    args = parser.parse_args(argv)
    doc = json.loads(Path(args.results).read_text())
    if args.docs:
        if doc.get("kind", "full") != "full":
            raise SystemExit(f"{args.results} is a {doc['kind']} run: only a full run's figures go into the docs")
        update_page(doc)
        print(f"{PAGE.relative_to(BENCH_DIR.parent)} and README.md updated from {args.results}")
    else:
        print(render_markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
