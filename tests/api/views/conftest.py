"""The view tests' fixtures: the nested namespace they work in, the bucket as text, the view service."""

from __future__ import annotations

import pytest

from app.composition.services import services_of
from tests.api.tables_support import PREFIX, TextStore
from tests.api.views.views_support import NS


@pytest.fixture
def ns(client):
    for levels in (["db"], list(NS)):
        assert client.post(f"{PREFIX}/namespaces", json={"namespace": levels}).status_code == 200
    return NS


@pytest.fixture
def s3(app):
    return TextStore(services_of(app.app).namespaces.objects)


@pytest.fixture
def views(app):
    return services_of(app.app).views
