"""The report's tables that compare across runs and catalogs (bench/report.py has the run's own):

- ``baseline_lines``: this checkout against the reference commit (bench/baseline.py), each workload's
  CPU per request and the ratio, flagged past 5%;
- ``java_lines``: Growler beside Iceberg's own REST server (``make bench-java``, bench/java_target.py);
- ``readme_table``: the README's bench table, from the committed full run (bench/results/latest.json).
"""

from __future__ import annotations

from typing import Any

SIDE_BY_SIDE = [
    ("W1", "GET namespace, 16 connections"),
    ("W2", "list 100 namespaces"),
    ("W3", "loadTable, 40 columns, 100 snapshots"),
    ("W5", "createTable, 16 connections"),
    ("W6", "append commits, one writer"),
]
README_BEGIN, README_END = "<!-- bench-table:begin -->", "<!-- bench-table:end -->"


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value >= 100:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def _busy(doc: dict[str, Any]) -> bool:
    m = doc.get("machine") or {}
    cores = m.get("cores") or 1
    return bool(doc.get("busy_machine")) or (m.get("loadavg_after") or 0) > 0.5 * cores


def _total_cpu(result: dict[str, Any] | None) -> float | None:
    return ((result or {}).get("cpu_ms_per_request") or {}).get("server_total")


def verdict(entry: dict[str, Any] | None, threshold: float = 1.05) -> str:
    """A workload's ratio to the reference as the tables print it: flagged past the threshold."""
    if not entry or entry.get("ratio") is None:
        return "not measured"
    ratio = entry["ratio"]
    change = f"{(ratio - 1) * 100:+.0f}%"
    return (
        f"**{ratio:.2f}x ({change}): over {round((threshold - 1) * 100)}%**"
        if entry.get("flagged")
        else f"{ratio:.2f}x"
    )


def baseline_lines(baseline: dict[str, Any] | None) -> list[str]:
    if not baseline:
        return []
    if "failed" in baseline:
        return ["", f"The comparison with the reference commit failed: {baseline['failed']}"]
    ref = baseline.get("reference", "?")
    name = baseline.get("reference_name")
    lines = [
        "",
        f"Against the reference commit {ref}{f' ({name})' if name else ''}: {baseline.get('method', '')}. "
        f"More than {round((baseline.get('threshold', 1.05) - 1) * 100)}% over the reference is flagged.",
        "",
        f"| workload | {ref} ms/request | this checkout | this / reference |",
        "|---|--:|--:|--:|",
    ]
    for key, entry in (baseline.get("workloads") or {}).items():
        lines.append(
            f"| {key} | {_num(entry.get('reference_ms'), 3)} | {_num(entry.get('head_ms'), 3)} "
            f"| {verdict(entry, baseline.get('threshold', 1.05))} |"
        )
    flagged = baseline.get("flagged") or []
    lines.append("")
    lines.append(
        f"Flagged (costs more than the reference by over 5%): {', '.join(flagged)}."
        if flagged
        else "No workload costs more than 5% over the reference."
    )
    return lines


