"""``make test``: the test suite as two pytest sessions side by side, one per part.

    python -m scripts.suite [pytest options and paths...]

Each part (``tests/suite_parts.py``: ``slow``, the tests that share the Spark drivers, Keycloak,
Kafka and the long STS job, and those marked slow; ``rest``, all the others) runs in a pytest session of its own, with
the same arguments and its own servers on throwaway ports; every test runs in exactly one. Much of
the suite's time is waiting (JVMs booting, the STS job's 16 minutes, tokens expiring, restarts),
so two sessions take about as long as the longer part instead of the sum.

Both sessions' output is shown as it comes, each line tagged with its part; at the end a line per
part with its exit status and time, followed by its failed tests again (a CI log may be cut to
its tail). The exit status is 0 only if both parts passed (a part in which the given paths or
filters select nothing counts as passed when the other ran tests).
Ctrl-C or SIGTERM reaches both sessions. Against external services (``GROWLER_TEST_DATABASE_URL``,
``GROWLER_TEST_S3_ENDPOINT``) the suite runs as one session: the parts would share one database.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import IO

PARTS = ("slow", "rest")
EXTERNAL_SERVICES = ("GROWLER_TEST_DATABASE_URL", "GROWLER_TEST_S3_ENDPOINT")
CPU_LOCK_ENV = "GROWLER_TEST_CPU_LOCK"  # tests/conftest.py, ``cpu_alone``
NO_TESTS_COLLECTED = 5  # pytest.ExitCode.NO_TESTS_COLLECTED


@dataclass
class Part:
    name: str
    process: subprocess.Popen
    started: float
    ended: float | None = None
    pump: threading.Thread | None = field(default=None, repr=False)
    failures: list[bytes] = field(default_factory=list)  # pytest's FAILED/ERROR summary lines


FAILURE_LINES = (b"FAILED ", b"ERROR ")  # pytest's short test summary (``-r fE``)


def _pump(tag: bytes, stream: IO[bytes], out: IO[bytes], lock: threading.Lock, failures: list[bytes]) -> None:
    """Copy a session's output line by line, tagged, without splitting another session's line;
    keep its failure summary lines, repeated at the very end (a CI log may show only its tail)."""
    for line in iter(stream.readline, b""):
        if line.startswith(FAILURE_LINES):
            failures.append(line)
        with lock:
            out.write(tag + line)
            out.flush()
    stream.close()


def start(name: str | None, args: list[str], lock: threading.Lock) -> Part:
    """A pytest session of part ``name`` (None: the whole suite)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", *([f"--part={name}"] if name else []), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a signal for one session reaches its children, not this runner
    )
    part = Part(name or "all", process, time.monotonic())
    assert process.stdout is not None
    tag = f"[{part.name}] ".encode()
    part.pump = threading.Thread(
        target=_pump, args=(tag, process.stdout, sys.stdout.buffer, lock, part.failures), daemon=True
    )
    part.pump.start()
    return part


def combined_status(codes: dict[str, int]) -> int:
    """0 if every part passed; a part that selected nothing passes if another ran tests."""
    ran = [code for code in codes.values() if code != NO_TESTS_COLLECTED]
    if not ran:
        return NO_TESTS_COLLECTED
    failed = [code for code in ran if code != 0]
    return failed[0] if failed else 0


def main(argv: list[str]) -> int:
    lock = threading.Lock()
    # External services (tests/conftest.py): one database and bucket, which every api test empties
    # - two sessions cannot share them, so the suite runs as one session there.
    external = any(os.environ.get(name) for name in EXTERNAL_SERVICES)
    # The tests that measure throughput under a CPU-bound burst take turns across the sessions
    # (the ``cpu_alone`` fixture, tests/conftest.py).
    with tempfile.NamedTemporaryFile(prefix="growler-suite-cpu-", suffix=".lock") as cpu_lock:
        os.environ[CPU_LOCK_ENV] = cpu_lock.name
        parts = [start(name, argv, lock) for name in ((None,) if external else PARTS)]
        return _wait(parts)


def _wait(parts: list[Part]) -> int:
    """Until every session ended (signals passed on to them); their combined exit status."""

    def forward(signum: int, _frame: object) -> None:
        for part in parts:
            if part.process.poll() is None:
                try:
                    os.killpg(part.process.pid, signum)
                except ProcessLookupError:
                    pass

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    waiting = list(parts)
    while waiting:
        for part in list(waiting):
            if part.process.poll() is not None:
                part.ended = time.monotonic()
                waiting.remove(part)
        time.sleep(0.2)
    for part in parts:
        assert part.pump is not None
        part.pump.join()
    codes = {part.name: part.process.returncode for part in parts}
    for part in parts:
        assert part.ended is not None
        took = part.ended - part.started
        print(f"part {part.name}: exit status {part.process.returncode} in {took:.0f} s", flush=True)
        for line in part.failures:
            sys.stdout.buffer.write(f"  [{part.name}] ".encode() + line)
        sys.stdout.buffer.flush()
    return combined_status(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
