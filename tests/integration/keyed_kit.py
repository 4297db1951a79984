"""Producing keyed backlogs and auditing what ``tests/integration/handlers/keyed_handler.py`` recorded.

The backlog: message ``i`` has body ``msg-<i>`` and key ``str(i % keys)`` (sent as a sharding
key, so it lands on one queue and carries ``__SHARDINGKEY``). The previous message of the
same key is therefore ``i - keys``; the audits use that to check order without knowing offsets.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from rmqrun.client.producer import Producer
from tests.waiting import SEND_ANSWER_TIMEOUT_S


async def produce_keyed(namesrv: str, topic: str, n: int, keys: int, *, start: int = 0) -> None:
    """Send messages ``start .. start+n-1``; a window never holds two messages of one key, so
    each key's messages are stored in their order."""
    async with Producer(namesrv, "PG_keyed", send_timeout=SEND_ANSWER_TIMEOUT_S) as producer:
        async def one(i: int) -> None:
            await producer.send(topic, f"msg-{i}".encode(), keys=f"k{i}", properties={"idx": str(i)},
                                sharding_key=str(i % keys))
        await one(start)  # alone: it may create the topic, after which the producer has its real route
        for lo in range(start + 1, start + n, keys):
            hi = min(lo + keys, start + n)
            await asyncio.gather(*(one(i) for i in range(lo, hi)))


@dataclass
class Call:
    """One handler call on one message, as the handler recorded it."""

    pid: int
    key: str
    i: int
    queue: int
    offset: int
    start: int
    reconsume: int
    end: int | None = None  # None: the worker died inside the call
    status: str = "-"


def read_calls(path: Path) -> list[Call]:
    """Every call, start and end paired per worker process (a worker runs one call at a time)."""
    if not path.exists():
        return []
    open_calls: dict[int, Call] = {}
    calls: list[Call] = []
    # a line still being written (workers append while the test reads) has no newline yet: it counts next time
    for line in path.read_text().split("\n")[:-1]:
        parts = line.split()
        if not parts:
            continue
        kind, pid, key, i, queue, offset, ns, reconsume = parts[:8]
        if kind == "S":
            call = Call(int(pid), key, int(i), int(queue), int(offset), int(ns), int(reconsume))
            open_calls[call.pid] = call
            calls.append(call)
        else:
            call = open_calls.pop(int(pid))
            assert call.i == int(i), f"worker {pid} ended {i} while running {call.i}"
            call.end, call.status = int(ns), parts[8]
    return calls


def finished(calls: list[Call]) -> list[Call]:
    return [c for c in calls if c.status == "ok"]


def assert_key_order(calls: list[Call], keys: int, *, moved_on: frozenset[int] | set[int] = frozenset()) -> None:
    """Per key: calls never overlap, and a message's call starts only once the key's previous
    message has succeeded (or was dead-lettered: ``moved_on``) in an earlier call."""
    by_key: dict[str, list[Call]] = defaultdict(list)
    for call in calls:
        by_key[call.key].append(call)
    for key, seq in by_key.items():
        seq.sort(key=lambda c: c.start)
        done: set[int] = set()
        prev: Call | None = None
        for call in seq:
            if prev is not None and prev.end is not None:
                assert call.start >= prev.end, f"key {key}: {call.i} started while {prev.i} was running"
            before = call.i - keys
            assert before < 0 or before in done or before in moved_on, \
                f"key {key}: message {call.i} ran before its predecessor {before} had succeeded"
            if call.status == "ok":
                done.add(call.i)
            prev = call


def max_overlap(calls: list[Call]) -> int:
    """The most handler calls that were running at the same moment."""
    events = sorted([(c.start, 1) for c in calls if c.end is not None] +
                    [(c.end, -1) for c in calls if c.end is not None])
    best = running = 0
    for _, step in events:
        running += step
        best = max(best, running)
    return best


async def stored_messages(namesrv: str, broker_address: str, topic: str) -> list:  # type: ignore[type-arg]
    """Every message of a small topic (a DLQ), pulled from offset 0 of each queue."""
    from rmqrun.protocol.headers import PullMessageRequestHeader
    from rmqrun.client.instance import ClientInstance
    from rmqrun.remoting.message import decode_messages
    inst = ClientInstance(namesrv, instance_name="probe-keyed")
    try:
        out = []
        for mq in await inst.subscribe_queues(topic):
            header = PullMessageRequestHeader(consumer_group="probe", topic=topic, queue_id=mq.queue_id,
                                              queue_offset=0, max_msg_nums=32, sys_flag=4, commit_offset=0,
                                              suspend_timeout_millis=0, sub_version=0, subscription="*",
                                              expression_type="TAG")
            result = await inst.broker.pull(broker_address, header)
            out.extend(decode_messages(result.body))
        return out
    finally:
        await inst.close()
