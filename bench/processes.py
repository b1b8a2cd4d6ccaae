"""The bench's server processes: started in their own session with their output in the run's log
(``spawn_logged``), and what /proc says they use (CPU seconds, memory, children)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

from scripts.processes import die_with_parent, signals_deferred


def process_memory(pid: int) -> dict[str, float]:
    """Resident (VmRSS) and proportional (Pss) memory of one process, in MB."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss_mb"] = round(int(line.split()[1]) / 1024, 1)
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                out["pss_mb"] = round(int(line.split()[1]) / 1024, 1)
    return out


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None, with_children: bool = True) -> float:
    """User + system CPU time of a process (all its threads), plus its direct children's."""
    if pid is None:
        return 0.0
    total = 0.0
    for p in [pid, *(children(pid) if with_children else [])]:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime
    return total


def children(pid: int) -> list[int]:
    pids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            pids += [int(p) for p in (task / "children").read_text().split()]
    return sorted(set(pids))


def spawn_logged(argv: list[str], cwd: Path, env: dict[str, str], root: Path) -> subprocess.Popen:
    """A server process of the bench's: its own session (stopped as a group), output appended to
    ``root/gunicorn.log``, and terminated if the bench dies first."""
    log = open(root / "gunicorn.log", "ab")  # noqa: SIM115 - handed to the child
    with signals_deferred():
        process = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=die_with_parent(signal.SIGTERM),
        )
    log.close()
    return process
