"""rmqrun's answers to broker-initiated requests, compared with the Java consumer's answers in scenario_g.

A real rmqrun push consumer (in-process executor, real TCP, the embedded broker) is asked what the Java
consumer of the capture was asked, through the broker as mqadmin asks: GET_CONSUMER_RUNNING_INFO
(``consumerStatus``), INVOKE_BROKER_TO_GET_CONSUMER_STATUS (→ GET_CONSUMER_STATUS_FROM_CLIENT),
CONSUME_MESSAGE_DIRECTLY (``consumeMessage``) and INVOKE_BROKER_TO_RESET_OFFSET (→ the oneway
RESET_CONSUMER_CLIENT_OFFSET, which the Java client never answers). The answers must have the Java
answers' response code, remark, ext fields and body shape, and the running info the same property names.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.producer import Producer
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.executor import ConsumeJob, JobResult
from rmqrun.model import Status
from rmqrun.consumer.push import PushConsumer
from rmqrun.remoting import fastjson, frame
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from tests import captures
from tests.conformance.shapes import shape

pytestmark = [captures.requires_captures, pytest.mark.timeout(120)]


class CountingExecutor:
    """Every message succeeds; remembers what it was given."""

    enforces_time_limit = False

    def __init__(self) -> None:
        self.offsets: list[tuple[int, int]] = []

    async def run(self, job: ConsumeJob) -> JobResult:
        self.offsets += [(job.mq.queue_id, o) for o in job.offsets]
        return JobResult([Status.SUCCESS] * len(job))


def java_exchange(code: int, direction: str = "c2s") -> tuple[RemotingCommand, RemotingCommand | None]:
    """The captured request with this code (admin → broker or broker → Java consumer) and its answer."""
    frames = captures.load("g")
    req = next(f for f in frames if f["kind"] == "request" and f["code"] == code and f["dir"] == direction)
    resp = next((f for f in frames if f["kind"] == "response" and f.get("reply_to_seq") == req.seq), None)
    return (frame.decode_with_prefix(req.raw),
            frame.decode_with_prefix(resp.raw) if resp is not None else None)


def same_kind(ours: RemotingCommand, java: RemotingCommand) -> list[str]:
    diffs = []
    if (ours.code, ours.remark) != (java.code, java.remark):
        diffs.append(f"code/remark {ours.code} {ours.remark!r}, Java {java.code} {java.remark!r}")
    if sorted(ours.ext_fields) != sorted(java.ext_fields):
        diffs.append(f"ext {sorted(ours.ext_fields)}, Java {sorted(java.ext_fields)}")
    if shape(fastjson.loads(ours.body or b"{}")) != shape(fastjson.loads(java.body or b"{}")):
        diffs.append(f"body shape {shape(fastjson.loads(ours.body or b'{}'))}, "
                     f"Java {shape(fastjson.loads(java.body or b'{}'))}")
    return diffs


async def scenario(tmp_path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with EmbeddedBroker(tmp_path / "data") as eb:
        async with Producer(eb.namesrv_address, "PG_scng") as producer:
            sent = [await producer.send("ScnG_Topic", f"m{i}".encode(), tags="TagA", keys=f"k{i}") for i in range(12)]
        executor = CountingExecutor()
        config = ConsumerConfig(group="CG_scng", namesrv=eb.namesrv_address, subscriptions={"ScnG_Topic": "*"},
                                consume_from_where="CONSUME_FROM_FIRST_OFFSET", persist_offset_interval_ms=200)
        consumer = PushConsumer(config, executor)
        await consumer.start()
        try:
            for _ in range(200):
                if len(executor.offsets) >= 12:
                    break
                await asyncio.sleep(0.05)
            assert len(executor.offsets) == 12
            client_id = consumer.instance.client_id
            admin = await Connection.open(eb.broker_address)

            async def ask(code: int, **changes: str) -> RemotingCommand:
                java_req, _ = java_exchange(code)
                ext = {**java_req.ext_fields, **changes}
                return await admin.request(RemotingCommand(code, ext, java_req.body), 10)

            out["running_info"] = await ask(R.GET_CONSUMER_RUNNING_INFO, clientId=client_id)
            out["status"] = await ask(R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS)
            out["direct"] = await ask(R.CONSUME_MESSAGE_DIRECTLY, clientId=client_id, msgId=sent[0].offset_msg_id)
            out["direct_ran"] = list(executor.offsets[12:])
            out["reset"] = await ask(R.INVOKE_BROKER_TO_RESET_OFFSET, timestamp="0")
            for _ in range(200):
                if len(executor.offsets) >= 25:
                    break
                await asyncio.sleep(0.05)
            out["after_reset"] = list(executor.offsets[13:])
            out["sent"] = sent
            admin.close()
        finally:
            await consumer.shutdown(5)
    return out


def test_rmqrun_answers_broker_initiated_requests_like_the_java_consumer(tmp_path: Path) -> None:
    got = asyncio.run(scenario(tmp_path))

    _, java_info = java_exchange(R.GET_CONSUMER_RUNNING_INFO, "s2c")
    assert java_info is not None
    ours = got["running_info"]
    assert not same_kind(ours, java_info), same_kind(ours, java_info)
    props, java_props = fastjson.loads(ours.body)["properties"], fastjson.loads(java_info.body)["properties"]
    assert sorted(props) == sorted(java_props)
    assert props["PROP_CONSUMER_START_TIMESTAMP"].isdigit() and int(props["PROP_CONSUMER_START_TIMESTAMP"]) > 1.6e12

    # the broker gathers GET_CONSUMER_STATUS_FROM_CLIENT answers into the admin's answer
    _, java_status = java_exchange(R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS)
    assert java_status is not None
    assert not same_kind(got["status"], java_status), same_kind(got["status"], java_status)

    _, java_direct = java_exchange(R.CONSUME_MESSAGE_DIRECTLY, "s2c")
    assert java_direct is not None
    assert not same_kind(got["direct"], java_direct), same_kind(got["direct"], java_direct)
    assert fastjson.loads(got["direct"].body)["consumeResult"] == "CR_SUCCESS"
    sent0 = got["sent"][0]
    assert got["direct_ran"] == [(sent0.queue.queue_id, sent0.queue_offset)], "the handler ran the message"

    _, java_reset = java_exchange(R.INVOKE_BROKER_TO_RESET_OFFSET)
    assert java_reset is not None
    assert not same_kind(got["reset"], java_reset), same_kind(got["reset"], java_reset)
    assert sorted(got["after_reset"]) == sorted((s.queue.queue_id, s.queue_offset) for s in got["sent"]), \
        "after the reset to the start, everything is consumed again, once"
    assert got["reset"].code == ResponseCode.SUCCESS
