"""Processes and their TCP sockets as /proc shows them: which gunicorn worker holds which
connection, without a test knob in the server; and waiting until they show what a test needs."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

WAIT_S = 60.0


def wait_for(predicate: Callable[[], object], what: str = "condition", timeout_s: float = WAIT_S) -> Any:
    """Until ``predicate()`` holds, looking again every 20 ms, and its (truthy) value: the kernel
    tells no other process when a worker accepts or closes a socket, nor another process when its
    workers saw a change, so a test can only look."""
    deadline = time.monotonic() + timeout_s
    while not (found := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
    return found


def tcp_table() -> list[tuple[int, int, str, int]]:
    """(local port, remote port, state, inode) of every IPv4/IPv6 TCP socket."""
    rows = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(name) as table:
            for line in list(table)[1:]:
                fields = line.split()
                local, remote, state, inode = fields[1], fields[2], fields[3], int(fields[9])
                rows.append((int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16), state, inode))
    return rows


def socket_inodes(pid: int) -> set[int]:
    """The sockets process ``pid`` holds open."""
    inodes = set()
    with contextlib.suppress(FileNotFoundError, ProcessLookupError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    return inodes


def children(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                stat = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
                if int(stat[1]) == pid:
                    found.add(int(entry))
    return found


def listening_inode(port: int, master: int) -> int:
    """gunicorn's listening socket: in LISTEN on ``port`` and held by its master. The port alone
    is not enough: another process (a Spark driver's JVM) may listen on the same port number on
    another address."""
    held = socket_inodes(master)
    [inode] = {inode for local, _, state, inode in tcp_table() if local == port and state == "0A" and inode in held}
    return inode


def accepted_inode(port: int, client_port: int) -> int | None:
    """The server side of the connection from ``client_port`` (None until the kernel made it)."""
    found = [inode for local, remote, state, inode in tcp_table() if (local, remote) == (port, client_port)]
    return found[0] if found and found[0] else None


def established_from(port: int, pid: int) -> int:
    """How many connections to ``port`` process ``pid`` has accepted and holds open."""
    held = socket_inodes(pid)
    return sum(1 for local, _, state, inode in tcp_table() if local == port and state == "01" and inode in held)
