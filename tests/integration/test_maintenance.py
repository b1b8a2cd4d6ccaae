"""The maintenance executor on real tables (issue 37): PyIceberg writes through a running gunicorn,
the executor runs in this process against the same PostgreSQL and SeaweedFS (the session's app).

Runs are given the clock of their plan (``now_ms``) so that "older than the floor" holds without
waiting days: only the executor's Python entry point takes one, never the API. The server's own
housekeeping may be looking at the same tables (with the real clock: it finds nothing to do), so a
run waits - on the lease row, not a clock - when a background run holds the table.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

from app.composition.services import services_of
from app.ground.locations import Location
from app.ground.settings import SparkSettings
from app.maintenance.lease import TableLease
from app.maintenance.runs import MaintenanceBusy
from app.rules.maintenance import DAY_MS
from storage.maintenance_jobs import ClaimedJob
from storage.management_rows import Securable
from tests.api.bin_support import protect, undrop, unit_of, unprotect
from tests.api.maintenance_jobs_support import only_this_apps_runner
from tests.api.tables_support import create_request
from tests.conftest import TEST_BUCKET, TEST_CREDENTIAL
from tests.integration.commit_barrier import CommitBarrierProxy
from tests.integration.pyiceberg_support import NS, create_sales, ids_of, new_catalog, objects_under, rows
from tests.integration.spark_support import CATALOG, DRIVERS, SparkError, java17_home, spark_jars

EXPIRY = "system.snapshot-expiry"
ORPHANS = "system.orphan-file-removal"


@pytest.fixture
def catalog(server, clean_catalog):
    cat = new_catalog(server)
    cat.create_namespace(NS)
    return cat


@pytest.fixture
def maintenance(app):
    service = services_of(app.app).maintenance
    only_this_apps_runner(service)
    yield service
    service.executor.planned = lambda _plan: None


def attach(maintenance, policy_type: str, name: str, content: dict) -> None:
    """Attach a policy to the table, first putting the background schedule off it for a day: the
    test runs it itself (the compactions do not wait on a clock, so the schedule could race it)."""
    table = maintenance.maintenance.table("test", (NS,), name)
    maintenance.maintenance.schedule(table.entry_id, 86_400)
    maintenance.maintenance.attach(policy_type, Securable("table", "test", (NS,), name), content)


def run(maintenance, name: str, policy_type: str, now_ms: int, dry_run: bool = False):
    table = maintenance.maintenance.table("test", (NS,), name)
    deadline = time.monotonic() + 30
    while True:
        try:
            return maintenance.executor.run(table, policy_type, dry_run=dry_run, now_ms=now_ms)
        except MaintenanceBusy:  # a background run holds the table: wait for its lease to go
            assert time.monotonic() < deadline, "the table's maintenance lease was never released"
            threading.Event().wait(0.05)


class RecordedControl:
    """A job's control (``RunControl``) that stores progress as a job runner's does - where
    getMaintenanceRun reads it - and records every update it is given: the hook that shows the
    updates came while the run went on, not only at its end."""

    def __init__(self, jobs) -> None:
        self.jobs = jobs
        self.updates: list[dict] = []

    def cancel_requested(self, run_id: int) -> bool:
        return self.jobs.cancel_requested(run_id)

    def progress(self, run_id: int, progress: dict) -> None:
        self.updates.append(dict(progress))
        self.jobs.progress(run_id, progress)

    def issue_report_token(self, run_id: int, token_hash: bytes) -> None:
        self.jobs.issue_report_token(run_id, token_hash)

    def job_result(self, run_id: int) -> dict | None:
        return self.jobs.job_result(run_id)


def run_as_job(maintenance, name: str, policy_type: str, control: RecordedControl):
    """The run as a job runner runs one - its row 'running' under the table's lease, progress and
    cancel through ``control`` - claimed by this process (the server's runners, which have no Spark
    configured, never see it queued)."""
    table = maintenance.maintenance.table("test", (NS,), name)
    lease = TableLease(maintenance.maintenance, table.entry_id, maintenance.executor.lease_s)
    deadline = time.monotonic() + 30
    while not lease.take():  # a background run holds the table: wait for its lease to go
        assert time.monotonic() < deadline, "the table's maintenance lease was never released"
        threading.Event().wait(0.05)
    run_id = maintenance.maintenance.start_run(table.entry_id, policy_type, "request", False, lease.holder)
    job = ClaimedJob(run_id, table, policy_type, False, "request")
    return maintenance.executor.run_job(job, lease.holder, control)


def compact_on_spark(maintenance, name: str, spark: SparkSettings):
    """The table's data compaction as a job on ``spark`` (this process's executor: the server's own
    runners have no Spark configured), the executor's Spark put back after: the run and its control."""
    maintenance.executor.spark = spark
    try:
        control = RecordedControl(maintenance.jobs)
        return run_as_job(maintenance, name, "system.data-compaction", control), control
    finally:
        maintenance.executor.spark = SparkSettings()


