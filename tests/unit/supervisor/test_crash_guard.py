"""The crash-loop guard's rule: more than ``limit`` deaths within ``window`` seconds trips it."""

from __future__ import annotations

from rmqrun.supervisor.crash_guard import CrashGuard


def test_deaths_up_to_the_limit_do_not_trip_it() -> None:
    guard = CrashGuard(limit=3, window=60.0)
    assert [guard.record(t) for t in (0.0, 1.0, 2.0)] == [False, False, False]
    assert guard.count == 3


def test_one_death_over_the_limit_trips_it() -> None:
    guard = CrashGuard(limit=3, window=60.0)
    for t in (0.0, 1.0, 2.0):
        guard.record(t)
    assert guard.record(3.0)
    assert guard.count == 4


def test_a_limit_of_one_trips_on_the_second_death() -> None:
    guard = CrashGuard(limit=1, window=10.0)
    assert not guard.record(0.0)
    assert guard.record(0.5)


def test_deaths_older_than_the_window_are_forgotten() -> None:
    guard = CrashGuard(limit=2, window=10.0)
    guard.record(0.0)
    guard.record(5.0)
    assert not guard.record(10.5)  # the death at 0.0 fell out of [0.5, 10.5]
    assert guard.count == 2
    assert guard.record(12.0)  # 5.0, 10.5, 12.0: three within 10 s


def test_a_death_exactly_at_the_window_edge_still_counts() -> None:
    guard = CrashGuard(limit=1, window=10.0)
    guard.record(0.0)
    assert guard.record(10.0)  # 0.0 is not older than 10.0 - 10.0


def test_a_slow_trickle_never_trips_it() -> None:
    guard = CrashGuard(limit=2, window=10.0)
    assert not any(guard.record(t * 6.0) for t in range(50))


def test_reset_forgets_every_death() -> None:
    guard = CrashGuard(limit=2, window=60.0)
    for t in (0.0, 1.0):
        guard.record(t)
    guard.reset()
    assert guard.count == 0
    assert not guard.record(2.0)
    assert not guard.record(3.0)
    assert guard.record(4.0)
