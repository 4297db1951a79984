"""The embedded broker's POP engine over real TCP: pop/ack, shared queues, revive, batch ack, change-invisible,
long polling, refusals. Requests are built with rmqrun.protocol.pop as a client builds them (tests/integration/pop_kit.py)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rmqrun.broker.app import BrokerProcess, EmbeddedBroker
from rmqrun.protocol.pop import (
    PROPERTY_FIRST_POP_TIME,
    PROPERTY_POP_CK,
    ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader,
    NotificationResponseHeader,
    PollingInfoRequestHeader,
    PopMessageResponseHeader,
    ReceiptHandle,
)
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client
from tests.integration.pop_kit import (
    ack, batch_ack, change_invisible, connect, pop, pop_all, pop_until, popped, run, send_many,
)
from tests.waiting import eventually_async

pytestmark = pytest.mark.timeout(90)
#: how long a held pop may take to be woken: a bound that only ends a failure (the holds asked for are 600 s)
WAKE_S = 30
G, T = "CG_pop", "TPop"


def test_pop_then_ack_commits_and_nothing_comes_back(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 3, queue_id=1)
            resp = await pop(c, G, T, invisible_ms=1000)
            header = PopMessageResponseHeader.from_ext(resp.ext_fields)
            got = popped(resp)
            assert [m.body for m, _ in got] == [b"m0", b"m1", b"m2"]
            assert header.start_offset_info == "0 1 0" and header.msg_offset_info == "0 1 0,1,2"
            assert header.invisible_time == 1000 and 0 <= header.revive_qid < 8
            first = got[0][1]
            assert first.encode() == f"0 {header.pop_time} 1000 {header.revive_qid} 0 broker-a 1 0"
            # popped messages are invisible: a second pop finds nothing, and the offset moved at pop time
            again = await pop(c, G, T)
            assert again.code == ResponseCode.POLLING_TIMEOUT, again.remark
            assert eb.broker.store.consumer_offsets.query(G, T, 1) == 3
            for _, r in got:
                assert (await ack(c, G, T, r)).code == ResponseCode.SUCCESS
            assert len(eb.broker.pop.ck_log) == 0
            await asyncio.sleep(1.6)
            assert await pop_all(c, G, T, poll_ms=300) == []
            assert eb.broker.pop.counters.revived == 0 and eb.broker.pop.counters.acked == 3
            info = await c.call(RequestCode.GET_BROKER_RUNTIME_INFO)
            table = fastjson.loads(info.body)["table"]
            assert (table["popMessageNums"], table["popAckNums"], table["popInFlightNums"]) == ("3", "3", "0")
            await c.close()

    run(main())


def test_refusals(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 1)
            r = await pop(c, G, T, max_nums=33)
            assert r.code == ResponseCode.INVALID_PARAMETER and "greater than 32" in r.remark
            r = await pop(c, G, "NoSuchTopic")
            assert r.code == ResponseCode.TOPIC_NOT_EXIST
            r = await pop(c, G, T, queue_id=9)
            assert r.code == ResponseCode.INVALID_PARAMETER and "queueId[9] is illegal" in r.remark
            r = await pop(c, G, T, exp="a > 1", exp_type="SQL92")
            assert r.code == ResponseCode.SYSTEM_ERROR and "SQL92" in r.remark
            r = await pop(c, G, T, born_ms=int(time.time() * 1000) - 10_000, poll_ms=1000)
            assert r.code == ResponseCode.POLLING_TIMEOUT and "timeout too much" in r.remark
            (m, receipt), = popped(await pop(c, G, T))
            bad = ReceiptHandle.parse(receipt.encode().rsplit(" ", 1)[0] + " 7")
            assert (await ack(c, G, T, bad)).code == ResponseCode.NO_MESSAGE  # offset past the queue's end
            assert (await change_invisible(c, G, T, ReceiptHandle.parse(
                receipt.encode().rsplit(" ", 1)[0] + " 1"), 1000)).code == ResponseCode.NO_MESSAGE  # == max
            await c.close()

    run(main())


def test_tag_filter_skips_other_tags(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            for i, tag in enumerate(["A", "B", "A", "B"]):
                await c.send(T, f"x{i}".encode(), queue_id=0, tags=tag)
            got = await pop_all(c, G, T, exp="B")
            assert [m.body for m, _ in got] == [b"x1", b"x3"]
            assert [r.queue_offset for _, r in got] == [1, 3]
            # the broker keeps a built filter per (topic, expression, type): another expression gets its own
            other = await pop_all(c, G + "2", T, exp="A")
            assert [m.body for m, _ in other] == [b"x0", b"x2"]
            everything = await pop_all(c, G + "3", T)
            assert [m.body for m, _ in everything] == [b"x0", b"x1", b"x2", b"x3"]
            await c.close()

    run(main())


def test_two_clients_popping_one_queue_get_disjoint_messages(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c1, c2 = await connect(eb), await connect(eb)
            sent = set(await send_many(c1, T, 60, queue_id=0))
            seen: list[bytes] = []
            per_client = [0, 0]
            end = time.monotonic() + 30  # a bound that only ends a failure
            while len(seen) < len(sent) and time.monotonic() < end:
                r1, r2 = await asyncio.gather(pop_all(c1, G, T, max_nums=4), pop_all(c2, G, T, max_nums=4))
                per_client[0] += len(r1)
                per_client[1] += len(r2)
                seen.extend(m.body for m, _ in r1 + r2)
                await asyncio.gather(*(ack(c1, G, T, r) for _, r in r1), *(ack(c2, G, T, r) for _, r in r2))
            assert len(seen) == len(set(seen)) == len(sent), "a message went to both clients or got lost"
            assert set(seen) == sent
            assert per_client[0] > 0 and per_client[1] > 0
            await c1.close()
            await c2.close()

    run(main())


def test_unacked_messages_are_revived_with_reconsume_times_plus_one(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 3, queue_id=2)
            got = popped(await pop(c, G, T, invisible_ms=1000))
            pop_time = got[0][1].pop_time
            assert (await ack(c, G, T, got[1][1])).code == ResponseCode.SUCCESS  # m1 acked, m0 and m2 not
            back = await pop_until(c, G, T, 2, invisible_ms=60_000)
            assert sorted(m.body for m, _ in back) == [b"m0", b"m2"]
            for m, r in back:
                assert m.topic == T  # handed out under the original topic
                assert m.reconsume_times == 1
                assert m.properties[PROPERTY_FIRST_POP_TIME] == str(pop_time)
                assert r.retry_flag == "1" and m.properties[PROPERTY_POP_CK] == r.encode()
                assert r.real_topic(T, G) == f"%RETRY%{G}_{T}"
            retry_tc = eb.broker.topics.get(f"%RETRY%{G}_{T}")
            assert retry_tc is not None and retry_tc.read_queue_nums == 1 and retry_tc.perm == 6
            # the pop was woken by the second copy's append; the revive pass counts once that append returns
            await eventually_async(lambda: eb.broker.pop.counters.revived >= 2, what="two revived messages")
            assert eb.broker.pop.counters.revived == 2
            for _, r in back:
                assert (await ack(c, G, T, r)).code == ResponseCode.SUCCESS
            assert len(eb.broker.pop.ck_log) == 0
            await c.close()

    run(main())


def test_revived_twice_counts_two(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 1, queue_id=0)
            assert len(popped(await pop(c, G, T, invisible_ms=1000))) == 1
            # held (nothing visible) far longer than the test may run: only the revive's append to the retry
            # topic can answer it
            once = popped(await asyncio.wait_for(pop(c, G, T, invisible_ms=1000, poll_ms=600_000), WAKE_S))
            assert [m.reconsume_times for m, _ in once] == [1]
            twice = await pop_until(c, G, T, 1, invisible_ms=60_000)
            assert [(m.body, m.reconsume_times) for m, _ in twice] == [(b"m0", 2)]
            await c.close()

    run(main())


def test_a_revive_pass_that_fails_half_way_stores_no_copy_twice(tmp_path: Path) -> None:
    """Three popped messages come due; storing the second retry copy fails (a full disk, say). The next pass
    stores what is left, not the first copy again: each message comes back once."""
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 3, queue_id=1)
            real_put = eb.broker.put_messages
            retry_puts: list[bytes] = []

            async def put_failing_the_second_copy(msgs):  # type: ignore[no-untyped-def]
                if msgs[0].topic.startswith("%RETRY%"):
                    retry_puts.append(msgs[0].body)
                    if len(retry_puts) == 2:
                        raise OSError(28, "No space left on device")
                return await real_put(msgs)

            eb.broker.put_messages = put_failing_the_second_copy
            assert len(popped(await pop(c, G, T, invisible_ms=1000))) == 3
            back = await pop_until(c, G, T, 3, invisible_ms=60_000)
            assert len(retry_puts) >= 4, retry_puts  # the scenario: a pass failed on the second copy
            assert sorted(m.body for m, _ in back) == [b"m0", b"m1", b"m2"], [m.body for m, _ in back]
            assert eb.broker.store.max_offset(f"%RETRY%{G}_{T}", 0) == 3, "a copy was stored twice"
            await c.close()

    run(main())


def test_batch_ack_acks_exactly_the_bits_sent(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 5, queue_id=3)
            got = popped(await pop(c, G, T, invisible_ms=1000))
            assert len(got) == 5
            resp = await batch_ack(c, G, T, [got[i][1] for i in (0, 2, 4)])
            assert resp.code == ResponseCode.SUCCESS
            assert (await c.call(RequestCode.BATCH_ACK_MESSAGE, body=b'{"acks":[]}')).code == ResponseCode.NO_MESSAGE
            back = await pop_until(c, G, T, 2, invisible_ms=60_000)
            assert sorted(m.body for m, _ in back) == [b"m1", b"m3"]
            await c.close()

    run(main())


def test_change_invisible_time_revives_at_the_new_time_only(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 2, queue_id=0)
            got = popped(await pop(c, G, T, invisible_ms=60_000))
            before = int(time.time() * 1000)
            resp = await change_invisible(c, G, T, got[0][1], 1000)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            h = ChangeInvisibleTimeResponseHeader.from_ext(resp.ext_fields)
            assert h.invisible_time == 1000 and h.pop_time >= before and h.revive_qid == got[0][1].revive_qid
            back = await pop_until(c, G, T, 1, invisible_ms=60_000)
            assert [m.body for m, _ in back] == [b"m0"]
            await asyncio.sleep(0.5)
            assert await pop_all(c, G, T) == []  # m1 still invisible (60 s)
            assert eb.broker.pop.counters.changed == 1
            await c.close()

    run(main())


def test_broker_restart_revives_popped_unacked_messages(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 3, queue_id=0)
            got = popped(await pop(c, G, T, invisible_ms=2000))
            assert (await ack(c, G, T, got[0][1])).code == ResponseCode.SUCCESS
            await c.close()
        async with EmbeddedBroker(tmp_path / "d") as eb:
            assert len(eb.broker.pop.ck_log) == 1
            c = await connect(eb)
            back = await pop_until(c, G, T, 2, invisible_ms=60_000)
            assert sorted((m.body, m.reconsume_times) for m, _ in back) == [(b"m1", 1), (b"m2", 1)]
            assert await pop_all(c, G, T) == []  # nothing popped twice: the pop offset survived too
            await c.close()

    run(main())


def test_long_poll_is_woken_by_a_send_and_counted_by_polling_info(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c, producer = await connect(eb), await connect(eb)
            await send_many(producer, T, 1, queue_id=0)
            for _, r in popped(await pop(c, G, T)):
                await ack(c, G, T, r)
            held = asyncio.create_task(pop(c, G, T, poll_ms=600_000))  # only a wake answers it within the test
            end = time.monotonic() + 30  # a bound that only ends a failure
            while eb.broker.pop_polling.polling_num(T, G, -1) == 0:
                assert not held.done(), held.result()
                assert time.monotonic() < end
                await asyncio.sleep(0.01)
            info = await c.call(RequestCode.POLLING_INFO, PollingInfoRequestHeader(
                consumer_group=G, topic=T, queue_id=-1).to_ext())
            assert info.code == ResponseCode.SUCCESS and info.ext_fields["pollingNum"] == "1"
            await producer.send(T, b"late", queue_id=3)
            resp = await asyncio.wait_for(held, WAKE_S)
            assert [m.body for m, _ in popped(resp)] == [b"late"]
            await c.close()
            await producer.close()

    run(main())


def test_notification_reports_whether_a_pop_would_find_something(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 1, queue_id=0)

            async def notify(poll_ms: int):
                h = NotificationRequestHeader(consumer_group=G, topic=T, queue_id=-1, poll_time=poll_ms,
                                              born_time=int(time.time() * 1000))
                r = await c.call(RequestCode.NOTIFICATION, h.to_ext(), timeout=5 + poll_ms / 1000)
                assert r.code == ResponseCode.SUCCESS, r.remark
                return NotificationResponseHeader.from_ext(r.ext_fields).has_msg

            assert await notify(0) is True
            assert eb.broker.store.consumer_offsets.query(G, T, 0) is None  # asking commits nothing
            for _, r in popped(await pop(c, G, T)):
                await ack(c, G, T, r)
            assert await notify(300) is False
            held = asyncio.create_task(notify(10_000))
            end = time.monotonic() + 30  # a bound that only ends a failure
            while eb.broker.pop_polling.polling_num(T, G, -1) == 0:
                assert time.monotonic() < end
                await asyncio.sleep(0.01)
            await c.send(T, b"x", queue_id=1)
            assert await asyncio.wait_for(held, 5) is True
            await c.close()

    run(main())


def test_kill_9_after_pop_neither_loses_nor_repeats_popped_messages(tmp_path: Path) -> None:
    """SIGKILL right after a pop (before the consumer offsets are saved): the checkpoint log alone tells the
    restarted broker what went out, so the un-acked messages are revived and nothing is popped twice."""
    data = tmp_path / "data"

    async def first(bp: BrokerProcess) -> None:
        c = await Client.connect(bp.namesrv_address, bp.broker_address)
        await send_many(c, T, 4, queue_id=0)
        got = popped(await pop(c, G, T, invisible_ms=2000, max_nums=3))
        assert [m.body for m, _ in got] == [b"m0", b"m1", b"m2"]
        assert (await ack(c, G, T, got[1][1])).code == ResponseCode.SUCCESS
        bp.kill()
        await c.close()

    bp = BrokerProcess(data, flush_mode="sync").start()
    try:
        run(first(bp))
    finally:
        bp.kill()

    async def second(bp2: BrokerProcess) -> None:
        c = await Client.connect(bp2.namesrv_address, bp2.broker_address)
        got = []
        end = time.monotonic() + 30  # a bound that only ends a failure
        while len(got) < 3 and time.monotonic() < end:
            got.extend(await pop_all(c, G, T, poll_ms=1000))
        assert sorted((m.body, m.reconsume_times) for m, _ in got) == [(b"m0", 1), (b"m2", 1), (b"m3", 0)]
        await c.close()

    with BrokerProcess(data, flush_mode="sync") as bp2:
        run(second(bp2))


def test_an_offset_reset_makes_pops_start_at_the_reset_offset(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 3, queue_id=0)
            for _, r in popped(await pop(c, G, T)):
                assert (await ack(c, G, T, r)).code == ResponseCode.SUCCESS
            reset = await c.call(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
                "topic": T, "group": G, "timestamp": "0", "isForce": "true"})
            assert reset.code == ResponseCode.SUCCESS, reset.remark
            again = await pop_all(c, G, T)
            assert [m.body for m, _ in again] == [b"m0", b"m1", b"m2"]
            await c.close()

    run(main())


def test_a_held_pop_of_a_closed_connection_is_forgotten(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c, other = await connect(eb), await connect(eb)
            await send_many(other, T, 1, queue_id=0)
            for _, r in popped(await pop(other, G, T)):
                await ack(other, G, T, r)
            held = asyncio.create_task(pop(c, G, T, poll_ms=15_000))
            end = time.monotonic() + 30  # a bound that only ends a failure
            while eb.broker.pop_polling.polling_num(T, G, -1) == 0:
                assert time.monotonic() < end
                await asyncio.sleep(0.01)
            await c.close()
            await asyncio.gather(held, return_exceptions=True)
            while eb.broker.pop_polling.polling_num(T, G, -1) != 0:
                assert time.monotonic() < end, "the closed connection's pop is still held"
                await asyncio.sleep(0.01)
            assert not eb.broker.pop_polling._deadlines
            # the message that arrives next goes to a live consumer, not to the gone one
            await other.send(T, b"next", queue_id=0)
            assert [m.body for m, _ in await pop_all(other, G, T, poll_ms=2000)] == [b"next"]
            await other.close()

    run(main())


def test_too_many_held_pops_on_one_key_are_answered_polling_full(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await connect(eb)
            await send_many(c, T, 1, queue_id=0)
            for _, r in popped(await pop(c, G, T)):
                await ack(c, G, T, r)
            eb.broker.pop_polling.max_per_key = 1
            first = asyncio.create_task(pop(c, G, T, poll_ms=15_000))
            end = time.monotonic() + 30  # a bound that only ends a failure
            while eb.broker.pop_polling.polling_num(T, G, -1) == 0:
                assert time.monotonic() < end
                await asyncio.sleep(0.01)
            second = await pop(c, G, T, poll_ms=15_000)
            assert second.code == ResponseCode.POLLING_FULL, second.remark
            await c.send(T, b"x", queue_id=1)
            assert [m.body for m, _ in popped(await asyncio.wait_for(first, 5))] == [b"x"]
            await c.close()

    run(main())
