"""The table-commit tests' fixtures: the namespace they work in, and the bucket as text."""

from __future__ import annotations

import pytest

from tests.api.tables_support import PREFIX, TextStore


@pytest.fixture
def ns(client):
    assert client.post(f"{PREFIX}/namespaces", json={"namespace": ["db"]}).status_code == 200
    return "db"


@pytest.fixture
def s3(app):
    return TextStore(app.app.extensions["growler.catalog"].objects)
