"""DuckDB (its ``iceberg`` extension) as a client of Growler, on the product defaults.

DuckDB is configured as a user would: an OAuth2 client credential and the catalog's URL, nothing
about storage. Where the bytes are and how to reach them come from the catalog: DuckDB asks for
vended credentials, and Growler (credentials mode ``sts``) answers loadTable with table-scoped
temporary S3 credentials, from which DuckDB builds an S3 secret scoped to the table's location.

The extensions come from their PyPI wheels (requirements-test.txt), loaded from the wheel's file
with autoinstall/autoload off: nothing is fetched from extensions.duckdb.org.

What a user runs against ``make run`` (the duckdb CLI or any DuckDB 1.5 client; ``<client_id>``
and ``<secret>`` are the two halves of ``.growler/credential``, ``client_id:secret``)::

    INSTALL httpfs; INSTALL avro; INSTALL iceberg;
    LOAD httpfs; LOAD avro; LOAD iceberg;
    CREATE SECRET growler_secret (
        TYPE iceberg,
        CLIENT_ID '<client_id>',
        CLIENT_SECRET '<secret>',
        OAUTH2_SERVER_URI 'http://127.0.0.1:8181/v1/oauth/tokens'
    );
    ATTACH 'warehouse' AS growler (
        TYPE iceberg,
        ENDPOINT 'http://127.0.0.1:8181',
        SECRET growler_secret,
        ACCESS_DELEGATION_MODE 'vended_credentials'  -- DuckDB's default, spelled out
    );
    SHOW ALL TABLES;
    SELECT * FROM growler.<namespace>.<table>;
    INSERT INTO growler.<namespace>.<table> VALUES (...);
    CREATE TABLE growler.<namespace>.<new table> AS SELECT ...;
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import DoubleType, LongType, NestedField, StringType

from scripts.duckdb_growler import attached
from tests.conftest import TEST_ACCESS_KEY, TEST_CLIENT_ID, TEST_CLIENT_SECRET, TEST_CREDENTIAL

NS = "ducks"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "name", StringType(), required=False),
    NestedField(3, "weight", DoubleType(), required=False),
)


def birds(*rows: tuple[int, str, float]) -> list[dict]:
    return [{"id": i, "name": name, "weight": weight} for i, name, weight in rows]


@pytest.fixture
def catalog(server, clean_catalog) -> RestCatalog:
    cat = RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)
    cat.create_namespace(NS)
    return cat


@pytest.fixture
def duck(server) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB with Growler's default warehouse attached as ``growler``."""
    con = attached(server.url, server.warehouse, TEST_CLIENT_ID, TEST_CLIENT_SECRET)
    try:
        yield con
    finally:
        con.close()


def vended_s3_secrets(con: duckdb.DuckDBPyConnection) -> list[tuple[list[str], dict[str, str]]]:
    """The S3 secrets DuckDB made from loadTable responses: (scope, fields of the redacted string)."""
    found = con.execute("SELECT scope, secret_string FROM duckdb_secrets() WHERE type = 's3'").fetchall()
    return [(scope, dict(field.partition("=")[::2] for field in text.split(";"))) for scope, text in found]


def test_duckdb_reads_a_table_pyiceberg_wrote(catalog, duck):
    table = catalog.create_table((NS, "birds"), schema=SCHEMA)
    appended = birds((1, "mallard", 1.1), (2, "teal", 0.35), (3, "eider", 2.2))
    table.append(pa.Table.from_pylist(appended, schema=SCHEMA.as_arrow()))

    listed = duck.execute("SELECT database, schema, name FROM (SHOW ALL TABLES)").fetchall()
    assert ("growler", NS, "birds") in listed
    in_schema = duck.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_catalog = 'growler' AND table_schema = ?",
        [NS],
    ).fetchall()
    assert in_schema == [("birds",)]

    read = duck.execute(f"SELECT id, name, weight FROM growler.{NS}.birds ORDER BY id").fetchall()
    assert read == [(r["id"], r["name"], r["weight"]) for r in appended]

    # the bytes were read with table-scoped temporary credentials from the catalog, not static keys
    secrets = vended_s3_secrets(duck)
    assert secrets, "DuckDB made no S3 secret from the catalog's vended credentials"
    for scope, fields in secrets:
        assert scope == [table.location()]
        assert fields["key_id"] != TEST_ACCESS_KEY
        assert fields["session_token"] == "redacted"  # present (DuckDB redacts its value)
        assert fields["url_style"] == "path"
        assert fields["use_ssl"] == "false"


def test_pyiceberg_reads_rows_duckdb_inserted(catalog, duck):
    table = catalog.create_table((NS, "flock"), schema=SCHEMA)
    table.append(pa.Table.from_pylist(birds((1, "mallard", 1.1)), schema=SCHEMA.as_arrow()))

    duck.execute(f"INSERT INTO growler.{NS}.flock VALUES (2, 'teal', 0.35), (3, 'eider', 2.2), (4, 'smew', 0.6)")

    table = catalog.load_table((NS, "flock"))
    snapshot = table.current_snapshot()
    assert snapshot is not None and len(table.snapshots()) == 2
    assert snapshot.summary.operation.value == "append"
    assert snapshot.summary["added-records"] == "3"
    read = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert read == birds((1, "mallard", 1.1), (2, "teal", 0.35), (3, "eider", 2.2), (4, "smew", 0.6))
    for task in table.scan().plan_files():
        assert task.file.file_path.startswith(f"{table.location()}/data/")

    # and DuckDB sees its own commit through the catalog
    assert duck.execute(f"SELECT count(*) FROM growler.{NS}.flock").fetchone() == (4,)


def test_duckdb_creates_a_table_as_select_that_pyiceberg_reads(catalog, duck):
    """DuckDB's CREATE TABLE is a staged create (its data written before the create commits, its
    partition spec and sort order added before its schema is made current)."""
    duck.execute(f"CREATE TABLE growler.{NS}.made AS SELECT * FROM (VALUES (1, 'mallard'), (2, 'teal')) AS t(id, name)")
    table = catalog.load_table((NS, "made"))
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "mallard"},
        {"id": 2, "name": "teal"},
    ]
    for task in table.scan().plan_files():
        assert task.file.file_path.startswith(f"{table.location()}/")
