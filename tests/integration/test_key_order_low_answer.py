"""``order_by: key`` when a pull answers below the offset it asked for.

A broker may answer a pull with messages from below the requested offset (a
Java master whose consume queue was corrected, a slave behind its master); the
puller logs it and hands the batch on. Messages of that batch the process queue
already holds are in their key's lane, or running: routed a second time they
would be handled twice. Here the embedded broker answers the second pull of the
queue from 8 below what was asked, while the first eight are still being
handled (one worker, 100 ms a call): every message is handled once, in order per
key, and the group's offset still reaches the end.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.remoting.codes import RequestCode
from tests.integration.engine_kit import Running, broker, committed_offsets, consumer_config, pool_config, wait_for
from tests.integration.keyed_kit import assert_key_order, finished, produce_keyed, read_calls

HANDLER = "tests.integration.handlers.keyed_handler:handle"
TOPIC, GROUP = "KLow", "GKLow"
TOTAL, KEYS, BATCH = 24, 4, 8


def test_a_pull_answered_below_the_asked_offset_routes_no_message_twice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls_file = tmp_path / "calls.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_FILE", str(calls_file))
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "100")

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce_keyed(eb.namesrv_address, TOPIC, TOTAL, KEYS)
            real_pull = eb.broker.processors.pull.pull
            lowered: list[tuple[int, int]] = []

            async def pull_answering_low_once(conn, cmd):  # type: ignore[no-untyped-def]
                asked = int(cmd.ext_fields.get("queueOffset", "0"))
                if cmd.ext_fields.get("topic") == TOPIC and asked >= BATCH and not lowered:
                    cmd.ext_fields["queueOffset"] = str(asked - BATCH)
                    lowered.append((asked, asked - BATCH))
                return await real_pull(conn, cmd)

            eb.broker.server.register(RequestCode.PULL_MESSAGE, pull_answering_low_once)
            cfg = consumer_config(eb.namesrv_address, GROUP, TOPIC, order_by="key", pull_batch_size=BATCH)
            async with Running(cfg, pool_config(HANDLER, workers=1)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= TOTAL, timeout=120,
                               what=f"{TOTAL} messages")
                await wait_for(lambda: all(req.pq.msg_count == 0 for req in engine.table.values()),
                               what="the queue drained")
                await wait_for(lambda: engine.offset_store.read_memory(next(iter(engine.table))) == TOTAL,
                               what="the commit at the end")
                assert await r.stop() == 0
            assert lowered == [(BATCH, 0)], f"the scenario did not happen: {lowered}"
            calls = read_calls(calls_file)
            assert sorted(c.i for c in calls) == list(range(TOTAL)), "a message was handled twice (or never)"
            assert_key_order(calls, KEYS)
            assert (await committed_offsets(eb, GROUP, TOPIC))[0] == TOTAL

    asyncio.run(asyncio.wait_for(main(), 240))