def done_entry(maintenance, name: str) -> int:
    return maintenance.maintenance.table("test", (NS,), name).entry_id


def reachable_files(table) -> set[str]:
    """Manifest lists, manifests and live data/delete files of every snapshot of ``table``."""
    files = set()
    for snapshot in table.snapshots():
        files.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            files.add(manifest.manifest_path)
            files |= {entry.data_file.file_path for entry in manifest.fetch_manifest_entry(table.io)}
    return files


def now_ms() -> int:
    return int(time.time() * 1000)


def test_expiry_by_count_keeps_refs_as_the_policy_says_and_a_policy_change_applies_next_run(catalog, maintenance):
    table = create_sales(catalog)
    for i in (1, 2, 3, 4):
        table.append(rows(i))
    s1, s2, s3, s4 = [s.snapshot_id for s in table.snapshots()]
    table.manage_snapshots().create_tag(s2, "keep", max_ref_age_ms=1000 * DAY_MS).create_branch(s1, "old").commit()
    before = objects_under(maintenance.executor.objects, table.location())
    later = now_ms() + 10 * DAY_MS

    attach(maintenance, EXPIRY, "sales", {"enable": True, "config": {"max_snapshot_age_days": 30}})
    first = run(maintenance, "sales", EXPIRY, later)
    assert first.status == "succeeded" and first.outcome["committed"] is False and first.files_removed == 0
    assert [s.snapshot_id for s in catalog.load_table((NS, "sales")).snapshots()] == [s1, s2, s3, s4]

    # the policy changes: the next run follows it
    policy = {"enable": True, "config": {"min_snapshot_to_keep": 1, "max_snapshot_age_days": 1, "max_ref_age_days": 5}}
    attach(maintenance, EXPIRY, "sales", policy)
    second = run(maintenance, "sales", EXPIRY, later)
    assert second.status == "succeeded", second.error
    assert second.plan["expired-snapshot-ids"] == sorted([s1, s3])  # s2: the tag's, s4: main's head
    assert second.plan["removed-refs"] == ["old"]  # older than max_ref_age_days; the tag's own age wins

    reloaded = catalog.load_table((NS, "sales"))
    assert sorted(s.snapshot_id for s in reloaded.snapshots()) == sorted([s2, s4])
    assert set(reloaded.refs()) == {"main", "keep"}
    assert ids_of(reloaded.scan().to_arrow()) == [1, 2, 3, 4]
    assert ids_of(reloaded.scan(snapshot_id=s2).to_arrow()) == [1, 2]
    after = objects_under(maintenance.executor.objects, table.location())
    removed = set(before) - set(after)
    assert removed == set(second.plan["files-to-remove"]["first"]) and second.files_removed == len(removed)
    assert {s.manifest_list for s in table.snapshots() if s.snapshot_id in (s1, s3)} <= removed
    assert not reachable_files(reloaded) & removed  # no live file gone
    assert all(uri in after for uri in reachable_files(reloaded))


def test_expiry_by_age_from_table_properties_removes_only_expired_files_and_dry_run_changes_nothing(
    catalog, maintenance, db
):
    table = create_sales(catalog, properties={"history.expire.max-snapshot-age-ms": str(3_600_000)})
    table.append(rows(1))
    table.append(rows(2))
    table.overwrite(rows(10))  # the files of rows 1 and 2 now live only in expired snapshots
    table = catalog.load_table((NS, "sales"))
    old_data = {
        entry.data_file.file_path
        for snapshot in table.snapshots()[:2]
        for manifest in snapshot.manifests(table.io)
        for entry in manifest.fetch_manifest_entry(table.io)
    }
    head = table.current_snapshot().snapshot_id
    before = objects_under(maintenance.executor.objects, table.location())
    pointer = db.execute("SELECT metadata_location FROM catalog_entry WHERE name = 'sales'").fetchone()[0]
    later = now_ms() + 2 * 3_600_000

    dry = run(maintenance, "sales", EXPIRY, later, dry_run=True)
    assert dry.status == "succeeded" and dry.dry_run and dry.outcome == {**dry.outcome, "committed": False}
    assert db.execute("SELECT metadata_location FROM catalog_entry WHERE name = 'sales'").fetchone()[0] == pointer
    assert objects_under(maintenance.executor.objects, table.location()) == before
    planned = set(dry.plan["files-to-remove"]["first"])
    assert old_data <= planned

    done = run(maintenance, "sales", EXPIRY, later)
    assert done.status == "succeeded", done.error
    final = catalog.load_table((NS, "sales"))
    assert [s.snapshot_id for s in final.snapshots()] == [head]
    assert ids_of(final.scan().to_arrow()) == [10]
    after = objects_under(maintenance.executor.objects, table.location())
    assert set(before) - set(after) == planned  # exactly what the dry run planned
    assert not old_data & set(after)
    assert reachable_files(final) <= set(after)


