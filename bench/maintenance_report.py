"""The maintenance benchmark's results (bench/maintenance.py) as Markdown: what ``make
bench-maintenance`` prints and what goes into docs/maintenance.md's "Measured" section.

``python -m bench.maintenance_report [results.json]`` prints it (default:
bench/results/latest-maintenance.json); ``--docs`` rewrites the block between
``<!-- bench-maintenance:begin -->`` and ``<!-- bench-maintenance:end -->`` of docs/maintenance.md.
Pure: a document in, text out (tests/unit/test_bench_maintenance.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.report_tables import replace_block

BENCH_DIR = Path(__file__).resolve().parent
LATEST = BENCH_DIR / "results" / "latest-maintenance.json"
PAGE = BENCH_DIR.parent / "docs" / "maintenance.md"
BEGIN, END = "<!-- bench-maintenance:begin -->", "<!-- bench-maintenance:end -->"


def _n(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def _best(seconds: list[float] | None) -> str:
    """The second (warm) run of a query, with the first in brackets."""
    if not seconds:
        return "-"
    if len(seconds) == 1:
        return _n(seconds[0], 2)
    return f"{_n(seconds[-1], 2)} (first {_n(seconds[0], 2)})"


def _p99(result: dict[str, Any] | None) -> str:
    if not result:
        return "-"
    lat = result.get("latency_ms") or {}
    return (
        f"{_n(result.get('rps'))} req/s, p50 {_n(lat.get('p50'), 2)} ms, p99 {_n(lat.get('p99'), 2)} ms, "
        f"{_n(result.get('errors'))} errors"
    )


def _machine(doc: dict[str, Any]) -> str:
    m = doc.get("machine") or {}
    busy = " - a busy machine: a full test run and other work shared the cores" if doc.get("busy_machine") else ""
    return (
        f"{m.get('cpu_model', '?')}, {m.get('cores', '?')} cores, {_n(m.get('memory_gb'))} GB; load average "
        f"{m.get('loadavg_before')} before, {m.get('loadavg_after')} after{busy}"
    )


def render(doc: dict[str, Any]) -> str:
    """The Measured section's body from one results document."""
    res = doc.get("results") or {}
    if "failed" in doc and not res.get("before"):
        return f"Run {doc.get('started_at', '?')} failed: {doc['failed']}"
    shape = doc.get("shape") or {}
    settings = res.get("settings") or {}
    before, after = res.get("before") or {}, res.get("after") or {}
    qb, qa = res.get("queries_before") or {}, res.get("queries_after") or {}
    comp, again = res.get("compaction") or {}, res.get("second_run") or {}
    run, again_run = comp.get("run") or {}, again.get("run") or {}
    cluster = settings.get("cluster") or {}
    files = shape.get("tasks_per_append", 0) * shape.get("partitions", 0)
    stopped = [f"**The run stopped early** ({doc['failed']}): a `-` was not measured.", ""] if "failed" in doc else []
    lines = [
        *stopped,
        f"Run {doc.get('started_at', '?')}, Growler {(doc.get('versions') or {}).get('growler_commit', '?')}; "
        f"{_machine(doc)}.",
        "",
        f"- **Table**: {_n(before.get('data_files'))} data files ({_n(before.get('bytes'))} bytes, "
        f"{_n(before.get('rows'))} rows) in {_n(before.get('partitions'))} partitions, written by a local Spark "
        f"session in {shape.get('appends')} appends (one commit each) of {shape.get('tasks_per_append')} write "
        f"tasks, each task one file of {shape.get('rows_per_file')} rows per partition ({_n(files)} files an "
        f"append); {_n((res.get('setup') or {}).get('seconds'))} s to write.",
        f"- **Cluster**: a Spark standalone master and {cluster.get('workers')} workers ({cluster.get('cores_each')} "
        f"core, {cluster.get('memory_each')} each) from PySpark's distribution; the job in client deploy mode. "
        f"Policy config: `{json.dumps(settings.get('policy') or {}, sort_keys=True)}` (sort: bin-packing "
        "partitions this small is done in process, not on Spark).",
        "",
        "| | before | after |",
        "|---|--:|--:|",
        f"| data files | {_n(before.get('data_files'))} | {_n(after.get('data_files'))} |",
        f"| Spark query, s | {_best(qb.get('spark_s'))} | {_best(qa.get('spark_s'))} |",
        f"| DuckDB query, s | {_best(qb.get('duckdb_s')) if 'duckdb_s' in qb else 'failed'} "
        f"| {_best(qa.get('duckdb_s')) if 'duckdb_s' in qa else 'failed'} |",
        "",
        f"- **Compaction**: {run.get('status', '-')} in {_n(comp.get('wall_s'))} s wall time (request to finished run; "
        f"the run's own {_n((run.get('outcome') or {}).get('seconds'))} s), "
        f"{_n(comp.get('spark_applications'))} Spark application(s) on the cluster; the job rewrote "
        f"{_n((run.get('outcome') or {}).get('rewritten-data-files-count'))} data files into "
        f"{_n((run.get('outcome') or {}).get('added-data-files-count'))}.",
        f"- **Second run** on the compacted table: {again_run.get('status', '-')} in {_n(again.get('wall_s'))} s "
        f"wall time, outcome `{json.dumps(again_run.get('outcome') or {}, sort_keys=True)}`; "
        f"{_n(again.get('spark_applications'))} Spark application(s) started, "
        + ("no new snapshot (no commit)." if again.get("snapshot_unchanged") else "**a new snapshot**."),
        f"- **Reads** (wrk, {(settings.get('reads') or {}).get('connections')} connections, "
        f"{(settings.get('reads') or {}).get('seconds')} s, loadTable of the table and loadNamespaceMetadata "
        f"alternately): without compaction {_p99(res.get('reads_without'))}; during compaction "
        f"{_p99(comp.get('reads_during'))}"
        + (
            ""
            if (comp.get("reads_during") or {}).get("run_still_running_after", True)
            else " (the run had finished before the measurement ended)"
        )
        + ".",
        f"- The query: `{qb.get('query', '-')}`; the Spark figure is the second of two runs in one local[2] "
        "session (the first in brackets), DuckDB's the second of two fresh connections.",
    ]
    for when, q in (("before", qb), ("after", qa)):
        if "duckdb_failed" in q:
            lines.append(f"- DuckDB failed {when} compaction: {q['duckdb_failed']}")
    return "\n".join(lines)


def update_page(doc: dict[str, Any], page: Path = PAGE) -> None:
    page.write_text(replace_block(page.read_text(), BEGIN, END, render(doc)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.maintenance_report")
    parser.add_argument("results", nargs="?", default=str(LATEST))
    parser.add_argument("--docs", action="store_true", help="rewrite docs/maintenance.md's Measured block")
    parser.add_argument("--partial", action="store_true", help="with --docs: a run stopped early, as far as it got")
    args = parser.parse_args(argv)
    doc = json.loads(Path(args.results).read_text())
    if args.docs:
        if "failed" in doc and not args.partial:
            raise SystemExit(f"{args.results} is a failed run: not put into the docs (--partial: what it measured)")
        update_page(doc)
        print(f"docs/maintenance.md updated from {args.results}")
    else:
        print(render(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
