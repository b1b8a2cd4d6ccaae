"""The Spark job settings of data compaction (app/ground/settings.py, app/maintenance/spark.py):
off unless both the spark-submit and the catalog URI are set; the credential never in a repr nor on
the job's command line."""

from __future__ import annotations

import re

import pytest

from app.ground.settings import SparkSettings
from app.maintenance.options import InvalidRewrite, RewriteSettings
from app.maintenance.spark import (
    JOB_SCRIPT,
    PYTHON_RUNNER,
    JobReports,
    SparkJobFailed,
    cluster_mode,
    command,
    job_environment,
    report_url,
    rewrite_options,
)


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
    confs = [args[i + 1] for i, arg in enumerate(args) if arg == "--conf"]
    assert args[:6] == [
        "/opt/spark/bin/spark-submit",
        "--master",
        "spark://master:7077",
        "--jars",
        "/jars/a.jar,/jars/b.jar",
        "--conf",
    ]
    assert args[-1] == str(JOB_SCRIPT)
    # the operator's conf wins over the defaults; on a standalone master the executors are cores.max
    assert confs == [
        "spark.executor.memory=8g",
        "spark.executor.instances=4",
        "spark.executor.cores=1",
        "spark.sql.shuffle.partitions=32",
        "spark.cores.max=4",
    ]
    assert not any("s3cret" in arg for arg in args)
    assert rewrite_options(1024)["target-file-size-bytes"] == "1024"


def test_a_policy_sets_the_jobs_resources_over_the_operators_and_the_defaults():
    settings = SparkSettings(submit="s", master="yarn", catalog_uri="u", conf="spark.executor.memory=8g")
    rewrite = RewriteSettings.of({"spark.executor-memory": "2G", "spark.shuffle-partitions": "7"})
    confs = dict(arg.split("=", 1) for arg in command(settings, rewrite) if "=" in arg and arg.startswith("spark."))
    assert confs == {
        "spark.executor.memory": "2g",
        "spark.executor.instances": "2",
        "spark.executor.cores": "1",
        "spark.sql.shuffle.partitions": "7",
    }  # (no cores.max off a standalone master)


def test_the_job_environment_carries_no_growler_storage_or_database_variable():
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/g",
        "GROWLER_DATABASE_URL": "postgresql://x",
        "GROWLER_SECRETS_KEY": "k",
        "GROWLER_SPARK_CREDENTIAL": "stale",
        "AWS_SECRET_ACCESS_KEY": "warehouse-key",
        "AWS_ACCESS_KEY_ID": "id",
        "PGPASSWORD": "pw",
        "aws_session_token": "t",
    }
    settings = SparkSettings(credential="maintainer:s3cret", java_home="/jdk17")
    env = job_environment(settings, environ)
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/g",
        "GROWLER_SPARK_CREDENTIAL": "maintainer:s3cret",  # the job's own principal, on purpose
        "JAVA_HOME": "/jdk17",
    }


def test_cluster_deploy_mode_runs_on_a_standalone_master_under_sparks_python_runner_and_is_refused_elsewhere():
    standalone = SparkSettings(
        submit="s", master="spark://m:7077", jars="/j/runtime.jar,/j/aws.jar", conf="spark.submit.deployMode=cluster"
    )
    assert cluster_mode(standalone) and not cluster_mode(SparkSettings(submit="s", master="spark://m:7077"))
    args = command(standalone)
    # spark-submit refuses a .py primary resource in this mode: Spark's JVM main class runs the
    # file, the first jar is the driver's, and spark-submit waits for the driver to end
    assert args[-4:] == [PYTHON_RUNNER, "/j/runtime.jar", str(JOB_SCRIPT), ""] and args[-5] == "--class"
    assert "spark.standalone.submit.waitAppCompletion=true" in args
    # a worker gives the driver it starts none of the Java 17 module options Spark's launcher adds
    java = next(arg for arg in args if arg.startswith("spark.driver.extraJavaOptions="))
    assert "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED" in java
    with pytest.raises(SparkJobFailed, match="first is the driver's"):
        command(SparkSettings(submit="s", master="spark://m:7077", conf="spark.submit.deployMode=cluster"))
    # YARN and Kubernetes would take the job's secrets on the command line: client mode there
    for master in ("yarn", "k8s://https://k:6443"):
        with pytest.raises(SparkJobFailed, match="standalone master .spark://. only"):
            cluster_mode(SparkSettings(submit="s", master=master, conf="spark.submit.deployMode=cluster"))
        assert not cluster_mode(SparkSettings(submit="s", master=master))
    with pytest.raises(SparkJobFailed, match="client or cluster"):
        cluster_mode(SparkSettings(submit="s", master="yarn", conf="spark.submit.deployMode=both"))


