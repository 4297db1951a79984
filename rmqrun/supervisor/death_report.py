"""What the pool says about a worker that died or was killed: OOM hints, messages, hard-limit results.

These are the parts of handling a death that need no pool state: reading
the cgroup's OOM counter, naming the messages a dead handler call was on,
and building the result of a batch whose worker was killed at the hard time
limit. Kept apart so the pool's death handling reads as decisions only.
"""

from __future__ import annotations

from loguru import logger

from rmqrun.model import message_position
from rmqrun.pipe import progress as progress_mem
from rmqrun.remoting.message_props import PROPERTY_RETRY_TOPIC
from rmqrun.pipe.wire import Batch, BatchResult, ConsumeMode, Status

__all__ = ["OomWatch", "describe_messages", "hard_limit_result", "log_death"]


def _oom_kills() -> int | None:
    """The cgroup v2 ``oom_kill`` counter of this process's cgroup, or None when unreadable."""
    try:
        with open("/proc/self/cgroup") as f:
            rel = next((line.split(":", 2)[2].strip() for line in f if line.startswith("0::")), None)
        if rel is None:
            return None
        with open(f"/sys/fs/cgroup{rel}/memory.events") as f:
            for line in f:
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
    except (OSError, ValueError, IndexError):
        return None
    return None


class OomWatch:
    """Tells an OOM kill from another SIGKILL by whether the cgroup's ``oom_kill`` count rose.

    The count is read once at start as the baseline, so kills from before the
    pool existed are not blamed on its workers.
    """

    def __init__(self) -> None:
        self._seen = _oom_kills() or 0

    def hint(self) -> str:
        """For a SIGKILL rmqrun did not send: the kernel's OOM killer is the usual sender."""
        count = _oom_kills()
        if count is not None and count > self._seen:
            self._seen = count
            return " (OOM-killed: the cgroup's memory.events oom_kill count rose)"
        return " (not sent by rmqrun: possibly the OOM killer)"


def describe_messages(batch: Batch, start: int, end: int) -> str:
    """topic, queue, offset and msg id of messages [start, end) of a batch, for the logs."""
    from rmqrun.remoting.message import decode_message
    records = batch.split_records()
    out = []
    for i in range(max(0, start), min(end, len(records))):
        try:
            msg, _ = decode_message(records[i], broker_name=batch.broker_name, decompress=False)
            where = message_position(batch.topic or msg.topic, batch.broker_name, msg.queue_id, msg.queue_offset,
                                     msg.properties.get(PROPERTY_RETRY_TOPIC) or msg.topic)
            out.append(f"message {msg.msg_id} at {where}")
        except Exception as exc:  # a record that does not decode is described by its place
            out.append(f"record {i} of batch {batch.batch_id} ({batch.queue_key}; undecodable: {exc})")
    return ", ".join(out) or f"batch {batch.batch_id} of {batch.queue_key}"


def hard_limit_result(batch: Batch, slot: int, pid: int, elapsed: float,
                      progress: progress_mem.Progress | None = None) -> BatchResult:
    """The result of a batch whose worker was killed at the hard limit.

    Messages the worker had finished keep their statuses; the call that hung
    fails (retry / suspend); messages after it never ran (NOT_RUN). Without
    progress, every message fails, as nothing is known to have finished.
    """
    status = Status.SUSPEND if batch.mode is ConsumeMode.ORDERLY else Status.RECONSUME_LATER
    offsets = tuple(batch.queue_offsets())
    n = len(offsets)
    error = f"hard time limit: worker {slot} (pid {pid}) killed after {elapsed:.1f} s"
    if progress is not None and progress.batch_id == batch.batch_id and progress.in_call and progress.calls:
        return _hard_limit_spread(batch, slot, pid, elapsed, progress, status, error)
    if progress is not None and progress.batch_id == batch.batch_id and progress.in_call:
        done = min(progress.done, n)
        end = min(max(progress.call_end, done + 1), n)
        statuses = progress.statuses[:done] + bytes([status]) * (end - done) + bytes([Status.NOT_RUN]) * (n - end)
        delays = tuple(progress.delay_levels[:done]) + (0,) * (n - done)
        # the limit is the error of the call that hung only (what failed before it raised its own, unknown here)
        errors = tuple((i, error) for i in range(done, end))
    else:
        statuses, delays, errors = bytes([status]) * n, (0,) * n, ()
    return BatchResult(batch, slot, pid, statuses, delays, offsets, -1, True, error, elapsed, errors)


def _hard_limit_spread(batch: Batch, slot: int, pid: int, elapsed: float, progress: progress_mem.Progress,
                       status: Status, error: str) -> BatchResult:
    """:func:`hard_limit_result` for calls at once (threads, asyncio): what finished keeps its status, each
    call in flight fails, the rest never ran."""
    offsets = tuple(batch.queue_offsets())
    n = len(offsets)
    statuses = bytearray(progress.statuses[:n]) + bytes([Status.NOT_RUN]) * max(0, n - progress.done)
    delays = list(progress.delay_levels[:n]) + [0] * max(0, n - progress.done)
    for i, st, delay in progress.later:
        if i < n:
            statuses[i], delays[i] = st, delay
    failed = [i for start, end, _ in progress.calls for i in range(start, min(end, n))]
    for i in failed:
        statuses[i] = status
    return BatchResult(batch, slot, pid, bytes(statuses), tuple(delays), offsets, -1, True, error, elapsed,
                       tuple((i, error) for i in sorted(failed)))


def in_flight_calls(progress: progress_mem.Progress) -> list[tuple[int, int]]:
    """The handler calls a worker was in, as (start, end): one per slot with calls at once, else the one."""
    if progress.calls:
        return sorted((start, end) for start, end, _ in progress.calls)
    return [(progress.call_start, progress.call_end)]


def log_death(worker_id: int, pid: int, expected: bool, what: str, batches: list[Batch],
              calling: list[tuple[Batch, progress_mem.Progress]]) -> None:
    """One line per death (debug when ``expected``: a clean exit after STOP); a second naming the messages
    when it died inside handler calls (of each batch it was in a call of)."""
    if expected:
        logger.debug("worker {} (pid {}) exited", worker_id, pid)
    else:
        logger.warning("worker {} (pid {}) {}{}", worker_id, pid, what,
                       f" holding {len(batches)} batch(es)" if batches else "")
    for in_call, progress in calling:
        calls = in_flight_calls(progress)
        logger.error("worker {} (pid {}) {} inside the handler call{} on {}", worker_id, pid, what,
                     "" if len(calls) == 1 else f"s ({len(calls)} at once)",
                     "; ".join(describe_messages(in_call, start, end) for start, end in calls))