def test_a_writer_appending_while_expiry_runs_always_wins(catalog, server, maintenance):
    table = create_sales(catalog)
    for i in (1, 2, 3):
        table.append(rows(i))
    attach(maintenance, EXPIRY, "sales", {"enable": True, "config": {"max_snapshot_age_days": 1}})
    writer = new_catalog(server).load_table((NS, "sales"))
    acknowledged = []
    plans = []

    def between_plan_and_commit(plan) -> None:
        """Forced interleaving: a writer commits after the run planned and before it commits."""
        plans.append(plan)
        if len(plans) == 1:
            writer.append(rows(100))
            acknowledged.append(100)

    maintenance.executor.planned = between_plan_and_commit
    done = run(maintenance, "sales", EXPIRY, now_ms() + 2 * DAY_MS)
    assert done.status == "succeeded", done.error
    assert len(plans) == 2  # the first commit lost to the writer (its ref moved); the run planned again
    assert plans[1].refs["main"] == writer.current_snapshot().snapshot_id
    final = catalog.load_table((NS, "sales"))
    assert ids_of(final.scan().to_arrow()) == [1, 2, 3, *acknowledged]
    assert [s.snapshot_id for s in final.snapshots()] == [writer.current_snapshot().snapshot_id]
    assert final.scan().to_arrow().num_rows == 4


@pytest.fixture
def failing_commits(server) -> Iterator[CommitBarrierProxy]:
    """A proxy in front of the shared server answering every commit to a table ``t`` with 503, unforwarded."""
    proxy = CommitBarrierProxy(server.url, "t")
    proxy.failing = 503
    try:
        yield proxy
    finally:
        proxy.close()


