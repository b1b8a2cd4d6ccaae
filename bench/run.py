"""``make bench``: reproducible catalog benchmarks, Growler and a peer, on this machine.

For each target in turn (never both at once):

1. start it in a private temporary directory on free ports: Growler as ``make run`` does
   (embedded PostgreSQL + SeaweedFS S3 + gunicorn with gunicorn.conf.py and its shipped defaults,
   GROWLER_WORKERS=2 unless set), then the peer, SeaweedFS's own Iceberg REST catalog (``weed mini -s3.port.iceberg``);
2. seed it over HTTP (W8's 10,000-table namespace in Growler with one SQL INSERT, for speed);
3. run W1-W8 from separate processes (wrk for reads, bench/load.py for writes), then W9, W10 (tails),
   W11 (history), W12 (scan planning, bench/planning.py) and W13 (loadTable of random tables out of
   100,000 on the shipped defaults, bench/random_tables.py; Growler only, and last: it restarts
   gunicorn);
4. stop it.

Then W0, the floors of the stack itself (bench/floor.py): W1 against an app that only runs the query,
and one metadata-file PUT alone.

Then, in a full run, the baseline (bench/baseline.py): the same workloads' CPU per request on the
reference commit and on this checkout, in interleaved A/B pairs; a workload more than 5% over the
reference is flagged (``BENCH_BASELINE=0``: skip it).

Then print the table and write ``bench/results/<UTC time>.json`` and ``bench/results/latest.json``
(only a full run does: a ``BENCH_QUICK=1`` smoke run writes ``<time>-quick.json`` and
``latest-quick.json`` instead, a ``BENCH_ONLY`` run ``-partial``, a ``BENCH_PEER=java`` run ``-java``, so
none of them replaces the figures docs/benchmarks.md and the README quote). ``python -m bench.report
--docs`` puts latest.json into docs/benchmarks.md and the README's bench table.

Environment: BENCH_QUICK=1 (smoke run, under a minute), BENCH_PEER=0 (Growler only), BENCH_PEER=java
(Iceberg's own REST server, bench/java_target.py, in the peer's place: ``make bench-java``),
BENCH_AS_GRANTEE=1 (measure as a non-admin principal with namespace-level grants), BENCH_AUTH=none
(Growler without authentication: what authentication costs),
BENCH_ONLY=W12 (a comma-separated list: only those workloads; seeding and W8's listings still run),
BENCH_SEED (default 7), BENCH_WRK_THREADS (default 1), BENCH_KEEP=1 (keep the temporary
directory with the servers' logs), GROWLER_WORKERS (default 2).
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import baseline, floor, goals, report, tails, wrk
from bench.growler_target import GrowlerTarget
from bench.java_target import JavaTarget
from bench.machine import RESULTS_DIR, machine
from bench.measuring import run_wrk
from bench.peer_target import PeerTarget
from bench.plan import NAMESPACES, Plan
from bench.seeding import seed
from bench.targets import REPO, Target, http_json, make_root, remove_root
from bench.workloads import run_all

PEER_NOTES = [
    "The peer keeps catalog state in its own filer (no PostgreSQL) and is one Go process that is also "
    "the S3 server; Growler runs PostgreSQL, SeaweedFS S3 and 2 gunicorn workers.",
    "Both check a bearer token on every request: the peer an HS256 JWT, Growler an RS256 JWT it issued.",
    "Growler writes one JSON log line per request and keeps Prometheus metrics; the peer logs nothing "
    "per request at its default verbosity.",
    "W8: Growler's 10,000 tables are inserted with SQL, the peer's created over HTTP (it has no database "
    "to write to); both list the same names.",
    "Both catalogs re-check the requirements of a commit that lost a race and retry on the server "
    "(the peer 3 times, Growler up to 8), so W7's 409s come from assert-ref-snapshot-id, as with real clients.",
]


def log(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def growler_commit() -> str:
    def git(*args: str) -> str:
        out = subprocess.run(
            ["git", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
            env=dict(os.environ, GIT_OPTIONAL_LOCKS="0"),
        )  # read-only: no index refresh
        return out.stdout.strip()

    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # the bench's own results (bench/results/) do not make the code it measures dirty
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results")
    return commit + ("+dirty" if changed else "")


def run_target(target: Target, plan: Plan, work_dir: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    log(f"starting {target.label}")
    start = time.perf_counter()
    try:
        target.start()
        log(f"{target.name} up in {time.perf_counter() - start:.1f} s at {target.api()}")
        first_seconds: dict[str, Any] = {}
        if plan.runs("W10"):
            log(f"{target.name}: W10 first seconds")
            try:
                first_seconds = {"W10_start": tails.cold(target, plan, run_wrk, http_json)}
            except Exception as exc:  # noqa: BLE001 - a failed W10 must not lose W1-W12
                first_seconds = {"W10_start": {"failed": f"{type(exc).__name__}: {exc}"[:2000]}}
        log(f"{target.name}: seeding")
        seeded = seed(target, plan, work_dir)
        log(f"{target.name} seeded: {seeded['timings_s']}")
        if _env_flag("BENCH_AS_GRANTEE") and isinstance(target, GrowlerTarget):
            target.become_grantee(list(NAMESPACES))  # measure as a principal with namespace grants
            log(f"{target.name}: measuring as a principal with namespace-level grants")
        results = {**first_seconds, **run_all(target, plan, seeded, work_dir, log)}
    finally:
        target.stop()
    summary = {k: v for k, v in seeded.items() if not k.endswith("_pages")}
    for which in ("big", "small"):
        summary[f"w8_{which}_pages"] = seeded.get(f"w8_{which}_pages", {}).get("pages")
    return summary, results


def _baseline_wanted() -> bool:
    """BENCH_BASELINE=0 skips the comparison with the reference commit (a full run does it otherwise)."""
    return os.environ.get("BENCH_BASELINE", "1").strip().lower() not in ("0", "false", "no", "off")


def run_kind(quick: bool, only: tuple[str, ...], peer_choice: str) -> str:
    """Which results file a run writes: only a full run (every workload, the usual peer) replaces
    latest.json, the figures docs/benchmarks.md and the README quote; the others keep their own."""
    if quick:
        return "quick"
    if peer_choice == "java":
        return "java"
    return "partial" if only else "full"


def main() -> int:
    quick = _env_flag("BENCH_QUICK")
    peer_choice = os.environ.get("BENCH_PEER", "1").strip().lower()
    with_peer = peer_choice not in ("0", "false", "no", "off")
    only = tuple(w.strip().upper() for w in os.environ.get("BENCH_ONLY", "").split(",") if w.strip())
    plan = Plan.make(quick, int(os.environ.get("BENCH_SEED", "7")), int(os.environ.get("BENCH_WRK_THREADS", "1")), only)
    workers = int(os.environ.get("GROWLER_WORKERS") or 2)
    keep = _env_flag("BENCH_KEEP")

    def on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    started = datetime.datetime.now(datetime.UTC)
    t0 = time.perf_counter()
    doc: dict[str, Any] = {
        "schema": 1,
        "started_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "quick": quick,
        "machine": machine(),
        "versions": {"growler_commit": growler_commit(), "python": platform.python_version(), "wrk": wrk.wrk_version()},
        "settings": {"plan": plan.as_dict()},
        "seeding": {},
        "results": {},
        "notes": PEER_NOTES if with_peer else [],
    }
    doc["busy_machine"] = doc["machine"]["loadavg_before"] > 0.5 * doc["machine"]["cores"]
    if doc["busy_machine"]:
        log(
            f"warning: load average {doc['machine']['loadavg_before']} before the run on "
            f"{doc['machine']['cores']} cores: figures will be low and noisy"
        )
    root = make_root()
    work_dir = root / "work"
    work_dir.mkdir()
    failed = False
    try:
        targets: list[Target] = [GrowlerTarget(root / "growler", workers)]
        if peer_choice == "java":  # Iceberg's own REST server (make bench-java), in the peer's place
            targets.append(JavaTarget(root / "java"))
        elif with_peer:
            targets.append(PeerTarget(root / "peer"))
        for target in targets:
            target.root.mkdir(parents=True, exist_ok=True)
            try:
                seeded, results = run_target(target, plan, work_dir)
            except Exception as exc:  # noqa: BLE001 - report it, keep the logs, go on with the next
                log(f"{target.name} failed: {type(exc).__name__}: {exc}")
                seeded, results = {}, {"failed": f"{type(exc).__name__}: {exc}"[:2000]}
                failed = keep = True
            doc["seeding"][target.name] = seeded
            doc["results"][target.name] = results
            doc["versions"][target.name] = target.versions()
            doc["settings"][target.name] = target.settings()
        if plan.runs("W0") and not failed:
            doc["results"]["floor"] = floor.measure(
                root / "floor", plan, run_wrk, workers, doc["results"].get("growler", {}), log
            )
        if run_kind(quick, plan.only, peer_choice) == "full" and not failed and _baseline_wanted():
            log(f"baseline: A/B pairs against the reference commit {baseline.REFERENCE} (bench/baseline.py)")
            try:
                doc["baseline"] = baseline.measure()
            except Exception as exc:  # noqa: BLE001 - the run's own figures stand without it
                doc["baseline"] = {"failed": f"{type(exc).__name__}: {exc}"[:2000]}
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        if keep:
            log(f"kept {root} (servers' logs: growler/gunicorn.log, growler/postgres.log, */weed.log)")
        else:
            remove_root(root)

    growler = doc["results"].get("growler", {})
    peer = doc["results"].get("peer") or doc["results"].get("java") or {}
    doc["ratios"] = report.compute_ratios(growler, peer) if peer else {}
    doc["targets"] = goals.evaluate_targets(growler, peer, doc["results"].get("floor"))
    caps_g, caps_p = growler.get("capabilities") or {}, peer.get("capabilities") or {}
    doc["peer_gaps"] = [name for name, ok in caps_g.items() if ok and caps_p.get(name) is False] if peer else []
    doc["wall_s"] = round(time.perf_counter() - t0, 1)
    doc["machine"]["loadavg_after"] = round(os.getloadavg()[0], 2)

    RESULTS_DIR.mkdir(exist_ok=True)
    kind = run_kind(quick, plan.only, peer_choice)
    doc["kind"] = kind
    stamp = started.strftime("%Y%m%dT%H%M%SZ") + ("" if kind == "full" else f"-{kind}")
    text = json.dumps(doc, indent=1, sort_keys=False) + "\n"
    (RESULTS_DIR / f"{stamp}.json").write_text(text)
    latest = RESULTS_DIR / ("latest.json" if kind == "full" else f"latest-{kind}.json")
    tmp = latest.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(latest)

    print(report.render_markdown(doc))
    print()
    print(f"results: {RESULTS_DIR / f'{stamp}.json'} and {latest} ({doc['wall_s']} s)")
    if kind == "full":
        print("docs/benchmarks.md and README.md: python -m bench.report --docs")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
