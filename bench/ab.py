"""A/B of server CPU per request between two checkouts, both served at once, runs interleaved.

Wall-clock figures mean little on a shared machine; CPU time per request much more. This starts
Growler from each checkout as ``make bench`` does (bench/targets.py: embedded PostgreSQL and
SeaweedFS, gunicorn with the shipped gunicorn.conf.py, authenticated, 2 workers), seeds what the
chosen workloads read, then runs each workload on A, B, A, B, ... the same way (wrk for reads, 16
connections, a warm-up first; bench/load.py for W5/W6) and reports the median and spread of app
(gunicorn master + workers) and PostgreSQL CPU milliseconds per request.

    python -m bench.ab /path/to/old /path/to/new            # W1, 6 rounds of 10 s each
    AB_ONLY=W1,W2,W3,W5,W6 AB_ROUNDS=6 AB_SECONDS=10 python -m bench.ab OLD NEW
    AB_ENV_B=GROWLER_AUDIT_TRAIL=on python -m bench.ab HERE HERE  # one checkout, a setting's cost

Each checkout is served by ``python bench/ab.py serve`` run from a copy of this file with the
checkout as its working directory (its own bench/targets.py, app and gunicorn.conf.py), so the
checkouts need nothing of this file.

Where the CPU goes, function by function: serve each checkout with one worker under yappi
(bench/gunicorn_yappi.py: ``AB_GUNICORN_CONF=<it> PROF_LABEL=old GROWLER_WORKERS=1 python
<this file> serve old.json`` in the old checkout, likewise ``new``), send both the same requests
between touching ``$TMPDIR/<label>.start`` and ``.stop``, then
``python -m bench.ab calls old-<pid>.pstat new-<pid>.pstat <requests old> <requests new>``.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

READS = {"W1": "namespaces/ns000", "W2": "namespaces", "W3": "namespaces/ns001/tables/wide"}


def serve(info_file: Path) -> None:
    """In a checkout's directory: start its Growler, seed, write where it is, wait for SIGTERM."""
    sys.path.insert(0, os.getcwd())
    import random

    from bench import bodies
    from bench.targets import make_root, remove_root

    # the checkout's own harness, wherever its bench kept it then (older checkouts, e.g. the
    # reference commit bench/baseline.py serves, had it all in bench/targets.py and bench/workloads.py)
    try:
        from bench.growler_target import GrowlerTarget
    except ImportError:
        from bench.targets import GrowlerTarget
    try:
        from bench.plan import NAMESPACE_PROPERTIES, NAMESPACES
        from bench.seeding import _expect, append_sequentially, catalog_client
    except ImportError:
        from bench.workloads import NAMESPACE_PROPERTIES, NAMESPACES, _expect, append_sequentially
        from bench.workloads import _client as catalog_client
    root = make_root()
    # AB_GUNICORN_CONF: another gunicorn config for the server, e.g. bench/gunicorn_yappi.py (a
    # profiler wrapping the shipped one: ``calls``), handed to the target (not patched into it)
    conf = os.environ.get("AB_GUNICORN_CONF")
    # AB_SERVE_ENV (set by ``compare`` from AB_ENV_A / AB_ENV_B): GROWLER_* settings of this side's
    # server, e.g. the audit trail on for B only (the target passes on no GROWLER_* of its own env)
    settings = _settings(os.environ.get("AB_SERVE_ENV", ""))
    target = GrowlerTarget(
        root / "growler",
        int(os.environ.get("GROWLER_WORKERS") or 2),
        **({"gunicorn_conf": conf} if conf else {}),  # an older checkout's target has no such argument
        **({"extra_env": settings} if settings else {}),
    )
    target.root.mkdir(parents=True)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        target.start()
        with catalog_client(target) as client:
            for name in NAMESPACES:
                _expect(client.post("namespaces", json={"namespace": [name], "properties": NAMESPACE_PROPERTIES}), 200)
            _expect(client.post("namespaces/ns001/tables", json=bodies.create_table("wide", 40)), 200)
            snapshots = int(os.environ.get("AB_WIDE_SNAPSHOTS", "100"))  # fewer: a quicker start
            append_sequentially(client, "namespaces/ns001/tables/wide", snapshots, random.Random(7))
            _expect(client.post("namespaces/ns003/tables", json=bodies.create_table("w6")), 200)
        info = {
            "api": target.api(),
            "headers": target.headers,
            "gunicorn": target.gunicorn.pid,
            "postgres": target.postgres.pid,
            "metrics_url": target.metrics_url,
            "root": str(root),
        }
        info_file.write_text(json.dumps(info))
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        target.stop()
        remove_root(root)


