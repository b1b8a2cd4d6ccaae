"""Creates and commits send their transaction's statements in pipeline mode (storage.db.pipelined,
issue 47): what a refusal sent before it was refused is rolled back, a statement's error surfaces
where the caller reads it, and every connection goes back to the pool outside a transaction."""

from __future__ import annotations

import psycopg
import pytest

from app.composition.services import services_of
from app.ground.errors import AlreadyExists, BadRequest
from storage.db import pipelined
from storage.entries import MetadataSwap
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url


def _entry(db, name: str) -> tuple[int, str, str]:
    return db.execute("SELECT id, metadata_location, location FROM catalog_entry WHERE name = %s", (name,)).fetchone()


def _idle_everywhere(database) -> None:
    """Every pooled connection can be checked out and is outside any transaction."""
    held = [database.pool.getconn() for _ in range(database.pool.get_stats()["pool_size"])]
    try:
        for conn in held:
            assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert conn.execute("SELECT 1").fetchone()["?column?"] == 1
    finally:
        for conn in held:
            database.pool.putconn(conn)


def _table_with_a_pending_file(client, app, db, file: str):
    """Table db.t, and a pending record of a new metadata file ``file`` in its metadata folder:
    (the repository, the entry's id, its current metadata location, its location, the file)."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    repository = services_of(app.app).tables.repository
    entry_id, current, location = _entry(db, "t")
    new = f"{location}/metadata/{file}"
    repository.record_pending([new])
    return repository, entry_id, current, location, new


def test_a_lost_race_settles_nothing_and_changes_nothing(client, app, db):
    """The settling of the new file's pending record is sent before the compare-and-set's result
    is read: on a lost race it is rolled back, so the sweeper still finds the file."""
    repository, entry_id, current, location, loser = _table_with_a_pending_file(
        client, app, db, "00001-lost-race.metadata.json"
    )
    swap = MetadataSwap(entry_id, f"{location}/metadata/00000-not-current.metadata.json", loser, "{}", location)

    assert repository.swap_metadata([swap], events=[]) is False

    assert _entry(db, "t")[1] == current
    assert db.execute("SELECT count(*) FROM pending_object WHERE location = %s", (loser,)).fetchone()[0] == 1
    _idle_everywhere(repository.db)
    db.execute("DELETE FROM pending_object WHERE location = %s", (loser,))


def test_a_commit_refused_by_its_caller_after_the_swap_is_rolled_back(client, app, db):
    """``before_commit`` raising (the file's write failed) after the swap and the settling were
    sent and read: nothing of the transaction stays."""
    repository, entry_id, current, location, new = _table_with_a_pending_file(
        client, app, db, "00001-refused.metadata.json"
    )

    def write_failed() -> None:
        raise BadRequest("the write failed")

    with pytest.raises(BadRequest):
        repository.swap_metadata(
            [MetadataSwap(entry_id, current, new, "{}", location)], before_commit=write_failed, events=[]
        )

    assert _entry(db, "t")[1] == current
    assert db.execute("SELECT count(*) FROM pending_object WHERE location = %s", (new,)).fetchone()[0] == 1
    _idle_everywhere(repository.db)
    db.execute("DELETE FROM pending_object WHERE location = %s", (new,))


def test_a_taken_name_is_already_exists_and_the_connection_stays_usable(client, app, db, caplog):
    """The insert fails in the pipeline with the claim's locks sent after it: the client gets the
    reference catalog's AlreadyExists, the pool's connections are idle, the next create works."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    assert client.post(tables_url(), json=create_request("t")).status_code == 200
    again = client.post(tables_url(), json=create_request("t"))
    assert again.status_code == 409, again.text
    assert again.json()["error"]["type"] == "AlreadyExistsException"
    assert again.json()["error"]["message"] == "Table already exists: db.t"
    assert [r.getMessage() for r in caplog.records if r.name == "psycopg"] == []  # the aborted locks read quietly
    _idle_everywhere(services_of(app.app).tables.repository.db)
    assert client.post(tables_url(), json=create_request("u")).status_code == 200
    assert client.get(table_url("u")).status_code == 200


def test_a_statement_error_surfaces_where_it_is_read_and_nothing_is_committed(app, db, caplog):
    """``pipelined`` on its own: the failing statement's error comes out of the fetch that reads
    it (through storage's translation), the statement sent after it is passed over without a
    logged error, and what was sent before it is not committed."""
    database = services_of(app.app).tables.repository.db
    marker = "pipelined-probe"
    with pytest.raises(AlreadyExists) as refused:
        with database.connection() as conn, pipelined(conn):
            conn.execute("INSERT INTO pending_object (location) VALUES (%s)", (marker,))
            duplicate = conn.execute("INSERT INTO pending_object (location) VALUES (%s) RETURNING location", (marker,))
            conn.execute("SELECT 1")  # sent after the failing one: aborted with the pipeline
            duplicate.fetchone()
    assert isinstance(refused.value.__cause__, psycopg.errors.UniqueViolation)
    assert [r.getMessage() for r in caplog.records if r.name == "psycopg"] == []
    assert db.execute("SELECT count(*) FROM pending_object WHERE location = %s", (marker,)).fetchone()[0] == 0
    _idle_everywhere(database)


def test_a_refusal_caught_inside_the_connection_commits_nothing(app, db):
    """The caller raises and catches its own refusal before the connection goes back to the pool
    (as ``swap_metadata`` does with a lost race): the statements it sent are rolled back, not
    committed by the pool's return."""
    database = services_of(app.app).tables.repository.db
    marker = "pipelined-refused"
    with database.connection() as conn:
        try:
            with pipelined(conn):
                conn.execute("INSERT INTO pending_object (location) VALUES (%s)", (marker,))
                raise AlreadyExists("refused by the caller")
        except AlreadyExists:
            pass
        assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert db.execute("SELECT count(*) FROM pending_object WHERE location = %s", (marker,)).fetchone()[0] == 0
