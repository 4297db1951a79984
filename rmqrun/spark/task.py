"""One Spark partition of ``rmqrun spark``: pull exactly one offset range and run the handler over it.

This runs on an executor, in Spark's Python worker. It uses the same pieces as
an ``rmqrun run`` worker process, so a handler behaves the same on both:
:func:`~rmqrun.handler.loading.load_handler` (plain or ``@rmqrun.batch``),
:func:`~rmqrun.handler.outcome.map_concurrent` for what it returns, raising
counts as a failure, and a soft time limit per call that raises
:class:`~rmqrun.handler.results.SoftTimeLimitExceeded` inside the handler
(SIGALRM, so only where the task runs in the main thread, as Spark's Python
workers do). ``worker_init`` runs once per partition, with the partition index
as the worker id.

Failed messages leave the task after each handler call, to ``%RETRY%<group>``
or to the attempt's part of ``--failed-to`` (:mod:`rmqrun.spark.send_back`);
the report that goes back to the driver holds counts only. A failure that
cannot be stored fails the task, so Spark retries the partition and the run
never commits past a message that went nowhere.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import traceback
from typing import Any, Callable, Iterable, Iterator

from rmqrun.errors import RmqrunError
from rmqrun.model import Message
from rmqrun.spark.backfill import (
    BAD_RESULT, NOT_ACKED, RECONSUME_LATER, RETURNED_FALSE, SUCCESS, TIME_LIMIT, FailedMessage, RangeReport,
    TaskConfig,
)
from rmqrun.handler.loading import Handler, WorkerInfo, call_hook, load_handler, load_hook
from rmqrun.handler.outcome import BadResultError, map_concurrent
from rmqrun.handler.results import ReconsumeLater, SoftTimeLimitExceeded
from rmqrun.spark.send_back import PartSink, RetrySendError, RetrySink, sink_for

__all__ = ["PartitionFailedError", "RetrySendError", "handle_chunk", "partition_function", "run_range"]

SAMPLE_REASONS = 5


class PartitionFailedError(RmqrunError, RuntimeError):
    """One partition of ``rmqrun spark`` failed; the text (one line naming the range, then the cause's
    traceback) is what Spark shows in the driver's error, where the runner finds it again."""


class _TimeLimit:
    """A soft limit per handler call, as ``rmqrun run``'s workers enforce it (consumeTimeout)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.enabled = seconds > 0 and threading.current_thread() is threading.main_thread()
        self._previous: Any = None

    def _alarm(self, signum: int, frame: Any) -> None:
        raise SoftTimeLimitExceeded(f"soft time limit ({self.seconds:g} s) exceeded")

    def __enter__(self) -> "_TimeLimit":
        if self.enabled:
            self._previous = signal.signal(signal.SIGALRM, self._alarm)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.enabled:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self._previous or signal.SIG_DFL)

    def call(self, fn: Callable[[Any], Any], arg: Any) -> Any:
        if not self.enabled:
            return fn(arg)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        try:
            return fn(arg)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)


def _fail(report: RangeReport, msgs: Iterable[Message], result: str, reason: str, keep: bool,
          delay_level: int = 0) -> None:
    for msg in msgs:
        report.failed += 1
        report.count(result)
        if len(report.sample_reasons) < SAMPLE_REASONS:
            report.sample_reasons.append(f"{msg.broker_name}:{msg.queue_id}@{msg.queue_offset}: {reason}")
        if keep:
            report.failures.append(FailedMessage.of(msg, reason, delay_level))


def handle_chunk(handler: Handler, chunk: list[Message], report: RangeReport, limit: _TimeLimit, keep: bool) -> None:
    """One handler call over ``chunk`` (one message for a plain handler), counted into ``report``."""
    report.handled += len(chunk)
    arg: Any = chunk if handler.is_batch else chunk[0]
    try:
        value = limit.call(handler.fn, arg)
    except SoftTimeLimitExceeded as exc:
        _fail(report, chunk, TIME_LIMIT, str(exc), keep)
        return
    except Exception as exc:
        name = type(exc).__name__
        _fail(report, chunk, f"raised {name}", f"raised {name}: {exc}", keep)
        return
    try:
        outcome = map_concurrent(value, len(chunk), handler.ref)
    except BadResultError as exc:
        _fail(report, chunk, BAD_RESULT, str(exc), keep)
        return
    report.succeeded += outcome.acked
    if outcome.acked:
        report.count(SUCCESS, outcome.acked)
    rest = chunk[outcome.acked:]
    if rest:
        result = RECONSUME_LATER if isinstance(value, ReconsumeLater) else RETURNED_FALSE if value is False \
            else NOT_ACKED
        _fail(report, rest, result, f"returned {value!r}", keep, outcome.delay_level)


def _chunks(messages: Iterator[Message], size: int) -> Iterator[list[Message]]:
    chunk: list[Message] = []
    for msg in messages:
        chunk.append(msg)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run_range(index: int, r: Any, cfg: TaskConfig) -> RangeReport:
    """Handle every message of the :class:`~rmqrun.spark.ranges.QueueRange` ``r``; partition ``index``."""
    from rmqrun.pull import PullConsumer
    from rmqrun.spark.pulling import read_range

    began = time.monotonic()
    report = RangeReport(index, r.topic, r.broker, r.queue_id, r.start, r.end)
    handler = load_handler(cfg.handler, batch_size=cfg.batch_size)
    if cfg.worker_init:
        call_hook(load_hook(cfg.worker_init, "worker_init"), WorkerInfo(index, os.getpid()))
    keep = cfg.failures != "count"
    sink = sink_for(cfg, index)
    try:
        with PullConsumer(cfg.namesrv, cfg.group, timeout=cfg.timeout, namespace=cfg.namespace,
                          security=cfg.security) as consumer, _TimeLimit(cfg.time_limit) as limit:
            for chunk in _chunks(read_range(consumer, r, cfg.tags), max(1, cfg.batch_size)):
                handle_chunk(handler, chunk, report, limit, keep)
                for f in report.failures:
                    sink.add(f)
                report.failures = []
        sink.close()
    except BaseException:
        sink.abort()
        raise
    if isinstance(sink, RetrySink):
        report.sent_to_retry = sink.sent
    elif isinstance(sink, PartSink):
        report.part, report.written = sink.part, sink.written
    report.seconds = time.monotonic() - began
    return report


def partition_function(cfg: TaskConfig, done: Any = None, parts: Any = None
                       ) -> Callable[[int, Iterator[Any]], Iterator[RangeReport]]:
    """The ``mapPartitionsWithIndex`` function: one range per partition, one report out.

    ``done`` / ``parts`` are Spark accumulators (offsets covered, partitions
    finished) the driver polls for progress.
    """

    def run(index: int, ranges: Iterator[Any]) -> Iterator[RangeReport]:
        for r in ranges:
            try:
                report = run_range(index, r, cfg)
            except Exception as exc:
                # One line on top, the cause below: Spark shows this text in the driver's error.
                raise PartitionFailedError(f"rmqrun spark: partition {index} ({r.topic} {r.broker}:{r.queue_id} "
                                   f"[{r.start}, {r.end})) failed: {type(exc).__name__}: {exc}\n"
                                   + "".join(traceback.format_exception(exc))) from None
            if done is not None:
                done.add(r.end - r.start)
            if parts is not None:
                parts.add(1)
            yield report

    return run
