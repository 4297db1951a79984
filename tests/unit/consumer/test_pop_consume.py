"""The POP consume services (``pop_consume.py``, ``pop_orderly.py``) on a fake engine: no broker, real logic.

What reaches the broker per message: an ack (batched) for a success; CHANGE_MESSAGE_INVISIBLETIME to the
delay of its count for a failure; a send-back to the DLQ then an ack at the limit; nothing for a message
not run or one whose invisibility lapsed before its call; an extension for a long call, whose new receipt
the ack then uses. Orderly POP runs a queue's batch in order, retries a failure in place and dead-letters
at the limit.
"""

from __future__ import annotations

import asyncio
from typing import Any

from rmqrun.client.pop_api import PopNotSupportedError
from rmqrun.consumer import pop_acks
from rmqrun.consumer.dead_letters import DeadLetterReason
from rmqrun.model import Status
from rmqrun.consumer.pop_consume import EXTEND_AT
from rmqrun.consumer.pop_queue import now_ms
from rmqrun.consumer.retry import reconsume_times
from rmqrun.protocol.pop import POP_DELAY_LEVELS_S
from rmqrun.remoting.codes import ResponseCode
from tests.fakes.engine import FakePopEngine, config, popped
from tests.waiting import eventually_async


def run(coro: Any) -> None:
    asyncio.run(coro)


async def _settled(engine: FakePopEngine, req: Any) -> None:
    await eventually_async(lambda: not engine.service.in_flight and req.pq.wait_ack_count == 0,
                           what="every message settled")


