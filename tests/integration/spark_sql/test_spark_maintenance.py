"""Spark 3.5 and 4.1 (PySpark + Iceberg's Spark runtime and S3FileIO) against a running gunicorn:
Iceberg's maintenance procedures, rename across namespaces, drop with and without purge (and the
purge left to the catalog), in each way of reaching storage where it differs.

The session is configured with Growler's URL and warehouse name and asks for vended credentials
(``spark_support.catalog_conf``); everything about S3 (endpoint, region, addressing style, keys)
comes from the catalog. Every test runs once per Spark line (``spark_support``); one session per
line is shared by every test (a JVM start costs tens of seconds); each test works in its own
namespace. Results are checked through Spark, through the REST API (the metadata Growler
stores) and by listing the bucket (fixtures in this directory's conftest.py).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.ground.locations import Location
from tests.integration.spark_sql.spark_sql_support import (
    load_table,
    objects_under,
    rows,
    scalar,
    snapshot_operations,
    wait_until_empty,
)
from tests.integration.spark_support import CATALOG, add_catalog

pytestmark = pytest.mark.slow


# ------------------------------------------------------------------------------------------
# maintenance procedures
# ------------------------------------------------------------------------------------------


def test_maintenance_procedures(spark, server, ns, objects, access):
    name = f"{ns}.compact"
    table = f"{access.catalog}.{name}"
    spark.sql(f"CREATE TABLE {table} (id bigint, payload string) USING iceberg")
    for i in range(1, 6):
        spark.sql(f"INSERT INTO {table} VALUES ({i}, 'p{i}')")
    expected = [(i, f"p{i}") for i in range(1, 6)]
    assert scalar(spark, f"SELECT count(*) FROM {table}.files") == 5
    assert scalar(spark, f"SELECT count(*) FROM {table}.manifests") == 5
    location = load_table(server, ns, "compact", access.warehouse)["metadata"]["location"]
    first_files = {o for o in objects_under(objects, location + "/data") if o.endswith(".parquet")}
    assert len(first_files) == 5

    # rewrite_data_files: five small files become one
    result = spark.sql(
        f"CALL {access.catalog}.system.rewrite_data_files(table => '{name}', options => map('min-input-files', '2'))"
    ).collect()[0]
    assert (result["rewritten_data_files_count"], result["added_data_files_count"]) == (5, 1)
    assert scalar(spark, f"SELECT count(*) FROM {table}.files") == 1
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == expected
    assert snapshot_operations(spark, table)[-1] == "replace"

    # rewrite_manifests: the manifests of the current snapshot become one
    before = scalar(spark, f"SELECT count(*) FROM {table}.manifests")
    result = spark.sql(f"CALL {access.catalog}.system.rewrite_manifests('{name}')").collect()[0]
    assert result["rewritten_manifests_count"] == before > 1
    assert result["added_manifests_count"] == 1
    assert scalar(spark, f"SELECT count(*) FROM {table}.manifests") == 1

    # expire_snapshots: keep only the current one; the compacted-away files are deleted (where
    # bulk deletes go through; through signing on SeaweedFS they are refused and the files stay)
    now = datetime.now(UTC).replace(tzinfo=None) + timedelta(seconds=1)
    result = spark.sql(
        f"CALL {access.catalog}.system.expire_snapshots(table => '{name}', "
        f"older_than => TIMESTAMP '{now:%Y-%m-%d %H:%M:%S.%f}', retain_last => 1)"
    ).collect()[0]
    assert result["deleted_data_files_count"] == (5 if access.bulk_deletes else 0)
    assert scalar(spark, f"SELECT count(*) FROM {table}.snapshots") == 1
    metadata = load_table(server, ns, "compact", access.warehouse)["metadata"]
    assert len(metadata["snapshots"]) == 1
    assert metadata["snapshots"][0]["snapshot-id"] == metadata["current-snapshot-id"]
    remaining = {o for o in objects_under(objects, location + "/data") if o.endswith(".parquet")}
    if access.bulk_deletes:
        assert not remaining & first_files and len(remaining) == 1
    else:
        assert first_files < remaining and len(remaining) == 6
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == expected

    # remove_orphan_files: an object nobody references is found and deleted. The procedure refuses
    # older_than within the last 24 hours, so CALL (listing through S3FileIO's prefix listing)
    # runs with its default (3 days: nothing that young is touched), and the deletion of a
    # just-written orphan goes through the Spark action the procedure wraps.
    orphan = f"{location}/data/orphan-{int(time.time())}.parquet"
    objects.write_new(Location.parse(orphan), b"not referenced by any snapshot", "application/octet-stream")
    dry = rows(spark, f"CALL {access.catalog}.system.remove_orphan_files(table => '{name}', prefix_listing => true)")
    assert dry == []
    assert objects.exists(Location.parse(orphan))
    older_than = datetime.now(UTC) + timedelta(minutes=1)
    removed = spark.call("delete_orphan_files", table, int(older_than.timestamp() * 1000))
    if access.bulk_deletes:
        assert removed == [orphan]  # exactly the planted object: every file Growler wrote is referenced
    else:  # found, with the data files expire_snapshots could not delete; none of them deleted
        assert orphan in removed and first_files <= set(removed)
        assert all(objects.exists(Location.parse(uri)) for uri in first_files)
    assert objects.exists(Location.parse(orphan)) is not access.bulk_deletes
    assert rows(spark, f"SELECT * FROM {table} ORDER BY id") == expected


# ------------------------------------------------------------------------------------------
# rename, drop, purge
# ------------------------------------------------------------------------------------------


def test_rename_table_across_namespaces(spark, server, ns):
    spark.sql(f"CREATE NAMESPACE {CATALOG}.{ns}_target")
    spark.sql(f"CREATE TABLE {CATALOG}.{ns}.before (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {CATALOG}.{ns}.before VALUES (1), (2)")
    original = load_table(server, ns, "before")

    spark.sql(f"ALTER TABLE {CATALOG}.{ns}.before RENAME TO {ns}_target.after")
    assert load_table(server, ns, "before") is None
    renamed = load_table(server, f"{ns}_target", "after")
    assert renamed["metadata-location"] == original["metadata-location"]
    assert renamed["metadata"]["table-uuid"] == original["metadata"]["table-uuid"]
    assert rows(spark, f"SELECT id FROM {CATALOG}.{ns}_target.after ORDER BY id") == [(1,), (2,)]
    with pytest.raises(Exception, match="(?i)TABLE_OR_VIEW_NOT_FOUND|not found"):
        spark.sql(f"SELECT * FROM {CATALOG}.{ns}.before").collect()
    assert [r[1] for r in rows(spark, f"SHOW TABLES IN {CATALOG}.{ns}_target")] == ["after"]

    # and the renamed table takes writes
    spark.sql(f"INSERT INTO {CATALOG}.{ns}_target.after VALUES (3)")
    assert scalar(spark, f"SELECT count(*) FROM {CATALOG}.{ns}_target.after") == 3


def make_table_with_files(
    spark, server, objects, catalog: str, ns: str, name: str, warehouse: str | None = None
) -> tuple[str, list[str]]:
    spark.sql(f"CREATE TABLE {catalog}.{ns}.{name} (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO {catalog}.{ns}.{name} VALUES (1)")
    spark.sql(f"INSERT INTO {catalog}.{ns}.{name} VALUES (2)")
    location = load_table(server, ns, name, warehouse)["metadata"]["location"]
    listing = objects_under(objects, location)
    assert sum(o.endswith(".parquet") for o in listing) == 2
    assert sum(o.endswith(".metadata.json") for o in listing) >= 3
    return location, listing


def purge_from_the_bin(server, warehouse: str, ns: str, name: str) -> None:
    """The default soft policy (issue 35) keeps a table dropped with purgeRequested in the recycle
    bin, its files in place, until its retention ends: an administrator's purge runs it now."""
    url = f"{server.url}/management/v1/warehouses/{warehouse}/bin"
    (unit,) = [u for u in httpx.get(url, params={"namespace": ns}, timeout=30).json()["units"] if u["name"] == name]
    assert unit["purge-requested"] is True
    assert httpx.delete(f"{url}/{unit['id']}", timeout=30).status_code == 204


