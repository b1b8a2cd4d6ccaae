"""The scan-planning tests' tables, built once per module: the partitioned v2 table of
``scan_planning_support`` and one with a branch and a tag."""

from __future__ import annotations

import pytest
from pyiceberg.expressions import EqualTo, In
from pyiceberg.types import LongType

from tests.conftest import truncate_catalog
from tests.integration.scan_planning.scan_planning_support import (
    BANDS,
    NS,
    SCHEMA,
    SPEC,
    TABLE,
    add_position_deletes,
    batch,
    client_catalog,
)


@pytest.fixture(scope="module")
def table(server, app, services):
    truncate_catalog(services.database_url)
    catalog = client_catalog(server)
    catalog.create_namespace(NS)
    created = catalog.create_table((NS, TABLE), schema=SCHEMA, partition_spec=SPEC)
    for band in BANDS:
        created.append(batch(band))
    created.delete(EqualTo("id", 5))  # copy-on-write: a data file replaced, an overwrite snapshot
    # merge-on-read deletes: rows 0 and 1 of two data files of the second append
    files = sorted((t.file for t in created.scan(row_filter=In("id", {9, 10})).plan_files()), key=lambda f: f.file_path)
    assert len(files) == 2
    add_position_deletes(created, [(files[0], [0]), (files[1], [0])])
    return catalog.load_table((NS, TABLE))


@pytest.fixture(scope="module")
def refs_table(server, table):
    """main: two appends; tag v1 at the first; branch dev from it with its own append and a
    copy-on-write delete; then a column added on main (the tag's snapshot keeps the old schema)."""
    catalog = client_catalog(server)
    created = catalog.create_table((NS, "refs"), schema=SCHEMA, partition_spec=SPEC)
    created.append(batch(range(0, 8)))
    first = created.current_snapshot().snapshot_id
    created.append(batch(range(8, 16)))
    created.manage_snapshots().create_tag(first, "v1").create_branch(first, "dev").commit()
    created.append(batch(range(16, 24)), branch="dev")
    created.delete(EqualTo("id", 17), branch="dev")
    with created.update_schema() as update:
        update.add_column("extra", LongType())
    yield catalog.load_table((NS, "refs"))
    catalog.drop_table((NS, "refs"))
