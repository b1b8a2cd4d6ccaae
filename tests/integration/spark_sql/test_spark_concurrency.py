"""Spark 3.5 and 4.1 against a running gunicorn, concurrently: two Spark drivers committing from the
same base (forced at a barrier in a proxy), and eight writers in one Spark job meeting retries or
clean conflicts, never storage errors, in each way of reaching storage.

The session is configured with Growler's URL and warehouse name and asks for vended credentials
(``spark_support.catalog_conf``); everything about S3 (endpoint, region, addressing style, keys)
comes from the catalog. Every test runs once per Spark line (``spark_support``); one session per
line is shared by every test (a JVM start costs tens of seconds); each test works in its own
namespace. Results are checked through Spark, through the REST API (the metadata Growler
stores) and by listing the bucket (fixtures in this directory's conftest.py).
"""

from __future__ import annotations

import re

import pytest

from tests.integration.commit_barrier import CommitBarrierProxy
from tests.integration.spark_sql.spark_sql_support import load_table, objects_under, rows, snapshot_operations
from tests.integration.spark_support import CATALOG, add_catalog

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------
# two Spark drivers committing to one table from the same base
# ------------------------------------------------------------------------------------------

ROUNDS = 3
ROWS_PER_ROUND = 100


@pytest.fixture
def barrier(server):
    proxy = CommitBarrierProxy(server.url, "shared")
    try:
        yield proxy
    finally:
        proxy.close()


def test_two_spark_drivers_commit_from_the_same_base(spark, second_spark, server, ns, barrier):
    """The race forced, every round: both drivers' appends held until both are built on one base.

    Then the proxy lets them through one after the other: the first lands, the second is a commit
    from a stale base that Growler refuses with 409 CommitFailedException (never losing or forking
    a snapshot); the Java client refreshes and retries it on top. Every round, the same outcome.
    """
    name = f"{CATALOG}.{ns}.shared"
    spark.sql(f"CREATE TABLE {name} (id bigint, who string) USING iceberg")
    # each driver a catalog through the proxy; the second driver is another process: its own JVM,
    # REST client and table cache
    first = add_catalog(spark, f"first_{ns}", barrier.url, server.warehouse, **{"header.X-Test-Driver": "first"})
    second = add_catalog(
        second_spark, f"second_{ns}", barrier.url, server.warehouse, **{"header.X-Test-Driver": "second"}
    )
    drivers = {"first": (spark, f"{first}.{ns}.shared"), "second": (second_spark, f"{second}.{ns}.shared")}
    for driver, table in drivers.values():  # warm up: load the table, no commit through the barrier
        assert rows(driver, f"SELECT count(*) FROM {table}") == [(0,)]
    for round_number in range(ROUNDS):
        held = barrier.arm(parties=2)
        pending = []
        for offset, (who, (driver, table)) in enumerate(drivers.items()):
            low = (2 * round_number + offset) * ROWS_PER_ROUND
            select = f"SELECT id, '{who}' FROM range({low}, {low + ROWS_PER_ROUND})"
            pending.append(driver.submit(f"INSERT INTO {table} {select}"))
        for statement in pending:
            statement.result()
        assert sorted(held.arrived) == ["first", "second"], held
        winner, loser = held.arrived
        assert [(a.driver, a.status, a.error_type) for a in held.answers] == [
            (winner, 200, None),
            (loser, 409, "CommitFailedException"),
        ]
    # each refused commit was retried once, on top, and landed
    assert sorted(a.driver for a in barrier.passed_commits) == sorted(r.arrived[1] for r in barrier.rounds)
    assert all(a.status == 200 for a in barrier.passed_commits)

    spark.sql(f"REFRESH TABLE {name}")
    total = ROUNDS * ROWS_PER_ROUND
    assert rows(spark, f"SELECT count(*), count(DISTINCT id) FROM {name}") == [(2 * total, 2 * total)]
    assert rows(spark, f"SELECT who, count(*) FROM {name} GROUP BY who ORDER BY who") == [
        ("first", total),
        ("second", total),
    ]
    # every commit is in one linear history: no snapshot was lost or forked off
    snapshots = rows(spark, f"SELECT snapshot_id, parent_id FROM {name}.snapshots ORDER BY committed_at")
    assert len(snapshots) == 2 * ROUNDS
    assert snapshots[0][1] is None
    assert all(parent == previous for (_, parent), (previous, _) in zip(snapshots[1:], snapshots, strict=False))
    metadata = load_table(server, ns, "shared")["metadata"]
    assert [entry["snapshot-id"] for entry in metadata["snapshot-log"]] == [s for s, _ in snapshots]
    # and in commit order, each round's winner then its loser
    writer_of = dict(
        rows(
            spark,
            f"""SELECT e.snapshot_id, first(f.who) FROM {name}.entries e
            JOIN (SELECT DISTINCT input_file_name() AS path, who FROM {name}) f ON e.data_file.file_path = f.path
            WHERE e.status = 1 GROUP BY e.snapshot_id""",
        )
    )
    assert [writer_of[s] for s, _ in snapshots] == [who for r in barrier.rounds for who in r.arrived]


# ------------------------------------------------------------------------------------------
# eight writers in one Spark job, each way of reaching storage
# ------------------------------------------------------------------------------------------

WRITERS, INSERTS = 8, 3
# What a storage permission error looks like to a Spark job (S3FileIO, the AWS SDK, the signer).
# A storage refusal in an exception's text; "403" as a whole number only: a conflict's message
# names snapshot ids, long numbers that may hold the digits 403.
STORAGE_REFUSAL = re.compile(r"AccessDenied|Access Denied|\b403\b|Forbidden|S3Exception|SignatureDoesNotMatch")


def test_concurrent_writers_meet_retries_or_clean_conflicts_never_storage_errors(spark, server, ns, objects, access):
    """8 threads of one Spark job, released by a barrier, append to one table: every lost race
    ends in Iceberg's retry or a clean CommitFailedException, never a storage permission error
    (the orphans of a lost race are cleaned up one object at a time, which signing allows), and
    every acknowledged INSERT, and nothing else, is in the table; nothing is written outside it."""
    name = f"{ns}.contended"
    table = f"{access.catalog}.{name}"
    spark.sql(f"CREATE TABLE {table} (writer int, n int) USING iceberg")
    outcomes = spark.call("concurrent_inserts", table, WRITERS, INSERTS)
    assert len(outcomes) == WRITERS * INSERTS
    errors = [error for _, _, error in outcomes if error is not None]
    assert all("CommitFailedException" in error for error in errors), errors
    # the exceptions and their causes, not the stack frames (whose line numbers may read "403")
    causes = [[line for line in e.splitlines() if not line.strip().startswith("at ")] for e in errors]
    assert not [c for c in causes if any(STORAGE_REFUSAL.search(line) for line in c)], causes
    acknowledged = sorted((writer, n) for writer, n, error in outcomes if error is None)
    assert len(acknowledged) > WRITERS  # the retries carried most of them through
    spark.sql(f"REFRESH TABLE {table}")
    assert rows(spark, f"SELECT writer, n FROM {table} ORDER BY writer, n") == acknowledged
    assert snapshot_operations(spark, table) == ["append"] * len(acknowledged)
    location = load_table(server, ns, "contended", access.warehouse)["metadata"]["location"]
    namespace_root = location.rsplit("/", 1)[0]
    assert all(o.startswith(location + "/") for o in objects_under(objects, namespace_root))