def test_drop_table_keeps_files_and_purge_deletes_them(spark, server, ns, objects, access):
    """DROP TABLE ... PURGE: the catalog drops the entry, and the reachable files go (Spark deletes
    them itself with the credentials it was vended; through signing, Growler's purger does, once
    the recycle bin lets it: an administrator's purge here, the retention's end otherwise)."""
    kept, kept_objects = make_table_with_files(spark, server, objects, access.catalog, ns, "kept", access.warehouse)
    purged, _ = make_table_with_files(spark, server, objects, access.catalog, ns, "purged", access.warehouse)

    spark.sql(f"DROP TABLE {access.catalog}.{ns}.kept")
    spark.sql(f"DROP TABLE {access.catalog}.{ns}.purged PURGE")
    assert load_table(server, ns, "kept", access.warehouse) is None
    assert load_table(server, ns, "purged", access.warehouse) is None
    assert rows(spark, f"SHOW TABLES IN {access.catalog}.{ns}") == []

    if access.catalog_purges:  # through signing the purge is the catalog's: it waits in the bin
        assert objects_under(objects, purged)
        purge_from_the_bin(server, access.warehouse, ns, "purged")
    # every data, manifest and metadata file is gone
    assert wait_until_empty(objects, purged) == []
    assert objects_under(objects, kept) == kept_objects


def test_drop_table_purge_delegated_to_the_catalog(spark, server, ns, objects):
    """With rest-catalog-purge, Spark sends purgeRequested=true and Growler's purger deletes the files."""
    uri = spark.conf.get(f"spark.sql.catalog.{CATALOG}.uri")
    purging = add_catalog(spark, "growler_purging", uri, server.warehouse, **{"rest-catalog-purge": "true"})
    location, _ = make_table_with_files(spark, server, objects, purging, ns, "purged")

    spark.sql(f"DROP TABLE {purging}.{ns}.purged PURGE")
    assert load_table(server, ns, "purged") is None
    assert objects_under(objects, location)  # in the recycle bin until its retention ends (issue 35)
    purge_from_the_bin(server, server.warehouse, ns, "purged")
    assert wait_until_empty(objects, location) == []
