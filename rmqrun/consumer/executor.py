"""The seam between the consumer logic and whatever runs the handler.

The push-consumer engine decides *what* to consume and what to do with the
outcome; an :class:`Executor` decides *where* it runs. rmqrun's supervisor
implements it with worker processes (orderly queues pinned to one worker,
concurrent batches spread by load); a test may implement it in-process. The
engine awaits :meth:`Executor.run` (or takes its optional ``submit``'s future) and never learns about
processes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Protocol, Sequence

from rmqrun.model import MessageQueue, RecordData, Status


@dataclass(slots=True, eq=False)
class ConsumeJob:
    """Messages of one queue, in offset order, as raw stored records."""

    mq: MessageQueue
    orderly: bool
    records: Sequence[RecordData]
    offsets: list[int]
    auto_commit: bool = True
    #: the ProcessQueue the job comes from (anything with a ``dropped`` flag): an executor does
    #: not start a job whose queue was dropped meanwhile (Java checks it as a consume request starts)
    pq: Any = None
    #: what the executor pins and serialises an orderly job on (None: the queue). Key mode passes a
    #: KeyLane, so each key runs one job at a time on the worker its key hashes to
    dispatch_key: Hashable | None = None
    #: orderly under the broker's lock (clustering): an executor does not start the job unless ``pq`` still
    #: holds that lock, fresh and without a gap (``pq.holds_lock()``). A job that waited for a worker while
    #: its process was frozen past the lock's expiry would otherwise run behind what another client
    #: committed meanwhile (the lock-gap rule, ``lock_gap.py``); it comes back NOT_RUN, with no error
    under_lock: bool = False
    #: orderly: the job of the same queue, not yet settled, that this one follows (pipelining; only for an
    #: executor with ``runs_chains``). It runs only after that one succeeded in full, else not at all
    after: "ConsumeJob | None" = None
    #: for a job that follows another: whether its queue is still ours (the lock held); checked until it runs
    still_owned: Callable[[], bool] | None = None
    #: set by the executor: the batch carrying the job now, and once settled, whether every message succeeded
    batch_id: int = 0
    clean: bool | None = None

    def __len__(self) -> int:
        return len(self.offsets)

    def settled(self, future: "asyncio.Future[JobResult]") -> None:
        """Its executor's future is done: record whether the job succeeded in full (a job chained to it may
        then run)."""
        if future.cancelled() or future.exception() is not None:
            self.clean = False
            return
        verdicts = future.result().verdicts
        self.clean = verdicts.count(Status.SUCCESS) == len(verdicts)


@dataclass(slots=True)
class JobResult:
    """One verdict per message of the job, in the job's order."""

    verdicts: list[Status]
    delay_levels: list[int] = field(default_factory=list)
    suspend_ms: int = -1
    error: str | None = None
    #: time the handler's process spent on the job (None: unknown), for the latency histogram
    handler_seconds: float | None = None
    #: each failed message's own error, by its index in the job (what its handler call raised); empty when
    #: the executor reports only the job's ``error``
    errors: dict[int, str] = field(default_factory=dict)
    #: a time limit cut the job short (the message tracing's TIME_OUT context code)
    timed_out: bool = False

    def delay_level(self, i: int) -> int:
        return self.delay_levels[i] if i < len(self.delay_levels) else 0

    def error_of(self, i: int) -> str | None:
        """What went wrong with message ``i``, for its failure and dead-letter lines in every mode: its own
        error where the executor reports them (None: its call raised nothing, e.g. ``ReconsumeLater``), else
        the job's (an executor that reports one error per job). Never another message's error."""
        if self.errors:
            return self.errors.get(i)
        return self.error


class Executor(Protocol):
    #: True when the executor stops a handler call itself at consumeTimeout and always
    #: answers for every job (the worker pool with a time limit does). The concurrent
    #: service then skips Java's cleanExpireMsg sweep: the executor's own limit already
    #: ends a stuck call. Optional: an executor without the attribute gets the sweep,
    #: which counts from when a message's handler call began if the executor can say
    #: (:class:`~rmqrun.consumer.context.HandlerCalls`), else from the hand-over.
    enforces_time_limit: bool
    #: Optional, True when the executor honours :attr:`ConsumeJob.after`: a job handed over while the job
    #: it follows runs is run after it and only if it succeeded in full (else answered all NOT_RUN). The
    #: orderly service pipelines a queue's jobs only then.
    runs_chains: bool

    async def run(self, job: ConsumeJob) -> JobResult:
        """Consume the job; return when every message has a verdict.

        May wait for capacity first (backpressure). Must not raise for a handler
        failure (that is a verdict); raises only when the job cannot be run at all
        (shutting down), in which case nothing of it counts as consumed.

        Optional beside it: ``submit(job) -> asyncio.Future[JobResult]``, the same as a future (failed where
        ``run`` raises). The consume services hand their jobs over through it when an executor has it (the
        pool's): a job per pull then costs no task awaiting ``run``. A wrapper that delegates attributes must
        define its own (``trace_hook.TracingExecutor``), or its ``run`` is skipped.
        """
        ...
