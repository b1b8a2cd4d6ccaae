"""PyIceberg's REST catalog client against a running gunicorn: tables with data, end to end - create,
append, read back, overwrite, delete; schema and partition evolution; time travel, refs, expiry.

Every client here is configured with Growler's URL and warehouse only: where the bytes are
(endpoint, addressing style) and how to reach them (keys) must come from the catalog, in the
loadTable ``config`` and ``storage-credentials`` (PyIceberg asks for vended credentials by default).
Results are checked by reading the data back through PyIceberg/pyarrow and by listing the bucket.
"""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pyarrow as pa
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.types import (
    DoubleType,
    LongType,
    StringType,
    TimestampType,
)

from app.ground.locations import Location
from tests.integration.pyiceberg_support import NS, create_sales, ids_of, new_catalog, objects_under, rows

# ------------------------------------------------------------------------------------------
# Create, write, read
# ------------------------------------------------------------------------------------------


def test_create_partitioned_append_and_read_back(access_catalog, objects, settings):
    table = create_sales(access_catalog)
    assert table.metadata_location.startswith("s3://growler-test-warehouse/shop/sales-")
    assert table.metadata_location.rsplit("/", 1)[1].startswith("00000-")
    # storage coordinates came from the catalog, not from the client's own configuration; the
    # warehouse's own keys never did: temporary credentials, or none at all with remote signing
    assert table.io.properties["s3.endpoint"] == settings.s3.endpoint
    assert table.io.properties.get("s3.access-key-id") != settings.s3.access_key
    assert settings.s3.secret_key not in table.io.properties.values()
    signing = table.io.properties.get("s3.remote-signing-enabled") == "true"
    assert signing == ("s3.access-key-id" not in table.io.properties)

    spec = table.spec()
    assert [(f.name, f.transform, table.schema().find_column_name(f.source_id)) for f in spec.fields] == [
        ("category", IdentityTransform(), "category"),
        ("ts_day", DayTransform(), "ts"),
    ]

    table.append(rows(1, 2, 3, 4))
    snapshot = table.current_snapshot()
    assert snapshot is not None
    assert snapshot.summary.operation.value == "append"
    assert snapshot.summary["added-records"] == "4"

    result = table.scan().to_arrow()
    assert result.num_rows == 4
    assert sorted(result.to_pylist(), key=lambda r: r["id"]) == sorted(
        rows(1, 2, 3, 4).to_pylist(), key=lambda r: r["id"]
    )
    filtered = table.scan(row_filter=EqualTo("category", "a")).to_arrow()
    assert ids_of(filtered) == [1, 3]

    # two partitions (a/2024-01-02, b/2024-01-01): one data file each, laid out by partition
    data_files = [o for o in objects_under(objects, table.location()) if o.endswith(".parquet")]
    assert len(data_files) == 2
    assert any("category=a/ts_day=2024-01-02/" in f for f in data_files)
    assert any("category=b/ts_day=2024-01-01/" in f for f in data_files)
    # and the catalog's pointer is the file PyIceberg was told about
    assert access_catalog.load_table((NS, "sales")).metadata_location == table.metadata_location
    assert objects.exists(Location.parse(table.metadata_location))


def test_second_client_reads_table_knowing_only_the_url(server, catalog):
    writer = create_sales(catalog)
    writer.append(rows(1, 2, 3))

    reader_catalog = new_catalog(server)  # a separate client: only Growler's URL and warehouse
    reader = reader_catalog.load_table((NS, "sales"))
    assert reader.metadata.table_uuid == writer.metadata.table_uuid
    assert reader.current_snapshot().snapshot_id == writer.current_snapshot().snapshot_id
    assert reader.scan().to_arrow().sort_by("id").to_pylist() == rows(1, 2, 3).to_pylist()

    # the second client writes, the first one sees it after a refresh
    reader.append(rows(4))
    assert ids_of(writer.refresh().scan().to_arrow()) == [1, 2, 3, 4]

    # the change feed (docs/events.md): the create, then each append's snapshot, as a consumer reads them
    feed = httpx.post(f"{server.url}/v1/{server.warehouse}/events", json={"catalog-objects-by-name": [[NS, "sales"]]})
    operations = [event["operation"] for event in feed.json()["events"]]
    assert [op["operation-type"] for op in operations] == ["create-table", "update-table", "update-table"]
    assert {op["table-uuid"] for op in operations} == {str(writer.metadata.table_uuid)}
    added = [u["snapshot"] for op in operations[1:] for u in op["updates"] if u["action"] == "add-snapshot"]
    assert [a["snapshot-id"] for a in added] == [snapshot.snapshot_id for snapshot in writer.metadata.snapshots]
    assert [(a["summary"]["operation"], a["summary"]["added-records"]) for a in added] == [
        ("append", "3"),
        ("append", "1"),
    ]
    assert operations[-1]["metadata-location"] == writer.metadata_location


