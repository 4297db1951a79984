"""Message traces end to end on the embedded broker: produced with a trace, consumed with ``msg_trace``.

Two messages are sent by a tracing Producer and consumed by a supervisor with ``msg_trace`` whose handler
fails the second once (``fail_handler``). Afterwards the trace topic (created by the broker's
``trace_topic_enable``) is read the way ``mqadmin queryMsgTraceById`` reads it, QUERY_MESSAGE by the message
id, and the records decode as Java's decoder reads them: a Pub per message, a SubBefore per delivery with its
retry count, a SubAfter per delivery with the verdict and ConsumeReturnType's ordinal (EXCEPTION for the
failed call). The same holds in each consume mode, because tracing wraps the one executor they all use.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.cli.run.metrics import registry_for
from rmqrun.client.assignment import AssignmentClient
from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import Producer
from rmqrun.protocol.assignment import MessageRequestMode
from rmqrun.protocol.trace import ContextCode, MessageType, TraceContext, TraceType, decode_trace_data
from rmqrun.pull.async_consumer import AsyncPullConsumer
from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, wait_for
from tests.integration.signals_kit import FAST_DELAYS

pytestmark = pytest.mark.timeout(240)

TOPIC, GROUP = "TraceT", "GTrace"


async def _send(eb: EmbeddedBroker) -> list[str]:
    async with Producer(eb.namesrv_address, "PG_traced", msg_trace=True) as producer:
        ids = []
        for i in range(2):
            r = await producer.send(TOPIC, f"msg-{i}".encode(), tags="TagA", keys=[f"k{i}", "order"],
                                    properties={"idx": str(i)}, queue=0)
            ids.append(r.msg_id)
        assert producer.tracer is not None
        tracer = producer.tracer
    assert (tracer.dropped, tracer.send_failures) == (0, 0)
    return ids


async def _traces(eb: EmbeddedBroker, msg_id: str) -> list[TraceContext]:
    """queryMsgTraceById: QUERY_MESSAGE by the id on the trace topic, the records of that message."""
    async with AsyncPullConsumer(eb.namesrv_address, "trace_reader", register=False) as c:
        found = await c.query_message("RMQ_SYS_TRACE_TOPIC", msg_id)
    return [ctx for m in found.messages for ctx in decode_trace_data(m.body.decode("utf-8"))
            if ctx.beans[0].msg_id == msg_id]


def _oks(record: Path) -> list[str]:
    return [line for line in record.read_text().splitlines() if " ok " in line] if record.exists() else []


async def _pop_mode(eb: EmbeddedBroker) -> None:
    inst = ClientInstance(eb.namesrv_address, instance_name="pop-mode")
    try:
        await AssignmentClient(inst.pool).set_message_request_mode(
            eb.broker_address, TOPIC, GROUP, MessageRequestMode.POP, pop_share_queue_num=0)
    finally:
        await inst.close()


MODES = {
    "concurrent": {},
    "orderly": {"orderly": True, "suspend_current_queue_time_ms": 50},
    "orderly_by_key": {"order_by": "key", "order_key": "tags", "suspend_current_queue_time_ms": 50},
    "pop": {"consume_mode": "pop", "pop_invisible_time_ms": 5000},
    "orderly_pop": {"consume_mode": "pop", "orderly": True, "pop_invisible_time_ms": 5000,
                    "suspend_current_queue_time_ms": 50},
}


@pytest.mark.parametrize("mode", list(MODES))
def test_pub_sub_before_and_sub_after_are_found_by_message_id(tmp_path: Path, mode: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(record))
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_OFFSETS", "1")
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_TIMES", "1")

    async def main() -> tuple[list[str], list[TraceContext], list[TraceContext], str]:
        async with broker(tmp_path, trace_topic_enable=True, message_delay_levels=FAST_DELAYS,
                          auto_create_queue_nums=1) as eb:
            ids = await _send(eb)
            if mode == "pop":
                await _pop_mode(eb)
            cfg = consumer_config(eb.namesrv_address, GROUP, TOPIC, msg_trace=True, **MODES[mode])
            async with Running(cfg, pool_config("tests.integration.handlers.fail_handler:handle", workers=1)) as r:
                await wait_for(lambda: len(_oks(record)) == 2, timeout=120, what="both messages handled")
                metrics = generate_latest(registry_for(r.supervisor, 0.0)).decode()
                assert "rmqrun_trace_dropped_total 0.0" in metrics
                assert "rmqrun_trace_send_failures_total 0.0" in metrics
                assert await r.stop() == 0  # the dispatcher sends what it holds as the supervisor stops
                assert r.supervisor.tracing is not None and r.supervisor.tracing.dispatcher.dropped == 0
            return ids, await _traces(eb, ids[0]), await _traces(eb, ids[1]), eb.broker_address
    ids, first, second, broker_addr = asyncio.run(asyncio.wait_for(main(), 220))

    def of(ctxs: list[TraceContext], t: TraceType) -> list[TraceContext]:
        return [c for c in ctxs if c.trace_type is t]
    for ctxs, i in ((first, 0), (second, 1)):
        (pub,) = of(ctxs, TraceType.PUB)
        bean = pub.beans[0]
        assert (pub.group, pub.success, pub.region_id) == ("PG_traced", True, "DefaultRegion")
        assert (bean.topic, bean.msg_id, bean.tags, bean.keys, bean.store_host, bean.body_length,
                bean.msg_type) == (TOPIC, ids[i], "TagA", f"k{i} order", broker_addr, 5, MessageType.NORMAL)
        assert bean.offset_msg_id and bean.offset_msg_id != ids[i]
        for c in of(ctxs, TraceType.SUB_BEFORE) + of(ctxs, TraceType.SUB_AFTER):
            assert (c.group, c.beans[0].keys) == (GROUP, f"k{i} order")
    # the first: one delivery, a success
    assert [c.beans[0].retry_times for c in of(first, TraceType.SUB_BEFORE)] == [0]
    assert [(c.success, c.context_code) for c in of(first, TraceType.SUB_AFTER)] == [(True, ContextCode.SUCCESS)]
    # the second: a failed call (the handler raised), then a success on its redelivery
    befores = sorted(of(second, TraceType.SUB_BEFORE), key=lambda c: c.timestamp)
    afters = sorted(of(second, TraceType.SUB_AFTER), key=lambda c: c.timestamp)
    assert [c.beans[0].retry_times for c in befores] == [0, 1]
    assert [(c.success, c.context_code) for c in afters] == [(False, ContextCode.EXCEPTION),
                                                             (True, ContextCode.SUCCESS)]
    # each SubAfter answers its SubBefore (Java pairs them by request id)
    assert [c.request_id for c in afters] == [c.request_id for c in befores]
    assert len({c.request_id for c in befores}) == 2


def test_a_call_stopped_by_the_time_limit_is_traced_as_time_out(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "probe.txt"
    monkeypatch.setenv("PROBE_RECORD", str(record))
    monkeypatch.setenv("PROBE_HANG_IDX", "1")

    def oks() -> int:
        return sum(line.startswith("ok ") for line in record.read_text().splitlines()) if record.exists() else 0

    async def main() -> list[TraceContext]:
        async with broker(tmp_path, trace_topic_enable=True, message_delay_levels=FAST_DELAYS,
                          auto_create_queue_nums=1) as eb:
            ids = await _send(eb)
            cfg = consumer_config(eb.namesrv_address, GROUP, TOPIC, msg_trace=True)
            pool = pool_config("tests.integration.handlers.probe_handler:hang", workers=1, time_limit=1.0)
            async with Running(cfg, pool) as r:
                await wait_for(lambda: oks() == 2, timeout=120, what="both messages handled")
                assert await r.stop() == 0
            return await _traces(eb, ids[1])
    traces = asyncio.run(asyncio.wait_for(main(), 220))
    afters = sorted((c for c in traces if c.trace_type is TraceType.SUB_AFTER), key=lambda c: c.timestamp)
    assert [(c.success, c.context_code) for c in afters] == [(False, ContextCode.TIME_OUT), (True, ContextCode.SUCCESS)]


def test_trace_sends_are_signed_under_acl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broker with ACL refuses unsigned requests: the records arrive only because trace sends are signed with
    the consumer's (and producer's) credentials, as every other request is."""
    from rmqrun.remoting.security import ClientSecurity
    from tests.acl_kit import ADMIN_AK, ADMIN_SK, USER_AK, USER_SK, write_acl
    record = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(record))
    user = ClientSecurity(USER_AK, USER_SK)

    async def main() -> tuple[str, list[TraceContext]]:
        acl = write_acl(tmp_path / "plain_acl.yml")
        async with broker(tmp_path, trace_topic_enable=True, acl_file=str(acl), auto_create_queue_nums=1) as eb:
            async with Producer(eb.namesrv_address, "PG_acl", security=user, msg_trace=True) as producer:
                msg_id = (await producer.send("OpenTopic", b"m", keys="acl-key", properties={"idx": "0"})).msg_id
            cfg = consumer_config(eb.namesrv_address, "OpenGroup", "OpenTopic", msg_trace=True, security=user)
            async with Running(cfg, pool_config("tests.integration.handlers.fail_handler:handle", workers=1)) as r:
                await wait_for(lambda: len(_oks(record)) == 1, timeout=120, what="the message handled")
                assert await r.stop() == 0
                dispatcher = r.supervisor.tracing.dispatcher  # type: ignore[union-attr]
                assert (dispatcher.dropped, dispatcher.send_failures) == (0, 0)
            async with AsyncPullConsumer(eb.namesrv_address, "trace_reader", register=False,
                                         security=ClientSecurity(ADMIN_AK, ADMIN_SK)) as c:
                found = await c.query_message("RMQ_SYS_TRACE_TOPIC", msg_id)
            return msg_id, [ctx for m in found.messages for ctx in decode_trace_data(m.body.decode("utf-8"))]
    msg_id, traces = asyncio.run(asyncio.wait_for(main(), 220))
    assert sorted(c.trace_type.value for c in traces if c.beans[0].msg_id == msg_id) == [
        "Pub", "SubAfter", "SubBefore"]
