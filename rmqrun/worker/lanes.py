"""A ``threads`` or ``asyncio`` worker's loop: several batches at once, one lane each.

Why: the supervisor hands a worker batches of one queue (or one key, in key
mode) each; with one batch at a time, an orderly worker of concurrency N
would still run one call at a time whatever N is, since an orderly batch
runs its calls in order. So the worker keeps reading frames while batches
run, and starts each batch in a free lane of its progress block
(:mod:`rmqrun.pipe.progress`), up to its lanes; every call of every lane
counts against the one bound of ``worker_concurrency`` calls in flight
(:class:`rmqrun.worker.call_runners.CallRunner`), and each batch is answered
(DONE) as it ends, in whatever order (results carry batch ids).

Order: the supervisor never has two batches of one orderly queue or key in
a worker at once unless the later one is chained to the earlier
(``Run.after``); a chained batch waits here, lane-less, until the batch it
follows has been answered, then runs only if that one succeeded in full
(:class:`rmqrun.worker.clean_batches.CleanBatches`). Batches that wait for a
lane start in the order they came.

A batch marked ``alone`` (the re-run of a message suspected of killing a
worker) starts only when no other runs, and nothing starts beside or after
it until it is answered: a death then names its message, as in a process
worker.

Everything here runs on the worker's event loop in its main thread: the
progress block keeps its one writer per lane. SIGTERM is seen by every
running batch within ``POLL_S`` (their calls in flight come back NOT_RUN);
batches still waiting are not answered (the supervisor has them back with
the worker's exit). STOP ends the loop once every batch it holds is answered.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

from rmqrun.aio import wait_event
from rmqrun.namespace import unwrap
from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import ExitCode, Run, Stop, WireError
from rmqrun.worker.batch_outcome import BatchOutcome
from rmqrun.worker.call_runners import POLL_S, CallRunner
from rmqrun.worker.call_slots import CallSlots
from rmqrun.worker.logs import CALL_BATCH, MessageContext

__all__ = ["LaneServer"]


class LaneServer:
    """Reads the worker's frames and runs its batches, each in a lane (see the module docstring)."""

    def __init__(self, runner: CallRunner) -> None:
        self.runner = runner
        self.worker = runner.worker
        cfg = self.worker.config
        prog = self.worker.progress
        lanes = progress_mem.lanes_for(cfg.worker_class, cfg.concurrency)
        if prog is not None:
            lanes = min(lanes, progress_mem.lanes_of(prog.mm))  # the block the supervisor made
        self.lanes = lanes
        self.writers = [prog.lane(k) if prog is not None else None for k in range(lanes)]
        self.slots = [CallSlots(runner.size, w) for w in self.writers]
        self.contexts = [MessageContext() for _ in range(lanes)]
        #: free lanes, the lowest taken first
        self.free = list(range(lanes - 1, -1, -1))
        #: batches received and not yet in a lane, in the order they came
        self.waiting: deque[Run] = deque()
        #: batch id -> the task running it in its lane
        self.active: dict[int, asyncio.Task[None]] = {}
        self._wake: asyncio.Event | None = None
        self._eof = False
        self._failed: BaseException | None = None
        #: the batch running alone now (:class:`rmqrun.pipe.wire.Batch`.alone: a suspect's re-run)
        self.alone: int | None = None

    # ------------------------------------------------------------------ the loop
    async def serve(self) -> int:
        worker = self.worker
        pipe = worker.pipe
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        fd = pipe.sock.fileno()
        loop.add_reader(fd, self._on_readable)
        stopping = False
        try:
            while True:
                while pipe.has_frame():
                    try:
                        frame = pipe.frames.next()
                    except WireError as exc:
                        worker.log.error("bad frame from the supervisor: {}", exc)
                        return ExitCode.LOST_SUPERVISOR
                    if isinstance(frame, Run):
                        self.waiting.append(frame)
                    elif isinstance(frame, Stop):
                        stopping = True
                    else:
                        worker.log.error("unexpected frame from the supervisor: {}", type(frame).__name__)
                        return ExitCode.LOST_SUPERVISOR
                if self._failed is not None:
                    raise self._failed
                self._start_waiting()
                pipe.flush()
                if worker._terminating:
                    break
                if not self.active and not self.waiting:
                    if stopping:
                        break
                    if self._eof and not pipe.has_frame():
                        worker.log.warning("the supervisor closed the pipe; exiting")
                        return ExitCode.LOST_SUPERVISOR
                self._wake.clear()
                await wait_event(self._wake, POLL_S)
        finally:
            if not self._eof:
                loop.remove_reader(fd)
            if self.active:  # SIGTERM: each running batch answers within POLL_S
                await asyncio.wait(list(self.active.values()), timeout=2.0)
            pipe.flush()
        return ExitCode.OK

    def _on_readable(self) -> None:
        """Bytes from the supervisor: into the frame buffer (the socket is readable: this does not block)."""
        try:
            data = self.worker.pipe.read()
        except OSError:
            data = b""  # type: ignore[assignment]
        if data:
            self.worker.pipe.frames.feed(data)
        else:
            self._eof = True
            asyncio.get_running_loop().remove_reader(self.worker.pipe.sock.fileno())
        assert self._wake is not None
        self._wake.set()

    def _start_waiting(self) -> None:
        """Start waiting batches in free lanes, in order; a chained batch only once the one it follows is
        answered (so it never runs beside it)."""
        if not self.free or not self.waiting:
            return
        kept: deque[Run] = deque()
        held: set[int] = set()
        blocked = self.alone is not None  # nothing starts beside a batch that runs alone, or before one
        while self.waiting:
            run = self.waiting.popleft()
            if blocked or not self.free or (run.after and (run.after in self.active or run.after in held)) \
                    or (run.alone and self.active):
                kept.append(run)
                held.add(run.batch_id)
                blocked = blocked or run.alone
                continue
            lane = self.free.pop()
            self.active[run.batch_id] = asyncio.ensure_future(self._lane(lane, run))
            if run.alone:
                self.alone = run.batch_id
                blocked = True
        self.waiting = kept

    # ------------------------------------------------------------------ one lane
    async def _lane(self, lane: int, run: Run) -> None:
        CALL_BATCH.set(self.contexts[lane])  # this task's own context: its calls' logs name its messages
        try:
            await self._run(lane, run)
        except BaseException as exc:  # a bug here must not leave a batch unanswered: the worker ends
            if self._failed is None:
                self._failed = exc
        finally:
            del self.active[run.batch_id]
            if self.alone == run.batch_id:
                self.alone = None
            self.free.append(lane)
            self.free.sort(reverse=True)
            self.worker._check_recycle()
            assert self._wake is not None
            self._wake.set()

    async def _run(self, lane: int, run: Run) -> None:
        """One RUN in a lane: as :meth:`rmqrun.worker.main.Worker._run_batch`, its calls on the loop."""
        worker = self.worker
        prog = self.writers[lane]
        if not worker._may_run(run, prog):
            return
        t0 = time.perf_counter()
        msgs, offsets, decode_errors = worker._decode(run)
        context = self.contexts[lane]
        context.begin(msgs, offsets, unwrap(worker.config.namespace, run.topic))
        outcome = BatchOutcome(len(msgs))
        try:
            await self.runner.run_batch(run, msgs, offsets, decode_errors, outcome, self.slots[lane])
        finally:
            context.end()
        if worker.config.max_memory > 0 and msgs:
            worker._memory_check()
        if worker._terminating:
            outcome.error = outcome.error or "worker terminated (SIGTERM)"
        worker._answer(run, prog, outcome, offsets, t0)
        worker.pipe.flush()
