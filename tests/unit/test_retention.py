"""The recycle bin's retention as written in the environment and the management API (issue 35)."""

from __future__ import annotations

import pytest

from app.ground.settings import Settings, format_retention, parse_retention

ENV = {"GROWLER_DATABASE_URL": "postgresql://x", "GROWLER_WAREHOUSE_LOCATION": "file:///tmp/w"}


@pytest.mark.parametrize(
    ("text", "seconds"), [("7d", 604_800), ("12h", 43_200), ("30m", 1800), ("45s", 45), ("600", 600), (" 2d ", 172_800)]
)
def test_a_retention_reads_and_writes_back(text, seconds):
    assert parse_retention(text) == seconds
    assert parse_retention(format_retention(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "7w", "-1d", "0s", "1.5d", "3651d", "d", "7 days", "9999999999"])
def test_a_retention_out_of_shape_or_bounds_is_refused(text):
    with pytest.raises(ValueError, match="retention"):
        parse_retention(text)


def test_the_default_warehouses_policy_comes_from_the_environment():
    default = Settings.from_env(ENV)
    assert (default.deletion_policy, default.deletion_retention, default.refuse_deletes) == ("soft", "7d", False)
    chosen = Settings.from_env(
        {**ENV, "GROWLER_DELETION_POLICY": "HARD", "GROWLER_DELETION_RETENTION": "1h", "GROWLER_REFUSE_DELETES": "true"}
    )
    assert (chosen.deletion_policy, chosen.deletion_retention, chosen.refuse_deletes) == ("hard", "1h", True)
    with pytest.raises(ValueError, match="GROWLER_DELETION_POLICY"):
        Settings.from_env({**ENV, "GROWLER_DELETION_POLICY": "sometimes"})
    with pytest.raises(ValueError, match="GROWLER_DELETION_RETENTION"):
        Settings.from_env({**ENV, "GROWLER_DELETION_RETENTION": "forever"})