@pytest.mark.parametrize("spark", ["3.5"], indirect=True)  # the Java client's abort: one line is enough
def test_orphans_of_an_aborted_spark_job_go_after_the_floor_and_nothing_else(
    spark, server, failing_commits, catalog, maintenance, app
):
    """A real aborted job leaves the orphans. Spark's INSERT goes through a proxy that answers its
    commit 503 without forwarding it: Iceberg's Java REST client takes a 5xx answer to a commit as
    CommitStateUnknownException (ErrorHandlers.tableCommitHandler; RESTTableOperations reloads the
    table, finds no such snapshot and raises it again), and since the commit may have landed, neither
    SnapshotProducer nor SparkWrite.abort deletes what the job wrote: its data files, manifest and
    manifest list stay under the table's location, named by no metadata. Past the floor the run
    removes exactly those; a neighbour's file under a prefix "t" shares as text, a staged table's
    file, a younger file and every file the live metadata names stay; Spark and PyIceberg still read
    the committed rows, and only them."""
    objects = maintenance.executor.objects
    base = f"s3://{TEST_BUCKET}/{NS}"
    table = create_sales(catalog, "t", location=f"{base}/t")
    neighbour = create_sales(catalog, "t2", location=f"{base}/t2")  # "t" is a prefix of "t2" as text
    table.append(rows(1, 2))
    neighbour.append(rows(3))
    staged = app.test_client().post(
        f"/v1/test/namespaces/{NS}/tables", json=create_request("t3", location=f"{base}/t3", **{"stage-create": True})
    )
    assert staged.status_code == 200, staged.text
    of_others = [Location.parse(f"{base}/t2/data/stray.parquet"), Location.parse(f"{base}/t3/data/staged.parquet")]
    for location in of_others:
        objects.write_new(location, b"PAR1", "application/octet-stream")

    # the aborted job: one retry of the refused commit (the client sends an Idempotency-Key, which
    # makes a 503 retriable; the default five retries would back off for half a minute)
    _, aborting = DRIVERS.catalog(spark.line, failing_commits.url, server.warehouse, **{"rest.client.max-retries": "1"})
    listed_before = set(objects_under(objects, table.location()))
    values = (
        "(5, 'a', TIMESTAMP_NTZ '2024-01-02 12:00:00', 50, 5.5), (6, 'b', TIMESTAMP_NTZ '2024-01-01 12:00:00', 60, 6.5)"
    )
    with pytest.raises(SparkError, match="CommitStateUnknownException"):
        spark.sql(f"INSERT INTO {aborting}.{NS}.t VALUES {values}")
    first, retry = failing_commits.failed_commits  # the same request twice, Growler saw neither
    assert (first.status, retry.status) == (503, 503)
    assert first.idempotency_key and retry.idempotency_key == first.idempotency_key
    written = set(objects_under(objects, table.location())) - listed_before
    live = catalog.load_table((NS, "t"))
    assert len(live.snapshots()) == 1  # PyIceberg's append only
    assert not written & reachable_files(live)
    assert len({uri for uri in written if uri.startswith(f"{base}/t/data/") and uri.endswith(".parquet")}) == 2
    assert len({uri for uri in written if uri.startswith(f"{base}/t/metadata/") and uri.endswith(".avro")}) == 2
    assert len(written) == 4  # a data file per partition, their manifest, the manifest list

    modified = dict(objects.list_modified(Location.parse(table.location())))
    last_s = max(modified[Location.parse(uri)] for uri in written)
    while time.time() < last_s + 1.5:  # the young file must be modified a clear second later
        threading.Event().wait(0.1)
    young = Location.parse(f"{base}/t/data/00000-young.parquet")
    objects.write_new(young, b"PAR1 being written right now", "application/octet-stream")
    clock = int(last_s * 1000) + 3 * DAY_MS + 500  # the job's last file is just past the 3-day floor
    attach(maintenance, ORPHANS, "t", {"enable": True})
    everything = objects_under(objects, base)

    dry = run(maintenance, "t", ORPHANS, clock, dry_run=True)
    assert dry.status == "succeeded", dry.error
    assert dry.plan["files-to-remove"] == {"count": len(written), "first": sorted(written)}
    assert objects_under(objects, base) == everything

    done = run(maintenance, "t", ORPHANS, clock)
    assert done.status == "succeeded" and done.files_removed == len(written), done.error
    left = objects_under(objects, base)
    assert left == sorted(set(everything) - written)
    assert {young.uri, *(location.uri for location in of_others)} <= set(left)
    assert reachable_files(live) <= set(left) and live.metadata_location in left
    assert ids_of(catalog.load_table((NS, "t")).scan().to_arrow()) == [1, 2]
    assert ids_of(catalog.load_table((NS, "t2")).scan().to_arrow()) == [3]
    spark.sql(f"REFRESH TABLE {CATALOG}.{NS}.t")  # the fixture's catalog: straight to the server
    assert [tuple(r) for r in spark.sql(f"SELECT id, category FROM {CATALOG}.{NS}.t ORDER BY id").collect()] == [
        (1, "a"),
        (2, "b"),
    ]

    # the run is the last one the table's health report lists
    health = app.test_client().get(f"/management/v1/maintenance/warehouses/test/namespaces/{NS}/tables/t/health")
    assert health.status_code == 200, health.text
    assert health.json()["last-runs"][0]["id"] == done.id
    assert health.json()["data-files"] == 2


def test_health_report_counts_files_per_partition(catalog, maintenance, app):
    table = create_sales(catalog)
    for i in range(1, 5):
        table.append(rows(i))
    attach(maintenance, EXPIRY, "sales", {"enable": True, "config": {"max_snapshot_age_days": 1}})
    response = app.test_client().get(f"/management/v1/maintenance/warehouses/test/namespaces/{NS}/tables/sales/health")
    assert response.status_code == 200, response.text
    health = response.json()
    assert health["snapshots"]["count"] == 4 and health["snapshots"]["expirable"] == 0
    assert health["data-files"] == 4 and health["delete-files"] == 0 and health["small-file-ratio"] == 1.0
    assert sorted(p["partition"] for p in health["partitions"]) == [
        "category=a/ts_day=2024-01-02",
        "category=b/ts_day=2024-01-01",
    ]
    assert sum(p["records"] for p in health["partitions"]) == 4
    # two days on, three snapshots are past the policy's retention: the report says to run it
    later = maintenance.report(maintenance.maintenance.table("test", (NS,), "sales"), now_ms() + 2 * DAY_MS)
    assert later["snapshots"]["expirable"] == 3
    assert later["recommendations"][EXPIRY].startswith("run: 3 snapshots")


