"""``rmqrun run --consume-mode auto`` follows the broker's mode table live (``mode_follow.py``).

A real ``rmqrun run`` process against the embedded broker, the probe handler
recording every delivery by the message's ``idx`` property:

* the group starts in PULL (the broker's default): auto pulls; ``rmqrun group mode --mode pop`` while
  pulled messages are still being handled: the pulls stop, those jobs finish and commit, then it pops;
  ``--mode pull`` while popped messages are being handled: the pops stop, those are acked, then it pulls.
  Messages flow all along; every one is handled exactly once;
* a broker without the table (4.x): auto pulls and says so once.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.processors.common import answer
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.mode_kit import create_topic_cli, lines_with, set_mode_cli
from tests.integration.pop_run_kit import HANDLER, deliveries_by_idx
from tests.integration.signals_kit import Runs, produce, read_deliveries, start_broker, wait_until

AUTO = ["--consume-mode", "auto", "--workers", "1"]
#: short long polls: a switch to pull waits for the pop on the wire to answer
FAST = {"RMQRUN_POP_POLL_TIME_MS": "1000"}


def test_auto_switches_a_live_group_pull_pop_pull_with_every_message_once(tmp_path: Path, runs: Runs) -> None:
    first, batch = 300, 150
    failing = first + 20  # popped, fails once
    total = first + 2 * batch
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    record = tmp_path / "records.txt"
    try:
        produce(eb, "AutoT", first)
        p = runs.start("auto", HANDLER, namesrv=eb.namesrv_address, group="GAuto", topic="AutoT", args=AUTO,
                       env={"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": "20", "PROBE_FAIL_IDX": str(failing)},
                       settings=FAST, ready_timeout=60.0)
        # (ready matches "rebalance: now consuming" too: wait for the start-up line itself)
        wait_until(lambda: "consuming AutoT[" in p.log(), 60, "the start-up line")
        assert lines_with(p.log(), "in PULL mode for topic AutoT: pulling it"), p.log()[-3000:]

        # pull -> POP while most of the first messages are pulled and not yet handled
        wait_until(lambda: len(deliveries_by_idx(record)) >= 10, 60, "pulled messages handled")
        set_mode_cli(eb, "GAuto", "AutoT", "pop")
        wait_until(lambda: lines_with(p.log(), "topic AutoT: pulled work committed; popping"), 120,
                   "the switch to POP", interval=0.2)
        assert len(deliveries_by_idx(record)) == first, "every pulled message was handled before the first pop"
        produce(eb, "AutoT", batch, start=first)
        wait_until(lambda: lines_with(p.log(), "POP: popping AutoT"), 60, "pops begun")

        # POP -> pull while popped messages are being handled and one failed pop waits for its retry (the broker
        # revives it into the pop retry topic %RETRY%GAuto_AutoT ~10 s after it failed: after this switch)
        wait_until(lambda: deliveries_by_idx(record, "fail").get(failing), 120, "the failing message failed once")
        set_mode_cli(eb, "GAuto", "AutoT", "pull")
        produce(eb, "AutoT", batch, start=first + batch)
        wait_until(lambda: lines_with(p.log(), "topic AutoT: popped work acked; pulling"), 120,
                   "the switch back to pull", interval=0.2)
        wait_until(lambda: len(deliveries_by_idx(record)) >= total, 180, "every message handled", interval=0.2)
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]

        got = deliveries_by_idx(record)
        assert set(got) == set(range(total)), "every message handled"
        twice = {idx: len(ds) for idx, ds in got.items() if len(ds) > 1}
        assert not twice, f"{len(twice)} message(s) handled twice across the switches: {sorted(twice)[:10]}"
        fails = [d.idx for d in read_deliveries(record) if d.event == "fail"]
        assert fails == [failing], fails
        assert got[failing][0].reconsume == 1, "handled again as a retry"
        log = p.log()
        assert len(lines_with(log, "in POP mode for topic AutoT now: pulls of its")) == 1, log[-3000:]
        assert len(lines_with(log, "in PULL mode for topic AutoT now: pops stopping")) == 1, log[-3000:]
        assert not lines_with(log, "consume_mode=pull, but"), "auto never disagrees with the table"
    finally:
        eb.stop_in_thread()


class LateNotice:
    """While ``held``, one client's QUERY_ASSIGNMENT answers are its last ones from before: it notices a flip of
    the mode table only when the test lets it, so two instances switch one after the other, for sure."""

    def __init__(self, eb: EmbeddedBroker, marker: str) -> None:
        self.original = eb.broker.server.processors[int(RequestCode.QUERY_ASSIGNMENT)]
        self.marker = marker.encode()
        self.held = False
        self.last: bytes | None = None
        eb.broker.server.register(RequestCode.QUERY_ASSIGNMENT, self.handle)

    async def handle(self, conn, cmd):  # type: ignore[no-untyped-def]
        if self.marker not in (cmd.body or b""):
            return await self.original(conn, cmd)
        if self.held and self.last is not None:
            return answer(cmd, body=self.last, typed=False)
        resp = await self.original(conn, cmd)
        self.last = resp.body
        return resp


def test_two_auto_instances_switch_one_after_the_other_with_every_message_once(tmp_path: Path, runs: Runs) -> None:
    """Two instances notice each flip at their own next query; here b notices it only once a has switched: the
    first to switch to POP pops only its own pull share while the other still pulls, the first to switch back
    waits until the other stops popping. Messages flow all along; none is handled twice."""
    first, batch = 400, 200
    total = first + 2 * batch
    eb = start_broker(tmp_path, auto_create_queue_nums=4)
    record = tmp_path / "records.txt"
    late = LateNotice(eb, "@autob")
    try:
        create_topic_cli(eb, "AutoTwo", 4)
        # b's handler is the slower one: it still holds pulled messages when a has handed its own over
        procs = [runs.start(name, HANDLER, namesrv=eb.namesrv_address, group="GAutoTwo", topic="AutoTwo",
                            args=AUTO, env={"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": sleep_ms},
                            settings={**FAST, "RMQRUN_REBALANCE_INTERVAL_MS": "1000", "RMQRUN_INSTANCE_NAME": name},
                            ready_timeout=0.0)
                 for name, sleep_ms in (("autoa", "20"), ("autob", "60"))]
        a, b = procs
        # the messages come once the two pull two queues each: a pull rebalance hands a queue over with what
        # was in flight (at least once, as in Java), which is not what this test is about
        for p in procs:
            wait_until(lambda p=p: _pulls(p.log(), "AutoTwo") == 2, 90, "two queues each")  # type: ignore[misc]
        produce(eb, "AutoTwo", first)
        wait_until(lambda: len(deliveries_by_idx(record)) >= 40, 60, "pulled messages handled")

        # pull -> POP: a first; b (still told PULL) keeps pulling its backlog
        late.held = True
        set_mode_cli(eb, "GAutoTwo", "AutoTwo", "pop")
        wait_until(lambda: lines_with(a.log(), "topic AutoTwo: pulled work committed; popping"), 120, "a's switch")
        wait_until(lambda: len(deliveries_by_idx(record)) >= first, 120, "the first messages handled", interval=0.2)
        assert lines_with(a.log(), "autob still pull(s) topic AutoTwo: popping only this instance's 2 queue(s)")
        late.held = False
        wait_until(lambda: lines_with(b.log(), "topic AutoTwo: pulled work committed; popping"), 120, "b's switch")
        produce(eb, "AutoTwo", batch, start=first)  # popped
        # all of them handled: both wait for more with a pop on the wire, so b pops what comes next at once
        wait_until(lambda: len(deliveries_by_idx(record)) >= first + batch, 120, "popped messages handled")

        # POP -> pull: a first; b (still told POP) keeps popping every queue, and more messages come meanwhile
        late.held = True
        set_mode_cli(eb, "GAutoTwo", "AutoTwo", "pull")
        wait_until(lambda: lines_with(a.log(), "autob still pop(s) topic AutoTwo: pulling once they stop")
                   or lines_with(a.log(), "topic AutoTwo: popped work acked; pulling"), 120, "a's switch back")
        for k in range(0, batch, 10):  # a trickle: b pops while a would pull, had it not waited for b
            produce(eb, "AutoTwo", 10, start=first + batch + k)
            time.sleep(0.1)  # pacing the producer, not waiting for anything
        wait_until(lambda: len(deliveries_by_idx(record)) >= total, 120, "every message handled", interval=0.2)
        late.held = False
        for p in procs:
            wait_until(lambda p=p: lines_with(p.log(), "topic AutoTwo: popped work acked; pulling"),  # type: ignore
                       120, "the switch back to pull", interval=0.2)
        for p in procs:
            p.signal(signal.SIGTERM)
        for p in procs:
            assert p.wait(60) == 0, p.log()[-3000:]
        got = deliveries_by_idx(record)
        assert set(got) == set(range(total)), "every message handled"
        twice = {idx: [(d.pid, d.queue_id, d.offset) for d in ds] for idx, ds in got.items() if len(ds) > 1}
        assert not twice, f"{len(twice)} message(s) handled twice across the switches: {list(twice.items())[:5]}"
        assert len({d.pid for ds in got.values() for d in ds}) == 2, "both instances handled messages"
    finally:
        eb.stop_in_thread()


def test_auto_beside_a_pull_instance_in_a_pop_group_pops_only_its_share(tmp_path: Path, runs: Runs) -> None:
    """The group is POP from the start, and a plain pull instance (warned) is left in it: the auto instance that
    joins pops, but only its own pull share queue by queue while the pull instance holds the others, so no message
    is handled twice (a POP instance beside it would pop every queue and hand its messages out again). A client
    joining later makes an auto instance ask again (the broker's "consumer ids changed")."""
    total = 200
    eb = start_broker(tmp_path, auto_create_queue_nums=4)
    record = tmp_path / "records.txt"
    try:
        create_topic_cli(eb, "AutoMix", 4)
        set_mode_cli(eb, "GAutoMix", "AutoMix", "pop")
        env = {"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": "10"}
        pull = runs.start("pull", HANDLER, namesrv=eb.namesrv_address, group="GAutoMix", topic="AutoMix",
                          args=["--workers", "1"], env=env, ready_timeout=0.0)
        wait_until(lambda: _pulls(pull.log(), "AutoMix") == 4, 90, "the pull instance alone")
        auto = runs.start("auto", HANDLER, namesrv=eb.namesrv_address, group="GAutoMix", topic="AutoMix",
                          args=AUTO, env=env, settings=FAST, ready_timeout=0.0)
        wait_until(lambda: _pulls(pull.log(), "AutoMix") == 2, 90, "the pull instance's share")
        wait_until(lambda: lines_with(auto.log(), "still pull(s) topic AutoMix: popping only this instance's 2"),
                   90, "the auto instance narrowed to its share")
        assert lines_with(auto.log(), "in POP mode for topic AutoMix: popping it"), auto.log()[-3000:]
        assert lines_with(pull.log(), "consume_mode=pull, but the broker has group GAutoMix in POP mode")
        produce(eb, "AutoMix", total)
        wait_until(lambda: len(deliveries_by_idx(record)) >= total, 120, "every message handled", interval=0.2)
        # read before the stop: once the pull instance has left, widening to every queue is right (the hunt of
        # 2026-11-29 saw the auto instance do so between the two SIGTERMs)
        auto_while_both_ran = auto.log()
        for p in (pull, auto):
            p.signal(signal.SIGTERM)
        for p in (pull, auto):
            assert p.wait(60) == 0, p.log()[-3000:]
        got = deliveries_by_idx(record)
        assert set(got) == set(range(total))
        twice = {idx: [(d.pid, d.queue_id, d.offset) for d in ds] for idx, ds in got.items() if len(ds) > 1}
        assert not twice, f"{len(twice)} message(s) handled twice: {list(twice.items())[:5]}"
        assert len({d.pid for ds in got.values() for d in ds}) == 2, "both handled their share"
        assert not lines_with(auto_while_both_ran, "popping every queue"), "it widened while the pull instance ran"
    finally:
        eb.stop_in_thread()


def _pulls(log: str, topic: str) -> int:
    """How many queues of ``topic`` the run's latest rebalance line says it pulls (-1: no such line yet)."""
    lines = lines_with(log, "rebalance: now consuming")
    return lines[-1].count(f" {topic}@") if lines else -1  # (not %RETRY%G{topic}@)


def test_auto_on_a_broker_without_the_table_pulls(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    record = tmp_path / "records.txt"
    try:
        produce(eb, "AutoOld", 5)

        async def not_supported(conn, cmd):  # type: ignore[no-untyped-def]
            return answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
        eb.broker.server.register(RequestCode.QUERY_ASSIGNMENT, not_supported)
        p = runs.start("old", HANDLER, namesrv=eb.namesrv_address, group="GAutoOld", topic="AutoOld", args=AUTO,
                       env={"PROBE_RECORD": str(record)}, ready_timeout=60.0)
        wait_until(lambda: len(deliveries_by_idx(record)) == 5, 60, "every message handled")
        log = p.log()
        assert len(lines_with(log, "consume_mode=auto: the brokers have no message request modes")) == 1, log
        assert "rebalance: took MessageQueue [topic=AutoOld" in log, log[-3000:]
        assert not lines_with(log, "ERROR"), log[-3000:]
    finally:
        eb.stop_in_thread()