def test_a_cluster_mode_jobs_report_channel_is_in_its_environment_only():
    settings = SparkSettings(submit="s", master="spark://m:7077", conf="spark.submit.deployMode=cluster")
    reports = JobReports(report_url("http://g:8181/", "wh", ("a", "b c"), "t/1", 7), "tok-" + "x" * 40, lambda: None)
    assert reports.url == (
        "http://g:8181/management/v1/maintenance/warehouses/wh/namespaces/a%1Fb%20c/tables/t%2F1/runs/7/report"
    )
    env = job_environment(settings, {"PATH": "/usr/bin", "GROWLER_JOB_REPORT_TOKEN": "stale"}, reports)
    assert env["GROWLER_JOB_REPORT_TOKEN"] == reports.token and env["GROWLER_JOB_REPORT_URL"] == reports.url
    assert "tok-" not in repr(reports) and not any(
        "tok-" in arg
        for arg in command(
            SparkSettings(submit="s", master="spark://m:7077", jars="/j/r.jar", conf="spark.submit.deployMode=cluster")
        )
    )
    assert "GROWLER_JOB_REPORT_TOKEN" not in job_environment(settings, {"GROWLER_JOB_REPORT_TOKEN": "stale"})


def test_rewrite_settings_read_icebergs_option_names_and_refuse_bad_values():
    default = RewriteSettings.of({})
    assert default.options() == {
        "min-input-files": "2",
        "delete-file-threshold": "1",
        "partial-progress.enabled": "false",
        "remove-dangling-deletes": "true",
    }
    assert default.procedure_args() == {} and not default.needs_spark
    assert default.small_below(1000) == 750
    tuned = RewriteSettings.of(
        {
            "min-input-files": 5,
            "min-file-size-bytes": "100",
            "delete-file-threshold": 3,
            "partial-progress.enabled": "true",
            "partial-progress.max-commits": 4,
            "max-concurrent-file-group-rewrites": 8,
            "strategy": "sort",
            "sort-order": "id DESC NULLS LAST, name",
        }
    )
    assert tuned.options() == {
        "min-input-files": "5",
        "delete-file-threshold": "3",
        "partial-progress.enabled": "true",
        "remove-dangling-deletes": "true",
        "min-file-size-bytes": "100",
        "partial-progress.max-commits": "4",
        "max-concurrent-file-group-rewrites": "8",
    }
    assert tuned.procedure_args() == {"strategy": "sort", "sort_order": "id DESC NULLS LAST, name"}
    assert tuned.small_below(1000) == 100 and tuned.needs_spark
    zorder = RewriteSettings.of({"strategy": "z-order", "z-order-columns": "a, b"})
    assert zorder.procedure_args() == {"strategy": "sort", "sort_order": "zorder(a,b)"}
    for bad, key in (
        ({"strategy": "shuffle"}, "strategy"),
        ({"strategy": "z-order"}, "z-order-columns"),
        ({"strategy": "sort", "sort-order": "id; DROP TABLE x"}, "sort-order"),
        ({"min-input-files": 0}, "min-input-files"),
        ({"partial-progress.enabled": "yes"}, "partial-progress.enabled"),
        ({"spark.executor-memory": "lots"}, "spark.executor-memory"),
        ({"spark.executor-instances": 100_000}, "spark.executor-instances"),
    ):
        with pytest.raises(InvalidRewrite, match=re.escape(key)):
            RewriteSettings.of(bad)
