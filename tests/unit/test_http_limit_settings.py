"""The HTTP protocol's limits as read from the environment (``HttpLimits``)."""

from __future__ import annotations

import pytest

from app.ground.settings import HttpLimits, Settings


def test_defaults():
    limits = HttpLimits.from_env({})
    assert (limits.max_head_bytes, limits.max_headers) == (65536, 100)
    assert (limits.head_timeout_s, limits.body_timeout_s) == (30.0, 30.0)


def test_read_from_the_environment_and_carried_by_the_settings():
    env = {
        "GROWLER_DATABASE_URL": "postgresql://localhost/growler",
        "GROWLER_WAREHOUSE_LOCATION": "file:/tmp/growler-warehouse",
        "GROWLER_MAX_HEADER_BYTES": "8192",
        "GROWLER_MAX_HEADERS": "20",
        "GROWLER_HEADER_TIMEOUT_S": "2.5",
        "GROWLER_BODY_TIMEOUT_S": "0.5",
    }
    assert Settings.from_env(env).http == HttpLimits(8192, 20, 2.5, 0.5)


@pytest.mark.parametrize(
    ("name", "value", "named"),
    [
        ("GROWLER_MAX_HEADER_BYTES", "lots", "GROWLER_MAX_HEADER_BYTES"),
        ("GROWLER_MAX_HEADER_BYTES", "100", "GROWLER_MAX_HEADER_BYTES"),
        ("GROWLER_MAX_HEADERS", "0", "GROWLER_MAX_HEADERS"),
        ("GROWLER_HEADER_TIMEOUT_S", "0", "GROWLER_HEADER_TIMEOUT_S"),
        ("GROWLER_BODY_TIMEOUT_S", "-1", "GROWLER_BODY_TIMEOUT_S"),
        ("GROWLER_BODY_TIMEOUT_S", "soon", "GROWLER_BODY_TIMEOUT_S"),
    ],
)
def test_a_bad_value_stops_the_start_naming_its_variable(name, value, named):
    with pytest.raises(ValueError, match=named):
        HttpLimits.from_env({name: value})
