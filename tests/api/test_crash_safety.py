"""Metadata objects of commits that never happened are reclaimed; committed ones never are."""

from __future__ import annotations

import threading

from app.ground.locations import Location
from app.housekeeping import Housekeeper
from storage.idempotency import IdempotencyRepository
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url


def housekeeper(app) -> Housekeeper:
    tables = app.app.extensions["growler.tables"]
    return Housekeeper(
        tables.repository, tables.objects, IdempotencyRepository(tables.repository.db), threading.Event()
    )


def test_committed_objects_leave_no_pending_record(client, db):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    client.post(
        table_url("t"), json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    )
    assert db.execute("SELECT count(*) FROM pending_object").fetchone()[0] == 0


def test_orphan_of_a_dead_worker_is_swept(client, app, db):
    """What a worker killed between writing the file and swapping the pointer leaves behind."""
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    current = client.post(tables_url(), json=create_request("t")).json()
    tables = app.app.extensions["growler.tables"]
    orphan = current["metadata"]["location"] + "/metadata/00001-dead-worker.metadata.json"
    tables.repository.record_pending([orphan])
    tables.objects.write_new(Location.parse(orphan), b"{}")
    # a pending record naming the *current* file (cannot happen, but must never cost the table)
    tables.repository.record_pending([current["metadata-location"]])

    assert housekeeper(app).sweep_pending(grace_s=3600) == 0  # young: may still be committing
    assert tables.objects.exists(Location.parse(orphan))

    db.execute("UPDATE pending_object SET created_at = now() - interval '2 hours'")
    # (the app's own housekeeping thread may get there first: assert the outcome, not who did it)
    assert housekeeper(app).sweep_pending(grace_s=3600) in (0, 1)
    assert not tables.objects.exists(Location.parse(orphan))
    assert tables.objects.exists(Location.parse(current["metadata-location"]))
    assert db.execute("SELECT count(*) FROM pending_object").fetchone()[0] == 0
    assert client.get(table_url("t")).status_code == 200


def test_failed_swap_deletes_its_file(client, app, monkeypatch):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    tables = app.app.extensions["growler.tables"]
    before = set(tables.objects.list(Location.parse("s3://growler-test-warehouse/")))
    monkeypatch.setattr(tables.repository, "swap_metadata", lambda swaps: False)
    response = client.post(
        table_url("t"), json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"a": "1"}}]}
    )
    assert response.status_code == 409
    assert set(tables.objects.list(Location.parse("s3://growler-test-warehouse/"))) == before


def _break_after_swap(monkeypatch, repository, *, committed: bool, database_answers: bool):
    """The connection dies after the swap statement was sent (it may or may not have applied)."""
    from app.ground.errors import ServiceUnavailable
    from storage.repository import CommitOutcomeUnknown

    real_swap = repository.swap_metadata

    def swap(swaps):
        if committed:
            real_swap(swaps)
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
    repository = app.app.extensions["growler.tables"].repository
    _break_after_swap(monkeypatch, repository, committed=False, database_answers=False)
    response = _set_property(client)
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "CommitStateUnknownException"
    monkeypatch.undo()
    assert client.get(table_url("t")).json()["metadata-location"] == created["metadata-location"]


def test_outcome_is_looked_up_when_the_database_answers(client, app, monkeypatch):
    client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]})
    client.post(tables_url(), json=create_request("t"))
    repository = app.app.extensions["growler.tables"].repository
    _break_after_swap(monkeypatch, repository, committed=True, database_answers=True)
    response = _set_property(client)
    assert response.status_code == 200, response.text
    monkeypatch.undo()
    loaded = client.get(table_url("t")).json()
    assert loaded["metadata-location"] == response.json()["metadata-location"]
    assert loaded["metadata"]["properties"]["a"] == "1"
