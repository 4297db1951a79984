"""``rmqrun run --consume-mode pop`` with jobs of several queues (issue #32): one pop of a two-queue topic
brings both queues' messages, and they go to the worker as one batch. A message in it that kills its worker
is failed alone (to the DLQ at ``--max-reconsume-times 0``), its batch mates of both queues are handled
once, and every message is acked with its own receipt: the broker holds nothing un-acked afterwards."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.integration.pop_run_kit import deliveries_by_idx, set_pop_mode
from tests.integration.signals_kit import Runs, produce, start_broker, topic_messages, wait_until
from tests.integration.test_pop_run import needs_pop_broker


@needs_pop_broker
def test_a_killer_in_a_job_of_two_queues_fails_alone_and_each_message_is_acked_once(tmp_path: Path,
                                                                                    runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopMix", 8)
        set_pop_mode(eb, "GPopMix", "PopMix")
        record = tmp_path / "records.txt"
        # a batch handler with calls of 8: the first job (the first pop, both queues) is one call, which dies
        p = runs.start("m", "tests.integration.handlers.crash_handler:crash_batch", namesrv=eb.namesrv_address,
                       group="GPopMix", topic="PopMix",
                       args=["--consume-mode", "pop", "--workers", "1", "--batch-size", "8",
                             "--max-reconsume-times", "0"],
                       env={"PROBE_RECORD": str(record), "PROBE_CRASH_IDX": "2"})
        wait_until(lambda: topic_messages(eb, "%DLQ%GPopMix"), 60, "the killer in the DLQ", interval=0.5)
        wait_until(lambda: len(deliveries_by_idx(record)) >= 7, 60, "the others handled", interval=0.2)
        wait_until(lambda: eb.broker.pop.in_flight("GPopMix") == 0, 30, "every pop acked", interval=0.2)
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]
        log = p.log()
        assert "queueId=-1]: 0 of 8 messages had finished" in log, "the job that died held all 8 messages"
        assert "at PopMix broker-a:0@0" in log and "at PopMix broker-a:1@0" in log, "of both queues"
        (dead,) = topic_messages(eb, "%DLQ%GPopMix")
        assert dead.properties.get("idx") == "2"
        got = deliveries_by_idx(record)
        assert sorted(got) == [0, 1, 3, 4, 5, 6, 7] and all(len(ds) == 1 for ds in got.values()), got
        assert {d.queue_id for ds in got.values() for d in ds} == {0, 1}
    finally:
        eb.stop_in_thread()
