"""An instance whose mode disagrees with the broker's table says so, once, with the fix (``broker_mode.py``).

Real ``rmqrun run`` processes against the embedded broker:

* a pull instance (the default) of a group the broker has in POP mode: one WARNING by the time it says it is
  consuming (its first rebalance), naming ``--consume-mode pop (or auto)`` and ``rmqrun group mode --mode pull``;
  the group switched back to PULL: one INFO line; switched to POP again while it runs: the warning again,
  saying the mode changed;
* a POP instance of a group in PULL mode: the same check, the other way round;
* a broker without the table (4.x: QUERY_ASSIGNMENT not supported): the pull instance asks, says nothing, runs.
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.processors.common import answer
from rmqrun.protocol.assignment import MessageRequestMode
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.mode_kit import lines_with, set_mode
from tests.integration.pop_run_kit import HANDLER, deliveries_by_idx, start_pop
from tests.integration.signals_kit import Runs, produce, start_broker, wait_until

PULL_WARNING = "consume_mode=pull, but the broker has group"
POP_WARNING = "consume_mode=pop, but the broker has group"


def test_a_pull_instance_of_a_pop_group_is_warned_at_start_and_when_the_mode_changes(tmp_path: Path,
                                                                                      runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "ModeT", 1)
        set_mode(eb, "GMode", "ModeT", MessageRequestMode.POP)
        p = runs.start("pull", HANDLER, namesrv=eb.namesrv_address, group="GMode", topic="ModeT",
                       args=["--workers", "1"], env={"PROBE_RECORD": str(tmp_path / "records.txt")},
                       ready_timeout=60.0)
        # the start-up line ("consuming ModeT[*] ...") follows the first rebalance: the warning is there by then
        wait_until(lambda: "consuming ModeT[" in p.log(), 60, "the start-up line")
        warned = lines_with(p.log(), PULL_WARNING, "POP mode for topic ModeT")
        assert len(warned) == 1, p.log()[-3000:]
        assert "WARNING" in warned[0]
        assert "--consume-mode pop (or auto)" in warned[0]
        assert "rmqrun group mode --group GMode --topic ModeT --mode pull" in warned[0]
        assert p.log().index(PULL_WARNING) < p.log().index("consuming ModeT"), "said within the first rebalance"

        set_mode(eb, "GMode", "ModeT", MessageRequestMode.PULL)
        wait_until(lambda: lines_with(p.log(), "topic ModeT is in PULL mode for group GMode now"), 60,
                   "the agreement said")
        set_mode(eb, "GMode", "ModeT", MessageRequestMode.POP)
        wait_until(lambda: len(lines_with(p.log(), PULL_WARNING)) == 2, 60, "the change said")
        changed = lines_with(p.log(), PULL_WARNING)[1]
        assert "(changed from PULL)" in changed and "--consume-mode pop (or auto)" in changed, changed
        # still consuming (a warning, not a stop)
        produce(eb, "ModeT", 3, start=1)
        wait_until(lambda: len(deliveries_by_idx(tmp_path / "records.txt")) == 4, 60, "messages handled")
        assert p.poll() is None
        assert len(lines_with(p.log(), PULL_WARNING)) == 2, "one line per change, not one per rebalance"
    finally:
        eb.stop_in_thread()


def test_a_pop_instance_of_a_pull_group_is_warned_by_the_same_check(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "ModeP", 1)
        p = start_pop(runs, "pop", eb, "GModeP", "ModeP", tmp_path / "records.txt")
        wait_until(lambda: "consuming ModeP[" in p.log(), 60, "the start-up line")
        warned = lines_with(p.log(), POP_WARNING, "PULL mode for topic ModeP")
        assert len(warned) == 1 and "rmqrun group mode --group GModeP --topic ModeP --mode pop" in warned[0], \
            p.log()[-3000:]
        set_mode(eb, "GModeP", "ModeP", MessageRequestMode.POP)
        wait_until(lambda: lines_with(p.log(), "topic ModeP is in POP mode for group GModeP now"), 60,
                   "the agreement said")
        assert not lines_with(p.log(), PULL_WARNING)
    finally:
        eb.stop_in_thread()


def test_a_broker_without_the_mode_table_gets_no_warning_and_no_error(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    asked: list[int] = []
    try:
        produce(eb, "ModeOld", 1)

        async def not_supported(conn, cmd):  # type: ignore[no-untyped-def]
            asked.append(cmd.code)
            return answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
        eb.broker.server.register(RequestCode.QUERY_ASSIGNMENT, not_supported)
        record = tmp_path / "records.txt"
        p = runs.start("old", HANDLER, namesrv=eb.namesrv_address, group="GModeOld", topic="ModeOld",
                       args=["--workers", "1"], env={"PROBE_RECORD": str(record)}, ready_timeout=60.0)
        assert asked, "the pull instance asked the broker for the group's mode"
        wait_until(lambda: len(deliveries_by_idx(record)) == 1, 60, "the message handled")
        log = p.log()
        assert not lines_with(log, "mode for topic"), log[-3000:]
        assert not [line for line in log.splitlines() if "WARNING" in line or "ERROR" in line], log[-3000:]
        assert len(asked) == 1, "a broker without the table is not asked again"
    finally:
        eb.stop_in_thread()
