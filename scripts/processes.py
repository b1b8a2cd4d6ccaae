"""Child processes of the development and test services: ports, spawning, stopping, orphans.

What the embedded servers (scripts/postgres.py, scripts/seaweedfs.py) share, kept in one place
so that both treat their children alike:

Child-process hygiene: every child runs in its own session / process group
(so a terminal Ctrl-C does not hit it behind our back, and stop() can kill
the whole group), gets a parent-death signal (Linux ``PR_SET_PDEATHSIG``) so
it does not outlive a parent that dies abruptly, and every running instance
is stopped by an ``atexit`` hook.  On start(), a server still running for the
same data directory is stopped first if its owner is gone (an orphan), and
refused ("already running") if its owner is alive (``handle_leftover``).

Only the standard library is used.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import pwd
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

LOCALHOST = "127.0.0.1"

# ---------------------------------------------------------------------------
# ports
# ---------------------------------------------------------------------------


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago.

    The kernel picks it (bind to port 0), so parallel callers get different
    ports; there is an unavoidable small window before the caller binds it.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOCALHOST, 0))
        return s.getsockname()[1]


def port_is_free(port: int, host: str = LOCALHOST) -> bool:
    """True if a listener could bind ``host:port`` right now.

    SO_REUSEADDR mirrors what servers (Go, PostgreSQL) do, so sockets in
    TIME_WAIT from a previous run do not count as "in use".
    """
    if not 0 < port < 65536:
        return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def port_is_listening(port: int, host: str = LOCALHOST, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------
# child processes
# ---------------------------------------------------------------------------

_PR_SET_PDEATHSIG = 1
try:  # loaded before any fork: no dlopen() in the forked child
    _libc: Any = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
except OSError:  # pragma: no cover
    _libc = None


_DEFERRED_SIGNALS = {signal.SIGINT, signal.SIGTERM}


@contextlib.contextmanager
def signals_deferred():
    """Hold SIGINT/SIGTERM (in this thread) for the duration of the block.

    Wrap "spawn a child and remember it" in this: a Ctrl-C landing between the
    fork and the assignment would otherwise lose track of a running child.
    Children get the signals unblocked again by :func:`die_with_parent`.
    """
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _DEFERRED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def die_with_parent(death_signal: int):
    """preexec_fn: ask the kernel to signal the child when we die.

    Runs in the child after setuid (the kernel clears PDEATHSIG on uid
    changes, so it must come after).  Note PDEATHSIG fires when the *thread*
    that forked dies, so start services from a long-lived thread.
    """
    parent = os.getpid()

    def fn() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _DEFERRED_SIGNALS)  # see signals_deferred()
        if _libc is not None:
            _libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
        if os.getppid() != parent:  # parent already gone between fork and prctl
            os._exit(1)

    return fn


def spawn(
    argv: list[str],
    *,
    log_path: Path,
    cwd: Path,
    env: dict[str, str],
    death_signal: int,
    user: pwd.struct_passwd | None = None,
) -> subprocess.Popen:
    kwargs: dict[str, Any] = {}
    if user is not None:
        # Popen(user=...) does setgroups/setgid/setuid in the child right before exec:
        # no runuser/su wrapper process sitting between us and the server (runuser
        # forwards SIGINT as SIGTERM and SIGKILLs after 2 s, which breaks fast shutdown).
        kwargs.update(
            user=user.pw_uid,
            group=user.pw_gid,
            extra_groups=os.getgrouplist(user.pw_name, user.pw_gid),
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab", buffering=0) as log:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            close_fds=True,
            start_new_session=True,
            preexec_fn=die_with_parent(death_signal),
            **kwargs,
        )


def _group_alive(pgid: int) -> bool:
    """True if a live (non-zombie) process is in process group ``pgid``.  Zombies
    are ignored: killed orphans linger as zombies until init reaps them."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def stop_process_group(proc: subprocess.Popen, signals: list[tuple[int, float]]) -> None:
    """Send each (signal, grace seconds) to the child's process group until it exits;
    SIGKILL the group as a last resort and make sure no group member survives."""
    pgid = proc.pid  # start_new_session: the child leads its own group
    killed = False
    for sig, grace in signals:
        if proc.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, sig)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            continue
    if proc.poll() is None:
        killed = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        proc.wait()
    if killed:
        # Leader is gone; sweep anything else left in its group (e.g. postgres
        # backends orphaned by a SIGKILLed postmaster).  The pgid cannot be
        # reused while members remain.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)


def cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.rstrip(b"\0").split(b"\0")] if raw else []


def _pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie, i.e. exited but not yet reaped, counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def _ppid(pid: int) -> int | None:
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat_line.rsplit(")", 1)[1].split()[1])


def read_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in path.read_text().split()]
    except (OSError, ValueError):
        return []


def handle_leftover(pid: int, owner: int | None, is_ours: bool, what: str, first_signal: int, grace: float) -> None:
    """A pid file names ``pid``.  Dead or reused by something else (``is_ours`` False):
    stale, ignore.  Still running under its recorded ``owner`` (a live run using the same
    data dir): refuse.  Running without its owner (the owner died and the child missed
    its parent-death signal): an orphan of ours, stop it."""
    if not is_ours or not _pid_alive(pid):
        return
    if owner is None or _ppid(pid) == owner:
        raise RuntimeError(
            f"{what} is already running (pid {pid}"
            + (f", started by pid {owner}" if owner else "")
            + "): another run is using this data directory"
        )
    _stop_orphan(pid, first_signal, grace)


def _stop_orphan(pid: int, first_signal: int, grace: float) -> None:
    """Stop a process left behind by an earlier (crashed) run. It is not our child,
    so poll instead of wait()."""
    target_group = False
    with contextlib.suppress(OSError):
        target_group = os.getpgid(pid) == pid

    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if target_group:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)

    send(first_signal)
    deadline = time.monotonic() + grace
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _pid_alive(pid) or (target_group and _group_alive(pid)):
        send(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while (_pid_alive(pid) or (target_group and _group_alive(pid))) and time.monotonic() < deadline:
            time.sleep(0.05)


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 16384))
            data = f.read().decode(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(data.splitlines()[-lines:])


# every started, not yet stopped service, in start order (stopped in reverse at exit)
_LIVE: list[Any] = []
_LIVE_LOCK = threading.Lock()


def register_live(svc: Any) -> None:
    with _LIVE_LOCK:
        if svc not in _LIVE:
            _LIVE.append(svc)


def unregister_live(svc: Any) -> None:
    with _LIVE_LOCK:
        if svc in _LIVE:
            _LIVE.remove(svc)


@atexit.register
def _stop_all_at_exit() -> None:
    with _LIVE_LOCK:
        live = list(reversed(_LIVE))
    for svc in live:
        with contextlib.suppress(Exception):
            svc.stop()


class Service:
    """Shared context-manager plumbing."""

    _proc: subprocess.Popen | None = None

    def start(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def stop(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def restart(self):
        """Stop and start again, keeping the data (and the public port)."""
        self.stop()
        return self.start()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running else None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
