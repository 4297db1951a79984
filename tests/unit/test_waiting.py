"""The tests' one wait helper (``tests/waiting.py``): it returns the awaited value and fails naming what it awaited."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from tests.waiting import eventually, eventually_async


def test_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert eventually(lambda: [n for n in [next(counter)] if n >= 3], what="three polls", interval=0) == [3]


def test_an_assertion_inside_the_condition_means_not_yet() -> None:
    seen = []

    def cond() -> str:
        seen.append(1)
        assert len(seen) > 2, "not there yet"
        return "there"

    assert eventually(cond, interval=0) == "there" and len(seen) == 3


def test_a_state_that_never_comes_fails_naming_it_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"waiting for the broker's count \(last value: 0\)"):
        eventually(lambda: 0, what="the broker's count", timeout=0.05, interval=0.01)
    with pytest.raises(AssertionError, match="waiting for a line") as info:
        eventually(lambda: (_ for _ in ()).throw(AssertionError("no line yet")), what="a line", timeout=0.05)
    assert str(info.value.__cause__) == "no line yet"


def test_other_errors_are_not_swallowed() -> None:
    with pytest.raises(ZeroDivisionError):
        eventually(lambda: 1 / 0)


def test_async_awaits_a_coroutine_condition_without_blocking_the_loop() -> None:
    async def main() -> int:
        state = {"n": 0}

        async def bump() -> None:
            for _ in range(3):
                await asyncio.sleep(0)
                state["n"] += 1

        async def read() -> int:
            return state["n"] if state["n"] == 3 else 0

        task = asyncio.create_task(bump())
        value = await eventually_async(read, what="three bumps", interval=0)
        await task
        return value

    assert asyncio.run(main()) == 3


def test_async_fails_naming_what_it_awaited() -> None:
    with pytest.raises(AssertionError, match=r"waiting for nothing \(last value: None\)"):
        asyncio.run(eventually_async(lambda: None, what="nothing", timeout=0.05))
