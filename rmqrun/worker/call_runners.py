"""The ``threads`` and ``asyncio`` worker classes: up to ``worker_concurrency`` handler calls at once.

The ``process`` class (:mod:`rmqrun.worker.main`) runs one call at a time in the
main thread, which suits CPU-bound handlers. A handler that mostly waits (an
HTTP call, a database write) leaves that process idle; gunicorn answers this
with its ``gthread`` and async workers, the Java push consumer with 20-64
consume threads. Here a batch's calls are started up to the concurrency bound
and their results taken as they end, by one scheduler on an event loop in the
worker's main thread:

* ``threads``: each call of a plain ``def`` handler runs in a thread pool
  (``loop.run_in_executor``);
* ``asyncio``: each call of an ``async def`` handler is a task on the loop.

Every per-message guarantee of the process class holds, because the
scheduler, not the calls, decides each message's status and writes the
progress block (:mod:`rmqrun.worker.call_slots`: a slot per call in flight,
results written as calls end). A call's result is written by the call
itself as it ends, before anything else runs: in a task's own last step, in
a thread right after the handler returns (under the runner's lock, which the
scheduler holds for its own writes). So a call that kills the worker from
another task or thread finds every finished call's result written; it cannot
fall between a call's return and its result, which would have the finished
message run again:

* **time limit**: a call past ``time_limit`` fails as timed out at its deadline.
  A task is cancelled. A thread cannot be stopped from outside, so it is left
  to run: its call slot is freed and the worker, one thread short, finishes
  the batch with the others, then asks to be recycled (RETIRING) and runs no
  further call; it exits at STOP without waiting for the thread. A coroutine
  that blocks the loop stops the scheduler too, and with it the STARTED
  announcements: the supervisor's hard limit kills the worker, as it would a
  process.
* **orderly batches** run one call at a time and stop at the first that does
  not succeed (the queue's order, or the key's); concurrency spreads over
  the messages of concurrent batches, and over batches: the worker runs up
  to ``lanes`` batches at once (:mod:`rmqrun.worker.lanes`: batches of
  different queues or keys, as the supervisor sends them), every call of
  every batch within the one bound of ``size`` calls in flight.
* **SIGTERM** is seen within :data:`POLL_S`: calls in flight are abandoned
  (NOT_RUN, delivered again), nothing more starts.
* **memory and the supervisor's cut** are checked before each call starts,
  as in the process class.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import ConsumeMode, Run, Started, Status
from rmqrun.worker.batch_decode import chunks_around
from rmqrun.worker.batch_outcome import BatchOutcome
from rmqrun.worker.call_slots import CallSlots
from rmqrun.worker.logs import CALL_BATCH, CALL_INDEX, MessageContext

__all__ = ["CallRunner", "POLL_S"]

#: the longest the scheduler waits without looking at SIGTERM and the announcements
POLL_S = 0.1


class CallRunner:
    """Runs a worker's batches ``size`` calls at once, in threads or as tasks (see the module docstring)."""

    def __init__(self, worker: Any, worker_class: str, size: int) -> None:
        """``worker``: the :class:`rmqrun.worker.main.Worker` it runs for (not imported: main imports this)."""
        self.worker = worker
        self.size = size
        self.use_threads = worker_class == "threads"
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        self.threads = ThreadPoolExecutor(size, thread_name_prefix="rmqrun-call") if self.use_threads else None
        #: threads still inside a call that passed its time limit: the pool is that much smaller
        self.stuck = 0
        #: handler calls in flight now, over every batch running
        self.in_flight = 0
        #: resolved when a call ends, for batches waiting for room under the bound
        self._room: asyncio.Future[None] | None = None
        #: held for every write of results and call slots: a thread writes its call's result as it ends
        self.lock = threading.Lock()

    # ------------------------------------------------------------------ hooks
    def call_hook(self, fn: Callable[..., Any], info: Any) -> None:
        """worker_init / worker_exit: a coroutine hook (asyncio class) is run to its end on the loop."""
        from rmqrun.handler.loading import call_hook
        result = call_hook(fn, info)
        if inspect.isawaitable(result):
            self.loop.run_until_complete(_awaited(result))

    def close(self) -> None:
        """At exit: the loop is closed; threads are not waited for (one may be stuck in a call)."""
        if self.threads is not None:
            self.threads.shutdown(wait=False, cancel_futures=True)
        self.loop.close()

    # ------------------------------------------------------------------ batches
    async def run_batch(self, run: Run, msgs: list[Any], offsets: list[int], decode_errors: list[str | None],
                        outcome: BatchOutcome, slots: CallSlots) -> None:
        """One batch's calls, within the worker's bound (one at a time for an orderly batch), its calls in
        ``slots`` (its lane's)."""
        try:
            await _Batch(self, run, msgs, offsets, decode_errors, outcome, slots).run()
        finally:
            slots.end_batch()
        if self.stuck:
            self.worker.stop_calls(f"{self.stuck} handler thread(s) still in a call past the time limit "
                                   f"({self.worker.config.time_limit:g} s)")

    def room_waiter(self) -> "asyncio.Future[None]":
        """Resolved when a call ends anywhere in the worker (room for a batch waiting under the bound)."""
        if self._room is None or self._room.done():
            self._room = self.loop.create_future()
        return self._room

    def ended(self) -> None:
        """A call ended (or is no longer waited for): one more fits under the bound."""
        self.in_flight -= 1
        if self._room is not None and not self._room.done():
            self._room.set_result(None)

    def start(self, fn: Callable[[Any], Any], arg: Any, index: int,
              on_end: Callable[[int, Any, BaseException | None], None]) -> "asyncio.Future[Any]":
        """A call begins: in a thread of the pool, or as a task; its logs are labelled with message ``index``
        of its own batch. The call reports its end to ``on_end(index, value, error)`` as it ends (in the
        thread, or in the task's last step)."""
        self.in_flight += 1
        if self.threads is not None:
            return self.loop.run_in_executor(self.threads, _labelled, fn, arg, index, CALL_BATCH.get(), on_end)
        token = CALL_INDEX.set(index)  # the task copies the context as it is created
        try:
            return asyncio.ensure_future(_called(fn, arg, index, on_end), loop=self.loop)
        finally:
            CALL_INDEX.reset(token)


