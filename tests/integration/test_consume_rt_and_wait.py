"""Consume RT counts the handler, not the wait for a worker; the wait shows in its own histogram.

One worker, a 20 ms handler and a backlog of 120 messages in pulls of 4: batches queue up behind the worker
for seconds.
``mqadmin consumerStatus`` (GET_CONSUMER_RUNNING_INFO through the broker) must show a Consume RT near 20 ms,
as a Java consumer with a 20 ms listener does, and the store → handler-start histogram must count every
message, with the seconds the backlog cost.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, produce, wait_for

N = 120
HANDLER_MS = 20


def test_consume_rt_is_the_handler_time_and_the_wait_has_a_histogram(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQRUN_HANDLER_SLEEP_MS", str(HANDLER_MS))

    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "RtT", N)
            # pulls of 4: about 30 jobs wait behind the one worker at once, the last for ~2.4 s
            async with Running(consumer_config(eb.namesrv_address, "RtG", "RtT", pull_batch_size=4),
                               pool_config("workers.misbehave:sleep", workers=1)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: engine.stats.consumed >= N, 60, what=f"{N} messages consumed")
                conn = await Connection.open(eb.broker_address)
                try:
                    info = await conn.request(RemotingCommand(R.GET_CONSUMER_RUNNING_INFO, {
                        "consumerGroup": "RtG", "clientId": engine.instance.client_id, "jstackEnable": "false"}), 10)
                finally:
                    conn.close()
                assert info.code == ResponseCode.SUCCESS, info.remark
                rt = fastjson.loads(info.body)["statusTable"]["RtT"]["consumeRT"]
                # the handler sleeps 20 ms per message; the batches waited seconds for the one worker
                assert HANDLER_MS <= rt < HANDLER_MS * 4, rt

                snap = r.supervisor.snapshot().consume
                assert snap is not None
                wait = snap.store_to_handler
                assert wait.count == N
                # the last of 120 messages began about 120 * 20 ms after it was stored: the backlog shows here
                assert wait.total / N > snap.handler_latency.total / N
                assert sum(wait.counts[:1]) < N  # not every message started within 10 ms of being stored
                assert await r.stop() == 0

    asyncio.run(asyncio.wait_for(main(), 180))