def test_successes_are_acked_together_and_failures_delayed_by_their_count() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=4))
        req = engine.request()
        engine.deliver(req, [popped(0), popped(1, reconsume_times=2), popped(2), popped(3)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        engine.executor.finish([Status.SUCCESS, Status.RECONSUME_LATER, Status.SUCCESS, Status.RECONSUME_LATER],
                               delay_levels=[0, 0, 0, 5])
        await _settled(engine, req)
        client = engine.pop_client
        assert client.batch_acked == [[0, 2]] and client.acked == []
        assert sorted(client.changed) == [(1, POP_DELAY_LEVELS_S[2] * 1000), (3, POP_DELAY_LEVELS_S[5] * 1000)]
        s = engine.pop_stats
        assert (s.acks, s.nacks, s.dead_lettered) == (2, 2, 0) and engine.stats.failed == 2
        assert engine.send_back.sent == []

    run(main())


def test_a_failure_at_the_limit_goes_to_the_dlq_then_is_acked() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", max_reconsume_times=3))
        req = engine.request()
        engine.deliver(req, [popped(0, reconsume_times=3)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        engine.executor.finish(Status.RECONSUME_LATER, errors={0: "boom"})
        await _settled(engine, req)
        assert engine.send_back.sent == [(0, 0, 3)]
        assert engine.send_back.failures[0].error == "boom"
        assert engine.pop_client.acked == [0] and engine.pop_client.changed == []
        assert engine.pop_stats.dead_lettered == 1

    run(main())


def test_an_undecodable_message_is_dead_lettered_and_one_not_run_left_alone() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=2))
        req = engine.request()
        engine.deliver(req, [popped(0), popped(1)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        engine.executor.finish([Status.UNDECODABLE, Status.NOT_RUN], errors={0: "bad"})
        await _settled(engine, req)
        assert [o for _, o, _ in engine.undecodable] == [0] and engine.pop_client.acked == [0]
        assert engine.pop_client.changed == [] and engine.pop_client.batch_acked == []

    run(main())


def test_a_message_whose_invisibility_lapsed_before_its_call_is_not_consumed() -> None:
    async def main() -> None:
        engine = FakePopEngine()
        req = engine.request()
        engine.deliver(req, [popped(0, invisible_ms=-1)])
        await _settled(engine, req)
        assert engine.executor.started == [] and engine.pop_stats.expired == 1
        assert engine.pop_client.all_acked == [] and engine.pop_client.changed == []

    run(main())


def test_a_lapsed_message_is_left_out_of_its_job_and_the_others_run_at_once() -> None:
    """The lapsed message is dropped when the job is made, so the live ones of the same pop run now: not the
    whole job refused as it starts (PopJobView) for the sake of one message the broker may have given away."""
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=4))
        req = engine.request()
        engine.deliver(req, [popped(0, invisible_ms=-1), popped(1, invisible_ms=60_000)])
        await eventually_async(lambda: engine.executor.pending, what="the job of the live message")
        assert [job.offsets for job in engine.executor.started] == [[1]] and engine.pop_stats.expired == 1
        engine.executor.finish()
        await _settled(engine, req)
        assert engine.pop_client.all_acked == [1]

    run(main())


def test_a_long_call_is_extended_and_acked_with_the_new_receipt() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", pop_invisible_time_ms=30_000))
        req = engine.request()
        [entry] = engine.deliver(req, [popped(0, invisible_ms=30_000)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        assert engine.service.extend_due(now_ms()) == 0, "not yet two thirds of its invisible time"
        later = entry.receipt.pop_time + int(30_000 * EXTEND_AT) + 1
        assert engine.service.extend_due(later) == 1
        await eventually_async(lambda: entry.extensions == 1, what="the extension's answer")
        assert engine.pop_client.changed == [(0, 30_000)] and engine.pop_stats.extensions == 1
        new_receipt = entry.receipt
        engine.executor.finish()
        await _settled(engine, req)
        assert engine.pop_client.batch_acked == [[0]] and entry.receipt is new_receipt

    run(main())


def test_a_broker_without_batch_acks_gets_one_ack_per_message() -> None:
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=2))
        client = engine.pop_client

        async def refuse(addr: str, **kw: Any) -> Any:
            raise PopNotSupportedError(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "4.x")

        client.batch_ack_receipts = refuse  # type: ignore[method-assign]
        req = engine.request()
        engine.deliver(req, [popped(0), popped(1)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        engine.executor.finish()
        await _settled(engine, req)
        assert sorted(client.acked) == [0, 1] and not engine.service.acks.batch_supported

    run(main())


def test_an_ack_on_its_way_frees_flow_control_but_the_job_waits_for_the_brokers_answer() -> None:
    """As Java's decFoundMsg once ackAsync is sent: a success no longer counts as un-acked for the pop loop's
    flow control while its (batched) ack is on the wire; the job still ends only once the broker answered,
    so a stop's grace waits for the answer as before."""
    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=2))
        client = engine.pop_client
        answer = asyncio.Event()
        sent: list[list[int]] = []

        async def held(addr: str, *, groups: Any, **kw: Any) -> Any:
            sent.append([r.queue_offset for _topic, receipts in groups for r in receipts])
            await answer.wait()
            return client.batch_ack_status

        client.batch_ack_receipts = held  # type: ignore[method-assign]
        req = engine.request()
        engine.deliver(req, [popped(0), popped(1)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        assert req.pq.wait_ack_count == 2
        engine.executor.finish()
        await eventually_async(lambda: sent == [[0, 1]], what="the batch ack on the wire")
        assert req.pq.wait_ack_count == 0 and engine.service.in_flight == 1 and engine.pop_stats.acks == 0
        answer.set()
        await eventually_async(lambda: not engine.service.in_flight, what="the job ended")
        assert engine.pop_stats.acks == 2 and engine.pop_stats.ack_failures == 0

    run(main())


def test_a_job_whose_acks_go_in_two_requests_ends_only_once_both_are_answered(monkeypatch: Any) -> None:
    """One waiter per job counts its messages' answers: the first request's answer does not end the job."""
    monkeypatch.setattr(pop_acks, "ACK_BATCH_MAX", 1)

    async def main() -> None:
        engine = FakePopEngine(config(consume_mode="pop", consume_message_batch_max_size=2))
        client = engine.pop_client
        answers: dict[int, asyncio.Event] = {0: asyncio.Event(), 1: asyncio.Event()}

        async def held(addr: str, *, groups: Any, **kw: Any) -> Any:
            [(_topic, [receipt])] = groups
            await answers[receipt.queue_offset].wait()
            return client.batch_ack_status

        client.batch_ack_receipts = held  # type: ignore[method-assign]
        req = engine.request()
        engine.deliver(req, [popped(0), popped(1)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        engine.executor.finish()
        await eventually_async(lambda: req.pq.wait_ack_count == 0, what="both acks queued")
        answers[1].set()
        await eventually_async(lambda: engine.pop_stats.acks == 1, what="the second request answered")
        assert engine.service.in_flight == 1
        answers[0].set()
        await eventually_async(lambda: not engine.service.in_flight, what="the job ended")
        assert engine.pop_stats.acks == 2

    run(main())


# --------------------------------------------------------------------------- orderly POP


def orderly_pop(**kw: Any) -> FakePopEngine:
    kw.setdefault("suspend_current_queue_time_ms", 10)
    return FakePopEngine(config(consume_mode="pop", orderly=True, **kw))


def test_orderly_pop_runs_a_queue_in_order_one_job_at_a_time_acking_each_success() -> None:
    async def main() -> None:
        engine = orderly_pop()
        req = engine.request()
        engine.deliver(req, [popped(2), popped(0), popped(1)])
        for offset in range(3):
            await eventually_async(lambda: engine.executor.pending, what=f"the job of {offset}")
            assert len(engine.executor.pending) == 1 and engine.executor.pending[0][0].offsets == [offset]
            engine.executor.finish()
            await eventually_async(lambda: offset in engine.pop_client.all_acked, what=f"ack of {offset}")
        await _settled(engine, req)
        assert [j.offsets for j in engine.executor.started] == [[0], [1], [2]]
        assert all(j.orderly for j in engine.executor.started)

    run(main())


def test_orderly_pop_retries_a_failure_in_place_counted_and_dead_letters_it_at_the_limit() -> None:
    async def main() -> None:
        engine = orderly_pop(max_reconsume_times=1)
        req = engine.request()
        engine.deliver(req, [popped(0), popped(1)])
        await eventually_async(lambda: engine.executor.pending, what="the first run")
        engine.executor.finish(Status.SUSPEND)
        await eventually_async(lambda: engine.executor.pending, what="the retry in place")
        retry = engine.executor.pending[0][0]
        assert retry.offsets == [0] and reconsume_times(retry.records[0]) == 1, "offset 1 waits behind it"
        assert engine.pop_client.changed == [] and engine.pop_client.all_acked == []
        engine.executor.finish(Status.SUSPEND, errors={0: "boom"})
        await eventually_async(lambda: engine.executor.pending, what="offset 1, after the DLQ")
        assert engine.executor.pending[0][0].offsets == [1]
        assert engine.send_back.sent == [(0, -1, 1)] and engine.pop_client.all_acked == [0]
        assert engine.send_back.failures[0].error == "boom" and engine.pop_stats.dead_lettered == 1
        engine.executor.finish()
        await _settled(engine, req)
        assert engine.pop_client.all_acked == [0, 1]

    run(main())


def test_orderly_pop_dead_letters_for_the_clients_count_not_the_handlers_request() -> None:
    async def main() -> None:
        engine = orderly_pop(max_reconsume_times=0)
        sent: list[Any] = []
        original = engine.send_back.send_back

        async def spy(*args: Any, reason: Any = None, **kw: Any) -> bool:
            sent.append(reason)
            return await original(*args, reason=reason, **kw)

        engine.send_back.send_back = spy  # type: ignore[method-assign]
        req = engine.request()
        engine.deliver(req, [popped(0)])
        await eventually_async(lambda: engine.executor.pending, what="the job")
        engine.executor.finish(Status.SUSPEND)
        await _settled(engine, req)
        assert sent == [DeadLetterReason.MAX_RECONSUME]

    run(main())
