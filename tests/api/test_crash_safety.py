"""Metadata objects of commits that never happened are reclaimed; committed ones never are."""

from __future__ import annotations

import threading

from app.composition.services import services_of
from app.ground.errors import ServiceUnavailable
from app.ground.locations import Location
from app.housekeeping import Housekeeper
from storage.idempotency import IdempotencyRepository
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url


def housekeeper(app) -> Housekeeper:
    tables = services_of(app.app).tables
    return Housekeeper(
        tables.repository, tables.objects, IdempotencyRepository(tables.repository.db), threading.Event()
    )


def test_committed_objects_leave_no_pending_record(client, db):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    location = client.post(tables_url(), json=create_request("t")).json()["metadata"]["location"]
    client.post(
        table_url("t"), json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    )
    assert pending_under(db, location) == 0


def pending_under(db, location: str) -> int:
    """This table's pending records (a test of dependency failures may leave others behind)."""
    return db.execute(
        "SELECT count(*) FROM pending_object WHERE starts_with(location, %s)", (location + "/",)
    ).fetchone()[0]


def test_orphan_of_a_dead_worker_is_swept(client, app, db):
    """What a worker killed between writing the file and swapping the pointer leaves behind."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    current = client.post(tables_url(), json=create_request("t")).json()
    tables = services_of(app.app).tables
    orphan = current["metadata"]["location"] + "/metadata/00001-dead-worker.metadata.json"
    tables.repository.record_pending([orphan])
    tables.objects.write_new(Location.parse(orphan), b"{}")
    # a pending record naming the *current* file (cannot happen, but must never cost the table)
    tables.repository.record_pending([current["metadata-location"]])

    assert housekeeper(app).sweep_pending(grace_s=3600) == 0  # young: may still be committing
    assert tables.objects.exists(Location.parse(orphan))

    db.execute(
        "UPDATE pending_object SET created_at = now() - interval '2 hours' WHERE starts_with(location, %s)",
        (current["metadata"]["location"] + "/",),
    )
    # (the app's own housekeeping thread may get there first: assert the outcome, not who did it)
    assert housekeeper(app).sweep_pending(grace_s=3600) in (0, 1)
    assert not tables.objects.exists(Location.parse(orphan))
    assert tables.objects.exists(Location.parse(current["metadata-location"]))
    assert pending_under(db, current["metadata"]["location"]) == 0
    assert client.get(table_url("t")).status_code == 200


def test_failed_swap_deletes_its_file(client, app, monkeypatch):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    tables = services_of(app.app).tables
    before = set(tables.objects.list(Location.parse("s3://growler-test-warehouse/")))
    monkeypatch.setattr(tables.repository, "swap_metadata", lambda swaps, before_commit, events: False)
    response = client.post(
        table_url("t"), json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    )
    assert response.status_code == 409
    assert set(tables.objects.list(Location.parse("s3://growler-test-warehouse/"))) == before


def _break_after_swap(monkeypatch, repository, *, committed: bool, database_answers: bool):
    """The connection dies after the swap statement was sent (it may or may not have applied)."""
    from app.ground.errors import ServiceUnavailable
    from storage.entries import CommitOutcomeUnknown

    real_swap = repository.swap_metadata

    def swap(swaps, before_commit, events):
        if committed:
            real_swap(swaps, before_commit=before_commit, events=events)
        raise CommitOutcomeUnknown("server closed the connection unexpectedly")

    monkeypatch.setattr(repository, "swap_metadata", swap)
    if not database_answers:

        def unreachable(*_args):
            raise ServiceUnavailable("down")

        monkeypatch.setattr(repository, "current_metadata_location", unreachable)


def _set_property(client):
    return client.post(
        table_url("t"), json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    )


def test_commit_outcome_unknown_only_when_it_cannot_be_known(client, app, monkeypatch):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    created = client.post(tables_url(), json=create_request("t")).json()
    repository = services_of(app.app).tables.repository
    _break_after_swap(monkeypatch, repository, committed=False, database_answers=False)
    response = _set_property(client)
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "CommitStateUnknownException"
    monkeypatch.undo()
    assert client.get(table_url("t")).json()["metadata-location"] == created["metadata-location"]


def test_outcome_is_looked_up_when_the_database_answers(client, app, monkeypatch):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    repository = services_of(app.app).tables.repository
    _break_after_swap(monkeypatch, repository, committed=True, database_answers=True)
    response = _set_property(client)
    assert response.status_code == 200, response.text
    monkeypatch.undo()
    loaded = client.get(table_url("t")).json()
    assert loaded["metadata-location"] == response.json()["metadata-location"]
    assert loaded["metadata"]["properties"]["a"] == "1"


class _WriteAfterTheSwap:
    """Holds each metadata write until the commit's database step has run (forced, not hoped for).

    If the write came first, as it once did, it would wait for a swap that never starts: the test
    fails on the timeout instead of passing by luck.
    """

    def __init__(self, monkeypatch, tables, db, *, swap=None, fail=False) -> None:
        self.swapped = threading.Event()
        self.pointer_while_writing: list[str] = []
        self.db, self.fail = db, fail
        real_swap, real_write = swap or tables.repository.swap_metadata, tables.objects.write_new

        def swap_then_signal(swaps, before_commit, events):
            def signal_then_wait():
                self.swapped.set()
                before_commit()

            try:
                return real_swap(swaps, before_commit=signal_then_wait, events=events)
            finally:
                self.swapped.set()  # a lost race does not get to its commit

        def write_once_swapped(location, data, *args):
            assert self.swapped.wait(10), "the database step did not run while the file was written"
            self.pointer_while_writing.append(self.pointer())
            if self.fail:
                raise ServiceUnavailable("Object storage is unavailable, retry later")
            real_write(location, data, *args)

        monkeypatch.setattr(tables.repository, "swap_metadata", swap_then_signal)
        monkeypatch.setattr(tables.objects, "write_new", write_once_swapped)

    def pointer(self) -> str:
        return self.db.execute("SELECT metadata_location FROM catalog_entry WHERE name = 't'").fetchone()[0]


def test_the_swap_runs_while_the_file_is_written_and_commits_after_it(client, app, db, monkeypatch):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    created = client.post(tables_url(), json=create_request("t")).json()
    tables = services_of(app.app).tables
    held = _WriteAfterTheSwap(monkeypatch, tables, db)
    response = _set_property(client)
    assert response.status_code == 200, response.text
    # while the file was being written the swap was sent but not committed: nobody saw the new
    # pointer before its file existed
    assert held.pointer_while_writing == [created["metadata-location"]]
    assert held.pointer() == response.json()["metadata-location"]
    assert tables.objects.exists(Location.parse(response.json()["metadata-location"]))
    assert _pending_of_table(db) == []


def test_a_write_failing_under_the_swap_rolls_it_back(client, app, db, monkeypatch):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    created = client.post(tables_url(), json=create_request("t")).json()
    tables = services_of(app.app).tables
    before = set(tables.objects.list(Location.parse("s3://growler-test-warehouse/")))
    held = _WriteAfterTheSwap(monkeypatch, tables, db, fail=True)
    response = _set_property(client)
    assert response.status_code == 503, response.text
    assert response.json()["error"]["type"] == "ServiceUnavailableException"
    assert held.pointer() == created["metadata-location"]
    assert set(tables.objects.list(Location.parse("s3://growler-test-warehouse/"))) == before
    assert _pending_of_table(db) == []


def test_a_lost_race_deletes_its_file_after_the_write_ends(client, app, db, monkeypatch):
    """The compare-and-set fails before the (held) write ends: the file is deleted once it is
    there, not before - else the write would land after the delete and leave an orphan."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    tables = services_of(app.app).tables
    before = set(tables.objects.list(Location.parse("s3://growler-test-warehouse/")))
    _WriteAfterTheSwap(monkeypatch, tables, db, swap=lambda swaps, before_commit, events: False)
    response = _set_property(client)
    assert response.status_code == 409, response.text
    assert set(tables.objects.list(Location.parse("s3://growler-test-warehouse/"))) == before
    assert _pending_of_table(db) == []