def test_metadata_compaction_rewrites_small_manifests_as_a_replace_and_rows_stay(catalog, server, maintenance):
    table = create_sales(catalog)
    for i in range(1, 7):
        table.append(rows(i))
    before = catalog.load_table((NS, "sales"))
    assert len(before.current_snapshot().manifests(before.io)) == 6
    attach(maintenance, "system.metadata-compaction", "sales", {"enable": True})

    dry = run(maintenance, "sales", "system.metadata-compaction", now_ms(), dry_run=True)
    assert dry.plan["manifests-to-rewrite"] == 6 and dry.outcome["committed"] is False
    assert catalog.load_table((NS, "sales")).current_snapshot().snapshot_id == before.current_snapshot().snapshot_id

    # a writer that commits between the plan's base and the rewrite's commit wins; the run gives up cleanly
    writer = new_catalog(server).load_table((NS, "sales"))
    manifests_before = objects_under(maintenance.executor.objects, f"{before.location()}/metadata")

    def interloper(_plan) -> None:
        writer.append(rows(7))

    maintenance.executor.compaction_planned = interloper
    try:
        gave_up = run(maintenance, "sales", "system.metadata-compaction", now_ms())
    finally:
        maintenance.executor.compaction_planned = lambda _plan: None
    assert gave_up.status == "succeeded" and gave_up.outcome["committed"] is False, gave_up.outcome
    appended = catalog.load_table((NS, "sales"))
    ours = {
        appended.current_snapshot().manifest_list,
        *(m.manifest_path for m in appended.current_snapshot().manifests(appended.io)),
    }
    left = set(objects_under(maintenance.executor.objects, f"{before.location()}/metadata")) - set(manifests_before)
    assert {uri for uri in left if uri.endswith(".avro")} <= ours  # the lost rewrite's files are gone
    assert ids_of(catalog.load_table((NS, "sales")).scan().to_arrow()) == [1, 2, 3, 4, 5, 6, 7]

    done = run(maintenance, "sales", "system.metadata-compaction", now_ms())
    assert done.status == "succeeded" and done.outcome["committed"] is True, done.error
    final = catalog.load_table((NS, "sales"))
    assert final.current_snapshot().summary.operation.value == "replace"
    assert len(final.current_snapshot().manifests(final.io)) == 1
    assert ids_of(final.scan().to_arrow()) == [1, 2, 3, 4, 5, 6, 7]
    final.append(rows(8))  # writers go on from the compacted snapshot
    assert ids_of(catalog.load_table((NS, "sales")).scan().to_arrow()) == [1, 2, 3, 4, 5, 6, 7, 8]


def test_spark_reads_the_same_rows_after_expiry(spark, catalog, maintenance):
    """The one Spark test: a Spark-written table, partly rewritten by a copy-on-write DELETE, expired;
    Spark (after a refresh) and PyIceberg read exactly the rows they read before."""
    table = f"growler.{NS}.sparked"
    spark.sql(f"CREATE TABLE {table} (id bigint, cat string) USING iceberg PARTITIONED BY (cat)")
    for low in (1, 4, 7):
        spark.sql(f"INSERT INTO {table} VALUES ({low}, 'a'), ({low + 1}, 'b'), ({low + 2}, 'a')")
    spark.sql(f"DELETE FROM {table} WHERE id = 3")
    query = f"SELECT id, cat FROM {table} ORDER BY id"
    expected = [tuple(row) for row in spark.sql(query).collect()]
    assert len(expected) == 8
    attach(maintenance, EXPIRY, "sparked", {"enable": True, "config": {"max_snapshot_age_days": 1}})

    done = run(maintenance, "sparked", EXPIRY, now_ms() + 2 * DAY_MS)
    assert done.status == "succeeded" and done.outcome["committed"] and done.files_removed > 0, done.error
    spark.sql(f"REFRESH TABLE {table}")
    assert [tuple(row) for row in spark.sql(query).collect()] == expected
    assert spark.sql(f"SELECT count(*) FROM {table}.snapshots").collect()[0][0] == 1
    assert ids_of(catalog.load_table((NS, "sparked")).scan().to_arrow()) == [row[0] for row in expected]


def test_data_compaction_in_process_bin_packs_small_files_and_rows_stay(catalog, maintenance):
    """Small files of partitions without delete files become one per partition; rows checksummed."""
    table = create_sales(catalog)
    for i in range(1, 9):
        table.append(rows(i))  # eight files: four per partition
    before = catalog.load_table((NS, "sales")).scan().to_arrow().sort_by("id")
    attach(maintenance, "system.data-compaction", "sales", {"enable": True})

    dry = run(maintenance, "sales", "system.data-compaction", now_ms(), dry_run=True)
    assert dry.plan["files-to-rewrite"] == 8 and dry.outcome["committed"] is False
    done = run(maintenance, "sales", "system.data-compaction", now_ms())
    assert done.status == "succeeded" and done.outcome["committed"] is True, (done.error, done.outcome)

    final = catalog.load_table((NS, "sales"))
    assert final.current_snapshot().summary.operation.value == "replace"
    files = [task.file for task in final.scan().plan_files()]
    assert len(files) == 2  # one per partition
    after = final.scan().to_arrow().sort_by("id")
    assert after.equals(before)  # the same rows, value for value
    final.append(rows(9))
    assert ids_of(catalog.load_table((NS, "sales")).scan().to_arrow()) == list(range(1, 10))


