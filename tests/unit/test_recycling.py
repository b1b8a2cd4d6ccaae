"""The memory guard's hand-over order (app/edge/recycling.py), on shared accept slots as the workers
see them: a worker above its limit asks for a successor first, serves on until the successor
accepts, and only then leaves; the master then takes the extra worker back off its count."""

from __future__ import annotations

from types import SimpleNamespace

from app.edge.recycling import MemoryGuard, hand_over_finished
from app.edge.serving import AcceptShares


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def guard_on(shares: AcceptShares, slot: int, rss: list[float], asked: list[int], clock: Clock) -> MemoryGuard:
    """A worker's guard as GrowlerWorker makes it, with the master's count at 2 workers; asking for
    a successor counts it at once (``expect_one_more``), before the master reads the signal."""
    shares.target.value = shares.target.value or 2

    def ask() -> None:
        shares.expect_one_more(2)
        asked.append(slot)

    return MemoryGuard(
        500,
        lambda: shares.wanted(2),
        serving_others=lambda: shares.serving_others(slot),
        mark_leaving=lambda: shares.mark_leaving(slot),
        ask_successor=ask,
        measure=lambda: rss[0],
        clock=clock,
    )


def test_a_worker_above_its_limit_leaves_only_once_its_successor_accepts():
    shares = AcceptShares(slots=4)
    shares.publish(0, 8)  # the worker that will grow
    shares.publish(1, 8)  # the other one
    rss, asked, clock = [300.0], [], Clock()
    guard = guard_on(shares, 0, rss, asked, clock)

    assert guard.hand_over_now() is False  # under the limit
    rss[0] = 600.0
    assert guard.hand_over_now() is False  # measured once a second only
    clock.now = 1.0
    assert guard.hand_over_now() is False  # above it: a successor is asked for, the worker serves on
    assert asked == [0] and shares.is_leaving(0)
    assert shares.serving_others(1) == 0  # the other worker does not count the leaving one
    assert shares.wanted(2) == 2  # three workers for now, one of them leaving: two must serve

    successor = shares.claim({0, 1})  # the master forks it: out of rotation while it boots
    for _ in range(5):
        clock.now += 1.0
        assert guard.hand_over_now() is False
    assert asked == [0]  # asked once, however long the successor takes

    shares.publish(successor, 0)  # warm, accepting
    assert guard.hand_over_now() is True


def test_two_workers_over_the_limit_each_wait_for_a_successor_of_their_own():
    shares = AcceptShares(slots=4)
    shares.publish(0, 8)
    shares.publish(1, 8)
    clock, asked = Clock(), []
    first = guard_on(shares, 0, [600.0], asked, clock)
    second = guard_on(shares, 1, [600.0], asked, clock)
    assert first.hand_over_now() is False and second.hand_over_now() is False
    assert asked == [0, 1]
    shares.publish(shares.claim({0, 1}), 0)  # one successor accepting: still only one worker not leaving
    assert first.hand_over_now() is False and second.hand_over_now() is False
    shares.publish(shares.claim({0, 1, 2}), 0)
    assert first.hand_over_now() is True and second.hand_over_now() is True


def test_no_limit_no_recycling():
    guard = MemoryGuard(
        0,
        lambda: 2,
        serving_others=lambda: 0,
        mark_leaving=lambda: None,
        ask_successor=lambda: None,
        measure=lambda: 1e9,
    )
    assert guard.hand_over_now() is False


def test_the_master_takes_back_the_extra_worker_of_a_hand_over_only():
    shares = AcceptShares(slots=4)
    server = SimpleNamespace(num_workers=3, cfg=SimpleNamespace(workers=2))
    crashed = SimpleNamespace(accept_shares=shares, accept_slot=1)
    hand_over_finished(server, crashed)  # not leaving: gunicorn replaces it as usual
    assert server.num_workers == 3

    shares.mark_leaving(0)
    handed_over = SimpleNamespace(accept_shares=shares, accept_slot=0)
    hand_over_finished(server, handed_over)
    assert server.num_workers == 2 and not shares.is_leaving(0)

    shares.mark_leaving(0)  # a reload reset the count meanwhile: never below the configured one
    hand_over_finished(server, handed_over)
    assert server.num_workers == 2


def test_a_successor_already_above_the_limit_never_hands_over():
    """A limit below a fresh worker's memory: one round of replacements, then a warning, no loop."""
    shares = AcceptShares(slots=4)
    shares.publish(2, 0)
    asked: list[int] = []
    clock = Clock()
    guard = MemoryGuard(
        1,
        lambda: 2,
        serving_others=lambda: 2,
        mark_leaving=lambda: shares.mark_leaving(2),
        ask_successor=lambda: asked.append(2),
        successor=True,
        measure=lambda: 120.0,
        clock=clock,
    )
    for _ in range(3):
        assert guard.hand_over_now() is False
        clock.now += 1.0
    assert asked == [] and not shares.is_leaving(2)
