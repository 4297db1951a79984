"""Pull exactly one :class:`~rmqrun.spark.ranges.QueueRange`: every message of ``[start, end)``, nothing past it.

Used by the data source's partitions on executors and reusable by ``rmqrun
spark``; it needs no pyspark. Each pull asks for at most ``end - offset``
entries, so the broker never scans past the range, and messages at or past
``end`` are dropped anyway. Offsets lost to retention (the broker answers
OFFSET_ILLEGAL, the queue's min offset is past ours) fail the read when
``fail_on_data_loss`` is true and are otherwise logged and skipped, like the
Kafka source's ``failOnDataLoss``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from loguru import logger

from rmqrun.model import Message
from rmqrun.pull import PullStatus
from rmqrun.spark.columns import ColumnRows
from rmqrun.spark.errors import SourceError
from rmqrun.spark.ranges import QueueRange


def _lost(r: QueueRange, what: str, fail: bool) -> None:
    text = (f"rocketmq source: {r.topic} {r.broker}:{r.queue_id} offsets [{r.start}, {r.end}): {what}")
    if fail:
        raise SourceError(text + " (set option failOnDataLoss=false to skip lost offsets)")
    logger.warning("{} (failOnDataLoss=false: skipped)", text)


def _next_offset(r: QueueRange, res, offset: int, fail: bool) -> int | None:  # type: ignore[no-untyped-def]
    """Where the range goes on after the pull answer ``res`` from ``offset`` (None: the range is done)."""
    if res.status is PullStatus.FOUND or res.status is PullStatus.NO_MATCHED_MSG:
        if res.next_begin_offset <= offset:
            raise SourceError(f"rocketmq source: {r.topic} {r.broker}:{r.queue_id}: the broker did not "
                              f"advance past offset {offset} ({res.status.value})")
        return res.next_begin_offset  # type: ignore[no-any-return]
    if res.status is PullStatus.OFFSET_ILLEGAL:
        if offset < res.min_offset:
            _lost(r, f"offsets {offset}..{res.min_offset - 1} were deleted (queue min offset "
                     f"{res.min_offset})", fail)
            return res.min_offset  # type: ignore[no-any-return]
        _lost(r, f"offset {offset} is past the queue's end (max offset {res.max_offset}, "
                 f"{res.remark or 'OFFSET_ILLEGAL'})", fail)
        return None
    # NO_NEW_MSG before the range's end: the queue is shorter than planned
    _lost(r, f"the queue ends at {res.max_offset}, before the planned end {r.end}", fail)
    return None


def read_range(consumer, r: QueueRange, tags: str = "*", *, fail_on_data_loss: bool = True,  # type: ignore[no-untyped-def]
               batch_size: int = 32) -> Iterator[Message]:
    """Yield the messages of ``r`` whose tags match ``tags``, in queue order."""
    mq = r.mq
    offset: int | None = r.start
    while offset is not None and offset < r.end:
        res = consumer.pull(mq, tags, offset, max_nums=min(batch_size, r.end - offset))
        for msg in res.messages:
            if msg.queue_offset >= r.end:
                return
            if msg.queue_offset >= offset:
                yield msg
        offset = _next_offset(r, res, offset, fail_on_data_loss)


def read_range_columns(consumer, r: QueueRange, rows: Callable[[], ColumnRows],  # type: ignore[no-untyped-def]
                       tags: str = "*", *, fail_on_data_loss: bool = True, batch_size: int = 32
                       ) -> Iterator[None]:
    """:func:`read_range`'s pulls, each answer's records decoded straight into ``rows()``
    (:class:`~rmqrun.spark.columns.ColumnRows`, asked for at every pull so the caller may start a
    new one between pulls) rather than into messages; yields after each pull. Same range, same
    filter, same errors and data-loss handling.

    Without a tag filter an answer ends where the next pull starts (a queue has no gaps: ``offset``
    plus as many entries as the broker gives per pull), so that next pull is sent before this one's
    answer is awaited: the broker reads one while this process decodes the other. A pull sent
    ahead for an offset the answer does not end at (a short answer, a lost offset) is dropped unread.
    """
    mq = r.mq
    offset: int | None = r.start
    step = batch_size                 # entries per answer; learned from a short answer (the broker's cap)
    ahead = (tags or "*").strip() == "*" and hasattr(consumer, "pull_undecoded_later")
    early = None                      # (offset, future) of the pull sent ahead
    try:
        while offset is not None and offset < r.end:
            want = min(batch_size, r.end - offset)
            sent, early = (early[1] if early is not None and early[0] == offset else _drop(early)), None
            guess = offset + min(step, want)
            if ahead and guess < r.end:
                early = (guess, consumer.pull_undecoded_later(mq, tags, guess, min(batch_size, r.end - guess)))
            res, sub = sent.result() if sent is not None else consumer.pull_undecoded(mq, tags, offset, max_nums=want)
            if res.status is PullStatus.FOUND and 0 < res.next_begin_offset - offset < want:
                step = res.next_begin_offset - offset
            if res.status is PullStatus.FOUND and res.body and rows().add(res.body, mq, sub, offset, r.end):
                return
            yield None
            offset = _next_offset(r, res, offset, fail_on_data_loss)
    finally:
        _drop(early)


def _drop(early: Any) -> None:
    """Cancel a pull sent ahead that will not be read (its answer, if it comes, is ignored)."""
    if early is not None:
        early[1].cancel()
