"""An embedded PostgreSQL server for development and tests: initdb on first use, listening
only on 127.0.0.1, set up like a production server (password authentication, a catalog role
that is not a superuser).

Running as root (CI): PostgreSQL refuses root, so it runs as the ``postgres``
system user (``Popen(user=...)``), its data directory is chowned to that user
and every ancestor directory gets the "x" (search) bit that user needs.

Starting, stopping and orphans are scripts/processes.py's; only the standard library and
psycopg are used.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

from scripts.processes import (
    LOCALHOST,
    Service,
    cmdline,
    handle_leftover,
    log_tail,
    read_pids,
    register_live,
    signals_deferred,
    spawn,
    stop_process_group,
    unregister_live,
)

MAX_CONNECTIONS = 500


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


class EmbeddedPostgres(Service):
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
            # Each Growler worker holds up to GROWLER_DB_POOL_MAX + 8 (its event loop's pool, opened
            # before it accepts: issue 40) connections; PostgreSQL's default of 100 is 3 replicas of
            # 2 workers, and the test suite runs a dozen servers at once.
            "-c",
            f"max_connections={MAX_CONNECTIONS}",
        ]
        if self.fast:
            # Only skip what protects against an OS crash.  synchronous_commit stays on:
            # with fsync off a commit is just a write() to the page cache, and it keeps
            # committed data safe when a (fault) test SIGKILLs the server.
            argv += ["-c", "fsync=off", "-c", "full_page_writes=off"]
        # GROWLER_PG_SETTINGS: more server settings, space-separated name=value pairs (e.g.
        # "shared_preload_libraries=pg_stat_statements" to see a workload's statements, or the
        # sizes docs/deployment.md gives for a large catalog); they come last, so they win.
        for setting in os.environ.get("GROWLER_PG_SETTINGS", "").split():
            argv += ["-c", setting]
        with open(self.log_path, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        with signals_deferred():
            self._proc = spawn(
                argv,
                log_path=self.log_path,
                cwd=self.data_dir,
                env=self._env(),
                death_signal=signal.SIGINT,  # postmaster: SIGINT = fast shutdown
                user=run_as,
            )
            register_live(self)
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
        unregister_live(self)

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
            proc = spawn(
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
            raise RuntimeError(f"initdb failed (exit {rc}); log {self.log_path}:\n{log_tail(self.log_path)}")

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
        cmd = cmdline(pid) or []
        ours = bool(cmd) and Path(cmd[0]).name in ("postgres", "postmaster") and str(self.data_dir) in cmd
        owner = (read_pids(self._owner_file) or [None])[0]
        handle_leftover(pid, owner, ours, f"PostgreSQL for {self.data_dir}", signal.SIGINT, 30.0)
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
                    f"log {self.log_path}:\n{log_tail(self.log_path)}"
                )
            try:
                with self._connect("postgres") as conn:
                    conn.execute("select 1")
                return
            except psycopg.OperationalError as e:
                last = e
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"postgres not ready on port {self.port}: {last}; log {self.log_path}:\n{log_tail(self.log_path)}"
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
