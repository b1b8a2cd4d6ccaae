"""Ctrl-C stops ``make run`` (scripts/run.py, which ``make run`` execs) cleanly, even twice at once.

Two signals that reach the process together (a second Ctrl-C, or SIGINT and SIGTERM) run its
handler twice before the first interrupt has been handled: the second used to raise a second
KeyboardInterrupt into the first one's handling, which ended ``make run`` with a traceback and a
nonzero status. The process is held stopped while both signals are sent, so both are pending when
it resumes, whatever the machine's timing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from scripts.processes import free_port, port_is_listening
from tests.integration.proc_support import wait_for

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 120


def test_two_signals_at_once_stop_make_run_without_a_traceback():
    # Not under pytest's basetemp: PostgreSQL runs as ``postgres`` and must traverse its ancestors.
    data_dir = tempfile.TemporaryDirectory(prefix="growler-make-run-")
    port, pg_port, s3_port = free_port(), free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROWLER_", "PROMETHEUS_"))}
    env.update(
        GROWLER_DATA_DIR=data_dir.name,
        GROWLER_BIND=f"127.0.0.1:{port}",
        GROWLER_WORKERS="1",
        GROWLER_EMBEDDED_PG_PORT=str(pg_port),
        GROWLER_EMBEDDED_S3_PORT=str(s3_port),
    )
    log_path = Path(data_dir.name) / "run.log"
    with open(log_path, "wb") as log_file:
        run = subprocess.Popen(
            [sys.executable, "-m", "scripts.run"],
            cwd=REPO,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(
            lambda: "Growler is up" in log_path.read_text(errors="replace") or run.poll() is not None,
            "make run to come up",
            START_TIMEOUT_S,
        )
        assert run.poll() is None, log_path.read_text(errors="replace")

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
