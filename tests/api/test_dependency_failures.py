"""PostgreSQL or S3 down: 503 + Retry-After, nothing half-done, and recovery without a restart."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest

from app.composition.services import services_of
from app.ground.locations import Location
from tests.api.tables_support import PREFIX, create_request, table_url, tables_url


def wait_until(predicate, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return False


def assert_unavailable(response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["type"] == "ServiceUnavailableException"
    assert int(response.headers["Retry-After"]) > 0


def test_postgres_down_then_back(client, services):
    if services.postgres is None:
        pytest.skip("external PostgreSQL: the test cannot stop it")
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["before"]}).status_code == 200
    services.postgres.stop()
    try:
        assert_unavailable(client.get(f"{PREFIX}/namespaces/before"))
        assert_unavailable(client.post(f"{PREFIX}/namespaces", json={"namespace": ["during"]}))
        assert_unavailable(client.get("/readyz"))
        assert client.get("/healthz").status_code == 200
    finally:
        services.postgres.start()
    assert wait_until(lambda: client.get(f"{PREFIX}/namespaces/before").status_code == 200)
    assert client.get("/readyz").status_code == 200
    assert client.get(f"{PREFIX}/namespaces").json() == {"namespaces": [["before"]]}


def test_object_storage_down_changes_nothing(client, services, db):
    if services.s3 is None:
        pytest.skip("external S3: the test cannot stop it")
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    services.s3.stop()
    try:
        assert_unavailable(client.post(tables_url(), json=create_request("during")))
        assert db.execute("SELECT count(*) FROM catalog_entry").fetchone()[0] == 0
        assert_unavailable(client.get("/readyz"))
    finally:
        services.s3.start()
    assert wait_until(lambda: client.get("/readyz").status_code == 200)
    # A restarted SeaweedFS lists buckets before it takes writes again (its volumes register a
    # little later): until then a write is refused with a clean 503, then succeeds by itself.
    assert wait_until(lambda: created_or_unavailable(client, "after"))


def created_or_unavailable(client, name: str) -> bool:
    response = client.post(tables_url(), json=create_request(name))
    if response.status_code != 200:
        assert_unavailable(response)
    return response.status_code == 200


def test_database_frozen_during_the_swap_answers_commit_state_unknown(client, app, services, monkeypatch):
    """The swap was sent and never answered: the outcome is unknown, and said so, within the deadlines."""
    if services.postgres is None:
        pytest.skip("external PostgreSQL: the test cannot freeze it")
    from tests.fault_support import frozen

    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    assert client.post(tables_url(), json=create_request("t")).status_code == 200
    tables = services_of(app.app).tables
    settings = services_of(app.app).namespaces.settings
    original_swap = tables.repository.swap_metadata
    freezing = frozen(services.postgres)
    database = tables.repository.db

    def swap_into_a_frozen_database(swaps, before_commit, events):
        # Freeze once the swap holds its connection, not before: a connection idle for a while is
        # checked on checkout, and a check against a frozen database is "unavailable" (503) - the
        # swap would not have been sent at all. Only this thread's checkout freezes.
        swapping = threading.get_ident()
        checkout = database.connection

        @contextmanager
        def connection_then_freeze():
            with checkout() as conn:
                if threading.get_ident() == swapping:
                    freezing.__enter__()  # thawed below, once the answer is in
                yield conn

        database.connection = connection_then_freeze
        try:
            return original_swap(swaps, before_commit=before_commit, events=events)
        finally:
            del database.connection

    monkeypatch.setattr(tables.repository, "swap_metadata", swap_into_a_frozen_database)
    started = time.monotonic()
    try:
        response = client.post(
            table_url("t"),
            json={"requirements": [], "updates": [{"action": "set-properties", "updates": {"frozen": "1"}}]},
        )
        elapsed = time.monotonic() - started
    finally:
        freezing.__exit__(None, None, None)
    assert response.status_code == 500, response.text
    assert response.json()["error"]["type"] == "CommitStateUnknownException"
    # the swap's deadline, then the lookup of its outcome: a connection check and a pool wait
    assert elapsed < 2 * settings.db_timeout_s + 2 * settings.pool_timeout_s + 3, elapsed
    monkeypatch.setattr(tables.repository, "swap_metadata", original_swap)
    assert wait_until(lambda: client.get(table_url("t")).status_code == 200, 30)
    loaded = client.get(table_url("t")).json()
    # whichever version won, its file is there
    assert tables.objects.exists(Location.parse(loaded["metadata-location"]))