def _settings(text: str) -> dict[str, str]:
    """``K=V,K=V`` (AB_ENV_A, AB_ENV_B) as a dict; only GROWLER_* names."""
    pairs = [item.split("=", 1) for item in text.split(",") if item.strip()]
    if any(len(pair) != 2 or not pair[0].strip().startswith("GROWLER_") for pair in pairs):
        raise SystemExit(f"AB_ENV_A/AB_ENV_B: GROWLER_NAME=value pairs, comma-separated, not {text!r}")
    return {name.strip(): value.strip() for name, value in pairs}


def calls(old: Path, new: Path, requests_old: int, requests_new: int, top: int = 40) -> list[str]:
    """Two yappi profiles (bench/gunicorn_yappi.py) of the same requests: calls and self CPU
    microseconds per request, function by function (paths made relative to their checkout or
    site-packages, so that two checkouts' functions match), largest difference in calls first."""
    import pstats
    import re

    def per_function(path: Path) -> dict[str, tuple[int, float]]:
        out: dict[str, tuple[int, float]] = {}
        for (file, _line, name), (_cc, ncalls, tottime, _ct, _callers) in pstats.Stats(str(path)).stats.items():
            key = f"{re.sub(r'^.*?(site-packages/|/(?=(app|storage|bench|scripts)/))', '', file)}:{name}"
            key = re.sub(r" at 0x[0-9a-f]+", "", key)  # a builtin's address differs between processes
            n, t = out.get(key, (0, 0.0))
            out[key] = (n + ncalls, t + tottime)
        return out

    a, b = per_function(old), per_function(new)
    lines = [
        f"calls per request: {sum(n for n, _ in a.values()) / requests_old:.1f} -> "
        f"{sum(n for n, _ in b.values()) / requests_new:.1f}; self CPU us per request: "
        f"{sum(t for _, t in a.values()) * 1e6 / requests_old:.0f} -> "
        f"{sum(t for _, t in b.values()) * 1e6 / requests_new:.0f}"
    ]
    rows = []
    for key in a.keys() | b.keys():
        (na, ta), (nb, tb) = a.get(key, (0, 0.0)), b.get(key, (0, 0.0))
        rows.append((nb / requests_new - na / requests_old, key, na / requests_old, nb / requests_new, ta, tb))
    rows.sort(key=lambda row: -abs(row[0]))
    for _diff, key, ca, cb, ta, tb in rows[:top]:
        lines.append(f"{key[:90]:90} {ca:9.2f} {cb:9.2f} {ta * 1e6 / requests_old:8.1f} {tb * 1e6 / requests_new:8.1f}")
    return lines


