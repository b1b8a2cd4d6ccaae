"""Real clients read and write through remote signing, with no S3 key in their configuration.

A gunicorn server serves a warehouse in ``remote-signing`` mode; PyIceberg (its FsspecFileIO
with the ``S3V4RestSigner``, which needs ``s3fs``) is given the catalog URL and the warehouse
name, nothing else. Every S3 request it makes is signed by Growler's ``/sign`` endpoint, and
the keys never reach it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import datetime

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from app.locations import Location
from storage.objects import S3ObjectStore
from tests.conftest import TEST_BUCKET
from tests.integration.conftest import Server, start_server, stop_server

WAREHOUSE = "signed-clients"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "ts", TimestampType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string()), pa.field("ts", pa.timestamp("us"))])


def _rows(*ids: int) -> pa.Table:
    return pa.Table.from_pylist(
        [{"id": i, "name": f"n{i}", "ts": datetime(2024, 1, 1 + i % 3)} for i in ids], schema=ARROW
    )


@pytest.fixture(scope="module")
def signing_settings(settings):
    return dataclasses.replace(
        settings,
        warehouse=WAREHOUSE,
        warehouse_location=f"s3://{TEST_BUCKET}/{WAREHOUSE}/",
        storage_credentials_mode="remote-signing",
    )


@pytest.fixture(scope="module")
def signing_server(signing_settings, app, tmp_path_factory) -> Iterator[Server]:
    running = start_server(signing_settings, tmp_path_factory.mktemp("gunicorn-signing"))
    try:
        yield running
    finally:
        stop_server(running)


def test_pyiceberg_round_trip_through_remote_signing(signing_server, signing_settings):
    catalog = RestCatalog("signed", uri=signing_server.url, warehouse=WAREHOUSE)
    assert not any("access-key" in key or "secret" in key for key in catalog.properties)
    catalog.create_namespace("rs")
    table = catalog.create_table("rs.events", schema=SCHEMA)
    assert table.io.properties["s3.remote-signing-enabled"] == "true"
    assert type(table.io).__name__ == "FsspecFileIO"  # the FileIO that signs through the catalog
    assert "s3.secret-access-key" not in table.io.properties
    assert "s3.access-key-id" not in table.io.properties

    table.append(_rows(1, 2, 3))
    assert sorted(catalog.load_table("rs.events").scan().to_arrow()["id"].to_pylist()) == [1, 2, 3]

    table = catalog.load_table("rs.events")
    table.overwrite(_rows(10, 11))
    assert sorted(table.scan().to_arrow()["id"].to_pylist()) == [10, 11]

    table.delete(EqualTo("id", 10))
    table = catalog.load_table("rs.events")
    assert table.scan().to_arrow()["id"].to_pylist() == [11]
    assert len(table.metadata.snapshots) >= 3

    store = S3ObjectStore(signing_settings.s3)
    location = Location.parse(table.location())
    written = [found.uri for found in store.list(location)]
    assert any(uri.endswith(".parquet") for uri in written) and any("metadata" in uri for uri in written)

    catalog.purge_table("rs.events")
    assert not catalog.table_exists("rs.events")


def test_signing_log_holds_no_secret(signing_server, signing_settings):
    catalog = RestCatalog("signed", uri=signing_server.url, warehouse=WAREHOUSE)
    catalog.create_namespace_if_not_exists("logs")
    table = catalog.create_table_if_not_exists("logs.t", schema=SCHEMA)
    table.append(_rows(1))
    assert table.scan().to_arrow().num_rows == 1
    log = signing_server.log()
    assert "signRequest" in log
    assert signing_settings.s3.secret_key not in log
    assert "Signature=" not in log
