"""A manual check of the embedded services: start PostgreSQL and S3 in a temporary directory,
round-trip a row and an object, stop, start warm, read the object back, with timings.

The services themselves are scripts/postgres.py and scripts/seaweedfs.py (their processes:
scripts/processes.py).

CLI::

    python -m scripts.services smoke
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from scripts.postgres import EmbeddedPostgres
from scripts.processes import free_port
from scripts.seaweedfs import EmbeddedS3


def _smoke(keep: bool) -> int:
    import io

    tmp = Path(tempfile.mkdtemp(prefix="growler-smoke-"))
    print(f"data in {tmp}")
    pg = EmbeddedPostgres(tmp / "postgres", free_port(), fast=True)
    s3 = EmbeddedS3(tmp / "s3", free_port(), "smoke-access", "smoke-secret-key")
    timings: list[tuple[str, float]] = []

    def timed(label: str, fn) -> None:
        t0 = time.monotonic()
        fn()
        timings.append((label, time.monotonic() - t0))
        print(f"  {label:<28} {timings[-1][1]:6.2f} s", flush=True)

    try:
        timed("postgres cold start", pg.start)
        print(f"    (initdb {pg.last_initdb_seconds:.2f} s)  {pg.display_url}")
        timed("s3 cold start", s3.start)
        print(f"    {s3.endpoint}  ports {s3.ports}")

        import psycopg

        with psycopg.connect(pg.url) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
        body = b"hello from growler smoke\n"
        timed("s3 make bucket", lambda: s3.ensure_bucket("smoke"))
        c = s3.client()
        timed("s3 first put", lambda: c.put_object("smoke", "a/b.txt", io.BytesIO(body), len(body)))
        resp = c.get_object("smoke", "a/b.txt")
        try:
            assert resp.read() == body
        finally:
            resp.close()
            resp.release_conn()
        timed("postgres stop", pg.stop)
        timed("s3 stop", s3.stop)
        timed("postgres warm start", pg.start)
        timed("s3 warm start", s3.start)
        resp = s3.client().get_object("smoke", "a/b.txt")
        try:
            assert resp.read() == body
        finally:
            resp.close()
            resp.release_conn()
        print("smoke OK")
        return 0
    finally:
        s3.stop()
        pg.stop()
        if keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.services")
    sub = parser.add_subparsers(dest="cmd", required=True)
    smoke = sub.add_parser("smoke", help="start PostgreSQL and S3 in a temp dir, round-trip, stop")
    smoke.add_argument("--keep", action="store_true", help="keep the temp dir (logs) afterwards")
    args = parser.parse_args(argv)
    if args.cmd == "smoke":
        return _smoke(args.keep)
    return 2


if __name__ == "__main__":
    sys.exit(main())
