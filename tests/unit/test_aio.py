"""``rmqrun.aio``: waits with a deadline that never lose a cancellation, and the stop-on-signal event.

The race they exist for (CPython gh-86296, fixed in 3.12): the awaited thing completes and the waiting task is
cancelled in the same loop step. ``asyncio.wait_for`` before 3.12 then returns the result and the cancellation is
gone; ``rmqrun status --watch`` lost a Ctrl-C that way (the cancellation ``asyncio.run`` makes of SIGINT landed
as a connection opened) and ran on until killed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any, Awaitable, Callable

import pytest

from rmqrun import aio

WAITS: dict[str, Callable[[Awaitable[Any], float | None], Awaitable[Any]]] = {"wait_for": aio.wait_for}


async def cancelled_as_it_completes(wait: Callable[[Awaitable[Any], float | None], Awaitable[Any]]) -> str:
    """Wait on a future with ``wait``; complete the future and cancel the waiter in the same step. What the
    waiter saw: ``"cancelled"`` or ``"result"``."""
    fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def waiter() -> str:
        await wait(fut, 30)
        return "result"

    task = asyncio.ensure_future(waiter())
    for _ in range(3):  # the waiter is now suspended in ``wait``
        await asyncio.sleep(0)
    fut.set_result(1)
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="asyncio.wait_for keeps the cancellation since 3.12")
def test_the_race_is_real_here_asyncio_wait_for_loses_the_cancellation() -> None:
    """The scenario below does reproduce the stdlib's race, so the tests after it can fail."""
    assert asyncio.run(cancelled_as_it_completes(asyncio.wait_for)) == "result"


@pytest.mark.parametrize("name", WAITS)
def test_a_cancellation_landing_as_the_awaited_thing_completes_is_kept(name: str) -> None:
    assert asyncio.run(cancelled_as_it_completes(WAITS[name])) == "cancelled"


@pytest.mark.parametrize("name", WAITS)
def test_the_result_comes_back_in_time_and_a_late_one_is_a_timeout_that_cancels_it(name: str) -> None:
    wait = WAITS[name]

    async def main() -> tuple[Any, bool]:
        async def soon() -> str:
            await asyncio.sleep(0.01)
            return "done"

        late = asyncio.ensure_future(asyncio.sleep(30))
        with pytest.raises(asyncio.TimeoutError):
            await wait(late, 0.05)
        return await wait(soon(), 5), late.cancelled()

    assert asyncio.run(main()) == ("done", True)


@pytest.mark.parametrize("name", WAITS)
def test_an_exception_of_the_awaited_thing_is_raised_as_it_is(name: str) -> None:
    async def boom() -> None:
        raise ValueError("bad frame")

    with pytest.raises(ValueError, match="bad frame"):
        asyncio.run(WAITS[name](boom(), 5))


def test_wait_event_says_whether_the_event_was_set() -> None:
    async def main() -> tuple[bool, bool, bool]:
        event = asyncio.Event()
        unset = await aio.wait_event(event, 0.02)
        asyncio.get_running_loop().call_later(0.01, event.set)
        later = await aio.wait_event(event, 5)
        return unset, later, await aio.wait_event(event, 0)

    assert asyncio.run(main()) == (False, True, True)


def test_run_until_set_cancels_the_work_when_stopped_and_returns_it_done() -> None:
    async def main() -> tuple[bool, str]:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.02, stop.set)
        stopped = await aio.run_until_set(stop, asyncio.sleep(30))

        async def quick() -> str:
            return "finished"
        finished = await aio.run_until_set(asyncio.Event(), quick())
        return stopped.cancelled(), finished.result()

    assert asyncio.run(main()) == (True, "finished")


def test_run_until_set_cancels_again_work_that_swallowed_the_first_cancel() -> None:
    async def main() -> tuple[bool, int]:
        cancels = 0

        async def stubborn() -> None:
            nonlocal cancels
            while True:
                try:
                    await asyncio.sleep(30)
                except asyncio.CancelledError:
                    cancels += 1
                    if cancels >= 2:
                        raise

        stop = asyncio.Event()
        stop.set()
        work = await asyncio.wait_for(aio.run_until_set(stop, stubborn()), 10)
        return work.cancelled(), cancels

    assert asyncio.run(main()) == (True, 2)


def test_stop_on_signals_sets_the_event_and_puts_the_old_handler_back() -> None:
    seen: list[int] = []

    def before(signum: int, frame: object) -> None:
        seen.append(signum)

    previous = signal.signal(signal.SIGUSR1, before)
    try:
        async def main() -> bool:
            with aio.stop_on_signals((signal.SIGUSR1,)) as stop:
                os.kill(os.getpid(), signal.SIGUSR1)
                return await aio.wait_event(stop, 10)

        assert asyncio.run(main()) is True
        assert seen == [], "the handler of the block took the signal"
        assert signal.getsignal(signal.SIGUSR1) is before
        os.kill(os.getpid(), signal.SIGUSR1)
        assert seen == [signal.SIGUSR1]
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_a_deadline_in_a_handler_served_on_the_reader_never_cancels_the_reader() -> None:
    """A connection starts a request's handler on its reader task (``Connection._serve_now``) and lets a task of
    its own go on with it once it waits. A deadline in the handler (the broker's SYNC flush wait) must fail the
    handler, not cancel the task that happened to start it (what ``asyncio.timeout`` would do)."""
    from rmqrun.remoting.connection import _go_on

    outcome: list[str] = []

    async def handler() -> None:
        try:
            await aio.wait_for(asyncio.sleep(30), 0.05)
        except asyncio.TimeoutError:
            outcome.append("timed out")

    async def reader() -> str:
        coro = handler()
        waiting = coro.send(None)  # started here, then handed to a task of its own
        rest = asyncio.ensure_future(_go_on(coro, waiting))
        await asyncio.sleep(0.3)  # the reader reads on past the handler's deadline
        await rest
        return "reader went on"

    assert asyncio.run(reader()) == "reader went on"
    assert outcome == ["timed out"]


def test_a_cancellation_landing_while_a_connection_waits_for_its_reader_is_raised() -> None:
    """``Connection.wait_closed`` (every client's close goes through it) waits for the reader it ended. A
    cancellation of the caller meanwhile is the caller's: it must come out, not be taken for the reader's
    own and dropped (a Ctrl-C landing in a client's close was lost that way)."""
    from rmqrun.remoting.connection import Connection

    async def main() -> str:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        try:
            conn = await Connection.open(f"127.0.0.1:{server.sockets[0].getsockname()[1]}")
            closing = asyncio.ensure_future(conn.wait_closed())
            await asyncio.sleep(0.05)  # waiting for the reader, which reads on
            closing.cancel()
            try:
                await closing
            except asyncio.CancelledError:
                return "cancelled" if not conn.closed else "cancelled, and the reader with it"
            finally:
                conn.close()
                await conn.wait_closed()
            return "returned"
        finally:
            server.close()

    assert asyncio.run(main()) == "cancelled"