def test_overwrite_all_and_by_filter(access_catalog):
    table = create_sales(access_catalog)
    table.append(rows(1, 2, 3, 4))

    first = table.current_snapshot().snapshot_id
    table.overwrite(rows(10, 11))
    assert ids_of(table.scan().to_arrow()) == [10, 11]
    # one commit, two snapshots: delete the old files, append the new ones
    operations = [(s.snapshot_id, s.parent_snapshot_id, s.summary.operation.value) for s in table.snapshots()]
    _, (deleted, parent, op_delete), (appended, parent2, op_append) = operations
    assert (parent, op_delete, parent2, op_append) == (first, "delete", deleted, "append")
    assert table.current_snapshot().snapshot_id == appended
    # the delete snapshot was never current on its own, so the snapshot log skips it (as Java)
    assert [entry.snapshot_id for entry in table.history()] == [first, appended]

    # replace only category b (id 10) with id 20
    table.overwrite(rows(20), overwrite_filter=EqualTo("category", "b"))
    result = table.scan().to_arrow()
    assert ids_of(result) == [11, 20]
    assert dict(zip(result.column("id").to_pylist(), result.column("qty").to_pylist(), strict=True)) == {
        11: 110,
        20: 200,
    }

    reloaded = access_catalog.load_table((NS, "sales"))
    assert ids_of(reloaded.scan().to_arrow()) == [11, 20]


def test_delete_rows(access_catalog):
    table = create_sales(access_catalog)
    table.append(rows(1, 2, 3, 4, 5, 6))
    before = table.current_snapshot().snapshot_id

    # a whole partition: the files go
    table.delete(delete_filter=EqualTo("category", "b"))
    assert ids_of(table.scan().to_arrow()) == [1, 3, 5]
    assert table.current_snapshot().summary.operation.value == "delete"

    # part of a file: copy-on-write rewrite
    table.delete(delete_filter=GreaterThanOrEqual("id", 5))
    assert ids_of(table.scan().to_arrow()) == [1, 3]
    assert table.current_snapshot().summary.operation.value == "overwrite"

    reloaded = access_catalog.load_table((NS, "sales"))
    assert ids_of(reloaded.scan().to_arrow()) == [1, 3]
    assert ids_of(reloaded.scan(snapshot_id=before).to_arrow()) == [1, 2, 3, 4, 5, 6]


# ------------------------------------------------------------------------------------------
# Evolution
# ------------------------------------------------------------------------------------------


def test_schema_evolution_add_rename_drop_widen(access_catalog):
    table = create_sales(access_catalog)
    table.append(rows(1, 2))
    first_schema_id = table.schema().schema_id

    with table.update_schema() as update:
        update.add_column("note", StringType(), doc="free text")
        update.rename_column("qty", "quantity")
        update.update_column("qty", field_type=LongType())  # int -> long (by its name before the rename)
        update.update_column("price", field_type=DoubleType())  # float -> double
    with table.update_schema() as update:
        update.delete_column("note")
        update.add_column("comment", StringType())

    reloaded = access_catalog.load_table((NS, "sales"))
    schema = reloaded.schema()
    assert schema.schema_id != first_schema_id
    assert [(f.name, f.field_type) for f in schema.fields] == [
        ("id", LongType()),
        ("category", StringType()),
        ("ts", TimestampType()),
        ("quantity", LongType()),
        ("price", DoubleType()),
        ("comment", StringType()),
    ]
    # field ids survive the rename and the widening; the dropped column's id is not reused
    assert schema.find_field("quantity").field_id == 4
    assert schema.find_field("price").field_id == 5
    assert schema.find_field("comment").field_id == 7
    assert reloaded.metadata.last_column_id == 7
    assert len(reloaded.schemas()) == 3

    # old files are read through the new schema: renamed and widened values, nulls for the new column
    old = reloaded.scan().to_arrow()
    assert old.schema.field("quantity").type == pa.int64()
    assert old.schema.field("price").type == pa.float64()
    assert old.sort_by("id").select(["id", "quantity", "price", "comment"]).to_pylist() == [
        {"id": 1, "quantity": 10, "price": 1.5, "comment": None},
        {"id": 2, "quantity": 20, "price": 2.5, "comment": None},
    ]

    new_rows = pa.Table.from_pylist(
        [
            {
                "id": 3,
                "category": "a",
                "ts": datetime(2024, 1, 3),
                "quantity": 2**40,
                "price": 0.1,
                "comment": "wide",
            }
        ],
        schema=schema.as_arrow(),
    )
    reloaded.append(new_rows)
    result = access_catalog.load_table((NS, "sales")).scan().to_arrow().sort_by("id")
    assert result.column("quantity").to_pylist() == [10, 20, 2**40]
    assert result.column("comment").to_pylist() == [None, None, "wide"]


