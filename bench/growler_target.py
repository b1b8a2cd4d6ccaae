"""``GrowlerTarget``: Growler as ``make run`` starts it (scripts/run.py) - embedded PostgreSQL (fsync on,
as ``make run``), embedded SeaweedFS S3 and gunicorn with ``gunicorn.conf.py``, with the same GROWLER_*
variables. External services (GROWLER_DATABASE_URL, GROWLER_S3_ENDPOINT) are never used: the
benchmark writes thousands of rows. ``BENCH_AUTH=none`` runs it without authentication (its cost)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.processes import children, cpu_seconds, process_memory, spawn_logged
from bench.targets import LOCALHOST, REPO, WAREHOUSE, Target, http_json
from scripts.postgres import EmbeddedPostgres, find_pg_bin
from scripts.processes import free_port, stop_process_group
from scripts.run import DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY, wait_for_http, warehouse_bucket
from scripts.seaweedfs import STS_ROLE_ARN, EmbeddedS3

UNAUTHENTICATED = os.environ.get("BENCH_AUTH") == "none"  # GROWLER_AUTH=none: the cost of authentication


class GrowlerTarget(Target):
    name = "growler"
    label = "Growler"

    def __init__(
        self,
        root: Path,
        workers: int,
        gunicorn_conf: str = "gunicorn.conf.py",
        sts: bool = False,
        extra_env: dict[str, str] | None = None,
    ) -> None:
        super().__init__(root)
        self.workers = workers
        self.gunicorn_conf = gunicorn_conf  # bench/ab.py's AB_GUNICORN_CONF: e.g. the yappi profiler's
        # bench/maintenance.py: SeaweedFS's STS on and Growler in ``sts`` mode, as ``make run`` (clients
        # asking for vended credentials - DuckDB, the Spark job - get table-scoped ones), and the
        # GROWLER_SPARK_* settings; the other workloads keep remote signing and no Spark
        self.sts = sts
        self.extra_env = dict(extra_env or {})
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
        self.s3 = EmbeddedS3(self.root / "s3", free_port(), DEV_S3_ACCESS_KEY, DEV_S3_SECRET_KEY, sts=self.sts)
        if self.sts:
            env["GROWLER_STS_ROLE_ARN"] = STS_ROLE_ARN
        self.s3.start()
        env["GROWLER_S3_ENDPOINT"] = self.s3.endpoint
        self.s3.ensure_bucket(warehouse_bucket(env["GROWLER_WAREHOUSE_LOCATION"]))
        env["GROWLER_BIND"] = f"{LOCALHOST}:{free_port()}"
        env.update(self.extra_env)  # may name GROWLER_BIND itself (the Spark job's catalog URI is on it)
        self.env = env
        self._serve(env)

    def _serve(self, env: dict[str, str]) -> None:
        """gunicorn with ``env``, every worker's app built; then the bench's token."""
        self.gunicorn = spawn_logged([sys.executable, "-m", "gunicorn", "-c", self.gunicorn_conf], REPO, env, self.root)
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
        from app.management.principals import PrincipalService
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

    def random_tables(
        self, parent: str, children: list[str], per_namespace: int, template: str, template_child: str | None = None
    ) -> None:
        """W13's (and W14's) catalog: ``per_namespace`` tables in each namespace ``parent.child``, rows
        copied from the real table ``template`` (in ``parent.template_child``, by default the first
        child) in one INSERT, each with a uuid, location,
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
                    "first": [parent, template_child or children[0]],
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
