"""Broadcasting mode end to end: every instance gets every message, offsets live in a local file.

Two instances of one group, each with its own instance name (as with Java,
the default instance name is not made unique in broadcasting mode, so two
instances on one host must be named to keep separate offset files).
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path

import pytest

from rmqrun.consumer.offsets import LocalFileOffsetStore
from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, produce
from tests.integration.engine_kit import wait_for
from tests.integration.signals_kit import read_deliveries

HANDLER = "tests.integration.handlers.probe_handler:record"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


def pids_of(r: Running) -> set[int]:
    return {w.pid for w in r.supervisor.executor.pool.workers()}


def test_every_instance_gets_every_message_and_a_restart_resumes_from_the_local_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record = tmp_path / "deliveries.txt"
    monkeypatch.setenv("PROBE_RECORD", str(record))
    offsets_dir = tmp_path / "offsets"

    def cfg(eb, name: str):  # type: ignore[no-untyped-def]
        return consumer_config(eb.namesrv_address, "GB", "BT", message_model="BROADCASTING", instance_name=name,
                               offset_store_dir=str(offsets_dir))

    def oks_by(pids: set[int], from_idx: int = 0) -> Counter[int]:
        return Counter(d.idx for d in read_deliveries(record) if d.event == "ok" and d.pid in pids
                       and d.idx >= from_idx)

    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "BT", 40)
            a = Running(cfg(eb, "A"), pool_config(HANDLER, workers=1))
            b = Running(cfg(eb, "B"), pool_config(HANDLER, workers=1))
            await a.__aenter__()
            await b.__aenter__()
            try:
                pa, pb = pids_of(a), pids_of(b)
                await wait_for(lambda: len(oks_by(pa)) == 40 and len(oks_by(pb)) == 40, timeout=60,
                               what="both instances to see all 40")
                await asyncio.sleep(1.0)
                assert oks_by(pa) == oks_by(pb) == Counter(range(40)), "each instance: every message, once"
                engine_a = a.supervisor.engine
                assert engine_a is not None and isinstance(engine_a.offset_store, LocalFileOffsetStore)
                path = engine_a.offset_store.path
                assert await a.stop() == 0

                # the local file holds A's offsets: every queue consumed to its end
                table = json.loads(path.read_text())["offsetTable"]
                assert path.parent.parent.name == engine_a.instance.client_id and "@A" in path.parent.parent.name
                assert sum(table.values()) == 40, table
                # and the broker stores none for the group: broadcasting offsets are local
                assert all(eb.broker.store.consumer_offsets.query("GB", "BT", q) is None for q in range(4))

                await produce(eb.namesrv_address, "BT", 20, start=40)
                a2 = Running(cfg(eb, "A"), pool_config(HANDLER, workers=1))
                await a2.__aenter__()
                try:
                    pa2 = pids_of(a2)
                    await wait_for(lambda: len(oks_by(pa2)) == 20 and len(oks_by(pb, 40)) == 20, timeout=60,
                                   what="the 20 new messages on both")
                    await asyncio.sleep(1.0)
                    # A resumed from its file: only the new messages, each once
                    assert oks_by(pa2) == Counter(range(40, 60))
                    assert oks_by(pb) == Counter(range(60))
                    assert await a2.stop() == 0
                finally:
                    await a2.__aexit__(None, None, None)
                table = json.loads(path.read_text())["offsetTable"]
                assert sum(table.values()) == 60
            finally:
                await a.__aexit__(None, None, None)
                await b.__aexit__(None, None, None)
    run(main())
