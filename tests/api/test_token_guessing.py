"""Guessing secrets at the token endpoint is bounded: per client id, per address, and in memory.

Each test uses an app of its own (its own failure buckets). The buckets refill while a test runs,
so each check allows for the time it took: a refusal must come within the burst plus what the
elapsed time refilled, and never later.

That time is the buckets' own clock (``SecretGuessing``'s ``clock``), stepped once per attempt:
the tests guess at a fixed pace (``STEP_S``) however long an attempt's argon2 takes. On the
wall clock a busy machine's attempts (0.7 s each under load) were slower than the address's
refill (one every 0.5 s), so the bucket never emptied and "never slowed down" failed on speed alone.
"""

from __future__ import annotations

import math
import uuid

import pytest

from app.composition.services import services_of
from app.edge.auth.endpoint import PER_ADDRESS, PER_CLIENT, SecretGuessing, TokenEndpoint
from tests.conftest import auth_settings_for_tests, fetch_token

TOKENS = "/v1/oauth/tokens"
STEP_S = 0.1  # a guesser's pace: ten attempts a second, faster than either bucket refills


class SteppedClock:
    """The failure buckets' clock: moves ``STEP_S`` per attempt (``step``), not with the machine."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def step(self) -> None:
        self.now += STEP_S


@pytest.fixture
def clock() -> SteppedClock:
    return SteppedClock()


@pytest.fixture
def fresh_app(settings, app, clock):
    from app.edge.factory import create_app

    made = create_app(settings, auth_settings_for_tests(poll_s=0.1))
    (endpoint,) = [
        m.keywords["endpoint"] for m in made.middleware.middlewares if "endpoint" in getattr(m, "keywords", {})
    ]
    assert isinstance(endpoint, TokenEndpoint)
    endpoint.guessing = SecretGuessing(clock=clock)
    return made


def attempt(client, client_id: str, secret: str):
    data = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
    return client.post(TOKENS, data=data)


def until_slowed(clients, client_ids, bucket: tuple[float, float], clock: SteppedClock) -> int:
    """Failed attempts (each from the next of ``clients``, one per ``STEP_S`` of the buckets'
    clock) until the first 429; fails unless it comes within the bound."""
    rate, burst = bucket
    started = clock()
    for count, (client, client_id) in enumerate(zip(clients, client_ids, strict=False)):
        clock.step()
        response = attempt(client, client_id, "wrong-" + uuid.uuid4().hex)
        if response.status_code == 429:
            assert response.json()["error"] == "slow_down"
            assert int(response.headers["Retry-After"]) >= 1
            assert response.headers["Cache-Control"] == "no-store"
            return count
        assert response.status_code == 401, response.text
        assert count <= burst + math.ceil((clock() - started) * rate), "never slowed down"
    raise AssertionError("never slowed down")


def test_a_client_id_guessed_at_is_slowed_down_even_with_its_secret(fresh_app, principals_for_guessing, clock):
    """Guesses from ever new addresses: the client id's own bucket is what slows them."""
    clients = [fresh_app.test_client(client=(f"10.9.{i // 250}.{i % 250}", 5000)) for i in range(100)]
    client_id, secret = principals_for_guessing
    failures = until_slowed(clients, [client_id] * 100, PER_CLIENT, clock)
    assert failures >= PER_CLIENT[1]  # the burst first
    locked = attempt(fresh_app.test_client(client=("10.8.0.1", 5000)), client_id, secret)
    assert locked.status_code == 429  # the right secret waits too: nothing is verified
    assert fetch_token(fresh_app.test_client(client=("10.8.0.1", 5000)))  # another client id is served


def test_an_address_guessing_many_client_ids_is_slowed_down(fresh_app, clock):
    client = fresh_app.test_client()
    ids = [f"guess-{i}-{uuid.uuid4().hex[:6]}" for i in range(400)]
    failures = until_slowed([client] * len(ids), ids, PER_ADDRESS, clock)
    assert failures >= PER_ADDRESS[1]


@pytest.fixture
def principals_for_guessing(app):
    """A principal of its own (its client id is what gets guessed at)."""
    from app.management.principals import PrincipalService
    from storage.db import Database
    from storage.principals import PrincipalRepository

    database = services_of(app.app).tables.repository.db
    assert isinstance(database, Database)
    credential = PrincipalService(PrincipalRepository(database)).create("guessed-" + uuid.uuid4().hex[:8])
    return credential.client_id, credential.secret


def test_a_proven_secret_buys_no_token_once_rotated_elsewhere(settings, app, principals_for_guessing):
    """A secret this worker verified is accepted again without argon2 only at the principal's
    current generation, read from PostgreSQL: here the worker's polled state is an hour stale
    (poll_s), and the rotation is made by another process's service; the old secret is refused
    at once, the new one accepted."""
    from app.edge.factory import create_app
    from app.management.principals import PrincipalService
    from storage.principals import PrincipalRepository

    stale = create_app(settings, auth_settings_for_tests(poll_s=3600)).test_client()
    client_id, secret = principals_for_guessing
    assert attempt(stale, client_id, secret).status_code == 200  # verified: now proven here
    assert attempt(stale, client_id, secret).status_code == 200  # the fast path
    database = services_of(app.app).tables.repository.db
    rotated = PrincipalService(PrincipalRepository(database)).rotate(client_id)
    assert rotated is not None
    refused = attempt(stale, client_id, secret)
    assert refused.status_code == 401 and refused.json()["error"] == "invalid_client"
    assert attempt(stale, client_id, rotated.secret).status_code == 200
