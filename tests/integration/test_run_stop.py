"""Ctrl-C stops ``make run`` (scripts/run.py, which ``make run`` execs) cleanly, even twice at once.

Two signals that reach the process together (a second Ctrl-C, or SIGINT and SIGTERM) run its
handler twice before the first interrupt has been handled: the second used to raise a second
KeyboardInterrupt into the first one's handling, which ended ``make run`` with a traceback and a
nonzero status. The process is held stopped while both signals are sent, so both are pending when
it resumes, whatever the machine's timing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psycopg
import pytest

from scripts.processes import free_port, port_is_listening
from tests.integration.proc_support import wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120


def _run_env(data_dir: str) -> tuple[dict[str, str], tuple[int, int, int]]:
    """``make run``'s environment on throwaway ports and a data directory of its own, and the ports."""
    port, pg_port, s3_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROWLER_", "PROMETHEUS_"))}
    env.update(
        GROWLER_DATA_DIR=data_dir,
        GROWLER_BIND=f"127.0.0.1:{port}",
        GROWLER_WORKERS="1",
        GROWLER_EMBEDDED_PG_PORT=str(pg_port),
        GROWLER_EMBEDDED_S3_PORT=str(s3_port),
    )
    return env, (port, pg_port, s3_port)


def _start(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    with open(log_path, "wb") as log_file:
        run = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for(
            lambda: "Growler is up" in log_path.read_text(errors="replace") or run.poll() is not None,
            "make run to come up",
            START_TIMEOUT_S,
        )
        assert run.poll() is None, log_path.read_text(errors="replace")
    except BaseException:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        raise
    return run


def test_two_signals_at_once_stop_make_run_without_a_traceback():
    # Not under pytest's basetemp: PostgreSQL runs as ``postgres`` and must traverse its ancestors.
    data_dir = tempfile.TemporaryDirectory(prefix="growler-make-run-")
    env, (port, pg_port, s3_port) = _run_env(data_dir.name)
    log_path = Path(data_dir.name) / "run.log"
    run = _start([sys.executable, "-m", "scripts.run"], env, log_path)
    try:
        os.kill(run.pid, signal.SIGSTOP)
        os.kill(run.pid, signal.SIGINT)  # Ctrl-C ...
        os.kill(run.pid, signal.SIGTERM)  # ... and another signal before the first is handled
        os.kill(run.pid, signal.SIGCONT)
        assert run.wait(90) == 0, log_path.read_text(errors="replace")
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
        output = log_path.read_text(errors="replace")
        data_dir.cleanup()
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert "[run] stopping" in output and output.rstrip().endswith("[run] stopped"), output
    # everything it started is stopped: gunicorn, PostgreSQL and S3 free their ports
    assert not any(port_is_listening(p, "127.0.0.1") for p in (port, pg_port, s3_port))


def test_the_large_catalog_settings_line_of_the_deployment_guide_reaches_postgresql():
    """docs/deployment.md's ``GROWLER_PG_SETTINGS=... make run``, run as written (by a shell, in
    the checkout): the embedded PostgreSQL it starts has the sizes the line gives."""
    docs = (REPO / "docs" / "deployment.md").read_text()
    (line,) = [text for text in docs.splitlines() if text.startswith("GROWLER_PG_SETTINGS=")]
    data_dir = tempfile.TemporaryDirectory(prefix="growler-make-run-")
    env, (_, pg_port, _) = _run_env(data_dir.name)
    run = _start(["bash", "-c", line], env, Path(data_dir.name) / "run.log")
    try:
        secrets = json.loads(next(Path(data_dir.name).rglob("growler-secrets.json")).read_text())
        url = f"postgresql://growler:{secrets['catalog']}@127.0.0.1:{pg_port}/growler"
        with psycopg.connect(url, autocommit=True) as conn:
            shown = [conn.execute(f"SHOW {name}").fetchone()[0] for name in ("shared_buffers", "effective_cache_size")]
        assert shown == ["2GB", "6GB"]
    finally:
        os.killpg(run.pid, signal.SIGINT)  # Ctrl-C
        try:
            run.wait(90)
        finally:
            if run.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
            data_dir.cleanup()
