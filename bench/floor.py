"""The floors of the fixed stack on this machine: what no catalog built on it can beat (``W0``).

The issue's targets compare Growler with a Go catalog that keeps its state in its own process.
These two measurements, taken in the same run, say how much of a gap is the stack's own:

- ``W0_read``: W1 (loadNamespaceMetadata, same wrk settings) against ``bench/floor_app.py`` -
  gunicorn with uvicorn workers (2, as Growler) and a psycopg_pool asyncio pool, one query of the
  same statement on the same row shape, and the JSON answer. No routing, validation,
  authentication, log line or metric: any catalog on this stack pays at least this much.
- ``W0_put``: W11's biggest metadata file written to the embedded SeaweedFS with Growler's own
  object-store client (``S3ObjectStore.write_new``), one PUT at a time: the part of a W11 commit
  at 4,000 snapshots no catalog that writes its metadata file before acknowledging can skip.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.processes import children, cpu_seconds, process_memory, spawn_logged
from bench.targets import REPO, WAREHOUSE, Target
from scripts.postgres import EmbeddedPostgres
from scripts.processes import free_port, stop_process_group
from scripts.run import DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY, wait_for_http
from scripts.seaweedfs import EmbeddedS3

LOCALHOST = "127.0.0.1"
PUT_COUNT = 40
PUT_WARMUP = 3
DEFAULT_PUT_BYTES = 1_430_000  # W11's file at 4,000 snapshots when the run has no W11 figure


class FloorTarget(Target):
    """PostgreSQL (fsync on, as Growler's) and gunicorn serving ``bench/floor_app.py``."""

    name = "floor"
    label = "stack floor"
    prefix = WAREHOUSE

    def __init__(self, root: Path, workers: int, namespace: str, properties: dict[str, str]) -> None:
        super().__init__(root)
        self.workers, self.namespace, self.properties = workers, namespace, properties
        self.postgres: EmbeddedPostgres | None = None
        self.gunicorn: subprocess.Popen | None = None

    def start(self) -> None:
        import psycopg
        from psycopg.types.json import Jsonb

        self.postgres = EmbeddedPostgres(self.root / "postgres", free_port())
        self.postgres.start()
        with psycopg.connect(self.postgres.url, autocommit=True) as conn:
            conn.execute(
                "CREATE TABLE namespace (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
                ' warehouse_id bigint NOT NULL, path text[] COLLATE "C" NOT NULL,'
                " properties jsonb NOT NULL DEFAULT '{}'::jsonb, UNIQUE (warehouse_id, path))"
            )
            conn.execute(
                "INSERT INTO namespace (warehouse_id, path, properties) VALUES (1, %s, %s)",
                ([self.namespace], Jsonb(self.properties)),
            )
        port = free_port()
        # cwd is not the repository: gunicorn would read Growler's gunicorn.conf.py from there
        env = dict(
            os.environ, FLOOR_DATABASE_URL=self.postgres.url, FLOOR_NAMESPACE=self.namespace, PYTHONPATH=str(REPO)
        )
        argv = [sys.executable, "-m", "gunicorn", "-k", "uvicorn_worker.UvicornWorker", "-w", str(self.workers)]
        argv += ["-b", f"{LOCALHOST}:{port}", "bench.floor_app:app"]
        self.gunicorn = spawn_logged(argv, self.root, env, self.root)
        if not wait_for_http(self.gunicorn, LOCALHOST, port, 90.0):
            raise RuntimeError(f"the floor's gunicorn exited during start-up; see {self.root / 'gunicorn.log'}")
        self.base_url = f"http://{LOCALHOST}:{port}"
        deadline = time.monotonic() + 90
        while (self.root / "gunicorn.log").read_text(errors="replace").count(
            "Application startup complete"
        ) < self.workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all floor workers started; see {self.root / 'gunicorn.log'}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.gunicorn is not None:
            stop_process_group(self.gunicorn, [(signal.SIGTERM, 20.0)])
            self.gunicorn = None
        if self.postgres is not None:
            self.postgres.stop()

    def cpu_seconds(self) -> dict[str, float]:
        return {
            "app": cpu_seconds(self.gunicorn.pid if self.gunicorn else None),
            "postgres": cpu_seconds(self.postgres.pid if self.postgres else None),
        }

    def memory(self) -> dict[str, Any]:
        return {"workers": [process_memory(pid) for pid in children(self.gunicorn.pid)]} if self.gunicorn else {}


def read_floor(root: Path, plan: Any, run_wrk: Any, workers: int, namespace: str, properties: dict[str, str]) -> dict:
    """W1 against the floor app, measured as W1 is (``run_wrk``: warm-up, then the plan's run)."""
    target = FloorTarget(root, workers, namespace, properties)
    try:
        target.start()
        return run_wrk(target, plan, f"namespaces/{namespace}")
    finally:
        target.stop()


def put_floor(root: Path, size: int, count: int = PUT_COUNT) -> dict[str, Any]:
    """``count`` PUTs of ``size`` bytes, one after the other, to a fresh embedded SeaweedFS."""
    from app.ground.locations import Location
    from app.ground.settings import S3Settings
    from storage.objects import S3ObjectStore

    s3 = EmbeddedS3(root / "s3", free_port(), DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY)
    s3.start()
    try:
        s3.ensure_bucket("floor")
        store = S3ObjectStore(
            S3Settings(endpoint=s3.endpoint, access_key=DEV_S3_ACCESS_KEY, secret_key=DEV_S3_SECRET_KEY)
        )
        body = (b'{"snapshots":[' + b'{"snapshot-id":1},' * size)[: size - 2] + b"]}"
        seconds = []
        before = cpu_seconds(s3.pid, with_children=False)
        for n in range(PUT_WARMUP + count):
            start = time.perf_counter()
            store.write_new(Location.parse(f"s3://floor/metadata/{n:05d}.metadata.json", "floor"), body)
            if n >= PUT_WARMUP:
                seconds.append(time.perf_counter() - start)
        s3_cpu = cpu_seconds(s3.pid, with_children=False) - before
    finally:
        s3.stop()
    ms = sorted(s * 1000 for s in seconds)
    return {
        "bytes": size,
        "puts": count,
        "latency_ms": {"p50": round(statistics.median(ms), 2), "min": round(ms[0], 2), "max": round(ms[-1], 2)},
        "s3_cpu_ms_per_put": round(s3_cpu * 1000 / (PUT_WARMUP + count), 2),
    }


def measure(root: Path, plan: Any, run_wrk: Any, workers: int, growler: dict[str, Any], log: Any) -> dict[str, Any]:
    """Both floors; the PUT is as big as Growler's loadTable answer at W11's last level."""
    from bench.plan import NAMESPACE_PROPERTIES, NS_W1

    levels = (growler.get("W11") or {}).get("levels") or []
    size = max((level.get("load_response_bytes") or 0 for level in levels), default=0) or DEFAULT_PUT_BYTES
    out: dict[str, Any] = {}
    for key, run in (
        ("W0_read", lambda: read_floor(root / "read", plan, run_wrk, workers, NS_W1, NAMESPACE_PROPERTIES)),
        ("W0_put", lambda: put_floor(root / "put", size)),
    ):
        log(f"floor: {key}")
        (root / key.removeprefix("W0_")).mkdir(parents=True, exist_ok=True)
        try:
            out[key] = run()
        except Exception as exc:  # noqa: BLE001 - a failed floor must not lose the run
            out[key] = {"failed": f"{type(exc).__name__}: {exc}"[:2000]}
    return out
