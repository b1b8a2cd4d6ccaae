"""PyIceberg's REST catalog client against a running gunicorn: tables, end to end, with data.

Every client here is configured with Growler's URL and warehouse only: where the bytes are
(endpoint, addressing style) and how to reach them (keys) must come from the catalog, in the
loadTable ``config`` and ``storage-credentials`` (PyIceberg asks for vended credentials by default).
Results are checked by reading the data back through PyIceberg/pyarrow and by listing the bucket.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import httpx
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.expressions import EqualTo, GreaterThanOrEqual
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.transforms import BucketTransform, DayTransform, IdentityTransform
from pyiceberg.types import (
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

from app.ground.locations import Location
from storage.objects import S3ObjectStore
from tests.conftest import TEST_CREDENTIAL

NS = "shop"

# A small table: an id, a category (identity partition), a timestamp (day partition), and an
# int and a float column for the type-widening scenario.
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "category", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
    NestedField(4, "qty", IntegerType(), required=False),
    NestedField(5, "price", FloatType(), required=False),
)
SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="category"),
    PartitionField(source_id=3, field_id=1001, transform=DayTransform(), name="ts_day"),
)
ARROW_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("category", pa.string()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("qty", pa.int32()),
        pa.field("price", pa.float32()),
    ]
)


def rows(*ids: int) -> pa.Table:
    """Rows with deterministic values derived from the id: category a/b, two different days."""
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "category": "a" if i % 2 else "b",
                "ts": datetime(2024, 1, 1 + i % 2, 12, 0, 0),
                "qty": i * 10,
                "price": i + 0.5,
            }
            for i in ids
        ],
        schema=ARROW_SCHEMA,
    )


def ids_of(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def new_catalog(server) -> RestCatalog:
    return RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)


@pytest.fixture
def catalog(server, clean_catalog) -> RestCatalog:
    cat = new_catalog(server)
    cat.create_namespace(NS)
    return cat


@pytest.fixture(params=["vended-credentials", "remote-signing"])
def access_catalog(request, server, clean_catalog) -> RestCatalog:
    """The catalog as PyIceberg reaches the default warehouse's storage either way it can: with
    the temporary credentials it asks for by default, or through remote signing when it asks for
    that (the data then goes through its FsspecFileIO and Growler's signer, on one I/O thread:
    ``pyiceberg_io_on_one_thread`` says why)."""
    if request.param == "remote-signing":
        request.getfixturevalue("pyiceberg_io_on_one_thread")
    cat = RestCatalog(
        "growler",
        uri=server.url,
        warehouse=server.warehouse,
        credential=TEST_CREDENTIAL,
        **{"header.X-Iceberg-Access-Delegation": request.param},
    )
    cat.create_namespace(NS)
    return cat


@pytest.fixture
def objects(settings) -> S3ObjectStore:
    return S3ObjectStore(settings.s3)


def objects_under(objects: S3ObjectStore, location: str) -> list[str]:
    return sorted(found.uri for found in objects.list(Location.parse(location)))


def create_sales(catalog: RestCatalog, name: str = "sales", **kwargs):
    return catalog.create_table((NS, name), schema=SCHEMA, partition_spec=SPEC, **kwargs)


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


# ------------------------------------------------------------------------------------------
# Lifecycle: staged create, rename, exists/list, purge, register
# ------------------------------------------------------------------------------------------


def test_staged_create_transaction(access_catalog, objects):
    txn = access_catalog.create_table_transaction((NS, "staged"), schema=SCHEMA, partition_spec=SPEC)
    # nothing exists until the transaction commits
    assert not access_catalog.table_exists((NS, "staged"))
    txn.set_properties({"owner": "etl"})
    txn.append(rows(1, 2))
    table = txn.commit_transaction()

    assert access_catalog.table_exists((NS, "staged"))
    loaded = access_catalog.load_table((NS, "staged"))
    assert loaded.metadata_location == table.metadata_location
    assert loaded.properties["owner"] == "etl"
    assert [f.name for f in loaded.spec().fields] == ["category", "ts_day"]
    assert len(loaded.snapshots()) == 1
    assert ids_of(loaded.scan().to_arrow()) == [1, 2]
    assert objects.exists(Location.parse(loaded.metadata_location))


def test_staged_create_without_data(catalog):
    txn = catalog.create_table_transaction((NS, "empty"), schema=SCHEMA, partition_spec=SPEC)
    txn.set_properties({"owner": "etl"})
    txn.commit_transaction()

    loaded = catalog.load_table((NS, "empty"))
    assert loaded.properties["owner"] == "etl"
    assert [f.name for f in loaded.schema().fields] == ["id", "category", "ts", "qty", "price"]
    assert [f.name for f in loaded.spec().fields] == ["category", "ts_day"]
    assert loaded.current_snapshot() is None
    assert loaded.scan().to_arrow().num_rows == 0


def test_concurrent_staged_creates_only_one_wins(catalog):
    first = catalog.create_table_transaction((NS, "race"), schema=SCHEMA)
    second = catalog.create_table_transaction((NS, "race"), schema=SCHEMA)
    first.set_properties({"winner": "first"})
    second.set_properties({"winner": "second"})
    first.commit_transaction()
    with pytest.raises(CommitFailedException, match="already exists"):  # assert-create
        second.commit_transaction()
    assert catalog.load_table((NS, "race")).properties["winner"] == "first"


def test_stage_create_of_existing_table_is_refused(catalog):
    # Java's CatalogHandlers.stageTableCreate: 409 AlreadyExistsException, as for a plain create
    create_sales(catalog)
    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table_transaction((NS, "sales"), schema=SCHEMA)


def test_rename_exists_and_list(catalog):
    catalog.create_namespace("archive")
    table = create_sales(catalog)
    table.append(rows(1, 2))
    create_sales(catalog, "returns")

    assert sorted(catalog.list_tables(NS)) == [(NS, "returns"), (NS, "sales")]
    assert catalog.table_exists((NS, "sales"))
    assert not catalog.table_exists((NS, "nothing"))

    renamed = catalog.rename_table((NS, "sales"), ("archive", "sales_2024"))
    assert renamed.name() == ("archive", "sales_2024")
    assert renamed.metadata.table_uuid == table.metadata.table_uuid
    assert ids_of(renamed.scan().to_arrow()) == [1, 2]
    assert not catalog.table_exists((NS, "sales"))
    assert catalog.list_tables(NS) == [(NS, "returns")]
    assert catalog.list_tables("archive") == [("archive", "sales_2024")]

    # the renamed table keeps taking writes
    renamed.append(rows(3))
    assert ids_of(catalog.load_table(("archive", "sales_2024")).scan().to_arrow()) == [1, 2, 3]


def test_drop_with_purge_removes_objects(catalog, objects, server):
    table = create_sales(catalog)
    table.append(rows(1, 2))
    table.append(rows(3))
    location = table.location()
    before = objects_under(objects, location)
    assert any(o.endswith(".parquet") for o in before)
    assert any(o.endswith(".avro") for o in before)  # manifests and manifest lists
    assert sum(o.endswith(".metadata.json") for o in before) == 3

    catalog.purge_table((NS, "sales"))
    assert not catalog.table_exists((NS, "sales"))
    with pytest.raises(NoSuchTableError):
        catalog.load_table((NS, "sales"))

    # The default soft policy (issue 35) keeps the table in the recycle bin, its files in place,
    # until its retention ends; an administrator's purge runs the purge now.
    assert objects_under(objects, location) == before
    bin_url = f"{server.url}/management/v1/warehouses/{server.warehouse}/bin"
    (unit,) = httpx.get(bin_url, timeout=30).json()["units"]
    assert unit["name"] == "sales" and unit["purge-requested"] is True
    assert httpx.delete(f"{bin_url}/{unit['id']}", timeout=30).status_code == 204
    # the purge runs in the background; give it a few seconds
    deadline = time.monotonic() + 15
    remaining = objects_under(objects, location)
    while remaining and time.monotonic() < deadline:
        time.sleep(0.2)
        remaining = objects_under(objects, location)
    assert remaining == []


def test_drop_without_purge_keeps_objects(catalog, objects):
    table = create_sales(catalog)
    table.append(rows(1))
    before = objects_under(objects, table.location())
    catalog.drop_table((NS, "sales"))
    assert not catalog.table_exists((NS, "sales"))
    time.sleep(0.5)
    assert objects_under(objects, table.location()) == before


def test_register_table_from_metadata_file(server, clean_catalog, hard_policy_warehouse, pyiceberg_io_on_one_thread):
    # On a hard-policy warehouse: a dropped table's location is free at once for a registration
    # (the default soft policy keeps it owned by the dropped table in its recycle bin, issue 35).
    # Its tables are reached through remote signing (FsspecFileIO: an append failed with
    # AccessDenied in a run), hence PyIceberg's I/O on one thread (pyiceberg_io_on_one_thread).
    catalog = RestCatalog("growler", uri=server.url, warehouse=hard_policy_warehouse, credential=TEST_CREDENTIAL)
    catalog.create_namespace(NS)
    table = create_sales(catalog)
    table.append(rows(1, 2))
    table.append(rows(3))
    metadata_location = table.metadata_location
    snapshot_id = table.current_snapshot().snapshot_id
    catalog.drop_table((NS, "sales"))  # files stay

    registered = catalog.register_table((NS, "restored"), metadata_location)
    assert registered.metadata_location == metadata_location
    assert registered.metadata.table_uuid == table.metadata.table_uuid
    assert registered.current_snapshot().snapshot_id == snapshot_id
    assert ids_of(registered.scan().to_arrow()) == [1, 2, 3]
    assert catalog.list_tables(NS) == [(NS, "restored")]

    # the registered table is a normal table: it takes writes, its next file follows on
    assert metadata_location.rsplit("/", 1)[1].startswith("00002-")
    registered.append(rows(4))
    assert registered.metadata_location.rsplit("/", 1)[1].startswith("00003-")
    assert registered.metadata.metadata_log[-1].metadata_file == metadata_location
    assert ids_of(catalog.load_table((NS, "restored")).scan().to_arrow()) == [1, 2, 3, 4]

    with pytest.raises(TableAlreadyExistsError):
        catalog.register_table((NS, "restored"), metadata_location)


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------


def test_missing_and_duplicate_tables(catalog):
    with pytest.raises(NoSuchTableError):
        catalog.load_table((NS, "missing"))
    with pytest.raises(NoSuchTableError):
        catalog.drop_table((NS, "missing"))
    with pytest.raises(NoSuchTableError):
        catalog.rename_table((NS, "missing"), (NS, "other"))

    create_sales(catalog)
    with pytest.raises(TableAlreadyExistsError):
        create_sales(catalog)
    create_sales(catalog, "second")
    with pytest.raises(TableAlreadyExistsError):
        catalog.rename_table((NS, "second"), (NS, "sales"))


def test_missing_namespace(catalog):
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table(("nowhere", "t"), schema=SCHEMA)
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("nowhere")
    with pytest.raises((NoSuchNamespaceError, NoSuchTableError)):
        catalog.load_table(("nowhere", "t"))
    create_sales(catalog)
    with pytest.raises(NoSuchNamespaceError):
        catalog.rename_table((NS, "sales"), ("nowhere", "sales"))
    assert catalog.table_exists((NS, "sales"))


def test_stale_schema_commit_from_second_client_fails(server, catalog):
    create_sales(catalog)
    first = catalog.load_table((NS, "sales"))
    second = new_catalog(server).load_table((NS, "sales"))

    with first.update_schema() as update:
        update.add_column("from_first", StringType())
    with pytest.raises(CommitFailedException, match="Requirement failed"):
        with second.update_schema() as update:  # based on the old schema: assert-current-schema-id fails
            update.add_column("from_second", StringType())

    names = [f.name for f in catalog.load_table((NS, "sales")).schema().fields]
    assert "from_first" in names and "from_second" not in names

    # after a refresh the second client's change applies
    with second.refresh().update_schema() as update:
        update.add_column("from_second", StringType())
    names = [f.name for f in catalog.load_table((NS, "sales")).schema().fields]
    assert names[-2:] == ["from_first", "from_second"]


def test_stale_append_from_second_client_fails_without_retries(server, catalog):
    # no client-side retries, so the catalog's 409 reaches the caller
    create_sales(catalog, properties={"commit.retry.num-retries": "0"})
    first = catalog.load_table((NS, "sales"))
    second = new_catalog(server).load_table((NS, "sales"))

    first.append(rows(1))
    with pytest.raises(CommitFailedException, match="branch main was created concurrently"):
        second.append(rows(2))  # assert-ref-snapshot-id main: expected none, found first's snapshot
    assert ids_of(catalog.load_table((NS, "sales")).scan().to_arrow()) == [1]


def test_stale_append_is_retried_by_pyiceberg(server, catalog):
    create_sales(catalog)
    first = catalog.load_table((NS, "sales"))
    second = new_catalog(server).load_table((NS, "sales"))

    first.append(rows(1))
    second.append(rows(2))  # 409 from Growler, PyIceberg refreshes and re-commits
    final = catalog.load_table((NS, "sales"))
    assert ids_of(final.scan().to_arrow()) == [1, 2]
    assert len(final.snapshots()) == 2
