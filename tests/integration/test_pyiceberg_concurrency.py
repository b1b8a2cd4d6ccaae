"""Eight PyIceberg writers appending to one table at once, on the defaults.

Every writer is a PyIceberg catalog of its own (its own HTTP session and FileIO), released by a
barrier so their commits race. A lost race must end in PyIceberg's own retry or a clean
``CommitFailedException`` - never a storage permission error - and every append PyIceberg
acknowledged is in the table exactly once. (Through remote signing, PyIceberg 0.12's threads race
on one shared S3 client's signer and send requests unsigned: a client bug Growler cannot prevent,
upstream apache/iceberg-python issue 3896; its defaults use vended credentials and no signer.)
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from tests.conftest import TEST_CREDENTIAL

pytestmark = pytest.mark.slow

WRITERS = 8
APPENDS = 3
NS = "racing"
SCHEMA = Schema(NestedField(1, "writer", StringType(), required=False), NestedField(2, "n", LongType(), required=False))


def catalog(server) -> RestCatalog:
    """As a user configures PyIceberg: it asks for vended credentials by default."""
    return RestCatalog("growler", uri=server.url, warehouse=server.warehouse, credential=TEST_CREDENTIAL)


def test_racing_appends_end_in_retries_or_clean_conflicts(server, clean_catalog):
    setup = catalog(server)
    setup.create_namespace(NS)
    setup.create_table((NS, "events"), schema=SCHEMA, properties={"commit.retry.num-retries": "20"})
    start = threading.Barrier(WRITERS)

    def writer(index: int) -> tuple[list[int], int]:
        table = catalog(server).load_table((NS, "events"))
        acknowledged, conflicts = [], 0
        start.wait(timeout=60)
        for n in range(APPENDS):
            rows = pa.Table.from_pylist([{"writer": f"w{index}", "n": n}], schema=SCHEMA.as_arrow())
            try:
                table.append(rows)
                acknowledged.append(n)
            except CommitFailedException:  # a clean conflict after PyIceberg's own retries
                conflicts += 1
            table = table.refresh()
        return acknowledged, conflicts

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        results = list(pool.map(writer, range(WRITERS)))  # any other exception (PermissionError) fails here

    table = setup.load_table((NS, "events"))
    found = sorted((row["writer"], row["n"]) for row in table.scan().to_arrow().to_pylist())
    expected = sorted((f"w{index}", n) for index, (acked, _) in enumerate(results) for n in acked)
    assert found == expected  # every acknowledged append exactly once, nothing else
