"""The Spark job settings of data compaction (app/ground/settings.py, app/maintenance_spark.py):
off unless both the spark-submit and the catalog URI are set; the credential never in a repr nor on
the job's command line."""

from __future__ import annotations

from app.ground.settings import SparkSettings
from app.maintenance_spark import JOB_SCRIPT, command, rewrite_options


def test_spark_is_off_by_default_and_the_credential_stays_out_of_reprs_and_command_lines():
    assert not SparkSettings.from_env({}).enabled
    assert not SparkSettings.from_env({"GROWLER_SPARK_SUBMIT": "/opt/spark/bin/spark-submit"}).enabled
    settings = SparkSettings.from_env(
        {
            "GROWLER_SPARK_SUBMIT": "/opt/spark/bin/spark-submit",
            "GROWLER_SPARK_CATALOG_URI": "https://growler.example.com",
            "GROWLER_SPARK_MASTER": "spark://master:7077",
            "GROWLER_SPARK_JOB_JARS": "/jars/a.jar,/jars/b.jar",
            "GROWLER_SPARK_CONF": "spark.executor.memory=8g, spark.executor.instances=4",
            "GROWLER_SPARK_CREDENTIAL": "maintainer:s3cret",
        }
    )
    assert settings.enabled and "s3cret" not in repr(settings)
    args = command(settings)
    assert args == [
        "/opt/spark/bin/spark-submit",
        "--master",
        "spark://master:7077",
        "--jars",
        "/jars/a.jar,/jars/b.jar",
        "--conf",
        "spark.executor.memory=8g",
        "--conf",
        "spark.executor.instances=4",
        str(JOB_SCRIPT),
    ]
    assert not any("s3cret" in arg for arg in args)
    assert rewrite_options(1024)["target-file-size-bytes"] == "1024"