def compare(old: Path, new: Path) -> dict[str, Any]:
    from bench import wrk
    from bench.processes import children, cpu_seconds

    only = [w.strip().upper() for w in os.environ.get("AB_ONLY", "W1").split(",") if w.strip()]
    rounds = int(os.environ.get("AB_ROUNDS", "6"))
    seconds = int(os.environ.get("AB_SECONDS", "10"))
    warmup_s = int(os.environ.get("AB_WARMUP_S", "2"))  # before each read run (wrk's shortest is 1 s)
    here = Path(__file__).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    sides: dict[str, dict[str, Any]] = {}
    procs: list[subprocess.Popen] = []
    try:
        for label, checkout in (("A", old), ("B", new)):
            info_file = tmp / f"{label}.json"
            py = checkout / ".venv" / "bin" / "python"
            procs.append(
                subprocess.Popen(
                    [str(py if py.exists() else sys.executable), str(here), "serve", str(info_file)],
                    cwd=checkout,
                    env={**os.environ, "AB_SERVE_ENV": os.environ.get(f"AB_ENV_{label}", "")},
                    stdout=open(tmp / f"{label}.log", "ab"),  # noqa: SIM115
                    stderr=subprocess.STDOUT,
                )
            )
            sides[label] = {"checkout": str(checkout), "info_file": info_file}
        deadline = time.monotonic() + 600
        while not all(s["info_file"].exists() for s in sides.values()):
            if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
                raise RuntimeError(f"a server did not start; see {tmp}")
            time.sleep(0.5)
        for side in sides.values():
            side.update(json.loads(side.pop("info_file").read_text()))

        def measure(side: dict[str, Any], workload: str) -> dict[str, float]:
            def cpu() -> tuple[float, float, dict[int, float]]:
                workers = {pid: cpu_seconds(pid, with_children=False) for pid in children(side["gunicorn"])}
                return cpu_seconds(side["gunicorn"]), cpu_seconds(side["postgres"]), workers

            if workload in READS:
                url = side["api"] + READS[workload]
                kwargs = {"connections": 16, "threads": 1, "headers": side["headers"], "seed": 7}
                if warmup_s:
                    wrk.run(url, duration_s=warmup_s, **kwargs)  # warm-up
                before = cpu()
                requests = wrk.run(url, duration_s=seconds, **kwargs)["requests"]
            else:
                side["runs"] = side.get("runs", 0) + 1  # a new seed each run: W5's table names are new
                spec = {"base_url": side["api"], "headers": side["headers"], "seed": side["runs"], "concurrency": 16}
                if workload == "W5":
                    spec.update(mode="create", namespace="ns002", count=40 * seconds, warmup=20)
                else:  # W6: one writer, appends
                    spec.update(
                        mode="append",
                        namespace="ns003",
                        table="w6",
                        writers=1,
                        count=10 * seconds,
                        warmup=5,
                        metrics_url=side["metrics_url"],
                    )
                before = cpu()
                out = subprocess.run(
                    [sys.executable, "-m", "bench.load", json.dumps(spec)],
                    cwd=new,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                line = next(ln for ln in out.splitlines() if ln.startswith("BENCH_JSON "))
                result = json.loads(line.removeprefix("BENCH_JSON "))
                requests = result.get("http_requests_total") or result["requests"]
            after = cpu()
            spent = sorted((after[2][pid] - cpu_before for pid, cpu_before in before[2].items() if pid in after[2]))
            return {
                "requests": requests,
                # the busiest worker's share of the workers' CPU: 16 connections are not always
                # spread evenly, and one busy worker batches more requests per loop turn than two
                "busiest_share": round(spent[-1] / max(sum(spent), 1e-9), 2) if spent else None,
                "app_ms": (after[0] - before[0]) * 1000 / requests,
                "pg_ms": (after[1] - before[1]) * 1000 / requests,
            }

        results: dict[str, Any] = {}
        for workload in only:
            runs: dict[str, list[dict[str, float]]] = {"A": [], "B": []}
            for i in range(rounds):
                for label in ("A", "B") if i % 2 == 0 else ("B", "A"):
                    runs[label].append(m := measure(sides[label], workload))
                    print(
                        f"{workload} round {i} {label}: {m['requests']} req, app {m['app_ms']:.3f} ms, "
                        f"pg {m['pg_ms']:.3f} ms, busiest worker {m['busiest_share']}, load {os.getloadavg()[0]:.2f}",
                        file=sys.stderr,
                        flush=True,
                    )
            results[workload] = {label: summarize(r) for label, r in runs.items()}
            a, b = results[workload]["A"]["app_ms"]["median"], results[workload]["B"]["app_ms"]["median"]
            results[workload]["app_B_over_A"] = round(b / a, 3)
            # each round's B over the A measured next to it (same minute, same load on the machine)
            paired = paired_ratio([r["app_ms"] for r in runs["A"]], [r["app_ms"] for r in runs["B"]])
            results[workload]["app_B_over_A_paired"] = round(paired, 3)
            # app + PostgreSQL: what bench/baseline.py holds each workload to
            totals = {label: [r["app_ms"] + r["pg_ms"] for r in runs[label]] for label in runs}
            results[workload]["total_B_over_A_paired"] = round(paired_ratio(totals["A"], totals["B"]), 3)
            results[workload]["total_ms"] = {label: round(statistics.median(v), 4) for label, v in totals.items()}
            print(
                f"{workload}: app A {a:.3f} B {b:.3f} ms/request (B/A {b / a:.3f}, paired {paired:.3f})",
                file=sys.stderr,
                flush=True,
            )
        return {"old": str(old), "new": str(new), "rounds": rounds, "seconds": seconds, "results": results}
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


def paired_ratio(a: list[float], b: list[float]) -> float:
    """The median of each round's B over its A: the two ran minutes apart at most, under the same load
    on the machine, which moves CPU per request far more than any change measured here."""
    return statistics.median(y / x for x, y in zip(a, b, strict=True))


def summarize(runs: list[dict[str, float]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "requests": [int(r["requests"]) for r in runs],
        "busiest_share": [r["busiest_share"] for r in runs],
    }
    for key in ("app_ms", "pg_ms"):
        values = sorted(r[key] for r in runs)
        out[key] = {
            "median": round(statistics.median(values), 4),
            "min": round(values[0], 4),
            "max": round(values[-1], 4),
            "runs": [round(r[key], 4) for r in runs],
        }
    return out


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(Path(sys.argv[2]))
    elif sys.argv[1] == "calls":  # calls OLD.pstat NEW.pstat REQUESTS_OLD REQUESTS_NEW
        print("\n".join(calls(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))))
    else:
        print(json.dumps(compare(Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()), indent=1))
