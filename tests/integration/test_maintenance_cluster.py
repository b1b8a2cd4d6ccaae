"""Data compaction on a real Spark standalone cluster (issue 49): one master and two workers from
PySpark's own distribution (``spark-class org.apache.spark.deploy.master.Master`` / ``...Worker``),
started and stopped by this module, small memory. Growler submits Iceberg's rewrite_data_files in
client deploy mode (the driver beside Growler, the executors on the workers) and in cluster deploy
mode (the driver on a worker, run by Spark's PythonRunner; the job reports its progress and result
through the management API with its run's token); the policy gives the executors' resources and
thresholds.

YARN and Kubernetes are not testable here (docs/maintenance.md gives their exact settings).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from app.ground.settings import SparkSettings
from scripts.spark_cluster import SparkCluster, spark_home
from tests.conftest import TEST_CREDENTIAL
from tests.integration.spark_support import java17_home, spark_jars
from tests.integration.test_maintenance import (  # noqa: F401 - fixtures
    NS,
    RecordedControl,
    attach,
    catalog,
    done_entry,
    maintenance,
    now_ms,
    run,
    run_as_job,
)

SPARK_HOME = spark_home()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[SparkCluster]:
    running = SparkCluster(tmp_path_factory.mktemp("spark-cluster"), java_home=java17_home())
    try:
        running.up()
        yield running
    finally:
        running.down()


def settings_for(cluster: SparkCluster, server, conf: str = "") -> SparkSettings:
    return SparkSettings(
        submit=str(SPARK_HOME / "bin" / "spark-submit"),
        master=cluster.url,
        jars=",".join(spark_jars("3.5")),
        conf=f"spark.pyspark.python={sys.executable},spark.ui.enabled=false,spark.driver.host=127.0.0.1,"
        "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1" + (f",{conf}" if conf else ""),
        java_home=java17_home() or "",
        catalog_uri=server.url,
        credential=TEST_CREDENTIAL,
        timeout_s=600,
    )


def run_job(maintenance, name: str):  # noqa: F811 - the fixture's name
    """The run, in this process's executor (the server's own runners have no Spark configured: a
    job queued through the API could be claimed by one of them)."""
    return run(maintenance, name, "system.data-compaction", now_ms())


@pytest.mark.parametrize("spark", ["3.5"], indirect=True)
def test_compaction_runs_on_a_standalone_cluster_in_client_mode(
    spark,
    server,
    cluster,
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


@pytest.mark.parametrize("spark", ["3.5"], indirect=True)
def test_compaction_runs_in_cluster_deploy_mode_and_reports_through_the_api(
    spark,
    server,
    cluster,
    catalog,  # noqa: F811 - the fixture
    maintenance,  # noqa: F811 - the fixture
):
    """Cluster deploy mode: the driver runs on a worker (Growler reads nothing it prints), so the
    job's progress and result come through reportMaintenanceRun, bound to the run by its token."""
    table = f"growler.{NS}.driven"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, cat string) USING iceberg PARTITIONED BY (cat)"
        " TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    for low in (1, 5, 9):
        spark.sql(f"INSERT INTO {table} VALUES ({low}, 'a'), ({low + 1}, 'a'), ({low + 2}, 'b'), ({low + 3}, 'b')")
    spark.sql(f"DELETE FROM {table} WHERE id IN (1, 7)")  # a delete file in each partition: Spark's work
    expected = sorted(tuple(row) for row in spark.sql(f"SELECT id, cat FROM {table}").collect())
    files_before = len(list(catalog.load_table((NS, "driven")).scan().plan_files()))
    policy = {"enable": True, "config": {"spark.executor-memory": "512m", "spark.executor-instances": 1}}
    attach(maintenance, "system.data-compaction", "driven", policy)
    maintenance.executor.spark = settings_for(
        cluster, server, "spark.submit.deployMode=cluster,spark.driver.memory=512m,spark.driver.cores=1"
    )
    control = RecordedControl(maintenance.jobs)
    drivers_before = set(cluster.drivers())
    try:
        done = run_as_job(maintenance, "driven", "system.data-compaction", control)
    finally:
        maintenance.executor.spark = SparkSettings()
    assert done.status == "succeeded", done.error
    assert done.outcome.get("engine") == "spark" and done.outcome["committed"] is True, (done.plan, done.outcome)
    # the driver ran on a worker, not beside Growler
    assert set(cluster.drivers()) - drivers_before, "no driver ran on the workers"
    # its reports reached the run's row through the API (the runner's own progress hook saw none:
    # nothing the driver prints reaches Growler), ending with every file group done
    assert control.updates == []
    final = maintenance.jobs.get(done_entry(maintenance, "driven"), done.id).progress
    assert final["file-groups-total"] == 2 and final["file-groups-done"] == 2, final  # a call per partition
    assert final["bytes-done"] == final["bytes-total"] > 0, final
    after = catalog.load_table((NS, "driven"))
    assert len(list(after.scan().plan_files())) < files_before
    assert sorted((row["id"], row["cat"]) for row in after.scan().to_arrow().to_pylist()) == expected