def test_a_table_protected_or_dropped_into_the_bin_during_expiry_keeps_its_history_and_files(
    catalog, maintenance, client
):
    """The executor checks again before its commit and before each delete: a protection mark set,
    or a drop into the recycle bin made, while it planned stops it there; the run says why."""
    table = create_sales(catalog)
    for i in (1, 2, 3):
        table.append(rows(i))
    snapshots = [s.snapshot_id for s in table.snapshots()]
    before = objects_under(maintenance.executor.objects, table.location())
    attach(maintenance, EXPIRY, "sales", {"enable": True, "config": {"max_snapshot_age_days": 1}})
    later = now_ms() + 2 * DAY_MS

    maintenance.executor.planned = lambda _plan: protect(client, "namespace", [NS])
    protected = run(maintenance, "sales", EXPIRY, later)
    assert protected.status == "skipped" and protected.outcome["committed"] is False
    assert protected.outcome["reason"].startswith(f"protected (namespace {NS} is protected)")
    assert protected.plan["expired-snapshot-ids"] == sorted(snapshots[:2])  # what it would have done
    maintenance.executor.planned = lambda _plan: None
    again = run(maintenance, "sales", EXPIRY, later)  # still protected: skipped before it plans
    assert again.status == "skipped" and again.plan == {} and "protected" in again.outcome["reason"]
    assert unprotect(client, "namespace", [NS]).status_code == 204

    maintenance.executor.planned = lambda _plan: catalog.drop_table((NS, "sales"))  # into the bin
    dropped = run(maintenance, "sales", EXPIRY, later)
    assert dropped.status == "skipped" and "recycle bin" in dropped.outcome["reason"], dropped
    assert objects_under(maintenance.executor.objects, table.location()) == before  # not one file deleted

    assert undrop(client, unit_of(client, "sales")["id"]).status_code == 200
    back = catalog.load_table((NS, "sales"))
    assert [s.snapshot_id for s in back.snapshots()] == snapshots and ids_of(back.scan().to_arrow()) == [1, 2, 3]
    entry = maintenance.maintenance.table("test", (NS,), "sales").entry_id
    assert [r.id for r in maintenance.maintenance.runs(entry, 10)] == [dropped.id, again.id, protected.id]


def test_orphan_removal_after_a_take_over_leaves_the_binned_tables_files_until_its_purge(
    catalog, maintenance, client, app
):
    """Maintenance meets the recycle bin's take-over (docs/recycle-bin.md): a table created at a
    dropped one's location shares that folder with the bin entry. While the entry can still come
    back, the new table's orphan removal deletes none of its files (another entry owns their
    place), whatever their age; once an administrator purged the entry - which deletes nothing
    under a live table's location - its files are the new table's orphans, and the next run
    removes exactly them. The new table's rows stay readable throughout."""
    from tests.api.bin_support import BIN, until

    objects = maintenance.executor.objects
    location = f"s3://{TEST_BUCKET}/{NS}/shared"
    old = create_sales(catalog, "old", location=location)
    old.append(rows(1, 2))
    old_files = set(objects_under(objects, location))
    catalog.drop_table((NS, "old"))  # soft, the default: into the bin, its files kept
    new = create_sales(catalog, "new", location=location)  # the take-over
    new.append(rows(3))
    new_files = set(objects_under(objects, location)) - old_files
    attach(maintenance, ORPHANS, "new", {"enable": True})
    far = now_ms() + 30 * DAY_MS  # every file is past the floor

    kept = run(maintenance, "new", ORPHANS, far)
    assert kept.status == "succeeded" and kept.files_removed == 0, (kept.status, kept.error, kept.plan)
    assert set(objects_under(objects, location)) == old_files | new_files

    unit = unit_of(client, "old")["id"]
    assert client.delete(f"{BIN}/{unit}").status_code == 204  # an administrator's purge
    until(lambda: not client.get(BIN).json()["units"], app)
    assert set(objects_under(objects, location)) == old_files | new_files  # under a live table: kept

    removed = run(maintenance, "new", ORPHANS, far)
    assert removed.status == "succeeded" and removed.files_removed == len(old_files), (removed.error, removed.plan)
    assert set(objects_under(objects, location)) == new_files
    assert ids_of(catalog.load_table((NS, "new")).scan().to_arrow()) == [3]


