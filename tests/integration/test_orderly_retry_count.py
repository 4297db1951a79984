"""The orderly retry count is exact: a message is handled ``max_reconsume_times + 1`` times, then dead-lettered,
and only messages that ran and failed are counted or dead-lettered (issue #23, item 5).

With ``consume_message_batch_max_size`` above 1 and a one-message handler, the worker stops a job at
the failing message and reports the rest NOT_RUN. Those used to be taken for part of the failed call:
their retry count was raised although they never ran, and at the limit they went to the DLQ with the
failing message, unhandled.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import Running, broker, committed_offsets, consumer_config, pool_config, produce
from tests.integration.engine_kit import wait_for
from tests.integration.test_engine_orderly import _topic_messages, read_records, record_file  # noqa: F401 (fixture)


def test_only_the_failed_message_is_retried_and_dead_lettered(tmp_path: Path, record_file: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_OFFSETS", "2")
    monkeypatch.setenv("RMQRUN_HANDLER_FAIL_TIMES", "1000")
    total = 8

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "OR1", total)
            cfg = consumer_config(eb.namesrv_address, "GOR1", "OR1", orderly=True, suspend_current_queue_time_ms=50,
                                  max_reconsume_times=1, consume_message_batch_max_size=4)
            async with Running(cfg, pool_config("tests.integration.handlers.fail_handler:handle", workers=1)) as r:
                await wait_for(lambda: len([x for x in read_records(record_file) if x[2] == "ok"]) >= total - 1,
                               what="the good messages", timeout=30)
                await wait_for(lambda: r.supervisor.engine is not None and all(
                    r.supervisor.engine.offset_store.read_memory(mq) == total
                    for mq in r.supervisor.engine.table if mq.topic == "OR1"), what="the queue committed")
                assert await r.stop() == 0
            seen = read_records(record_file)
            assert [(x[2], x[3]) for x in seen if x[1] == 2] == [("fail", 0), ("fail", 1)], seen
            # the messages behind it never failed: each handled once, on its first delivery
            assert [(x[1], x[3]) for x in seen if x[2] == "ok"] == [(i, 0) for i in range(total) if i != 2], seen
            dlq = await _topic_messages(eb, "%DLQ%GOR1")
            assert [m.body for m in dlq] == [b"msg-2"]
            assert (await committed_offsets(eb, "GOR1", "OR1"))[0] == total
    asyncio.run(asyncio.wait_for(main(), 240))