def _labelled(fn: Callable[[Any], Any], arg: Any, index: int, batch: MessageContext | None,
              on_end: Callable[[int, Any, BaseException | None], None]) -> Any:
    """A thread's call, its log records labelled with its own message (the thread's context, not the batch's);
    its end reported to ``on_end`` from the thread, as the handler returns or raises."""
    token = CALL_INDEX.set(index)
    held = CALL_BATCH.set(batch)
    try:
        try:
            value = fn(arg)
        except BaseException as exc:
            on_end(index, None, exc)
            raise
        on_end(index, value, None)
        return value
    finally:
        CALL_BATCH.reset(held)
        CALL_INDEX.reset(token)


async def _called(fn: Callable[[Any], Any], arg: Any, index: int,
                  on_end: Callable[[int, Any, BaseException | None], None]) -> Any:
    """An async handler's call, as a task: a raise as the call is made fails the call, not the scheduler. Its
    end goes to ``on_end`` in this same step (a cancel by the scheduler is not an end it records)."""
    try:
        value = await _awaited(fn(arg))
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        on_end(index, None, exc)
        raise
    on_end(index, value, None)
    return value


async def _awaited(value: Any) -> Any:
    """What an async handler's call comes to (a plain value, returned by a sync callable, as is)."""
    if inspect.isawaitable(value):
        return await value
    return value


