"""The trace dispatcher against the embedded broker over real TCP.

Contexts appended are sent as trace messages on the trace topic, several per message, found again the way
``mqadmin queryMsgTraceById`` finds them (QUERY_MESSAGE by the traced message's id and by its keys); a full
buffer drops contexts and counts them without waiting; a broker that cannot be reached counts the records
of the failed sends and never raises to the caller.
"""

from __future__ import annotations

import asyncio
from typing import Iterator

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.producer import Producer
from rmqrun.client.trace_dispatch import TraceDispatcher
from rmqrun.protocol.trace import TraceBean, TraceContext, TraceType, decode_trace_data
from rmqrun.pull.async_consumer import AsyncPullConsumer
from tests.integration.signals_kit import start_broker

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = start_broker(tmp_path_factory.mktemp("trace"), trace_topic_enable=True)
    try:
        yield broker
    finally:
        broker.stop_in_thread()


def _before(msg_id: str, keys: str | None, ts: int = 1_700_000_000_000) -> TraceContext:
    return TraceContext(TraceType.SUB_BEFORE, timestamp=ts, region_id="DefaultRegion", group="G", request_id="R1",
                        beans=[TraceBean(msg_id=msg_id, keys=keys, retry_times=0)])


async def _query(eb: EmbeddedBroker, topic: str, key: str) -> list[TraceContext]:
    async with AsyncPullConsumer(eb.namesrv_address, "trace_probe", register=False) as c:
        found = await c.query_message(topic, key)
        return [ctx for m in found.messages for ctx in decode_trace_data(m.body.decode("utf-8"))]


def test_appended_contexts_are_found_by_message_id_and_by_key(eb: EmbeddedBroker) -> None:
    async def main() -> tuple[list[TraceContext], list[TraceContext], TraceDispatcher]:
        d = TraceDispatcher(lambda: Producer(eb.namesrv_address, "_INNER_TRACE_PRODUCER-G-CONSUMER"),
                            max_batch_bytes=400)
        d.start()
        for i in range(12):
            assert d.append(_before(f"AB{i:030X}", f"order-{i} shared"))
        await d.close(timeout=30)
        return (await _query(eb, "RMQ_SYS_TRACE_TOPIC", "AB" + "0" * 29 + "7"),
                await _query(eb, "RMQ_SYS_TRACE_TOPIC", "shared"), d)
    by_id, by_key, d = asyncio.run(main())
    assert d.dropped == 0 and d.send_failures == 0
    # 400 characters per message at most: the twelve records travel in several messages
    assert d.sent_messages >= 3
    assert [c.beans[0].msg_id for c in by_id if c.beans[0].msg_id == "AB" + "0" * 29 + "7"] == ["AB" + "0" * 29 + "7"]
    assert sorted(c.beans[0].msg_id for c in by_key) == [f"AB{i:030X}" for i in range(12)]
    assert {c.trace_type for c in by_key} == {TraceType.SUB_BEFORE}


def test_a_full_buffer_drops_and_counts_without_waiting(eb: EmbeddedBroker) -> None:
    async def main() -> TraceDispatcher:
        d = TraceDispatcher(lambda: Producer(eb.namesrv_address, "PG_trace_full"), "TRACE_FULL", capacity=3)
        d.start()
        # no await between the appends: the sender cannot take any, so the fourth and fifth are dropped
        results = [d.append(_before(f"CD{i:030X}", None)) for i in range(5)]
        assert results == [True, True, True, False, False]
        await d.close(timeout=30)
        assert not d.append(_before("EF" + "0" * 30, None))  # after close: dropped, not queued
        return d
    d = asyncio.run(main())
    assert (d.dropped, d.send_failures, d.sent_messages) == (3, 0, 1)


def test_an_unreachable_name_server_counts_failures_and_never_raises() -> None:
    async def main() -> TraceDispatcher:
        d = TraceDispatcher(lambda: Producer("127.0.0.1:1", "PG_trace_down", send_timeout=1.0), max_wait=0.01)
        d.start()
        assert d.append(_before("AA" + "0" * 30, "k"))
        assert d.append(_before("BB" + "0" * 30, "k"))
        await d.close(timeout=30)
        return d
    d = asyncio.run(main())
    assert d.send_failures == 2 and d.sent_messages == 0


def test_the_broker_creates_the_trace_topic_only_when_asked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from rmqrun.client.instance import ClientInstance
    from rmqrun.remoting.errors import TopicNotExistError

    async def route_queues(broker: EmbeddedBroker, topic: str) -> int | None:
        inst = ClientInstance(broker.namesrv_address, instance_name="trace-route")
        try:
            route = await inst.get_route(topic)
            return sum(q.write_queue_nums for q in route.queue_datas)
        except TopicNotExistError:
            return None
        finally:
            await inst.close()
    on = start_broker(tmp_path / "on", trace_topic_enable=True, msg_trace_topic_name="MY_TRACE")
    try:
        assert asyncio.run(route_queues(on, "MY_TRACE")) == 1
        assert "MY_TRACE" in on.broker.topics.system_topics
    finally:
        on.stop_in_thread()
    off = start_broker(tmp_path / "off")
    try:
        assert asyncio.run(route_queues(off, "RMQ_SYS_TRACE_TOPIC")) is None
    finally:
        off.stop_in_thread()
    with pytest.raises(ValueError, match="msg_trace_topic_name"):
        start_broker(tmp_path / "bad", trace_topic_enable=True, msg_trace_topic_name="no spaces")


def test_a_record_that_does_not_encode_is_dropped_and_the_rest_sent(eb: EmbeddedBroker) -> None:
    async def main() -> tuple[TraceDispatcher, list[TraceContext]]:
        d = TraceDispatcher(lambda: Producer(eb.namesrv_address, "PG_trace_bad"), "TRACE_BAD")
        assert d.append(TraceContext(TraceType.END_TRANSACTION, beans=[TraceBean(msg_id="X")]))  # not written
        assert d.append(_before("BA" + "0" * 30, "fine"))
        await d.close(timeout=30)
        return d, await _query(eb, "TRACE_BAD", "fine")
    d, found = asyncio.run(main())
    assert (d.dropped, d.send_failures, d.sent_messages) == (1, 0, 1)
    assert [c.beans[0].msg_id for c in found] == ["BA" + "0" * 30]
