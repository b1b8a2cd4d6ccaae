"""The embedded PostgreSQL / SeaweedFS helpers used by `make run` and the test suite.

Self-contained (no conftest): run with
``python -m pytest -p no:cacheprovider --noconftest tests/integration/test_embedded_services.py``.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from minio.error import S3Error

from scripts.postgres import EmbeddedPostgres
from scripts.processes import free_port, port_is_listening
from scripts.seaweedfs import EmbeddedS3

REPO = Path(__file__).resolve().parents[2]
ACCESS_KEY = "embedded-test"
SECRET_KEY = "embedded-test-secret"


def processes_mentioning(text: str) -> list[int]:
    """Pids whose command line mentions ``text`` (our data dirs are unique)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd:
            pids.append(int(entry.name))
    return pids


def wait_until(predicate, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


@pytest.fixture
def service_root() -> Iterator[Path]:
    """A fresh directory for one test's servers, outside pytest's basetemp.

    PostgreSQL runs as ``postgres`` when the suite runs as root, so the data directory's ancestors
    are opened for traversal (scripts/postgres.py ``_grant_traverse``). pytest's basetemp
    (/tmp/pytest-of-root) is put back to 0700 by every pytest session that starts meanwhile on
    the same machine, which made initdb fail with "Permission denied" half-way through; a mkdtemp
    directory under /tmp is ours alone.
    """
    root = Path(tempfile.mkdtemp(prefix="growler-embedded-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def put(s3: EmbeddedS3, bucket: str, key: str, body: bytes) -> None:
    s3.client().put_object(bucket, key, io.BytesIO(body), len(body))


def get(client, bucket: str, key: str) -> bytes:
    resp = client.get_object(bucket, key)
    try:
        return resp.read()
    finally:
        resp.close()
        resp.release_conn()


@pytest.fixture
def pg(service_root: Path):
    server = EmbeddedPostgres(service_root / "pg", free_port(), fast=True)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3(service_root: Path):
    server = EmbeddedS3(service_root / "s3", free_port(), ACCESS_KEY, SECRET_KEY)
    try:
        yield server
    finally:
        server.stop()


def test_postgres_select_restart_keeps_data_and_stop_frees_port(pg: EmbeddedPostgres, service_root: Path):
    with pg:
        assert pg.running
        assert pg.url.startswith("postgresql://growler:") and pg.url.endswith(f"@127.0.0.1:{pg.port}/growler")
        assert (service_root / "postgres.log").exists()
        with psycopg.connect(pg.url, autocommit=True) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
            assert conn.execute("select current_database(), current_user").fetchone() == ("growler", "growler")
            conn.execute("create table kept (v text)")
            conn.execute("insert into kept values ('before restart')")

        pg.restart()

        assert pg.running
        with psycopg.connect(pg.url) as conn:
            assert conn.execute("select v from kept").fetchall() == [("before restart",)]

    assert not pg.running
    assert not port_is_listening(pg.port)
    assert processes_mentioning(str(pg.data_dir)) == []


def test_postgres_recovers_from_crash_with_stale_pidfile(pg: EmbeddedPostgres):
    pg.start()
    with psycopg.connect(pg.url, autocommit=True) as conn:
        conn.execute("create table t (v int)")
        conn.execute("insert into t values (42)")
    # crash: SIGKILL the whole server (postmaster + backends), postmaster.pid stays behind
    os.killpg(pg.pid, signal.SIGKILL)
    assert wait_until(lambda: not pg.running)
    assert wait_until(lambda: processes_mentioning(str(pg.data_dir)) == [])
    assert (pg.data_dir / "postmaster.pid").exists()

    pg.start()

    with psycopg.connect(pg.url) as conn:
        assert conn.execute("select v from t").fetchall() == [(42,)]
    pg.stop()
    assert not port_is_listening(pg.port)


def test_s3_roundtrip_auth_restart_and_stop(s3: EmbeddedS3, service_root: Path):
    with s3:
        assert s3.endpoint == f"http://127.0.0.1:{s3.port}"
        assert (service_root / "weed.log").exists()
        s3.ensure_bucket("growler-test")
        s3.ensure_bucket("growler-test")  # idempotent
        put(s3, "growler-test", "dir/object.txt", b"before restart")
        assert get(s3.client(), "growler-test", "dir/object.txt") == b"before restart"

        # wrong secret / unknown key / anonymous are all refused
        for access_key, secret_key in [(ACCESS_KEY, "not-the-secret"), ("nobody", SECRET_KEY), ("", "")]:
            client = s3.client(retries=False, access_key=access_key, secret_key=secret_key)
            with pytest.raises(S3Error) as err:
                get(client, "growler-test", "dir/object.txt")
            assert err.value.code in {"SignatureDoesNotMatch", "InvalidAccessKeyId", "AccessDenied"}
            with pytest.raises(S3Error):
                client.list_buckets()

        ports = set(s3.ports.values()) | {s3.port}
        s3.restart()

        assert s3.running
        assert set(s3.ports.values()) | {s3.port} == ports  # internal ports are remembered
        assert get(s3.client(), "growler-test", "dir/object.txt") == b"before restart"
        put(s3, "growler-test", "after.txt", b"after restart")
        assert get(s3.client(), "growler-test", "after.txt") == b"after restart"

    assert not s3.running
    for port in ports:
        assert not port_is_listening(port), port
    assert processes_mentioning(str(s3.data_dir)) == []
    leftovers = [p for port in ports for p in Path("/tmp").glob(f"seaweedfs-*-{port}.sock")]
    assert leftovers == []


def test_s3_recovers_from_crash(s3: EmbeddedS3):
    s3.start()
    s3.ensure_bucket("crash")
    put(s3, "crash", "k", b"survives SIGKILL")
    os.killpg(s3.pid, signal.SIGKILL)
    assert wait_until(lambda: not s3.running)

    s3.start()

    assert get(s3.client(), "crash", "k") == b"survives SIGKILL"


def test_changed_secret_key_takes_effect_on_restart(service_root: Path):
    data = service_root / "s3"
    with EmbeddedS3(data, free_port(), ACCESS_KEY, SECRET_KEY) as first:
        first.ensure_bucket("keys")
        port = first.port
    with EmbeddedS3(data, port, ACCESS_KEY, "a-new-secret") as second:
        second.ensure_bucket("keys")  # works with the new secret
        old = second.client(retries=False, secret_key=SECRET_KEY)
        with pytest.raises(S3Error):
            old.list_buckets()


def test_children_die_with_their_parent(service_root: Path):
    """A parent killed with SIGKILL (no atexit) must not leave servers behind."""
    script = textwrap.dedent(
        f"""
        import json, sys, time
        from pathlib import Path
        from scripts.postgres import EmbeddedPostgres
        from scripts.processes import free_port
        from scripts.seaweedfs import EmbeddedS3
        root = Path({str(service_root)!r})
        pg = EmbeddedPostgres(root / "pg", free_port(), fast=True).start()
        s3 = EmbeddedS3(root / "s3", free_port(), "k", "secret-key").start()
        print(json.dumps({{"pg": [pg.pid, pg.port], "s3": [s3.pid, s3.port]}}), flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        line = parent.stdout.readline()
        assert line, "child script failed to start the services"
        info = json.loads(line)
        assert port_is_listening(info["pg"][1]) and port_is_listening(info["s3"][1])
        parent.kill()
        parent.wait()
        assert wait_until(lambda: processes_mentioning(str(service_root)) == [], timeout=15)
        assert not port_is_listening(info["pg"][1])
        assert not port_is_listening(info["s3"][1])
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in processes_mentioning(str(service_root)):  # only if the assertion above failed
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
    # the leftovers of the dead run (stale postmaster.pid, weed's /tmp sockets) do not
    # prevent a new start, and a clean stop removes them
    with EmbeddedPostgres(service_root / "pg", free_port(), fast=True) as pg:
        with psycopg.connect(pg.url) as conn:
            assert conn.execute("select 1").fetchone() == (1,)
    with EmbeddedS3(service_root / "s3", info["s3"][1], "k", "secret-key") as s3:
        s3.client().list_buckets()
        ports = set(s3.ports.values()) | {s3.port}
    assert [p for port in ports for p in Path("/tmp").glob(f"seaweedfs-*-{port}.sock")] == []


def test_second_instance_on_same_data_dir_is_refused(pg: EmbeddedPostgres, s3: EmbeddedS3):
    pg.start()
    s3.start()
    with pytest.raises(RuntimeError, match="already running"):
        EmbeddedPostgres(pg.data_dir, free_port(), fast=True).start()
    with pytest.raises(RuntimeError, match="already running"):
        EmbeddedS3(s3.data_dir, free_port(), ACCESS_KEY, SECRET_KEY).start()
    assert pg.running and s3.running  # untouched
    with psycopg.connect(pg.url) as conn:
        assert conn.execute("select 1").fetchone() == (1,)


def test_orphans_of_a_dead_run_are_stopped_on_start(service_root: Path):
    """If a child ever misses its parent-death signal, the next start() cleans up."""
    script = textwrap.dedent(
        f"""
        import json, time
        from pathlib import Path
        from scripts import processes
        from scripts.postgres import EmbeddedPostgres
        from scripts.seaweedfs import EmbeddedS3
        processes._libc = None  # simulate a missed parent-death signal
        root = Path({str(service_root)!r})
        pg = EmbeddedPostgres(root / "pg", processes.free_port(), fast=True).start()
        s3 = EmbeddedS3(root / "s3", processes.free_port(), "k", "secret-key").start()
        print(json.dumps({{"pg": pg.pid, "s3": s3.pid, "s3_port": s3.port}}), flush=True)
        time.sleep(600)
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        line = parent.stdout.readline()
        assert line, "child script failed to start the services"
        info = json.loads(line)
        parent.kill()  # only the parent: its servers keep running as orphans
        parent.wait()
        assert processes_mentioning(str(service_root))  # orphans exist

        with EmbeddedPostgres(service_root / "pg", free_port(), fast=True) as pg:
            with psycopg.connect(pg.url) as conn:
                assert conn.execute("select 1").fetchone() == (1,)
        with EmbeddedS3(service_root / "s3", info["s3_port"], "k", "secret-key") as s3:
            s3.client().list_buckets()
        assert processes_mentioning(str(service_root)) == []
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        for pid in processes_mentioning(str(service_root)):  # only if an assertion above failed
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def test_postgres_takes_the_settings_it_is_given(pg: EmbeddedPostgres, monkeypatch: pytest.MonkeyPatch):
    """GROWLER_PG_SETTINGS (docs/deployment.md: a large catalog's sizes) reaches the server, after
    the settings of its own: ``max_connections`` given there wins over the embedded server's."""
    monkeypatch.setenv("GROWLER_PG_SETTINGS", "shared_buffers=64MB max_connections=150 track_io_timing=on")
    with pg, psycopg.connect(pg.url, autocommit=True) as conn:
        shown = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in ("shared_buffers", "track_io_timing")}
        assert shown == {"shared_buffers": "64MB", "track_io_timing": "on"}
        assert conn.execute("SHOW max_connections").fetchone()[0] == "150"


def test_postgres_is_set_up_like_production(pg: EmbeddedPostgres):
    """Password authentication with generated secrets; the catalog's role is no superuser."""
    with pg:
        secrets_file = pg.data_dir / "growler-secrets.json"
        assert stat.S_IMODE(secrets_file.stat().st_mode) == 0o600
        password = json.loads(secrets_file.read_text())["catalog"]
        assert len(password) >= 24 and password in pg.url and password not in pg.display_url
        assert password not in repr(pg) and password not in (pg.log_path.read_text(errors="replace"))

        for user in ("growler", EmbeddedPostgres.admin_user):  # no password, or a wrong one: refused
            for auth in ({}, {"password": "wrong"}):
                with pytest.raises(psycopg.OperationalError, match="password"):
                    psycopg.connect(
                        host="127.0.0.1", port=pg.port, user=user, dbname="growler", connect_timeout=5, **auth
                    )

        with psycopg.connect(pg.url, autocommit=True) as conn:
            role = conn.execute(
                "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles"
                " WHERE rolname = current_user"
            ).fetchone()
            assert role == (False, False, False, False, False)
            assert conn.execute("SELECT current_schema()").fetchone() == ("growler",)
            owned = conn.execute(
                "SELECT nspname FROM pg_namespace WHERE nspowner = (SELECT oid FROM pg_roles"
                " WHERE rolname = current_user)"
            ).fetchall()
            assert owned == [("growler",)]
            conn.execute("CREATE TABLE catalog_thing (v int)")  # in its own schema: allowed
            for refused in (
                "CREATE TABLE public.elsewhere (v int)",
                "CREATE DATABASE other",
                "CREATE ROLE intruder",
                "CREATE SCHEMA another",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(refused)

        with psycopg.connect(pg.admin_url, autocommit=True) as conn:
            assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (True,)

        pg.restart()  # the secrets are read back from the data directory
        with psycopg.connect(pg.url) as conn:
            assert conn.execute("SELECT count(*) FROM catalog_thing").fetchone() == (0,)


def test_seaweedfs_relaunches_on_new_ports_when_one_was_taken_meanwhile(tmp_path, monkeypatch):
    """Two suites side by side start many servers: a port found free can be bound by another
    process before weed binds it. weed then exits ("Port allocation failed"); the start chooses
    new ports for weed's own listeners and relaunches (scripts/seaweedfs.py)."""
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    taken = held.getsockname()[1]
    chosen = EmbeddedS3._choose_ports
    calls: list[bool] = []

    def first_with_a_taken_port(self, fresh: bool = False) -> dict[str, int]:
        ports = chosen(self, fresh)
        calls.append(fresh)
        return {**ports, "volume": taken} if len(calls) == 1 else ports

    monkeypatch.setattr(EmbeddedS3, "_choose_ports", first_with_a_taken_port)
    try:
        with EmbeddedS3(tmp_path / "s3", free_port(), ACCESS_KEY, SECRET_KEY) as s3:
            s3.ensure_bucket("relaunched")
            assert s3.ports["volume"] != taken
            assert calls == [False, True]
            log = s3.log_path.read_text(errors="replace")
            assert f"Port allocation failed: port {taken}" in log
            assert f"port {taken} was taken meanwhile: relaunching on new ports" in log
    finally:
        held.close()
