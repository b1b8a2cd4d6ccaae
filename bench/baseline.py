"""The baseline that cannot drift: this checkout against a named reference commit, A/B on one machine.

Comparing each change only with the commit before it lets many small costs add up unnoticed (issue
47: the write path doubled its CPU over two weeks of features, each measured against its parent).
So every full ``make bench`` also measures the same workloads on ``REFERENCE`` (e24938e, the commit
issue 47's figures of "two weeks ago" were taken at) and on this checkout, both served at once and
run in interleaved pairs by bench/ab.py (A, B, B, A, ...): the ratio of each pair is taken minutes
apart at most, under the same load, so it holds on a busy machine where absolute figures do not.

The figure compared is server CPU per request, app (gunicorn master and workers) plus PostgreSQL,
the median of the pairs' ratios. A workload that costs more than ``THRESHOLD`` (5%) more than the
reference is flagged in the report and in the README's bench table.

The reference is exported once with ``git archive`` into ``.cache/bench-ref-<commit>`` (its own
code, harness and gunicorn.conf.py; the interpreter is this checkout's ``.venv``).

    python -m bench.baseline              # the reference, W1 W2 W3 W5 W6, 6 pairs of 10 s each
    python -m bench.baseline <rev>        # any other revision (make bench-ab OLD=<rev>)
    BASELINE_ROUNDS=4 BASELINE_SECONDS=8 BASELINE_ONLY=W1,W5 python -m bench.baseline
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from bench.machine import RESULTS_DIR
from bench.targets import REPO

REFERENCE = "e24938e"
REFERENCE_NAME = "issue 47's baseline, 2026-11-27"
THRESHOLD = 1.05
WORKLOADS = ("W1", "W2", "W3", "W5", "W6")


def _git(*args: str) -> str:
    out = subprocess.run(
        ["git", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, GIT_OPTIONAL_LOCKS="0"),
    )
    return out.stdout.strip()


def export(rev: str, cache: Path = REPO / ".cache") -> Path:
    """The tree of ``rev`` in ``cache/bench-ref-<commit>`` (made once: written beside, then renamed)."""
    commit = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    target = cache / f"bench-ref-{commit[:12]}"
    if (target / ".exported").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".bench-ref-", dir=cache))
    archive = subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO, capture_output=True, check=True)
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive.stdout)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(staging, filter="data")
    (staging / ".exported").write_text(commit + "\n")
    shutil.rmtree(target, ignore_errors=True)  # a half-made copy of an interrupted export
    staging.rename(target)
    return target


def flagged(ratio: float | None, threshold: float = THRESHOLD) -> bool:
    """Whether a workload's cost over the reference's is past the threshold (more than 5% more)."""
    return ratio is not None and ratio > threshold


def summarize(ab_result: dict[str, Any], reference: str, threshold: float = THRESHOLD) -> dict[str, Any]:
    """bench/ab.py's answer (A = reference, B = this checkout) as the report shows it."""
    workloads: dict[str, Any] = {}
    for key, result in (ab_result.get("results") or {}).items():
        ratio = result.get("total_B_over_A_paired")
        totals = result.get("total_ms") or {}
        workloads[key] = {
            "reference_ms": totals.get("A"),
            "head_ms": totals.get("B"),
            "ratio": ratio,
            "app_ratio": result.get("app_B_over_A_paired"),
            "pg_ms": {label: ((result.get(label) or {}).get("pg_ms") or {}).get("median") for label in ("A", "B")},
            "flagged": flagged(ratio, threshold),
        }
    return {
        "reference": reference,
        "reference_name": REFERENCE_NAME if reference.startswith(REFERENCE) else "",
        "threshold": threshold,
        "method": (
            f"bench/ab.py: both served at once (2 workers, authenticated), {ab_result.get('rounds')} interleaved "
            f"pairs of {ab_result.get('seconds')} s per workload; app + PostgreSQL CPU ms per request, "
            "median of the pairs' ratios"
        ),
        "workloads": workloads,
        "flagged": sorted(key for key, w in workloads.items() if w["flagged"]),
    }


def measure(
    rev: str = REFERENCE, only: tuple[str, ...] = WORKLOADS, rounds: int = 6, seconds: int = 10
) -> dict[str, Any]:
    from bench import ab

    old = export(rev)
    os.environ["AB_ONLY"] = ",".join(only)
    os.environ["AB_ROUNDS"] = str(rounds)
    os.environ["AB_SECONDS"] = str(seconds)
    commit = (old / ".exported").read_text().strip()
    return summarize(ab.compare(old, REPO), commit[:12])


def main(argv: list[str]) -> int:
    rev = argv[0] if argv else REFERENCE
    only = tuple(
        w.strip().upper() for w in os.environ.get("BASELINE_ONLY", ",".join(WORKLOADS)).split(",") if w.strip()
    )
    result = measure(
        rev, only, int(os.environ.get("BASELINE_ROUNDS", "6")), int(os.environ.get("BASELINE_SECONDS", "10"))
    )
    result["started_at"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    result["loadavg_after"] = round(os.getloadavg()[0], 2)
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"ab-{result['reference'][:7]}-{result['started_at'].replace(':', '')}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    from bench.report_tables import baseline_lines

    print("\n".join(baseline_lines(result)))
    print(f"\nresults: {out}")
    return 0  # a flagged workload is a finding for the report, not a failure of the run


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
