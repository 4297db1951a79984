"""The POP engine (``pop_push.PopPushConsumer``) on a fake client instance and POP client: no broker.

QUERY_ASSIGNMENT's answer decides what is popped: queue id -1 in POP mode (every queue, shared with the
group), this client's queues when the broker still has the group in PULL mode; an assignment that goes
stops its pop loop. What is popped reaches the executor and is acked; a broker without POP stops the
start with a clear error. The pull side keeps only ``%RETRY%<group>``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rmqrun.client.pop_api import PopNotSupportedError
from rmqrun.consumer.pop_push import PopPushConsumer
from rmqrun.errors import ConfigError
from rmqrun.model import MessageQueue
from rmqrun.protocol.assignment import MessageQueueAssignment, MessageRequestMode
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError
from tests.fakes.engine import BROKER, FakeAssignments, FakeClient, FakeExecutor, FakePopClient, config, popped, succeed
from tests.waiting import eventually_async

EVERY_QUEUE = MessageQueue("T", BROKER, -1)


def run(coro: Any) -> None:
    asyncio.run(coro)


def engine(**kw: Any) -> tuple[PopPushConsumer, FakePopClient, FakeAssignments]:
    client = FakeClient()
    client.queues("T", 4)
    consumer = PopPushConsumer(config(consume_mode="pop", **kw), FakeExecutor(succeed), instance=client)  # type: ignore
    consumer.pop_client = pop = FakePopClient()  # type: ignore[assignment]
    consumer.assignments = assignments = FakeAssignments()  # type: ignore[assignment]
    return consumer, pop, assignments


async def _stop(consumer: PopPushConsumer) -> None:
    consumer.stop_pulling()
    await consumer.pop_service.stop(1)
    for req in consumer.pop_table.values():
        if req.task is not None:
            await asyncio.wait([req.task])


def test_the_pull_side_keeps_only_the_retry_topic() -> None:
    consumer, _, _ = engine()
    assert consumer.subscribed_topics() == ["%RETRY%G"]


def test_a_pop_mode_assignment_pops_every_queue_and_acks_what_it_consumed() -> None:
    async def main() -> None:
        consumer, pop, assignments = engine(pop_batch_size=8, pop_invisible_time_ms=20_000)
        assignments.answers["T"] = [MessageQueueAssignment(EVERY_QUEUE, MessageRequestMode.POP)]
        pop.batches = [[popped(0), popped(1, queue_id=1)]]
        assert await consumer.refresh_assignments()
        assert list(consumer.pop_table) == [EVERY_QUEUE]
        await eventually_async(lambda: pop.all_acked == [0, 1], what="both messages acked")
        first = pop.pops[0]
        assert (first["topic"], first["queue_id"], first["max_msg_nums"], first["invisible_time_ms"],
                first["order"]) == ("T", -1, 8, 20_000, False)
        assert consumer.pop_stats.popped == 2
        assert sorted(o for j in consumer.executor.started for o in j.offsets) == [0, 1]
        assert not await consumer.refresh_assignments(), "the same answer changes nothing"
        await _stop(consumer)

    run(main())


def test_an_assignment_of_every_queue_counts_the_topic_s_queues_on_its_broker_and_follows_a_topic_update() -> None:
    """Queue id -1 stands for the topic's readable queues on that broker (the cached route): the pop loop's
    window and pops on the wire scale with them (pop_loop.window); one queue's assignment counts one."""
    async def main() -> None:
        consumer, _, assignments = engine()
        consumer.instance.queues("T", 3, broker="other")  # type: ignore[attr-defined]
        consumer.instance.routes["T"] += [MessageQueue("T", BROKER, i) for i in range(4)]  # type: ignore
        other = MessageQueue("T", "other", -1)
        assignments.answers["T"] = [MessageQueueAssignment(EVERY_QUEUE, MessageRequestMode.POP),
                                    MessageQueueAssignment(other, MessageRequestMode.POP)]
        assert await consumer.refresh_assignments()
        assert {mq.broker_name: req.queues for mq, req in consumer.pop_table.items()} == {BROKER: 4, "other": 3}
        consumer.instance.queues("T", 8)  # the topic updated to 8 queues on BROKER, gone from "other"
        assert not await consumer.refresh_assignments(), "the same assignments"
        assert {mq.broker_name: req.queues for mq, req in consumer.pop_table.items()} == {BROKER: 8, "other": 1}
        one = MessageQueue("T", BROKER, 2)
        assignments.answers["T"] = [MessageQueueAssignment(one, MessageRequestMode.PULL)]
        assert await consumer.refresh_assignments()
        assert consumer.pop_table[one].queues == 1
        await _stop(consumer)

    run(main())


def test_a_pull_mode_answer_pops_only_this_clients_queues_and_a_gone_assignment_stops() -> None:
    async def main() -> None:
        consumer, pop, assignments = engine()
        mine = [MessageQueue("T", BROKER, 0), MessageQueue("T", BROKER, 1)]
        assignments.answers["T"] = [MessageQueueAssignment(mq, MessageRequestMode.PULL) for mq in mine]
        assert await consumer.refresh_assignments()
        assert sorted(consumer.pop_table) == mine
        # several pops may be in flight per queue (issue #32): each queue has one held, and no other queue any
        await eventually_async(lambda: {p["queue_id"] for p in pop.pops} == {0, 1}, what="a pop held on each queue")
        gone = consumer.pop_table[mine[1]]
        assignments.answers["T"] = [MessageQueueAssignment(mine[0], MessageRequestMode.PULL)]
        assert await consumer.refresh_assignments()
        assert list(consumer.pop_table) == [mine[0]] and gone.pq.dropped
        await eventually_async(lambda: gone.task is not None and gone.task.done(), what="its pop loop to end")
        await _stop(consumer)

    run(main())


def test_orderly_pop_pops_with_the_order_flag() -> None:
    async def main() -> None:
        consumer, pop, assignments = engine(orderly=True)
        assignments.answers["T"] = [MessageQueueAssignment(EVERY_QUEUE, MessageRequestMode.POP)]
        await consumer.refresh_assignments()
        await eventually_async(lambda: pop.pops, what="a pop")
        assert pop.pops[0]["order"] is True
        await _stop(consumer)

    run(main())


@pytest.mark.parametrize("refusal", [PopNotSupportedError(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "4.x"),
                                     BrokerError(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "no such code")])
def test_a_broker_without_pop_stops_the_start_with_a_clear_error(refusal: Exception) -> None:
    async def main() -> None:
        consumer, _, assignments = engine()

        async def refuse(*args: Any, **kw: Any) -> Any:
            raise refusal

        assignments.query_assignment = refuse  # type: ignore[method-assign]
        with pytest.raises(ConfigError, match="POP needs RocketMQ 5.x"):
            await consumer.refresh_assignments()
        assert consumer.pop_table == {}

    run(main())


def test_a_failing_assignment_query_keeps_the_table() -> None:
    async def main() -> None:
        consumer, pop, assignments = engine()
        assignments.answers["T"] = [MessageQueueAssignment(EVERY_QUEUE, MessageRequestMode.POP)]
        await consumer.refresh_assignments()

        async def fail(*args: Any, **kw: Any) -> Any:
            raise BrokerError(ResponseCode.SYSTEM_ERROR, "busy")

        assignments.query_assignment = fail  # type: ignore[method-assign]
        assert not await consumer.refresh_assignments()
        assert list(consumer.pop_table) == [EVERY_QUEUE]
        await _stop(consumer)

    run(main())
