"""A queue whose last records do not match the tags commits past them as soon as its cache drains.

Before, the commit stayed at the last matching offset + 1 (a lag of one per such
queue) until the next long poll came back empty, and for good after a stop: the
records the broker filtered out by tag were never counted as done. The long poll
here is held for 60 s, so a commit at the end of the queue within the test's
wait can only come from the drained cache.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.handlers import record_handler
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, wait_for,
)


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_filtered_tail_is_committed_when_the_cache_drains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          orderly: bool) -> None:
    out = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD", str(out))

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            # offsets 0..9, TagA on even offsets: the last record (9) is TagB
            await produce(eb.namesrv_address, "TT", 10, tags=["TagA", "TagB"])
            cfg = consumer_config(eb.namesrv_address, "GTT", "TT", tags="TagA", orderly=orderly,
                                  broker_suspend_max_time_ms=60_000)
            async with Running(cfg, pool_config("tests.integration.handlers.record_handler:handle")) as r:
                await wait_for(lambda: len(record_handler.records(out)) >= 5, 60, what="the five TagA messages")
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "TT"]
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 10, 20,
                               what="the commit past the filtered tail (offset 10)")
                assert await r.stop() == 0
            got = record_handler.records(out)
            assert sorted(o for _t, _q, o, _tag, _b in got) == [0, 2, 4, 6, 8]
            assert {tag for _t, _q, _o, tag, _b in got} == {"TagA"}
            assert (await committed_offsets(eb, "GTT", "TT")) == {0: 10}
    asyncio.run(asyncio.wait_for(main(), 180))
