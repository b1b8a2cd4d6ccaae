"""A Spark standalone cluster for a test module (scripts/spark_cluster.py: a master and two workers
from PySpark's own distribution), and Growler's Spark settings pointing at it.

Not a shared JVM of the session (tests/suite_parts.py): each module that uses ``cluster`` starts
its own and stops it, so a module whose tests need no Spark driver of the session stays in the
``rest`` part.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from app.ground.settings import SparkSettings
from scripts.spark_cluster import SparkCluster, java17_home, spark_home
from tests.conftest import TEST_CREDENTIAL
from tests.integration.spark_support import spark_jars

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
