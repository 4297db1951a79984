"""Judging a failed orderly call (``rmqrun/consumer/orderly_failures.py``): which messages count, which go to the DLQ."""

from __future__ import annotations

import asyncio
from typing import Any

from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.orderly_failures import failed_call, suspend_or_dlq
from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.consumer.retry import reconsume_times
from rmqrun.model import MessageQueue, Status as V
from rmqrun.remoting.message import encode_stored

MQ = MessageQueue("T", "broker-a", 0)


def entries(counts: list[int], start: int = 10) -> list[QueuedMessage]:
    return [QueuedMessage(start + i, 4, bytes(encode_stored(topic="T", body=b"body", queue_offset=start + i,
                                                             reconsume_times=n)))
            for i, n in enumerate(counts)]


class _SendBack:
    def __init__(self, take: bool) -> None:
        self.take = take
        self.sent: list[str] = []

    async def republish(self, msg: Any, limit: int, times: int, failure: Any = None) -> bool:
        self.sent.append(msg.body.decode() + f"@{times}")
        return self.take


class _Engine:
    def __init__(self, take: bool = True, clustering: bool = True) -> None:
        self.config = ConsumerConfig(group="G", namesrv="127.0.0.1:9876", subscriptions={"T": "*"},
                                     max_reconsume_times=1, suspend_current_queue_time_ms=200,
                                     message_model="CLUSTERING" if clustering else "BROADCASTING")
        self.send_back = _SendBack(take)

    async def dead_letter_undecodable(self, mq: MessageQueue, record: Any, offset: int) -> bool:
        raise AssertionError("every record here decodes")


def judge(engine: _Engine, call: list[QueuedMessage]) -> tuple[int, float]:
    return asyncio.run(suspend_or_dlq(engine, PullRequest(MQ, ProcessQueue(MQ), 0), call, -1))  # type: ignore[arg-type]


def test_the_failed_call_is_what_ran_and_failed_not_what_came_back_not_run() -> None:
    e = entries([0, 0, 0, 0])
    assert failed_call(e, [V.SUSPEND, V.NOT_RUN, V.NOT_RUN, V.NOT_RUN], 4) == e[:1]  # a one-message handler
    assert failed_call(e, [V.SUSPEND, V.SUSPEND, V.SUSPEND, V.NOT_RUN], 4) == e[:3]  # a batch handler's chunk
    assert failed_call(e, [V.SUSPEND] * 4, 2) == e[:2]                              # one call at most
    assert failed_call([], [], 4) == []


def test_below_the_limit_every_message_of_the_call_counts_a_retry_and_the_queue_suspends() -> None:
    engine, call = _Engine(), entries([0, 0])
    assert judge(engine, call) == (0, 0.2)
    assert [reconsume_times(x.payload) for x in call] == [1, 1] and not engine.send_back.sent


def test_the_prefix_at_the_limit_goes_to_the_dlq_and_the_rest_is_retried() -> None:
    """A newer message joined the call after the older ones had failed: the older ones are not retried again."""
    engine, call = _Engine(), entries([1, 1, 0])
    assert judge(engine, call) == (2, 0.2)
    assert engine.send_back.sent == ["body@1", "body@1"]
    assert reconsume_times(call[2].payload) == 1


def test_a_call_wholly_at_the_limit_moves_on_without_suspending() -> None:
    engine, call = _Engine(), entries([1, 1])
    assert judge(engine, call) == (2, 0.0)


def test_a_dlq_send_refused_keeps_the_message_first_in_line() -> None:
    engine, call = _Engine(take=False), entries([1, 0])
    assert judge(engine, call) == (0, 0.2)
    assert engine.send_back.sent == ["body@1"] and [reconsume_times(x.payload) for x in call] == [2, 1]


def test_broadcasting_has_no_dlq() -> None:
    engine, call = _Engine(clustering=False), entries([5])
    assert judge(engine, call) == (0, 0.2) and not engine.send_back.sent
