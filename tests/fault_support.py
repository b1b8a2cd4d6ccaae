"""Freezing a dependency the way a hung host does (SIGSTOP), for the fault tests."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager


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


@contextmanager
def frozen(service) -> Iterator[None]:
    pids = process_tree(service._proc.pid)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in process_tree(service._proc.pid):
            os.kill(pid, signal.SIGCONT)
