"""The commit trigger of maintenance (app/maintenance/trigger.py): a table past the threshold is
made due at once, at most once per interval; one past it within the interval is made due by the
first round after it, without waiting for another commit."""

from __future__ import annotations

from app.maintenance.trigger import CommitTrigger
from app.rules.maintenance import COMMIT_TRIGGER_EVERY_S, COMMITS_BEFORE_DUE, SNAPSHOTS_BEFORE_DUE


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_long_history_is_due_at_once_then_at_most_once_per_interval() -> None:
    clock = Clock()
    trigger = CommitTrigger(clock)
    trigger.note(7, SNAPSHOTS_BEFORE_DUE - 1)
    assert trigger.take() == []
    trigger.note(7, SNAPSHOTS_BEFORE_DUE)
    assert trigger.take() == [7]
    clock.now += 1
    trigger.note(7, SNAPSHOTS_BEFORE_DUE + 400)  # the burst goes on within the interval
    assert trigger.take() == []


def test_a_table_past_the_threshold_within_the_interval_is_due_once_it_has_passed() -> None:
    clock = Clock()
    trigger = CommitTrigger(clock)
    trigger.note(7, SNAPSHOTS_BEFORE_DUE)
    assert trigger.take() == [7]
    clock.now += 5
    trigger.note(7, SNAPSHOTS_BEFORE_DUE)  # the burst's last commit: no other follows
    clock.now += COMMIT_TRIGGER_EVERY_S - 10
    assert trigger.take() == []
    clock.now += 10
    assert trigger.take() == [7]
    clock.now += 10 * COMMIT_TRIGGER_EVERY_S
    assert trigger.take() == []  # no commit since: nothing to look at


def test_commits_of_a_short_history_count_up_to_the_threshold() -> None:
    trigger = CommitTrigger(Clock())
    for _ in range(COMMITS_BEFORE_DUE - 1):
        trigger.note(3, 1)
    assert trigger.take() == []
    trigger.note(3, 1)
    assert trigger.take() == [3]


def test_the_trigger_remembers_which_tables_set_expiry_by_their_properties() -> None:
    """``by_properties``: those of the tables made due whose last commit's metadata set
    ``history.expire.*`` (housekeeping makes them known to maintenance with the due mark)."""
    clock = Clock()
    trigger = CommitTrigger(clock)
    trigger.note(1, SNAPSHOTS_BEFORE_DUE, {"history.expire.max-snapshot-age-ms": "1000"})
    trigger.note(2, SNAPSHOTS_BEFORE_DUE)
    trigger.note(3, SNAPSHOTS_BEFORE_DUE, {"history.expire.max-snapshot-age-ms": "1000"})
    trigger.note(3, SNAPSHOTS_BEFORE_DUE, {"write.format.default": "parquet"})  # its last commit removed them
    due = trigger.take()
    assert due == [1, 2, 3]
    assert trigger.by_properties(due) == [1]
    assert trigger.by_properties([99]) == []  # never counted