class _Batch:
    """One batch's run on the loop: start calls while there is room, settle each as it ends."""

    def __init__(self, runner: CallRunner, run: Run, msgs: list[Any], offsets: list[int],
                 errors: list[str | None], outcome: BatchOutcome, slots: CallSlots) -> None:
        self.runner = runner
        self.slots = slots
        self.worker = runner.worker
        self.run_frame = run
        self.msgs = msgs
        self.offsets = offsets
        self.errors = errors
        self.outcome = outcome
        self.orderly = run.mode is ConsumeMode.ORDERLY
        self.fail = Status.SUSPEND if self.orderly else Status.RECONSUME_LATER
        self.stop = False
        #: call future -> (start, end, slot, began)
        self.flying: dict[asyncio.Future[Any], tuple[int, int, int, float]] = {}
        #: start -> (end, slot) of the calls in flight whose result is not written yet
        self.unsettled: dict[int, tuple[int, int]] = {}
        self.lock = runner.lock

    def room(self) -> int:
        """How many calls this batch may have in flight: its own bound, less what the others hold of the
        worker's (every batch's calls count against ``size``)."""
        runner = self.runner
        own = 1 if self.orderly else max(0, runner.size - runner.stuck)
        return min(own, len(self.flying) + max(0, runner.size - runner.stuck - runner.in_flight))

    def starved(self) -> bool:
        """More calls to start, none in room: wait for a call of another batch to end."""
        return not self.stop and len(self.flying) >= self.room() and self.runner.size > self.runner.stuck

    async def run(self) -> None:
        worker = self.worker
        cfg = worker.config
        handler = worker.handler
        assert handler is not None
        step = cfg.batch_size if handler.is_batch else 1
        chunks = chunks_around(self.errors, step)
        self.slots.begin_batch(len(self.msgs))
        limit = cfg.time_limit
        announce_every = min(cfg.kill_grace, limit) / 2 if limit > 0 else 0.0
        announced = time.monotonic()
        try:
            while True:
                if not self.stop:
                    self._start_calls(chunks, handler.fn, handler.is_batch)
                if not self.flying and not self.starved():
                    return
                now = time.monotonic()
                timeout = POLL_S
                if limit > 0:
                    if now - announced > announce_every:  # the supervisor's hard limit follows the calls
                        announced = now
                        worker.pipe.send(Started(self.run_frame.batch_id))
                        worker.pipe.flush()
                    oldest = min((began for _, _, _, began in self.flying.values()), default=now)
                    timeout = min(timeout, oldest + limit - now, announced + announce_every - now)
                waits: list[asyncio.Future[Any]] = list(self.flying)
                if self.starved():
                    waits.append(self.runner.room_waiter())
                done, _ = await asyncio.wait(waits, timeout=max(0.0, timeout), return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    if fut in self.flying:
                        self._settle(fut)
                if limit > 0:
                    self._time_out(time.monotonic(), limit)
                if worker._terminating:
                    self.outcome.error = self.outcome.error or "worker terminated (SIGTERM)"
                    return
        finally:
            await self._abandon()

    def _start_calls(self, chunks: Any, fn: Callable[[Any], Any], is_batch: bool) -> None:
        worker = self.worker
        outcome = self.outcome
        check_memory = worker.config.max_memory > 0
        while len(self.flying) < self.room():
            nxt = next(chunks, None)
            if nxt is None or worker._terminating:
                self.stop = True
                return
            start, end = nxt
            if self.errors[start]:  # never handed to the handler; the supervisor dead-letters it as stored
                with self.lock:
                    outcome.statuses[start] = Status.UNDECODABLE
                    outcome.failed(start, start + 1, str(self.errors[start]))
                    self.slots.settle(start, start + 1, outcome.statuses, outcome.delays)
                if self.orderly:
                    self.stop = True
                    return
                continue
            if check_memory and start and worker._memory_check():
                self.stop = True  # recycle after the call that went over: the rest go to the replacement
                return
            now = time.monotonic()
            with self.lock:
                try:
                    slot = self.slots.take(start, end, now)
                except progress_mem.CallCut:  # the rest was given to another worker
                    self.stop = True
                    return
                self.unsettled[start] = (end, slot)
            arg = self.msgs[start:end] if is_batch else self.msgs[start]
            self.flying[self.runner.start(fn, arg, start, self._ended)] = (start, end, slot, now)

    def _ended(self, start: int, value: Any, exc: BaseException | None) -> None:
        """A call ended (in its thread, or its task's last step): its result written now (module docstring)."""
        with self.lock:
            entry = self.unsettled.pop(start, None)
            if entry is None:
                return  # timed out or abandoned before it ended: no longer waited for
            end, slot = entry
            self._map(start, end, value, exc)
            self.slots.finish(slot, self.outcome.statuses, self.outcome.delays)

    def _settle(self, fut: "asyncio.Future[Any]") -> None:
        """A call ended: its room in the bound is free. Its result was written as it ended; one that ended without
        saying so (a task cancelled by something other than this scheduler) is mapped here."""
        start, end, slot, _ = self.flying.pop(fut)
        with self.lock:
            unsettled = self.unsettled.pop(start, None) is not None
            if unsettled:
                token = CALL_INDEX.set(start)  # what is logged of it is labelled with its message
                try:
                    try:
                        value, exc = fut.result(), None
                    except BaseException as e:  # in a thread even SystemExit only ends the call: a failure
                        value, exc = None, e
                    self._map(start, end, value, exc)
                finally:
                    CALL_INDEX.reset(token)
                self.slots.finish(slot, self.outcome.statuses, self.outcome.delays)
        if not unsettled and not fut.cancelled():
            fut.exception()  # written by its call; retrieved here so asyncio does not warn it never was
        self.runner.ended()

    def _map(self, start: int, end: int, value: Any, exc: BaseException | None) -> None:
        worker = self.worker
        outcome = self.outcome
        statuses = outcome.statuses
        ref = worker.handler.ref  # type: ignore[union-attr]
        if exc is not None:
            statuses[start:end] = bytes([self.fail]) * (end - start)
            outcome.failed(start, end, f"handler '{ref}' raised {type(exc).__name__}: {exc}")
            worker._log_exception(exc, self.offsets[start])
            self.stop = self.stop or self.orderly
        else:
            if value is None:
                statuses[start:end] = bytes(end - start)
            elif worker._map_result(value, self.run_frame, start, end, outcome, self.offsets):
                self.stop = True

    def _time_out(self, now: float, limit: float) -> None:
        """Calls past their deadline fail as timed out; a task is cancelled, a thread left to end alone."""
        outcome = self.outcome
        ref = self.worker.handler.ref  # type: ignore[union-attr]
        for fut, (start, end, slot, began) in list(self.flying.items()):
            if now - began < limit:
                continue
            with self.lock:
                if self.unsettled.pop(start, None) is None:
                    continue  # it ended just now and wrote its result: _settle frees it
                del self.flying[fut]  # its task (cancelled below) or its thread writes nothing more
                outcome.statuses[start:end] = bytes([self.fail]) * (end - start)
                outcome.failed(start, end, f"handler '{ref}': soft time limit ({limit:g} s) exceeded")
                outcome.timed_out = True
                self.slots.finish(slot, outcome.statuses, outcome.delays)
            self.runner.ended()
            token = CALL_INDEX.set(start)
            self.worker.log.warning("handler '{}': soft time limit ({:g} s) exceeded (queue offset {}){}", ref,
                                    limit, self.offsets[start], "; the call is cancelled" if not
                                    self.runner.use_threads else "; its thread cannot be stopped: the worker "
                                    "recycles after this batch")
            CALL_INDEX.reset(token)
            self._drop(fut)
            self.stop = self.stop or self.orderly

    def _drop(self, fut: "asyncio.Future[Any]") -> None:
        """Stop waiting for a call: a task is cancelled; a thread runs on, counted as stuck until it ends."""
        if fut.done():
            fut.exception() if not fut.cancelled() else None  # retrieved: no "never retrieved" warning
            return
        fut.cancel()
        if self.runner.use_threads:
            # run_in_executor's future is cancelled, the thread is not: it stays busy until the call returns
            self.runner.stuck += 1

    async def _abandon(self) -> None:
        """Whatever is still in flight (SIGTERM, an error here) stays NOT_RUN; tasks get to see their cancel."""
        left = list(self.flying)
        self.flying.clear()
        with self.lock:
            self.unsettled.clear()
        for fut in left:
            self._drop(fut)
            self.runner.ended()
        tasks = [f for f in left if not self.runner.use_threads]
        if tasks:
            await asyncio.wait(tasks, timeout=1.0)