def local_spark_job(server) -> SparkSettings:
    """Spark settings that make the executor start its rewrite job on this machine (``local[1]``),
    a client of ``server`` like any writer."""
    return SparkSettings(
        submit=str(Path(pyspark.__file__).parent / "bin" / "spark-submit"),
        master="local[1]",
        jars=",".join(spark_jars("3.5")),
        # a small job: no UI, one shuffle partition, the JIT's quick tier only (a JVM starts faster)
        conf=f"spark.pyspark.python={sys.executable},spark.ui.enabled=false,spark.sql.shuffle.partitions=1,"
        "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1",
        java_home=java17_home() or "",
        catalog_uri=server.url,
        credential=TEST_CREDENTIAL,
        timeout_s=600,
    )


@pytest.mark.parametrize("spark", ["3.5"], indirect=True)  # Growler's job runs on the 3.5 line (.venv)
def test_data_compaction_with_delete_files_runs_on_a_spark_job_growler_starts(spark, server, catalog, maintenance):
    """A partitioned table with delete files (merge-on-read, written by the shared driver) is beyond
    the in-process bound: the executor starts spark-submit with Iceberg's rewrite_data_files, the
    job commits through the server like any writer; fewer files, the deletes applied, same rows.
    Run as a job, its progress moves while the Spark job runs (a line per file group it reports)."""
    table = f"growler.{NS}.deleted"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, cat string) USING iceberg PARTITIONED BY (cat)"
        " TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    for low in (1, 4, 7, 10):
        spark.sql(f"INSERT INTO {table} VALUES ({low}, 'a'), ({low + 1}, 'b'), ({low + 2}, 'a')")
    spark.sql(f"DELETE FROM {table} WHERE id IN (3, 5)")  # position delete files in both partitions
    query = f"SELECT id, cat FROM {table} ORDER BY id"
    expected = [tuple(row) for row in spark.sql(query).collect()]
    before = catalog.load_table((NS, "deleted"))
    assert any(task.delete_files for task in before.scan().plan_files())
    files_before = len(list(before.scan().plan_files()))
    attach(maintenance, "system.data-compaction", "deleted", {"enable": True})

    unset = run(maintenance, "deleted", "system.data-compaction", now_ms())  # no Spark configured
    assert unset.outcome["committed"] is False and "engine" not in unset.plan
    assert set(unset.plan["skipped"].values()) == {"has delete files (needs Spark)"}
    maintenance.executor.spark = local_spark_job(server)
    try:
        dry = run(maintenance, "deleted", "system.data-compaction", now_ms(), dry_run=True)
        assert dry.plan["engine"] == "spark" and dry.outcome["committed"] is False
        # what the job takes on is the plan: every data file of both partitions (they have deletes)
        assert dry.plan["files-to-rewrite"] == files_before and len(dry.plan["partitions"]) == 2, dry.plan
        assert set(dry.plan["needs-spark"].values()) == {"has delete files (needs Spark)"}
        control = RecordedControl(maintenance.jobs)
        done = run_as_job(maintenance, "deleted", "system.data-compaction", control)
    finally:
        maintenance.executor.spark = SparkSettings()
    assert done.status == "succeeded", done.error
    assert done.outcome["engine"] == "spark" and done.outcome["committed"] is True, done.outcome
    assert done.outcome["rewritten-data-files-count"] >= 2 and done.outcome["failed-data-files-count"] == 0
    # the job reported its progress as it went: a file group (one call of the procedure per
    # partition here, a and b) at a time, recorded while it ran; the run ends at its totals
    final = maintenance.jobs.get(done_entry(maintenance, "deleted"), done.id).progress
    assert final["file-groups-total"] == 2 and final["file-groups-done"] == 2, final
    assert final["bytes-done"] == final["bytes-total"] > 0, final
    assert control.updates[-1] == final, control.updates
    middle = [u for u in control.updates if 0 < u["file-groups-done"] < u["file-groups-total"]]
    assert middle and 0 < middle[0]["bytes-done"] < final["bytes-total"], control.updates

    after = catalog.load_table((NS, "deleted"))
    tasks = list(after.scan().plan_files())
    assert len(tasks) < files_before and not any(task.delete_files for task in tasks)
    assert sorted((row["id"], row["cat"]) for row in after.scan().to_arrow().to_pylist()) == expected
    spark.sql(f"REFRESH TABLE {table}")
    assert [tuple(row) for row in spark.sql(query).collect()] == expected


