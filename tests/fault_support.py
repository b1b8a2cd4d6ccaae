"""Freezing a dependency the way a hung host does (SIGSTOP), for the fault tests."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (PostgreSQL's backends are in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def _state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None  # gone


def _stop_tree(root: int) -> None:
    """SIGSTOP every process of the tree, including one forked while we were stopping the others.

    A backend forked between a listing and its parent's stop would keep serving (the freeze
    would not be one); so list again until a listing finds nothing new, then wait until each
    process is really stopped. A stopped parent forks no more.
    """
    stopped: set[int] = set()
    while new := [pid for pid in process_tree(root) if pid not in stopped]:
        for pid in new:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
            stopped.add(pid)
    deadline = time.monotonic() + 30  # a hang guard, not a speed bound
    while any(_state(pid) not in ("T", "t", None) for pid in stopped):
        assert time.monotonic() < deadline, "processes did not stop"
        time.sleep(0.01)


@contextmanager
def frozen(service) -> Iterator[None]:
    _stop_tree(service._proc.pid)
    try:
        yield
    finally:
        for pid in process_tree(service._proc.pid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
