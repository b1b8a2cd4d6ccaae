"""``make bench-maintenance``: issue 49's measurement of data compaction on a Spark standalone cluster.

What it starts, each in a private temporary directory on free ports: Growler as ``make bench`` does
(bench/growler_target.py: embedded PostgreSQL and SeaweedFS, gunicorn with the shipped
gunicorn.conf.py, authentication on, 2 workers), with SeaweedFS's STS and Growler in ``sts`` mode
(as ``make run``) and maintenance's Spark pointed at a standalone cluster this module starts
(scripts/spark_cluster.py: PySpark's own master and two workers, 1 core and 1 GiB each).

Then, in order (``MBENCH_*`` change the sizes):

1. **The table**: ``mbench.events (id bigint, part int, payload string) PARTITIONED BY (part)``, 8
   partitions, written by a local Spark session (bench/maintenance_engines.py) in 5 appends, each
   one commit of 250 write tasks that each write one tiny file to every partition (fanout writers,
   no write distribution): 10,000 data files of 40 rows.
2. **Queries before**: the same aggregate over the whole table in Spark (local[2]) and in DuckDB
   (its iceberg extension attached to Growler's REST endpoint), each run twice (the first pays the
   JVM's and the caches' warm-up; the table shows the second).
3. **Reads without compaction**: wrk (bench/measuring.py, as W1-W8) on loadTable of the table and
   loadNamespaceMetadata, 16 connections, 20 s.
4. **Compaction**: a data-compaction policy on the table (``strategy: sort`` by ``id``, so the run
   goes to Spark: bin-packing partitions this small Growler does in process; 2 executors of 1 core
   and 512 MiB), then ``POST .../tables/events/runs`` (202, a job) and its run URL polled until it
   finishes. While it runs, the same wrk measurement (the reads during compaction). Recorded: the
   wall time (POST to finished), the run's own seconds, data files before and after.
5. **Queries after**, as in 2.
6. **The second run**: the same request again on the compacted table: one planning pass, no job.
   Recorded: its wall time, its outcome, whether the cluster saw a new application, whether the
   table got a new snapshot (a commit).

It writes ``bench/results/<time>-maintenance.json`` and ``bench/results/latest-maintenance.json``;
``python -m bench.maintenance_report --docs`` renders the latter into docs/maintenance.md's
"Measured" section (``make bench-maintenance`` does both).

Environment: MBENCH_APPENDS (5), MBENCH_TASKS (250 tasks an append), MBENCH_PARTITIONS (8),
MBENCH_ROWS_PER_FILE (40), BENCH_KEEP=1 (keep the temporary directory and its logs).
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.growler_target import GrowlerTarget
from bench.machine import RESULTS_DIR, machine
from bench.maintenance_engines import SparkClient, duckdb_query, spark_jars
from bench.measuring import run_wrk
from bench.plan import Plan
from bench.run import growler_commit
from bench.targets import LOCALHOST, WAREHOUSE, http_json, make_root, remove_root
from scripts.processes import free_port
from scripts.spark_cluster import SparkCluster, java17_home, spark_home

NAMESPACE, TABLE = "mbench", "events"
CLIENT_ID, CLIENT_SECRET = "bench", "bench-secret"  # GrowlerTarget's bootstrap principal
POLICY_TYPE = "system.data-compaction"
POLICY_CONFIG: dict[str, Any] = {
    "strategy": "sort",
    "sort-order": "id",
    "spark.executor-instances": 2,
    "spark.executor-cores": 1,
    "spark.executor-memory": "512m",
    "spark.shuffle-partitions": 8,
}
FINISHED = ("succeeded", "failed", "skipped", "cancelled")
READ_SECONDS = 20


def log(message: str) -> None:
    print(f"[bench-maintenance] {message}", file=sys.stderr, flush=True)


def sizes() -> dict[str, int]:
    def number(name: str, default: int) -> int:
        return int(os.environ.get(name) or default)

    return {
        "appends": number("MBENCH_APPENDS", 5),
        "tasks_per_append": number("MBENCH_TASKS", 250),
        "partitions": number("MBENCH_PARTITIONS", 8),
        "rows_per_file": number("MBENCH_ROWS_PER_FILE", 40),
    }


def spark_settings(cluster: SparkCluster, catalog_uri: str) -> dict[str, str]:
    """GROWLER_SPARK_* for the server: compaction on the cluster, client deploy mode (the driver
    beside Growler, the executors on the workers), the bench principal as the job's credential."""
    conf = [f"spark.pyspark.python={sys.executable}", "spark.ui.enabled=false", "spark.driver.host=127.0.0.1"]
    return {
        "GROWLER_SPARK_SUBMIT": str(spark_home() / "bin" / "spark-submit"),
        "GROWLER_SPARK_MASTER": cluster.url,
        "GROWLER_SPARK_JOB_JARS": ",".join(spark_jars()),
        "GROWLER_SPARK_CONF": ",".join(conf),
        "GROWLER_SPARK_JAVA_HOME": java17_home() or "",
        "GROWLER_SPARK_CATALOG_URI": catalog_uri,
        "GROWLER_SPARK_CREDENTIAL": f"{CLIENT_ID}:{CLIENT_SECRET}",
    }


