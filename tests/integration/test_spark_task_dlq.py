"""One ``rmqrun spark`` partition, run in this process against the embedded broker (no Spark needed):
with ``--failures retry`` a handler's ``ReconsumeLater(delay_level=-1)`` sends its message straight to
``%DLQ%<group>``, as ``rmqrun run`` does, not to the retry topic to be handled again."""

from __future__ import annotations

from pathlib import Path

from rmqrun.spark.backfill import TaskConfig
from rmqrun.spark.ranges import QueueRange
from rmqrun.spark.task import run_range
from tests.integration.signals_kit import produce, start_broker, topic_messages

HANDLER = "tests.integration.handlers.dlq_handler:handle"


def test_reconsume_later_minus_one_goes_straight_to_the_dlq(tmp_path: Path) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=1)
    try:
        produce(eb, "SpkDlq", 1, props={"fate": "dlq"})
        produce(eb, "SpkDlq", 1, start=1)
        cfg = TaskConfig(namesrv=eb.namesrv_address, handler=HANDLER, group="GSpkDlq", failures="retry")
        report = run_range(0, QueueRange("SpkDlq", "broker-a", 0, 0, 2), cfg)
        assert (report.handled, report.succeeded, report.failed, report.sent_to_retry) == (2, 1, 1, 1)
        dead = topic_messages(eb, "%DLQ%GSpkDlq")
        assert [m.properties.get("idx") for m in dead] == ["0"], "the message did not reach the DLQ"
        assert topic_messages(eb, "%RETRY%GSpkDlq") == [], "the message went to the retry topic, to run again"
    finally:
        eb.stop_in_thread()
