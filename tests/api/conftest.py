"""Fixtures the API tests share: principals with chosen grants; ``ns`` (the namespace ``db``) and ``s3``
(the bucket as text) for the table tests, which modules needing others define for themselves."""

from __future__ import annotations

import pytest

from app.composition.services import services_of
from tests.api.authz_support import Principals
from tests.api.tables_support import PREFIX, TextStore
from tests.api.webhook_support import serve_receiver


@pytest.fixture(scope="module")
def principals(app, settings):
    """Principals with exactly the grants a test gives them (tests/api/authz_support.py)."""
    made = Principals(app, settings.database_url)
    yield made
    made.close()


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    return "db"


@pytest.fixture
def s3(app):
    return TextStore(services_of(app.app).namespaces.objects)


@pytest.fixture
def receiver():
    """A local webhook receiver (tests/api/webhook_support.py): its URL and its scripts by path."""
    yield from serve_receiver()