def java_lines(doc: dict[str, Any]) -> list[str]:
    """Growler (no authentication) beside Iceberg's REST reference server, from a ``make bench-java`` run."""
    res = doc.get("results") or {}
    growler, java = res.get("growler") or {}, res.get("java") or {}
    if not java:
        return []
    m = doc.get("machine") or {}
    version = (doc.get("versions") or {}).get("java") or {}
    lines = [
        f"Run {doc.get('started_at', '?')}, Growler {(doc.get('versions') or {}).get('growler_commit', '?')} "
        f"(no authentication, {(doc.get('settings') or {}).get('growler', {}).get('GROWLER_WORKERS', 2)} workers) "
        f"and Iceberg {version.get('iceberg', '?')}'s RESTCatalogServer ({version.get('java', 'Java')}; JdbcCatalog "
        "on SQLite, S3FileIO), one after the other (never both at once), both on SeaweedFS S3; "
        f"{m.get('cpu_model', '?')}, "
        f"{m.get('cores', '?')} cores, load average {m.get('loadavg_before')} before, {m.get('loadavg_after')} after"
        + (" (a busy machine: other jobs shared the cores)." if _busy(doc) else "."),
        "",
        "| workload | Growler req/s | Java reference req/s | Growler / Java | Growler CPU ms/request "
        "| Java CPU ms/request |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for key, label in SIDE_BY_SIDE:
        g, j = growler.get(key) or {}, java.get(key) or {}
        gv, jv = g.get("rps"), j.get("rps")
        ratio = f"{gv / jv:.2f}" if gv and jv else "-"
        cells = [_num(gv, 1), _num(jv, 1), ratio, _num(_total_cpu(g)), _num(_total_cpu(j))]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(
        "CPU per request is the server side's: Growler's gunicorn workers + PostgreSQL + SeaweedFS, the "
        "reference's JVM + SeaweedFS."
    )
    return lines


def readme_table(doc: dict[str, Any]) -> str:
    """The README's table: the committed full run's figures and each workload's verdict against the
    reference commit (or that the run predates the comparison)."""
    growler = (doc.get("results") or {}).get("growler") or {}
    baseline = doc.get("baseline") or {}
    workloads = baseline.get("workloads") or {}
    ref = baseline.get("reference") or "the reference commit"
    commit = (doc.get("versions") or {}).get("growler_commit", "?")
    lines = [
        f"`make bench` of {doc.get('started_at', '?')} (Growler {commit}, "
        f"{(doc.get('machine') or {}).get('cores', '?')} cores"
        + (", a busy machine" if doc.get("busy_machine") else "")
        + f"); the last column: CPU per request against {ref}, flagged past 5% "
        "(`python -m bench.report --docs` writes this table).",
        "",
        "| workload | req/s | p99 ms | CPU ms/request | vs. reference |",
        "|---|--:|--:|--:|--:|",
    ]
    for key, label in SIDE_BY_SIDE:
        g = growler.get(key) or {}
        entry = workloads.get(key)
        cells = [
            _num(g.get("rps"), 1),
            _num((g.get("latency_ms") or {}).get("p99")),
            _num(_total_cpu(g)),
            verdict(entry, baseline.get("threshold", 1.05))
            if baseline
            else "not in this run (it predates the baseline)",
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def replace_block(text: str, begin: str, end: str, body: str) -> str:
    if begin not in text or end not in text:
        raise SystemExit(f"no {begin} ... {end} block to fill")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def w14_lines(growler: dict[str, Any], seeded: dict[str, Any]) -> list[str]:
    """W14 (bench/million.py): loadTable and listing pages over the 1,000,000-table catalog."""
    lines: list[str] = []
    for key, what in (("W14_load", "loadTable of random tables"), ("W14_list", "listTables pages of 100")):
        r = growler.get(key) or {}
        if not r:
            continue
        lat, cpu = r.get("latency_ms") or {}, r.get("cpu_ms_per_request") or {}
        lines.append(
            f"- {key} ({_num(seeded.get('w14_tables'))} tables): {what}, {_num(r.get('rps'), 1)} req/s, "
            f"p99 {_num(lat.get('p99'))} ms, p99.9 {_num(lat.get('p999'))} ms, {_num(r.get('errors'))} errors, "
            f"CPU {_num(cpu.get('app'))} ms app + {_num(cpu.get('postgres'))} ms PostgreSQL a request"
        )
    if "failed" in (growler.get("W14") or {}):
        lines.append(f"- W14 failed: {growler['W14']['failed']}")
    database = seeded.get("w14_database") or {}
    if database:
        lines.append(
            f"- W14 catalog_entry {_num(database.get('catalog_entry_mb'))} MB "
            f"({_num(database.get('catalog_entry_indexes_mb'))} MB indexes), "
            f"shared_buffers {database.get('shared_buffers')}"
        )
    return lines