def test_a_create_inserts_while_its_file_is_written(client, app, db, monkeypatch):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    tables = services_of(app.app).tables
    real_insert, real_write = tables.repository.insert_entry, tables.objects.write_new
    inserted = threading.Event()

    def insert_then_signal(*args, before_commit, **kwargs):
        def signal_then_wait():
            inserted.set()
            before_commit()

        return real_insert(*args, before_commit=signal_then_wait, **kwargs)

    def write_once_inserted(location, data, *args):
        assert inserted.wait(10), "the insert did not run while the file was written"
        assert db.execute("SELECT count(*) FROM catalog_entry WHERE name = 't'").fetchone()[0] == 0
        real_write(location, data, *args)

    monkeypatch.setattr(tables.repository, "insert_entry", insert_then_signal)
    monkeypatch.setattr(tables.objects, "write_new", write_once_inserted)
    response = client.post(tables_url(), json=create_request("t"))
    assert response.status_code == 200, response.text
    assert tables.objects.exists(Location.parse(response.json()["metadata-location"]))
    assert _pending_of_table(db) == []


def _pending_of_table(db) -> list[str]:
    """Pending records of this test's table ``db.t`` (other tests leave theirs, e.g. an unknown outcome)."""
    rows = db.execute(
        "SELECT p.location FROM pending_object p JOIN catalog_entry e ON p.location LIKE e.location || '/%'"
        " WHERE e.name = 't'"
    ).fetchall()
    return [row[0] for row in rows]


def test_a_name_the_store_says_is_taken_is_left_alone(client, app, db, monkeypatch):
    """The store refuses the write (If-None-Match): the object there is someone else's - it stays,
    the commit does not happen, and no pending record is left to make the sweeper delete it."""
    from app.ground.errors import AlreadyExists

    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    created = client.post(tables_url(), json=create_request("t")).json()
    tables = services_of(app.app).tables
    real_write = tables.objects.write_new
    taken: list[Location] = []

    def someone_else_was_first(location, data, *args):
        real_write(location, b"{}", *args)  # another writer's object under that name
        taken.append(location)
        raise AlreadyExists(f"write {location.uri}: object already exists")

    monkeypatch.setattr(tables.objects, "write_new", someone_else_was_first)
    response = _set_property(client)
    assert response.status_code == 409, response.text
    assert response.json()["error"]["type"] == "AlreadyExistsException"
    monkeypatch.undo()
    assert client.get(table_url("t")).json()["metadata-location"] == created["metadata-location"]
    assert [tables.objects.exists(location) for location in taken] == [True]
    assert _pending_of_table(db) == []
