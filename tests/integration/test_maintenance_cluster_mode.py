"""Data compaction in cluster deploy mode on a real Spark standalone cluster (issue 49): the driver
runs on a worker, under Spark's own PythonRunner, so Growler reads nothing it prints. The job
reports its progress and then its result through the management API (reportMaintenanceRun),
signed in as its principal and bound to its run by the token Growler gave it alone.

The table is written with PyIceberg and compacted with the ``sort`` strategy (which Growler always
hands to Spark): the module needs no Spark driver of the session, only its own cluster.
"""

from __future__ import annotations

from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import IdentityTransform

from tests.integration.pyiceberg_support import NS, SCHEMA, rows
from tests.integration.spark_cluster_support import cluster, settings_for  # noqa: F401 - the fixture
from tests.integration.test_maintenance import (  # noqa: F401 - fixtures
    attach,
    catalog,
    compact_on_spark,
    done_entry,
    maintenance,
)


def test_compaction_runs_in_cluster_deploy_mode_and_reports_through_the_api(
    server,
    cluster,  # noqa: F811 - the fixture
    catalog,  # noqa: F811 - the fixture
    maintenance,  # noqa: F811 - the fixture
):
    by_category = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "category"))
    table = catalog.create_table((NS, "driven"), schema=SCHEMA, partition_spec=by_category)
    for low in (1, 5, 9):  # three small files in each of the two partitions
        table.append(rows(low, low + 1, low + 2, low + 3))
    expected = sorted(catalog.load_table((NS, "driven")).scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    files_before = len(list(catalog.load_table((NS, "driven")).scan().plan_files()))
    policy = {
        "enable": True,
        "config": {
            "strategy": "sort",
            "sort-order": "id",
            "spark.executor-memory": "512m",
            "spark.executor-instances": 1,
        },
    }
    attach(maintenance, "system.data-compaction", "driven", policy)
    on_cluster = settings_for(
        cluster, server, "spark.submit.deployMode=cluster,spark.driver.memory=512m,spark.driver.cores=1"
    )
    done, control = compact_on_spark(maintenance, "driven", on_cluster)
    assert done.status == "succeeded", done.error
    assert done.outcome.get("engine") == "spark" and done.outcome["committed"] is True, (done.plan, done.outcome)
    # the driver ran on a worker, not beside Growler
    assert cluster.drivers(), "no driver ran on the workers"
    # its reports reached the run's row through the API, ending with every file group done (a
    # call of the procedure per partition); the runner's own hook saw none: nothing the driver
    # prints reaches Growler
    assert control.updates == []
    final = maintenance.jobs.get(done_entry(maintenance, "driven"), done.id).progress
    assert final["file-groups-total"] == 2 and final["file-groups-done"] == 2, final
    assert final["bytes-done"] == final["bytes-total"] > 0, final
    after = catalog.load_table((NS, "driven"))
    assert len(list(after.scan().plan_files())) < files_before
    assert sorted(after.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == expected
