"""Garbage in, answers out: random headers and bodies on every served code never hang or break the broker."""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path

import psutil
import pytest

from rmqrun.broker.app import BrokerProcess, EmbeddedBroker
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand, SerializeType
from tests.integration.broker_kit import Client, drain

pytestmark = pytest.mark.timeout(120)

KEYS = ["topic", "queueId", "queueOffset", "consumerGroup", "group", "offset", "maxMsgNums", "sysFlag",
        "commitOffset", "suspendTimeoutMillis", "subVersion", "subscription", "expressionType", "delayLevel",
        "timestamp", "clientID", "producerGroup", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "m",
        "readQueueNums", "writeQueueNums", "perm", "maxReconsumeTimes", "defaultTopic", "batch"]
VALUES = ["", "0", "-1", "1", "2", "3", "6", "99999999999999999999", "abc", "T", "%RETRY%G", "TBW102",
          "SCHEDULE_TOPIC_XXXX", "true", "false", "TAG", "SQL92", "a || b", "||", "*", "\x01\x02", "G", "é"]


def _random_request(rng: random.Random, codes: list[int]) -> RemotingCommand:
    ext = {rng.choice(KEYS): rng.choice(VALUES) for _ in range(rng.randint(0, 12))}
    body = rng.choice([None, b"", b"{", b"{}", b'{"clientID":"x"}', os.urandom(rng.randint(1, 200)),
                       b'{"consumerGroup":"G","clientId":"c","mqSet":[{"topic":"T"}]}'])
    code = rng.choice(codes)
    serialize = rng.choice([SerializeType.JSON, SerializeType.ROCKETMQ])
    if code > 0x7FFF:  # a binary header holds the code in 16 bits (Java truncates it): 5.x codes travel as JSON
        serialize = SerializeType.JSON
    return RemotingCommand(code, ext, body=body, language="JAVA", serialize_type=serialize)


def test_random_requests_get_answers_and_the_broker_keeps_serving(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d") as eb:
            c = await Client.connect(eb.namesrv_address, eb.broker_address)
            codes = sorted(eb.broker.server.processors) + [9999]
            rng = random.Random(20260101)
            answered = 0
            for _ in range(600):
                cmd = _random_request(rng, codes)
                sys_flag = cmd.ext_fields.get("sysFlag", "")
                if cmd.code == RequestCode.PULL_MESSAGE and sys_flag.isdigit() and int(sys_flag) & 2:
                    cmd.ext_fields["suspendTimeoutMillis"] = "50"  # a held pull still answers, just later
                resp = await c.broker.request(cmd, 5)
                assert resp.is_response and isinstance(resp.code, int)
                answered += 1
            assert answered == 600
            assert not c.broker.closed
            # Still a working broker.
            assert (await c.send("After", b"ok", queue_id=0)).code == ResponseCode.SUCCESS
            await c.heartbeat("c@1", "CG", {"After": "*"})
            assert [m.body for m in await drain(c, "CG", "After", 1, expect=1)] == [b"ok"]
            await c.close()

    asyncio.run(asyncio.wait_for(main(), 100))


@pytest.mark.slow
def test_broker_memory_stays_flat_while_the_data_grows(tmp_path: Path) -> None:
    """Bodies live on disk: writing 200 MiB and reading it all back leaves the RSS where it was."""
    body = b"m" * 8192

    async def load(bp: BrokerProcess, topic: str, rounds: int) -> None:
        c = await Client.connect(bp.namesrv_address, bp.broker_address)
        for _ in range(rounds):
            await asyncio.gather(*(c.send(topic, body, queue_id=i % 4) for i in range(64)))
        await c.heartbeat("c@1", "CG", {topic: "*"})
        seen = 0
        for q in range(4):
            offset = 0
            while True:
                resp = await c.pull("CG", topic, q, offset)
                if resp.code != ResponseCode.SUCCESS:
                    break
                offset = int(resp.ext_fields["nextBeginOffset"])
                seen += len(resp.body or b"") // len(body)
        assert seen == rounds * 64
        await c.close()

    with BrokerProcess(tmp_path / "d", flush_mode="async") as bp:
        rss = psutil.Process(bp.pid).memory_info().rss
        asyncio.run(load(bp, "Warm", 40))  # ~20 MiB: warm up caches and code paths
        warm = psutil.Process(bp.pid).memory_info().rss
        started = time.monotonic()
        asyncio.run(load(bp, "Mem", 400))  # ~200 MiB more
        grown = psutil.Process(bp.pid).memory_info().rss - warm
        assert grown < 40 * 2**20, f"RSS grew by {grown / 2**20:.0f} MiB for 200 MiB of data " \
                                   f"(start {rss / 2**20:.0f} MiB, {time.monotonic() - started:.0f}s)"
