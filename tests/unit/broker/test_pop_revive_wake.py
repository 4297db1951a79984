"""The revive loop is woken by a new checkpoint only when it would otherwise sleep past its revive time."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from rmqrun.broker.pop.checkpoint import PopCheckpoint
from rmqrun.broker.pop.ck_log import CheckpointLog
from rmqrun.broker.pop.revive import ReviveService
from rmqrun.broker.pop.service import now_ms


def test_a_checkpoint_due_before_the_loop_wakes_wakes_it_and_a_later_one_does_not() -> None:
    revive = ReviveService(SimpleNamespace(broker=None))  # type: ignore[arg-type]
    revive.wake(123)
    assert revive._wake.is_set(), "a pass is running (not asleep): any new checkpoint wakes the next wait"
    revive._wake.clear()
    revive._sleep_until_ms = 10_000
    revive.wake(10_000)
    revive.wake(60_000)
    assert not revive._wake.is_set(), "the loop wakes by itself at 10 000 and revives these then or later"
    revive.wake(9_999)
    assert revive._wake.is_set()
    revive._wake.clear()
    revive.wake()
    assert revive._wake.is_set(), "a wake without a time always wakes"


def test_the_sleeping_loop_revives_a_checkpoint_added_while_it_sleeps(tmp_path: Path) -> None:
    """On the real loop: a checkpoint added (and announced with its revive time) while the loop sleeps is
    revived, once."""
    log = CheckpointLog(tmp_path, fsync=False)
    log.open()
    revived: list[PopCheckpoint] = []
    added: list[PopCheckpoint] = []

    async def main() -> None:
        revive = ReviveService(SimpleNamespace(broker=None, ck_log=log, orders=None))  # type: ignore[arg-type]

        async def fake_revive(ck: PopCheckpoint) -> bool:
            revived.append(ck)
            return True
        revive.revive = fake_revive  # type: ignore[method-assign]
        revive.start()
        for _ in range(200):  # until the loop sleeps (bounded)
            if revive._sleep_until_ms is not None:
                break
            await asyncio.sleep(0.005)
        assert revive._sleep_until_ms is not None
        pop_time = now_ms()
        ck = PopCheckpoint(topic="T", group="G", queue_id=0, start_offset=0, pop_time=pop_time, invisible_time=50,
                           revive_qid=0, broker_name="b", offsets=(0,))
        log.add(ck)
        added.append(ck)
        revive.wake(pop_time + 50)
        for _ in range(400):
            if revived:
                break
            await asyncio.sleep(0.005)
        await revive.stop()
    asyncio.run(main())
    log.close()
    assert [c.key for c in revived] == [c.key for c in added]
