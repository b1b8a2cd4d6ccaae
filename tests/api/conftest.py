"""Fixtures the API tests share."""

from __future__ import annotations

import pytest

from tests.api.authz_support import Principals


@pytest.fixture(scope="module")
def principals(app, settings):
    """Principals with exactly the grants a test gives them (tests/api/authz_support.py)."""
    made = Principals(app, settings.database_url)
    yield made
    made.close()