def test_partition_spec_evolution(catalog, objects):
    table = create_sales(catalog)
    table.append(rows(1, 2))

    with table.update_spec() as update:
        update.add_field("id", BucketTransform(4), "id_bucket")
        update.remove_field("ts_day")

    reloaded = catalog.load_table((NS, "sales"))
    spec = reloaded.spec()
    assert spec.spec_id == 1
    assert [(f.name, str(f.transform)) for f in spec.fields] == [
        ("category", "identity"),
        ("id_bucket", "bucket[4]"),
    ]
    # v2: a removed field is removed (no void transform), ids keep counting
    assert [f.field_id for f in spec.fields] == [1000, 1002]
    assert reloaded.metadata.last_partition_id == 1002
    assert sorted(reloaded.specs()) == [0, 1]

    reloaded.append(rows(3, 4))
    files = reloaded.inspect.files()
    assert sorted(files.column("spec_id").to_pylist()) == [0, 0, 1, 1]
    assert ids_of(reloaded.scan().to_arrow()) == [1, 2, 3, 4]
    assert ids_of(reloaded.scan(row_filter=EqualTo("id", 3)).to_arrow()) == [3]
    new_files = [o for o in objects_under(objects, reloaded.location()) if "id_bucket=" in o]
    assert len(new_files) == 2


# ------------------------------------------------------------------------------------------
# Snapshots: time travel, refs, expiry
# ------------------------------------------------------------------------------------------


def test_time_travel(catalog):
    table = create_sales(catalog)
    table.append(rows(1, 2))
    first = table.current_snapshot()
    table.append(rows(3))
    second = table.current_snapshot()
    table.delete(delete_filter=EqualTo("id", 1))
    third = table.current_snapshot()

    reloaded = catalog.load_table((NS, "sales"))
    assert [entry.snapshot_id for entry in reloaded.history()] == [
        first.snapshot_id,
        second.snapshot_id,
        third.snapshot_id,
    ]
    assert second.parent_snapshot_id == first.snapshot_id
    assert ids_of(reloaded.scan(snapshot_id=first.snapshot_id).to_arrow()) == [1, 2]
    assert ids_of(reloaded.scan(snapshot_id=second.snapshot_id).to_arrow()) == [1, 2, 3]
    assert ids_of(reloaded.scan().to_arrow()) == [2, 3]
    as_of = reloaded.snapshot_as_of_timestamp(second.timestamp_ms)
    assert as_of is not None and as_of.snapshot_id == second.snapshot_id

    # roll main back to the first snapshot
    reloaded.manage_snapshots().rollback_to_snapshot(first.snapshot_id).commit()
    again = catalog.load_table((NS, "sales"))
    assert again.current_snapshot().snapshot_id == first.snapshot_id
    assert ids_of(again.scan().to_arrow()) == [1, 2]


def test_tags_and_branches(server, catalog):
    table = create_sales(catalog)
    table.append(rows(1, 2))
    first = table.current_snapshot().snapshot_id

    table.manage_snapshots().create_tag(first, "v1").create_branch(first, "dev").commit()
    # a write to the branch does not move main
    table.append(rows(100), branch="dev")
    table.append(rows(3))

    other = new_catalog(server).load_table((NS, "sales"))
    refs = other.refs()
    assert refs["v1"].snapshot_ref_type == SnapshotRefType.TAG
    assert refs["v1"].snapshot_id == first
    assert refs["dev"].snapshot_ref_type == SnapshotRefType.BRANCH
    dev_head = refs["dev"].snapshot_id
    assert dev_head not in (first, refs["main"].snapshot_id)
    assert other.snapshot_by_id(dev_head).parent_snapshot_id == first
    assert other.metadata.current_snapshot_id == refs["main"].snapshot_id

    assert ids_of(other.scan().to_arrow()) == [1, 2, 3]
    assert ids_of(other.scan().use_ref("dev").to_arrow()) == [1, 2, 100]
    assert ids_of(other.scan().use_ref("v1").to_arrow()) == [1, 2]
    assert other.snapshot_by_name("v1").snapshot_id == first

    other.manage_snapshots().remove_tag("v1").remove_branch("dev").commit()
    assert set(catalog.load_table((NS, "sales")).refs()) == {"main"}


def test_expire_snapshots(catalog):
    table = create_sales(catalog)
    snapshot_ids = []
    for i in (1, 2, 3, 4):
        table.append(rows(i))
        snapshot_ids.append(table.current_snapshot().snapshot_id)
    s1, s2, s3, s4 = snapshot_ids
    table.manage_snapshots().create_tag(s2, "keep").commit()

    table.maintenance.expire_snapshots().by_id(s1).commit()
    reloaded = catalog.load_table((NS, "sales"))
    assert [s.snapshot_id for s in reloaded.snapshots()] == [s2, s3, s4]
    assert reloaded.current_snapshot().snapshot_id == s4
    # the snapshot log no longer claims s1 was ever current (Java's updateSnapshotLog)
    assert [entry.snapshot_id for entry in reloaded.history()] == [s2, s3, s4]

    # everything older than now goes, except what a ref protects: the tag (s2) and main's head (s4)
    reloaded.maintenance.expire_snapshots().older_than(datetime.now(UTC)).commit()
    final = catalog.load_table((NS, "sales"))
    assert [s.snapshot_id for s in final.snapshots()] == [s2, s4]
    assert final.refs()["keep"].snapshot_id == s2
    assert ids_of(final.scan().to_arrow()) == [1, 2, 3, 4]
    assert ids_of(final.scan(snapshot_id=s2).to_arrow()) == [1, 2]
    assert final.snapshot_by_id(s3) is None
