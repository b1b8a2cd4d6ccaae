"""Data compaction on a real Spark standalone cluster (issue 49): one master and two workers from
PySpark's own distribution (``spark-class org.apache.spark.deploy.master.Master`` / ``...Worker``),
started and stopped by this module, small memory. Growler submits Iceberg's rewrite_data_files in
client deploy mode (the driver beside Growler, the executors on the workers); the policy gives the
executors' resources and thresholds. Cluster deploy mode: test_maintenance_cluster_mode.py.

YARN and Kubernetes are not testable here (docs/maintenance.md gives their exact settings).
"""

from __future__ import annotations

import pytest

from app.ground.settings import SparkSettings
from tests.integration.spark_cluster_support import cluster, settings_for  # noqa: F401 - the fixture
from tests.integration.test_maintenance import (  # noqa: F401 - fixtures
    NS,
    attach,
    catalog,
    maintenance,
    now_ms,
    run,
)


def run_job(maintenance, name: str):  # noqa: F811 - the fixture's name
    """The run, in this process's executor (the server's own runners have no Spark configured: a
    job queued through the API could be claimed by one of them)."""
    return run(maintenance, name, "system.data-compaction", now_ms())


@pytest.mark.parametrize("spark", ["3.5"], indirect=True)
def test_compaction_runs_on_a_standalone_cluster_in_client_mode(
    spark,
    server,
    cluster,  # noqa: F811 - the fixture
    catalog,  # noqa: F811 - the fixture
    maintenance,  # noqa: F811 - the fixture
):
    table = f"growler.{NS}.clustered"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, cat string) USING iceberg PARTITIONED BY (cat)"
        " TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    for low in (1, 4, 7, 10):
        spark.sql(f"INSERT INTO {table} VALUES ({low}, 'a'), ({low + 1}, 'b'), ({low + 2}, 'a')")
    spark.sql(f"DELETE FROM {table} WHERE id IN (3, 5)")
    query = f"SELECT id, cat FROM {table} ORDER BY id"
    expected = [tuple(row) for row in spark.sql(query).collect()]
    files_before = len(list(catalog.load_table((NS, "clustered")).scan().plan_files()))
    policy = {
        "enable": True,
        "config": {"spark.executor-memory": "512m", "spark.executor-instances": 2, "spark.shuffle-partitions": 2},
    }
    attach(maintenance, "system.data-compaction", "clustered", policy)

    maintenance.executor.spark = settings_for(cluster, server)
    try:
        done = run_job(maintenance, "clustered")
    finally:
        maintenance.executor.spark = SparkSettings()
    assert done.status == "succeeded", done.error
    assert done.outcome["engine"] == "spark" and done.outcome["committed"] is True, done.outcome
    assert done.plan["options"]["min-input-files"] == "2"
    after = catalog.load_table((NS, "clustered"))
    tasks = list(after.scan().plan_files())
    assert len(tasks) < files_before and not any(task.delete_files for task in tasks)
    assert sorted((row["id"], row["cat"]) for row in after.scan().to_arrow().to_pylist()) == expected
    # the job ran on the cluster: its executors' logs are in the workers' directories
    assert cluster.applications(), "no application ran on the workers"

    # a table in shape: one planning pass, no job
    again = run_job(maintenance, "clustered")
    assert again.status == "succeeded", (again.error, again.plan)
    assert again.outcome.get("reason") == "nothing to compact", (again.plan, again.outcome)
