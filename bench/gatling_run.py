"""``make bench-gatling``: Apache Polaris's Gatling benchmarks (bench/gatling/, vendored from
apache/polaris-tools ``benchmarks/``, setup adapted as bench/gatling/CHANGES.md says) against Growler.

Growler is started as ``make bench`` starts it (bench/growler_target.py: embedded PostgreSQL and
SeaweedFS, gunicorn with the shipped gunicorn.conf.py, authentication on, 2 workers). The
simulations' Iceberg REST requests are Polaris's paths (``/api/catalog/v1/{catalog}/...``) and run
unchanged: an nginx in front maps ``/api/catalog/`` to Growler's ``/`` (one ``proxy_pass``; the
management API's ``/management/`` passes as is). The simulations run in the order the upstream
README gives: CreateTreeDataset, ReadTreeDataset, CreateCommits, ReadUpdateTreeDataset, each with
the upstream defaults (benchmark-defaults.conf) except what must name this server (base URL,
credentials, the warehouse location) and the durations (``GATLING_MINUTES``, default 1).

    python -m bench.gatling_run            # needs bench/gatling/target (make bench-gatling builds it)
    GATLING_SIMULATIONS=CreateTreeDataset,ReadTreeDataset python -m bench.gatling_run

Gatling's HTML reports and simulation.log land in ``bench/results/gatling-<time>/`` (not committed);
the summary (each request's count, failures, mean and percentiles from Gatling's stats.json) is
printed and written to ``bench/results/gatling-<time>/summary.json``.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.targets import REPO, make_root, remove_root

GATLING = REPO / "bench" / "gatling"
PACKAGE = "org.apache.polaris.benchmarks.simulations"
BUCKET = "gatling"
SIMULATIONS = ("CreateTreeDataset", "ReadTreeDataset", "CreateCommits", "ReadUpdateTreeDataset")


def nginx_front(upstream: str, prefix: Path) -> tuple[subprocess.Popen, str]:
    """nginx on a free port: ``/api/catalog/`` -> Growler's ``/``, everything else as is."""
    from scripts.processes import free_port, port_is_listening

    binary = shutil.which("nginx") or "/usr/sbin/nginx"
    port = free_port()
    prefix.mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(
        "\n".join(
            [
                "user root;" if os.geteuid() == 0 else "",
                "worker_processes 1;",
                f"pid {prefix}/nginx.pid;",
                f"error_log {prefix}/error.log warn;",
                "events { worker_connections 1024; }",
                "http {",
                "    access_log off;",
                f"    client_body_temp_path {prefix}/client_body;",
                f"    proxy_temp_path {prefix}/proxy;",
                f"    fastcgi_temp_path {prefix}/fastcgi;",
                f"    uwsgi_temp_path {prefix}/uwsgi;",
                f"    scgi_temp_path {prefix}/scgi;",
                f"    upstream growler {{ server {upstream}; keepalive 64; }}",
                "    server {",
                f"        listen 127.0.0.1:{port};",
                "        proxy_http_version 1.1;",
                '        proxy_set_header Connection "";',
                "        proxy_set_header Host $host;",
                "        location /api/catalog/ { proxy_pass http://growler/; }",
                "        location / { proxy_pass http://growler; }",
                "    }",
                "}",
                "",
            ]
        )
    )
    command = [binary, "-p", f"{prefix}/", "-e", f"{prefix}/error.log", "-c", str(conf), "-g", "daemon off;"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not port_is_listening(port, "127.0.0.1"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"nginx did not start; see {prefix}/error.log")
        time.sleep(0.05)
    return process, f"http://127.0.0.1:{port}"


def application_conf(base_url: str, location: str, minutes: int) -> str:
    """What must name this server, and the durations; every other setting is the upstream default."""
    return "\n".join(
        [
            f'http.base-url = "{base_url}"',
            'auth.client-id = "bench"',
            'auth.client-secret = "bench-secret"',
            f'dataset.tree.default-base-location = "{location}"',
            f"workload.create-commits.duration-in-minutes = {minutes}",
            f"workload.read-update-tree-dataset.duration-in-minutes = {minutes}",
            "",
        ]
    )


def summarize(report_dir: Path) -> dict[str, Any]:
    """Gatling's own figures per request name (js/stats.json of its HTML report)."""
    stats = next(report_dir.glob("*/js/stats.json"), None)
    if stats is None:
        return {"failed": f"no Gatling report under {report_dir}"}
    raw = json.loads(stats.read_text())
    out: dict[str, Any] = {}
    for entry in (raw.get("contents") or {}).values():
        s = entry.get("stats") or {}

        def total(key: str, s: dict[str, Any] = s) -> Any:
            return (s.get(key) or {}).get("total")

        out[s.get("name") or entry.get("name")] = {
            "requests": total("numberOfRequests"),
            "failed": (s.get("numberOfRequests") or {}).get("ko"),
            "mean_ms": total("meanResponseTime"),
            "p50_ms": total("percentiles1"),
            "p75_ms": total("percentiles2"),
            "p95_ms": total("percentiles3"),
            "p99_ms": total("percentiles4"),
            "per_s": total("meanNumberOfRequestsPerSecond"),
        }
    return out


def main() -> int:
    from bench.growler_target import GrowlerTarget
    from bench.machine import machine

    target_dir = GATLING / "target"
    if not (target_dir / "classes").exists() or not (target_dir / "libs").exists():
        print("bench/gatling/target is not built: make bench-gatling", file=sys.stderr)
        return 2
    chosen = [s.strip() for s in os.environ.get("GATLING_SIMULATIONS", ",".join(SIMULATIONS)).split(",") if s.strip()]
    minutes = int(os.environ.get("GATLING_MINUTES", "1"))
    started = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    results_dir = REPO / "bench" / "results" / f"gatling-{started}"
    results_dir.mkdir(parents=True)
    summary: dict[str, Any] = {"started_at": started, "machine": machine(), "minutes": minutes, "simulations": {}}
    root = make_root()
    target = GrowlerTarget(root / "growler", int(os.environ.get("GROWLER_WORKERS") or 2))
    target.root.mkdir(parents=True)
    nginx = None
    try:
        target.start()
        nginx, front = nginx_front(target.base_url.removeprefix("http://"), root / "nginx")
        conf = root / "application.conf"
        # a bucket of its own: a warehouse's location may not overlap another's (the bench's warehouse
        # owns s3://growler-warehouse/), and table files need the bucket to exist
        target.s3.ensure_bucket(BUCKET)
        conf.write_text(application_conf(front, f"s3://{BUCKET}", minutes))
        java = os.environ.get("BENCH_JAVA_HOME")
        java_bin = str(Path(java) / "bin" / "java") if java else shutil.which("java") or "java"
        classpath = f"{target_dir / 'classes'}:{target_dir / 'libs'}/*"
        for name in chosen:
            print(f"[gatling] {name}", file=sys.stderr, flush=True)
            out = subprocess.run(
                [
                    java_bin,
                    # what Gatling's own launchers add (its stats writer reads String internals)
                    "--add-opens=java.base/java.lang=ALL-UNNAMED",
                    "-Xmx1G",
                    "-XX:+UseG1GC",
                    "-Xss100m",
                    f"-Dconfig.file={conf}",
                    "-cp",
                    classpath,
                    "io.gatling.app.Gatling",
                    "-s",
                    f"{PACKAGE}.{name}",
                    "-rf",
                    str(results_dir / name),
                ],
                cwd=GATLING,
                capture_output=True,
                text=True,
                check=False,
            )
            (results_dir / f"{name}.log").write_text(out.stdout + out.stderr)
            summary["simulations"][name] = {"exit": out.returncode, "requests": summarize(results_dir / name)}
    finally:
        if nginx is not None:
            os.killpg(nginx.pid, signal.SIGQUIT)
            nginx.wait(15)
        target.stop()
        remove_root(root)
    (results_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary["simulations"], indent=1))
    print(f"results: {results_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
