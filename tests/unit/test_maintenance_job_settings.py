"""The job runner's settings (app/maintenance/jobs.py): the limits on concurrent maintenance runs
and the idle poll, with their defaults, and refused when out of bounds."""

from __future__ import annotations

import pytest

from app.maintenance.jobs import JobSettings
from storage.maintenance_jobs import Limits


def test_defaults_and_overrides():
    assert JobSettings.from_env({}) == JobSettings(Limits(4, 2), 2.0)
    tuned = JobSettings.from_env(
        {
            "GROWLER_MAINTENANCE_MAX_RUNS": "10",
            "GROWLER_MAINTENANCE_MAX_RUNS_PER_WAREHOUSE": "3",
            "GROWLER_MAINTENANCE_JOB_POLL_S": "0.5",
        }
    )
    assert tuned == JobSettings(Limits(10, 3), 0.5)
    # a warehouse never gets more than the whole fleet
    assert JobSettings.from_env({"GROWLER_MAINTENANCE_MAX_RUNS": "1"}).limits == Limits(1, 1)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GROWLER_MAINTENANCE_MAX_RUNS", "0"),
        ("GROWLER_MAINTENANCE_MAX_RUNS_PER_WAREHOUSE", "5000"),
        ("GROWLER_MAINTENANCE_JOB_POLL_S", "0"),
    ],
)
def test_out_of_bounds_values_are_refused(name, value):
    with pytest.raises(ValueError, match=name):
        JobSettings.from_env({name: value})