class Management:
    """The management API as the bench principal, with a token taken afresh for each call sequence
    (the run lasts longer than a token)."""

    def __init__(self, target: GrowlerTarget) -> None:
        self.target = target

    def headers(self) -> dict[str, str]:
        status, _, token = http_json(
            "POST",
            f"{self.target.base_url}/v1/oauth/tokens",
            form={"grant_type": "client_credentials", "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET},
        )
        if status != 200:
            raise RuntimeError(f"token request answered {status}: {token}")
        return {"Authorization": f"Bearer {token['access_token']}"}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
        url = path if path.startswith("http") else f"{self.target.base_url}{path}"
        return http_json(method, url, body, headers=self.headers(), timeout=120.0)

    def runs_path(self) -> str:
        return f"/management/v1/maintenance/warehouses/{WAREHOUSE}/namespaces/{NAMESPACE}/tables/{TABLE}/runs"

    def attach_policy(self) -> None:
        body = {
            "policy-type": POLICY_TYPE,
            "securable": {"type": "table", "warehouse": WAREHOUSE, "namespace": [NAMESPACE], "name": TABLE},
            "content": {"enable": True, "config": POLICY_CONFIG},
        }
        status, _, answer = self.call("PUT", "/management/v1/maintenance/policies", body)
        if status != 200:
            raise RuntimeError(f"attaching the policy answered {status}: {answer}")

    def queue(self) -> str:
        status, headers, answer = self.call("POST", self.runs_path(), {"policy-type": POLICY_TYPE})
        if status != 202:
            raise RuntimeError(f"runMaintenance answered {status}: {answer}")
        location = headers.get("Location") or f"{self.runs_path()}/{answer['id']}"
        return location

    def run(self, location: str) -> dict[str, Any]:
        status, _, answer = self.call("GET", location)
        if status != 200:
            raise RuntimeError(f"GET {location} answered {status}: {answer}")
        return answer


def keep_off_schedule(target: GrowlerTarget) -> None:
    """The schedule's own next run of the table a day away (as the maintenance tests do): attaching
    the policy makes the table due, and housekeeping would otherwise compact it before the request."""
    import psycopg

    with psycopg.connect(target.postgres.url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO maintenance_lease (entry_id, next_due_at)"
            " SELECT e.id, now() + interval '1 day' FROM catalog_entry e JOIN namespace n ON n.id = e.namespace_id"
            " WHERE n.path = %(ns)s AND e.name = %(table)s"
            " ON CONFLICT (entry_id) DO UPDATE SET next_due_at = EXCLUDED.next_due_at",
            {"ns": [NAMESPACE], "table": TABLE},
        )


def wait_run(management: Management, location: str, until: tuple[str, ...], timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        run = management.run(location)
        if run["status"] in until:
            return run
        if time.monotonic() > deadline:
            raise RuntimeError(f"the run stayed {run['status']} past {timeout_s:.0f} s: {run}")
        threading.Event().wait(1.0)


def reads(target: GrowlerTarget, plan: Plan, work_dir: Path) -> dict[str, Any]:
    """wrk over loadTable of the table and loadNamespaceMetadata of its namespace, alternately."""
    base = target.api().removeprefix(target.base_url)
    paths = [f"{base}namespaces/{NAMESPACE}/tables/{TABLE}", f"{base}namespaces/{NAMESPACE}"]
    return run_wrk(target, plan, "", paths=paths, work_dir=work_dir, duration_s=READ_SECONDS)


QUERY = "SELECT part, count(*), sum(id), max(payload) FROM {table} GROUP BY part ORDER BY part"


def queries(spark: SparkClient, target: GrowlerTarget) -> dict[str, Any]:
    """The aggregate twice in Spark and twice in DuckDB (seconds of each) and that both agree."""
    name = f"growler.{NAMESPACE}.{TABLE}"
    out: dict[str, Any] = {"query": QUERY.format(table=name)}
    spark_runs = [spark.timed(out["query"]) for _ in range(2)]
    out["spark_s"] = [round(seconds, 2) for seconds, _ in spark_runs]
    try:
        duck_runs = [duckdb_query(target.base_url, WAREHOUSE, CLIENT_ID, CLIENT_SECRET, out["query"]) for _ in range(2)]
        out["duckdb_s"] = [round(seconds, 2) for seconds, _ in duck_runs]
        out["agree"] = [tuple(map(str, r)) for r in duck_runs[-1][1]] == [tuple(map(str, r)) for r in spark_runs[-1][1]]
    except Exception as exc:  # noqa: BLE001 - DuckDB unavailable: Spark's figures still stand
        out["duckdb_failed"] = f"{type(exc).__name__}: {exc}"[:1000]
    return out


def table_state(spark: SparkClient) -> dict[str, Any]:
    name = f"growler.{NAMESPACE}.{TABLE}"
    files, size = spark.sql(f"SELECT count(*), coalesce(sum(file_size_in_bytes), 0) FROM {name}.files")[0]
    partitions = spark.sql(f"SELECT count(DISTINCT partition) FROM {name}.files")[0][0]
    snapshots = spark.sql(f"SELECT snapshot_id FROM {name}.snapshots ORDER BY committed_at")
    rows = spark.sql(f"SELECT count(*) FROM {name}")[0][0]
    return {
        "data_files": files,
        "bytes": size,
        "partitions": partitions,
        "snapshots": len(snapshots),
        "current_snapshot": snapshots[-1][0] if snapshots else None,
        "rows": rows,
    }


def write_table(spark: SparkClient, shape: dict[str, int]) -> dict[str, Any]:
    name = f"growler.{NAMESPACE}.{TABLE}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS growler.{NAMESPACE}")
    spark.sql(
        f"CREATE TABLE {name} (id bigint, part int, payload string) USING iceberg PARTITIONED BY (part)"
        " TBLPROPERTIES ('format-version'='2', 'write.distribution-mode'='none',"
        " 'write.spark.fanout.enabled'='true')"
    )
    seconds = []
    per_append = shape["tasks_per_append"] * shape["rows_per_file"] * shape["partitions"]
    for index in range(shape["appends"]):
        start = time.perf_counter()
        spark.append_small_files(
            name, index * per_append, shape["tasks_per_append"], shape["rows_per_file"], shape["partitions"]
        )
        seconds.append(round(time.perf_counter() - start, 1))
        log(f"append {index + 1}/{shape['appends']}: {seconds[-1]} s")
    return {"append_s": seconds}


def compaction(
    management: Management, cluster: SparkCluster, target: GrowlerTarget, plan: Plan, work_dir: Path
) -> dict[str, Any]:
    """The first run: queued, reads measured while it runs, followed to its end."""
    apps_before = cluster.registered_applications()
    start = time.perf_counter()
    location = management.queue()
    running = wait_run(management, location, ("running", *FINISHED), 600)
    during: dict[str, Any] = {}
    if running["status"] == "running":
        during = reads(target, plan, work_dir)
        during["run_still_running_after"] = management.run(location)["status"] == "running"
    done = wait_run(management, location, FINISHED, 7200)
    return {
        "wall_s": round(time.perf_counter() - start, 1),
        "run": done,
        "spark_applications": cluster.registered_applications() - apps_before,
        "reads_during": during,
    }


def second_run(management: Management, cluster: SparkCluster) -> dict[str, Any]:
    apps_before = cluster.registered_applications()
    start = time.perf_counter()
    done = wait_run(management, management.queue(), FINISHED, 600)
    return {
        "wall_s": round(time.perf_counter() - start, 1),
        "run": done,
        "spark_applications": cluster.registered_applications() - apps_before,
    }


def measure(root: Path, shape: dict[str, int], plan: Plan, results: dict[str, Any], checkpoint: Any) -> None:
    """Every phase in turn into ``results``; ``checkpoint()`` after each (the document on disk holds
    what was measured so far, should a later phase fail or the run be stopped)."""
    cluster = SparkCluster(root / "spark-cluster")
    bind = f"{LOCALHOST}:{free_port()}"
    target = GrowlerTarget(
        root / "growler",
        int(os.environ.get("GROWLER_WORKERS") or 2),
        sts=True,
        extra_env={"GROWLER_BIND": bind, **spark_settings(cluster, f"http://{bind}")},
    )
    target.root.mkdir(parents=True)
    work_dir = root / "work"
    work_dir.mkdir()
    results["settings"] = {
        "spark_master": "spark://127.0.0.1 (standalone)",
        "cluster": {"workers": cluster.workers, "cores_each": cluster.cores, "memory_each": cluster.memory},
        "policy": POLICY_CONFIG,
        "reads": {"connections": plan.concurrency, "seconds": READ_SECONDS, "warmup_s": plan.warmup_s},
    }

    def phase(name: str, value: dict[str, Any]) -> dict[str, Any]:
        results[name] = value
        log(f"{name}: {json.dumps(value, default=str)[:3000]}")
        checkpoint()
        return value

    spark: SparkClient | None = None
    try:
        cluster.up()
        log(f"Spark cluster up at {cluster.url}")
        target.start()
        log(f"Growler up at {target.base_url}")
        results["settings"]["growler"] = target.settings()
        management = Management(target)
        spark = SparkClient(target.base_url, WAREHOUSE, f"{CLIENT_ID}:{CLIENT_SECRET}")
        start = time.perf_counter()
        setup = write_table(spark, shape)
        phase("setup", {**setup, "seconds": round(time.perf_counter() - start, 1)})
        phase("before", table_state(spark))
        phase("queries_before", queries(spark, target))
        phase("reads_without", reads(target, plan, work_dir))
        keep_off_schedule(target)
        management.attach_policy()
        phase("compaction", compaction(management, cluster, target, plan, work_dir))
        after = phase("after", table_state(spark))
        phase("queries_after", queries(spark, target))
        again = second_run(management, cluster)
        again["snapshot_unchanged"] = table_state(spark)["current_snapshot"] == after["current_snapshot"]
        phase("second_run", again)
    finally:
        if spark is not None:
            spark.stop()
        target.stop()
        cluster.down()


def main() -> int:
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    shape = sizes()
    plan = Plan.make(False, int(os.environ.get("BENCH_SEED", "7")), 1)
    doc: dict[str, Any] = {
        "kind": "maintenance",
        "started_at": started,
        "machine": machine(),
        "versions": {"growler_commit": growler_commit()},
        "shape": shape,
        "results": {},
    }
    doc["busy_machine"] = doc["machine"]["loadavg_before"] > 0.5 * doc["machine"]["cores"]
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"{started.replace(':', '').replace('-', '')}-maintenance.json"

    def checkpoint() -> None:
        doc["machine"]["loadavg_after"] = round(os.getloadavg()[0], 2)
        out.write_text(json.dumps(doc, indent=1, default=str) + "\n")

    def on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    root = make_root()
    try:
        measure(root, shape, plan, doc["results"], checkpoint)
    except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - recorded, with what was measured so far
        doc["failed"] = f"{type(exc).__name__}: {exc}"[:4000]
        log(f"failed: {doc['failed']} (logs kept in {root})")
        os.environ["BENCH_KEEP"] = "1"
    finally:
        if os.environ.get("BENCH_KEEP") == "1":
            log(f"kept {root}")
        else:
            remove_root(root)
    checkpoint()
    if "failed" not in doc:
        (RESULTS_DIR / "latest-maintenance.json").write_text(out.read_text())
    from bench.maintenance_report import render

    print(render(doc))
    print(f"results: {out}")
    return 1 if "failed" in doc else 0


if __name__ == "__main__":
    sys.exit(main())
