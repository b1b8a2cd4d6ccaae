"""A PostgreSQL primary with a synchronous standby (Debian's binaries, ``pg_basebackup``), for the
failover test: the primary is the suite's kind of embedded server; the standby is a base backup of
it, streaming, named in the primary's ``synchronous_standby_names`` so that every commit the
primary acknowledges is flushed on the standby first."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from scripts.postgres import EmbeddedPostgres, _run_as_postgres, find_pg_bin
from scripts.processes import free_port

STANDBY_NAME = "standby1"


class StandbyPostgres(EmbeddedPostgres):
    """A hot standby started from a base backup: its roles and databases are the primary's, and it
    accepts no writes, so nothing is set up on it at start."""

    def _ensure_database(self) -> None:
        pass


@dataclass
class ReplicatedPostgres:
    primary: EmbeddedPostgres
    standby: StandbyPostgres

    @property
    def url(self) -> str:
        """The catalog role's multi-host URL: whichever of the two accepts writes."""
        user, rest = self.primary.url.removeprefix("postgresql://").split("@", 1)
        return (
            f"postgresql://{user}@127.0.0.1:{self.primary.port},127.0.0.1:{self.standby.port}"
            f"/{self.primary.database}?target_session_attrs=read-write"
        )

    def kill_primary(self) -> None:
        """SIGKILL to the primary's whole process group (postmaster and backends): a crash."""
        process = self.primary._proc
        assert process is not None
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

    def promote_standby(self) -> None:
        with psycopg.connect(self.standby.admin_url, autocommit=True, connect_timeout=5) as conn:
            assert conn.execute("SELECT pg_promote(wait => true, wait_seconds => 30)").fetchone()[0]

    def stop(self) -> None:
        self.standby.stop()
        self.primary.stop()


def _admin(server: EmbeddedPostgres) -> psycopg.Connection:
    return psycopg.connect(server.admin_url, autocommit=True, connect_timeout=5)


def start_replicated(root: Path) -> ReplicatedPostgres:
    primary = EmbeddedPostgres(root / "primary", free_port(), fast=True).start()
    standby = StandbyPostgres(root / "standby", free_port(), fast=True)
    try:
        run_as = _run_as_postgres()
        standby._prepare_data_dir(run_as)  # empty, 0700, owned by the server's user
        admin_password = primary.admin_url.split(":", 2)[2].split("@", 1)[0]
        conninfo = (
            f"host=127.0.0.1 port={primary.port} user={primary.admin_user} password={admin_password}"
            f" application_name={STANDBY_NAME}"
        )
        ids = {"user": run_as.pw_uid, "group": run_as.pw_gid} if run_as is not None else {}
        # Growler's generated passwords sit in the data directory, readable by root only: not for
        # the server to send; the standby gets the same file (its roles are the primary's).
        secrets_file = primary.data_dir / "growler-secrets.json"
        aside = root / "primary-secrets.json"
        secrets_file.rename(aside)
        try:
            done = subprocess.run(
                [str(find_pg_bin() / "pg_basebackup"), "-d", conninfo, "-D", str(standby.data_dir), "-R",
                 "-X", "stream", "--no-sync", "--checkpoint=fast"],
                capture_output=True, text=True, timeout=120, cwd=standby.data_dir.parent, **ids,
            )  # fmt: skip
        finally:
            aside.rename(secrets_file)
        assert done.returncode == 0, f"pg_basebackup failed: {done.stderr}"
        shutil.copy2(secrets_file, standby.data_dir / "growler-secrets.json")
        standby.start()
        with _admin(primary) as conn:
            deadline = time.monotonic() + 30
            while not conn.execute(
                "SELECT 1 FROM pg_stat_replication WHERE application_name = %s AND state = 'streaming'",
                (STANDBY_NAME,),
            ).fetchone():
                assert time.monotonic() < deadline, "the standby does not stream"
                time.sleep(0.05)
            conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
            conn.execute("SELECT pg_reload_conf()")
            while conn.execute(
                "SELECT sync_state FROM pg_stat_replication WHERE application_name = %s", (STANDBY_NAME,)
            ).fetchone() != ("sync",):
                assert time.monotonic() < deadline, "the standby did not become synchronous"
                time.sleep(0.05)
    except BaseException:
        standby.stop()
        primary.stop()
        raise
    return ReplicatedPostgres(primary, standby)


def remove(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
