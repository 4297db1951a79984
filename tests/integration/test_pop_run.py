"""``rmqrun run --consume-mode pop`` against the embedded broker: a group scaled past its queue count.

Real ``rmqrun run`` processes, the embedded broker on a thread, the probe handler
recording every delivery with its pid (``tests/integration/handlers/probe_handler.py``):

* six instances on a two-queue topic share it: every instance handles messages,
  every message is handled, none twice;
* an instance killed with SIGKILL mid-drain: what it had popped and not acked
  comes back to the others after the invisible time, nothing is lost;
* a handler that always fails: after ``max_reconsume_times`` the message is in
  ``%DLQ%<group>`` (and acked: not delivered again);
* a call longer than the invisible time is extended while it runs, so no other
  instance gets the message meanwhile;
* a broker without POP stops the start with what is needed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from rmqrun.broker.processors.common import answer
from rmqrun.client.instance import ClientInstance
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.cli_kit import free_port, run_cli
from tests.integration.pop_run_kit import deliveries_by_idx, set_pop_mode, start_pop
from tests.integration.signals_kit import (
    Runs, produce, read_deliveries, start_broker, topic_messages, wait_until,
)

#: the embedded broker's POP engine (branch pp24) lands separately: until then only the refusal test runs
needs_pop_broker = pytest.mark.skipif(importlib.util.find_spec("rmqrun.broker.processors.pop") is None,
                                      reason="the embedded broker does not serve POP_MESSAGE in this tree")


@needs_pop_broker
def test_six_instances_share_a_two_queue_topic(tmp_path: Path, runs: Runs) -> None:
    total = 10_000
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopSix", 2)  # the topic exists (two queues) before the group starts
        set_pop_mode(eb, "GPopSix", "PopSix")
        record = tmp_path / "records.txt"
        procs = [start_pop(runs, f"p{i}", eb, "GPopSix", "PopSix", record, ready=False,
                           env={"PROBE_SLEEP_MS": "1"}) for i in range(6)]
        for p in procs:
            p.wait_ready(90)
        workers = [set(p.worker_pids()) for p in procs]
        produce(eb, "PopSix", total - 2, start=2)
        wait_until(lambda: len(deliveries_by_idx(record)) >= total, 300, "every message handled", interval=0.5)
        time.sleep(1.0)  # a late duplicate would show up here
        for mine, p in zip(workers, procs):
            mine.update(p.worker_pids())
        for p in procs:
            p.signal(signal.SIGTERM)
        for p in procs:
            assert p.wait(60) == 0, p.log()[-3000:]
        got = deliveries_by_idx(record)
        assert set(got) == set(range(total)), "every message handled"
        twice = {idx: [d.pid for d in ds] for idx, ds in got.items() if len(ds) > 1}
        assert not twice, f"{len(twice)} message(s) handled twice without a kill: {list(twice.items())[:5]}"
        handled = {d.pid for ds in got.values() for d in ds}
        for i, (mine, p) in enumerate(zip(workers, procs)):
            assert mine & handled, f"instance {i} handled nothing:\n{p.log()[-2000:]}"
            assert "POP: popping PopSix" in p.log() and "(every queue: 2)" in p.log(), p.log()[-2000:]
    finally:
        eb.stop_in_thread()


@needs_pop_broker
def test_a_killed_instance_s_messages_come_back_to_the_others(tmp_path: Path, runs: Runs) -> None:
    total = 600
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopKill", total)
        set_pop_mode(eb, "GPopKill", "PopKill")
        record = tmp_path / "records.txt"
        fast = {"RMQRUN_POP_INVISIBLE_TIME_MS": "5000", "RMQRUN_POP_POLL_TIME_MS": "2000"}
        slow = {"PROBE_SLEEP_MS": "30"}
        victim = start_pop(runs, "victim", eb, "GPopKill", "PopKill", record, settings=fast, env=slow)
        victim_workers = set(victim.worker_pids())
        wait_until(lambda: sum(d.pid in victim_workers for d in read_deliveries(record)) >= 30, 60,
                   "the victim consuming")
        others = [start_pop(runs, f"k{i}", eb, "GPopKill", "PopKill", record, settings=fast, env=slow)
                  for i in range(2)]
        victim.kill9()  # with messages popped and not acked: its pops run ahead of its one worker
        victim.wait_group_gone()
        wait_until(lambda: len(deliveries_by_idx(record)) >= total, 120, "every message handled", interval=0.5)
        for p in others:
            p.signal(signal.SIGTERM)
            assert p.wait(60) == 0, p.log()[-3000:]
        got = deliveries_by_idx(record)
        assert set(got) == set(range(total)), "nothing lost"
        revived = [d for ds in got.values() for d in ds if d.reconsume >= 1 and d.pid not in victim_workers]
        assert revived, "what the killed instance had popped came back (revived: reconsume count raised)"
        # A second handling comes only from the broker handing a message out again (the victim's pops, or a
        # survivor's message whose invisible time ran out between its call's start and its ack on a loaded
        # machine, as in Java): each copy carries a raised reconsume count. One popped copy is never run twice.
        twice = {idx: sorted(d.reconsume for d in ds) for idx, ds in got.items() if len(ds) > 1}
        copied = {idx: counts for idx, counts in twice.items() if len(set(counts)) < len(counts)}
        assert not copied, f"one popped copy handled twice (reconsume counts per handling): {list(copied.items())[:5]}"
    finally:
        eb.stop_in_thread()


@needs_pop_broker
def test_a_message_failing_every_time_ends_in_the_dlq(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopDlq", 6)
        set_pop_mode(eb, "GPopDlq", "PopDlq")
        record = tmp_path / "records.txt"
        p = start_pop(runs, "d", eb, "GPopDlq", "PopDlq", record, args=("--max-reconsume-times", "1"),
                      env={"PROBE_FAIL_IDX": "3", "PROBE_FAIL_TIMES": "100"})
        wait_until(lambda: topic_messages(eb, "%DLQ%GPopDlq"), 90, "the DLQ", interval=0.5)
        time.sleep(2.0)
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]
        (dead,) = topic_messages(eb, "%DLQ%GPopDlq")
        assert dead.properties.get("idx") == "3"
        fails = deliveries_by_idx(record, "fail")
        assert sorted(d.reconsume for d in fails[3]) == [0, 1], "delivered max_reconsume_times + 1 times"
        assert set(deliveries_by_idx(record)) == {0, 1, 2, 4, 5}
        # its origin is the topic it was sent to, not the pop retry topic it last came from (issue #31)
        assert dead.properties.get("RETRY_TOPIC") == "PopDlq"
        (line,) = [ln for ln in p.log().splitlines() if "dead-lettered message" in ln]
        assert " of PopDlq to %DLQ%GPopDlq (max_reconsume)" in line, line
        dlq = ["--group", "GPopDlq", "--namesrv", eb.namesrv_address]
        listed = run_cli(["dlq", "list", "--json", "--topic", "PopDlq", *dlq])
        assert listed.returncode == 0, listed.stderr
        assert [json.loads(row)["origin_topic"] for row in listed.stdout.splitlines()] == ["PopDlq"]
        moved = run_cli(["dlq", "redrive", "--topic", "PopDlq", *dlq])
        assert moved.stdout.count("moved ") == 1 and "-> PopDlq (" in moved.stdout, moved.stdout + moved.stderr
        assert len(topic_messages(eb, "PopDlq")) == 7, "re-driven to the original topic"
    finally:
        eb.stop_in_thread()


@needs_pop_broker
def test_a_call_longer_than_the_invisible_time_is_not_delivered_twice(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopLong", 2)
        set_pop_mode(eb, "GPopLong", "PopLong")
        record = tmp_path / "records.txt"
        fast = {"RMQRUN_POP_INVISIBLE_TIME_MS": "5000", "RMQRUN_POP_POLL_TIME_MS": "2000"}
        procs = [start_pop(runs, f"l{i}", eb, "GPopLong", "PopLong", record, settings=fast,
                           env={"PROBE_SLEEP_MS": "13000"}) for i in range(2)]
        wait_until(lambda: len(deliveries_by_idx(record)) >= 2, 90, "both messages handled", interval=0.5)
        time.sleep(8.0)  # a second delivery, had the invisibility lapsed, would have begun and ended by now
        for p in procs:
            p.signal(signal.SIGTERM)
        for p in procs:
            assert p.wait(60) == 0, p.log()[-3000:]
        got = deliveries_by_idx(record)
        assert {idx: len(ds) for idx, ds in got.items()} == {0: 1, 1: 1}, got
    finally:
        eb.stop_in_thread()


def test_a_broker_without_pop_stops_the_start_with_what_is_needed(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopOld", 1)

        async def not_supported(conn, cmd):  # type: ignore[no-untyped-def]
            return answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
        eb.broker.server.register(RequestCode.QUERY_ASSIGNMENT, not_supported)
        p = start_pop(runs, "old", eb, "GPopOld", "PopOld", tmp_path / "records.txt", ready=False)
        assert p.wait(60) == 2, p.log()[-3000:]
        assert "POP needs RocketMQ 5.x" in p.log()
    finally:
        eb.stop_in_thread()


@needs_pop_broker
def test_a_message_that_kills_its_worker_fails_alone_and_the_run_reports_pop(tmp_path: Path, runs: Runs) -> None:
    """Crash isolation as in pull mode: the poison message (its worker dies in the call) is the one failure, its
    batch mates are handled once; with max_reconsume_times 0 it goes to the DLQ at once. The run's /metrics and
    its consumer running info (mqadmin consumerStatus) show the POP side."""
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopCrash", 8)
        set_pop_mode(eb, "GPopCrash", "PopCrash")
        record = tmp_path / "records.txt"
        port = free_port()
        p = runs.start("c", "tests.integration.handlers.crash_handler:crash", namesrv=eb.namesrv_address, group="GPopCrash",
                       topic="PopCrash", args=["--consume-mode", "pop", "--workers", "1",
                                               "--max-reconsume-times", "0", "--metrics-port", str(port)],
                       env={"PROBE_RECORD": str(record), "PROBE_CRASH_IDX": "2", "PROBE_CRASH": "exit7"})
        wait_until(lambda: topic_messages(eb, "%DLQ%GPopCrash"), 60, "the poison message in the DLQ", interval=0.5)
        wait_until(lambda: len(deliveries_by_idx(record)) >= 7, 60, "the others handled", interval=0.2)
        wait_until(lambda: "rmqrun_pop_acks_total 8.0" in _scrape(port), 30, "8 acks (7 + the DLQ'd)")
        metrics = _scrape(port)
        info = _running_info(eb, "GPopCrash")
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]
        (dead,) = topic_messages(eb, "%DLQ%GPopCrash")
        assert dead.properties.get("idx") == "2"
        got = deliveries_by_idx(record)
        assert sorted(got) == [0, 1, 3, 4, 5, 6, 7] and all(len(ds) == 1 for ds in got.values()), got
        assert len(deliveries_by_idx(record, "start")[2]) == 1, "the poison message ran once"
        assert "rmqrun_pop_unacked_messages 0.0" in metrics
        assert 'rmqrun_pop_assignment_unacked_messages{broker="broker-a",group="GPopCrash",queue_id="-1",' \
               'topic="PopCrash"} 0.0' in metrics
        props = info["properties"]
        assert props["consumeMode"] == "POP" and props["popAcks"] == "8", props
        assert [fastjson.object_key(k)["queueId"] for k in info["mqPopTable"]] == [-1]
        assert {s["topic"] for s in info["subscriptionSet"]} == {"PopCrash", "%RETRY%GPopCrash"}
    finally:
        eb.stop_in_thread()


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return resp.read().decode()


def _running_info(eb, group: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    """GET_CONSUMER_RUNNING_INFO through the broker, as mqadmin consumerStatus asks it."""
    async def main() -> dict:  # type: ignore[type-arg]
        inst = ClientInstance(eb.namesrv_address, instance_name="probe")
        try:
            (client_id,) = await inst.broker.get_consumer_list(eb.broker_address, group)
            resp = await inst.broker.request(eb.broker_address, RemotingCommand(
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"}), 10)
            assert resp.code == ResponseCode.SUCCESS, resp.remark
            return fastjson.loads(resp.body)
        finally:
            await inst.close()
    return asyncio.run(main())


@needs_pop_broker
def test_a_graceful_stop_acks_what_finished_and_leaves_the_rest_to_come_back(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopStop", 6)
        set_pop_mode(eb, "GPopStop", "PopStop")
        record = tmp_path / "records.txt"
        fast = {"RMQRUN_POP_INVISIBLE_TIME_MS": "5000", "RMQRUN_POP_POLL_TIME_MS": "2000"}
        a = start_pop(runs, "a", eb, "GPopStop", "PopStop", record, settings=fast, args=("--graceful-timeout", "3"),
                      env={"PROBE_SLEEP_MS": "2000"})
        wait_until(lambda: len(deliveries_by_idx(record)) >= 1, 60, "a first message handled")
        a.signal(signal.SIGTERM)  # a call is running: it finishes within the grace and is acked; the next is cut
        assert a.wait(60) == 0, a.log()[-3000:]
        by_a = deliveries_by_idx(record)
        assert 1 <= len(by_a) < 6
        b = start_pop(runs, "b", eb, "GPopStop", "PopStop", record, settings=fast)
        wait_until(lambda: len(deliveries_by_idx(record)) >= 6, 60, "the rest handled by the next run", interval=0.2)
        time.sleep(6.0)  # an un-acked finished message would come back within one invisible time
        b.signal(signal.SIGTERM)
        assert b.wait(60) == 0, b.log()[-3000:]
        got = deliveries_by_idx(record)
        assert sorted(got) == list(range(6)) and all(len(ds) == 1 for ds in got.values()), got
        assert all(ds[0].reconsume >= 1 for idx, ds in got.items() if idx not in by_a), \
            "the ones left behind came back (revived after the invisible time)"
    finally:
        eb.stop_in_thread()


@needs_pop_broker
def test_orderly_pop_keeps_each_queue_in_order_across_instances_and_a_kill(tmp_path: Path, runs: Runs) -> None:
    """Three ``--orderly --consume-mode pop`` instances on two queues; one is killed mid-drain. Per queue the
    handler never sees an offset ahead of one not yet handled, and every message is handled."""
    total = 400
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopOrd", total)
        set_pop_mode(eb, "GPopOrd", "PopOrd")
        record = tmp_path / "records.txt"
        fast = {"RMQRUN_POP_INVISIBLE_TIME_MS": "5000", "RMQRUN_POP_POLL_TIME_MS": "2000",
                "RMQRUN_POP_BATCH_SIZE": "8"}
        slow = {"PROBE_SLEEP_MS": "10"}
        procs = [start_pop(runs, f"o{i}", eb, "GPopOrd", "PopOrd", record, settings=fast, env=slow,
                           args=("--orderly",)) for i in range(3)]
        victim = procs[0]
        victim_workers = set(victim.worker_pids())
        wait_until(lambda: sum(d.pid in victim_workers for d in read_deliveries(record)) >= 20, 60,
                   "the victim consuming")
        victim.kill9()
        victim.wait_group_gone()
        wait_until(lambda: len(deliveries_by_idx(record)) >= total, 180, "every message handled", interval=0.5)
        for p in procs[1:]:
            p.signal(signal.SIGTERM)
            assert p.wait(60) == 0, p.log()[-3000:]
        assert "orderly by POP" in procs[1].log()
        oks = [d for d in read_deliveries(record) if d.event == "ok"]
        assert {d.idx for d in oks} == set(range(total)), "nothing lost"
        per_queue: dict[int, list[int]] = {}
        for d in oks:
            per_queue.setdefault(d.queue_id, []).append(d.offset)
        assert sorted(per_queue) == [0, 1]
        for q, offsets in per_queue.items():
            top = -1
            for x in offsets:
                assert x <= top + 1, f"queue {q}: {x} handled before {top + 1}: {offsets}"
                top = max(top, x)
        handlers = {d.pid for d in oks}
        assert handlers - victim_workers, "the survivors took over"
    finally:
        eb.stop_in_thread()


@needs_pop_broker
def test_orderly_pop_retries_a_failed_message_before_the_rest_of_its_queue(tmp_path: Path, runs: Runs) -> None:
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopOrdFail", 20)
        set_pop_mode(eb, "GPopOrdFail", "PopOrdFail")
        record = tmp_path / "records.txt"
        p = start_pop(runs, "f", eb, "GPopOrdFail", "PopOrdFail", record, args=("--orderly",),
                      settings={"RMQRUN_POP_POLL_TIME_MS": "2000"},
                      env={"PROBE_FAIL_IDX": "4", "PROBE_FAIL_TIMES": "2"})
        wait_until(lambda: len(deliveries_by_idx(record)) >= 20, 60, "every message handled", interval=0.2)
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]
        log = read_deliveries(record)
        fails = [d for d in log if d.event == "fail"]
        assert [(d.idx, d.reconsume) for d in fails] == [(4, 0), (4, 1)], "its delivery count is its reconsume count"
        oks = [d for d in log if d.event == "ok"]
        four = next(d for d in oks if d.idx == 4)
        assert four.reconsume == 2
        after = [d for d in oks if d.queue_id == four.queue_id and d.offset > four.offset]
        assert after and all(oks.index(d) > oks.index(four) for d in after), "the rest of its queue waited for it"
        assert sorted(deliveries_by_idx(record)) == list(range(20))
        assert all(len(ds) == 1 for ds in deliveries_by_idx(record).values())
    finally:
        eb.stop_in_thread()


@needs_pop_broker
def test_a_batch_handler_s_successes_are_acked_in_one_batch_ack(tmp_path: Path, runs: Runs) -> None:
    """``--batch-size 4`` with a batch handler: each call's successes go in one BATCH_ACK_MESSAGE, which the
    broker takes (nothing comes back after the invisible time)."""
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        produce(eb, "PopBatch", 40)
        set_pop_mode(eb, "GPopBatch", "PopBatch")
        record = tmp_path / "records.txt"
        port = free_port()
        p = runs.start("b", "tests.integration.handlers.probe_handler:record_batch", namesrv=eb.namesrv_address,
                       group="GPopBatch", topic="PopBatch",
                       args=["--consume-mode", "pop", "--workers", "1", "--batch-size", "4",
                             "--metrics-port", str(port)],
                       settings={"RMQRUN_POP_INVISIBLE_TIME_MS": "5000"}, env={"PROBE_RECORD": str(record)})
        wait_until(lambda: len(deliveries_by_idx(record)) >= 40, 60, "every message handled", interval=0.2)
        time.sleep(7.0)  # longer than the invisible time: an unacked message would be back
        metrics = _scrape(port)
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]
        got = deliveries_by_idx(record)
        assert sorted(got) == list(range(40)) and all(len(ds) == 1 for ds in got.values()), got
        assert "rmqrun_pop_acks_total 40.0" in metrics and "rmqrun_pop_ack_failures_total 0.0" in metrics
        calls = {(d.pid, d.call) for ds in got.values() for d in ds}
        assert len(calls) < 40, "some calls carried several messages"
    finally:
        eb.stop_in_thread()


@needs_pop_broker
def test_a_broker_refusing_batch_acks_gets_every_message_acked_one_by_one(tmp_path: Path, runs: Runs) -> None:
    """A broker that serves POP but answers BATCH_ACK_MESSAGE "not supported": the batch of acks that finds
    out is sent again one ACK_MESSAGE per message, as every later one is; none is left to come back."""
    eb = start_broker(tmp_path, auto_create_queue_nums=2)
    try:
        async def not_supported(conn, cmd):  # type: ignore[no-untyped-def]
            return answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported")
        eb.broker.server.register(RequestCode.BATCH_ACK_MESSAGE, not_supported)
        produce(eb, "PopNoBatch", 20)
        set_pop_mode(eb, "GPopNoBatch", "PopNoBatch")
        record = tmp_path / "records.txt"
        p = start_pop(runs, "n", eb, "GPopNoBatch", "PopNoBatch", record,
                      settings={"RMQRUN_POP_INVISIBLE_TIME_MS": "60000"})
        wait_until(lambda: len(deliveries_by_idx(record)) >= 20, 60, "every message handled", interval=0.2)
        # acked: the broker holds no popped message un-acked (one whose ack was dropped would stay so for 60 s)
        wait_until(lambda: len(eb.broker.pop.ck_log) == 0, 30, "every message acked", interval=0.2)
        p.signal(signal.SIGTERM)
        assert p.wait(60) == 0, p.log()[-3000:]
        got = deliveries_by_idx(record)
        assert sorted(got) == list(range(20)) and all(len(ds) == 1 for ds in got.values()), got
        assert "does not take batch acks" in p.log()
    finally:
        eb.stop_in_thread()
