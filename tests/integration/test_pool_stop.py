"""What a stop that cuts batches short says it cut (``Pool.stop``; issue #31 defect 7).

A batch of six messages whose fourth hangs: the first three finish, then the
stop's grace runs out and SIGTERM interrupts the call. The log must count the
three messages that run again, not the six of the batch: the three that
finished come back as SUCCESS and are committed.
"""

from __future__ import annotations

from loguru import logger

from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import Status as S
from tests.integration.test_pool_basic import Harness, records, run, statuses


def test_a_stop_counts_only_the_messages_that_run_again() -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO")

    async def scenario() -> None:
        async with Harness("workers.misbehave:by_property") as h:
            batch = h.submit(0, records([{}, {}, {}, {"MISBEHAVE": "hang"}, {}, {}]))

            def hanging() -> bool:
                for proc in list(h.pool._procs):
                    live = progress_mem.read_live(proc.progress)
                    if live is not None and live.batch_id == batch.batch_id and live.in_call and live.done >= 3:
                        return True
                return False

            await h.wait_for(hanging, what="the fourth message's call hanging")
            await h.pool.stop(0.3)
            result = await h.result(batch, timeout=30)
            assert statuses(result) == [S.SUCCESS] * 3 + [S.NOT_RUN] * 3
            assert h.pool.cut_short_messages == 3

    try:
        run(scenario())
    finally:
        logger.remove(sink)
    (line,) = [ln for ln in lines if "cut short" in ln]
    assert "1 batch(es) cut short (3 messages), redelivered later" in line, line