@pytest.mark.parametrize("spark", ["3.5"], indirect=True)
def test_a_spark_job_on_a_table_partitioned_by_transforms_commits_and_reports_a_partition_at_a_time(
    spark, server, catalog, maintenance
):
    """days(ts), bucket(4, id) and truncate(3, name): the job names each partition by a where on
    its source columns (a UTC range of ts, Iceberg's bucket function, a prefix of name; the null
    partition by IS NULL) and calls the procedure once per partition - a commit each that rewrote
    exactly that partition's three data files - reporting its progress a file group at a time."""
    table = f"growler.{NS}.daily"
    spark.sql(
        f"CREATE TABLE {table} (id bigint, ts timestamp, name string, n int) USING iceberg"
        " PARTITIONED BY (days(ts), bucket(4, id), truncate(3, name))"
        " TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    partitions = [
        (1, "TIMESTAMP '2026-01-02 23:00:{:02d}+00:00'", "'apple'"),
        (2, "TIMESTAMP '2026-01-03 00:00:{:02d}+00:00'", "'banana'"),
        (3, "NULL", "NULL"),
    ]
    for k in range(3):  # three inserts: a data file in each partition per insert, two rows in each
        values = [f"({i}, {ts.format(2 * k + j)}, {name}, {2 * k + j})" for i, ts, name in partitions for j in (0, 1)]
        spark.sql(f"INSERT INTO {table} VALUES {', '.join(values)}")
    spark.sql(f"DELETE FROM {table} WHERE n = 1")  # a position delete file in each partition: a job for Spark
    query = f"SELECT id, ts, name, n FROM {table} ORDER BY n, id"
    expected = [tuple(row) for row in spark.sql(query).collect()]
    before = catalog.load_table((NS, "daily"))
    assert len(list(before.scan().plan_files())) == 9 and len(expected) == 15
    snapshots_before = {snapshot.snapshot_id for snapshot in before.snapshots()}
    attach(maintenance, "system.data-compaction", "daily", {"enable": True})
    done, control = compact_on_spark(maintenance, "daily", local_spark_job(server))
    assert done.status == "succeeded", done.error
    assert done.outcome["engine"] == "spark" and done.outcome["committed"] is True, done.outcome
    assert done.outcome["rewritten-data-files-count"] == 9 and done.outcome["failed-data-files-count"] == 0

    final = maintenance.jobs.get(done_entry(maintenance, "daily"), done.id).progress
    assert final["file-groups-total"] == 3 and final["file-groups-done"] == 3, final  # a group per partition
    assert final["bytes-done"] == final["bytes-total"] > 0, final
    assert control.updates[-1] == final, control.updates
    assert [u["file-groups-done"] for u in control.updates] == [0, 1, 2, 3], control.updates

    after = catalog.load_table((NS, "daily"))
    commits = [s for s in after.snapshots() if s.snapshot_id not in snapshots_before]
    # each call's where selected exactly its partition: its rewrite (then the removal of the delete
    # file it applied: remove-dangling-deletes) changed that one partition, its 3 data files replaced
    assert {(s.summary.operation.value, s.summary["changed-partition-count"]) for s in commits} == {("replace", "1")}
    rewrites = [s.summary for s in commits if s.summary.get("deleted-data-files")]
    assert [summary["deleted-data-files"] for summary in rewrites] == ["3"] * 3, [s.summary for s in commits]
    tasks = list(after.scan().plan_files())
    assert len(tasks) == 3 and not any(task.delete_files for task in tasks)
    spark.sql(f"REFRESH TABLE {table}")
    assert [tuple(row) for row in spark.sql(query).collect()] == expected


def test_data_compaction_follows_the_policys_thresholds_and_a_table_in_shape_costs_no_rewrite(catalog, maintenance):
    """Four small files per partition: min-input-files 5 leaves both partitions (nothing to
    compact, one planning pass); 4 rewrites them; then the table is in shape and the next run
    finds nothing. The dry run shows the options."""
    table = create_sales(catalog)
    for i in range(1, 9):
        table.append(rows(i))  # eight files: four per partition
    attach(maintenance, "system.data-compaction", "sales", {"enable": True, "config": {"min-input-files": 5}})
    left = run(maintenance, "sales", "system.data-compaction", now_ms())
    assert left.outcome == {"committed": False, "reason": "nothing to compact", "seconds": left.outcome["seconds"]}
    assert left.plan["options"]["min-input-files"] == "5" and left.plan["strategy"] == "binpack"

    attach(maintenance, "system.data-compaction", "sales", {"enable": True, "config": {"min-input-files": 4}})
    dry = run(maintenance, "sales", "system.data-compaction", now_ms(), dry_run=True)
    assert dry.plan["files-to-rewrite"] == 8 and dry.plan["options"]["min-input-files"] == "4"
    done = run(maintenance, "sales", "system.data-compaction", now_ms())
    assert done.outcome["committed"] is True, (done.error, done.outcome)
    again = run(maintenance, "sales", "system.data-compaction", now_ms())
    assert again.outcome["reason"] == "nothing to compact", again.outcome
    assert len(list(catalog.load_table((NS, "sales")).scan().plan_files())) == 2
