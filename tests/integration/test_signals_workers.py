"""Workers that die, hang, leak or crash-loop under a real ``rmqrun run`` process.

Each test starts ``rmqrun run`` as a child process against an embedded broker,
breaks its workers, and then checks durable facts: what the handler recorded
(every message handled, per-queue order kept in orderly mode) and what the
broker committed (never a message that was not handled).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil

from tests.integration.signals_kit import (
    Runs, committed, oks, per_queue, produce, queue_max_offsets, read_deliveries, topic_messages,
    wait_until,
)

PROBE = "tests.integration.handlers.probe_handler"


def assert_in_order_at_least_once(offsets: list[int], size: int, max_restarts: int, what: str) -> None:
    """Orderly after crashes: never a skip ahead; a redelivery restarts at an earlier offset and
    continues contiguously from there; every offset seen."""
    restarts = 0
    top = -1
    prev = -1
    for x in offsets:
        assert x <= top + 1, f"{what}: {x} seen before {top + 1}: {offsets}"
        if x != prev + 1:
            restarts += 1
        prev = x
        top = max(top, x)
    assert set(offsets) == set(range(size)), f"{what}: missing {sorted(set(range(size)) - set(offsets))}"
    assert restarts <= max_restarts, f"{what}: {restarts} redelivery restarts: {offsets}"


def _kill_busy_workers(run, record: Path, kills: int) -> list[int]:  # type: ignore[no-untyped-def]
    """SIGKILL a worker in the middle of its work, ``kills`` times, a little apart."""
    killed = []
    for _ in range(kills):
        before = len(oks(record))
        wait_until(lambda: len(oks(record)) >= before + 20, 30, "progress before the next kill")
        pids = run.worker_pids()
        assert pids
        victim = pids[len(killed) % len(pids)]
        os.kill(victim, signal.SIGKILL)
        killed.append(victim)
    return killed


def test_sigkill_of_a_busy_worker_loses_nothing_concurrent(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    produce(eb, "WK", 300)
    sizes = queue_max_offsets(eb, "WK")
    record = tmp_path / "records.txt"
    run = runs.start("run", f"{PROBE}:record", namesrv=eb.namesrv_address, group="GWK", topic="WK",
                     args=["--workers", "2"], env={"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": "10"})
    killed = _kill_busy_workers(run, record, 2)
    wait_until(lambda: {d.idx for d in oks(record)} >= set(range(300)), 40, "every message handled")
    wait_until(lambda: committed(eb, "GWK", "WK") == sizes, 10, "everything committed", interval=0.2)
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    log = run.log()
    assert log.count("redelivering") >= 1, log[-3000:]
    assert all(str(pid) in log for pid in killed)
    # at-least-once: duplicates only from batches the killed workers held
    assert len(oks(record)) - 300 <= 2 * 64


def test_sigkill_of_a_busy_worker_keeps_orderly_queues_in_order(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    produce(eb, "WKO", 300, sharding_keys=4)
    sizes = queue_max_offsets(eb, "WKO")
    record = tmp_path / "records.txt"
    run = runs.start("run", f"{PROBE}:record", namesrv=eb.namesrv_address, group="GWKO", topic="WKO",
                     args=["--workers", "2", "--orderly"],
                     env={"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": "10"})
    _kill_busy_workers(run, record, 3)
    wait_until(lambda: {d.idx for d in oks(record)} >= set(range(300)), 40, "every message handled")
    wait_until(lambda: committed(eb, "GWKO", "WKO") == sizes, 10, "everything committed", interval=0.2)
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    for q, offs in per_queue(oks(record)).items():
        assert_in_order_at_least_once(offs, sizes[q], 3, f"queue {q}")


def test_hung_handler_is_stopped_at_its_time_limit_and_retried_not_committed(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    produce(eb, "WH", 40)
    record = tmp_path / "records.txt"
    # consume_timeout_minutes 0.1 = 6 s; the first delivery of idx 5 sleeps for an hour
    run = runs.start("run", f"{PROBE}:hang", namesrv=eb.namesrv_address, group="GWH", topic="WH",
                     args=["--workers", "2", "--consume-timeout", "0.1"],
                     env={"PROBE_RECORD": str(record), "PROBE_HANG_IDX": "5"})
    wait_until(lambda: any(d.event == "start" and d.idx == 5 for d in read_deliveries(record)), 20, "idx 5 hangs")
    hung = next(d for d in read_deliveries(record) if d.event == "start")
    # later messages of the hung queue arrive in new batches and finish on the other worker
    produce(eb, "WH", 40, start=40)
    held: list[float] = []

    def held_while_later_ones_finish() -> bool:
        """Valid only before the time limit stops idx 5 (then it may be sent back and passed)."""
        later_done = any(d.event == "ok" and d.queue_id == hung.queue_id and d.offset > hung.offset
                         for d in read_deliveries(record))
        commit = committed(eb, "GWH", "WH")[hung.queue_id]
        stopped = "soft time limit" in run.log()  # logged by the worker before it answers
        assert not stopped or len(held) >= 3, "the time limit came before the check could be made"
        if later_done and not stopped:
            assert commit <= hung.offset, f"committed {commit} past the hung offset {hung.offset}"
            if not held or time.monotonic() - held[-1] >= 0.3:  # one persist round apart
                held.append(time.monotonic())
        return len(held) >= 3
    wait_until(held_while_later_ones_finish, 20, "later messages finishing while idx 5 hangs", interval=0.1)
    wait_until(lambda: any(d.event == "ok" and d.idx == 5 for d in read_deliveries(record)), 20, "idx 5 retried")
    wait_until(lambda: {d.idx for d in oks(record)} >= set(range(80)), 20, "every message")
    retried = [d for d in read_deliveries(record) if d.idx == 5]
    assert [(d.event, d.reconsume) for d in retried] == [("start", 0), ("ok", 1)], retried
    wait_until(lambda: sum(committed(eb, "GWH", "WH").values()) == 80, 10, "all committed", interval=0.2)
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    assert "time limit" in run.log()


def test_handler_ignoring_the_soft_limit_is_killed_at_the_hard_limit_and_retried(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    produce(eb, "WHH", 40)
    record = tmp_path / "records.txt"
    run = runs.start("run", f"{PROBE}:hang_hard", namesrv=eb.namesrv_address, group="GWHH", topic="WHH",
                     args=["--workers", "2", "--consume-timeout", "0.02"], settings={"RMQRUN_KILL_GRACE": "1"},
                     env={"PROBE_RECORD": str(record), "PROBE_HANG_IDX": "5"})
    wait_until(lambda: any(d.event == "start" for d in read_deliveries(record)), 20, "idx 5 hangs")
    hung = next(d for d in read_deliveries(record) if d.event == "start")
    wait_until(lambda: not psutil.pid_exists(hung.pid) or psutil.Process(hung.pid).status() == psutil.STATUS_ZOMBIE,
               15, "the hung worker to be killed")
    wait_until(lambda: {d.idx for d in oks(record)} >= set(range(40)), 30, "every message")
    assert [(d.event, d.reconsume) for d in read_deliveries(record) if d.idx == 5] == [("start", 0), ("ok", 1)]
    wait_until(lambda: sum(committed(eb, "GWHH", "WHH").values()) == 40, 10, "all committed", interval=0.2)
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    assert "hard time limit" in run.log()


def test_leaking_handler_is_recycled_at_its_memory_limit_without_loss(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    produce(eb, "WL", 24)
    record = tmp_path / "records.txt"
    run = runs.start("run", f"{PROBE}:leak", namesrv=eb.namesrv_address, group="GWL", topic="WL",
                     args=["--workers", "1"],
                     # one message per batch and no batch queued behind the running one: the worker
                     # checks its memory after each batch and holds nothing it would have to finish
                     settings={"RMQRUN_MAX_MEMORY_PER_WORKER": "150MiB", "RMQRUN_PULL_BATCH_SIZE": "1",
                               "RMQRUN_MAX_INFLIGHT_MESSAGES": "1"},
                     env={"PROBE_RECORD": str(record), "PROBE_LEAK_MB": "25"})
    wait_until(lambda: {d.idx for d in oks(record)} >= set(range(24)), 60, "every message")
    wait_until(lambda: sum(committed(eb, "GWL", "WL").values()) == 24, 10, "all committed", interval=0.2)
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    deliveries = oks(record)
    assert sorted(d.idx for d in deliveries) == list(range(24)), "each exactly once: recycling is graceful"
    pids = {d.pid for d in deliveries}
    assert len(pids) >= 24 // 7, f"the worker was recycled several times, got pids {pids}"
    # no worker handled more than fits under the limit (25 MiB each on top of the interpreter)
    # plus the one that crossed it
    per_pid = {p: sum(1 for d in deliveries if d.pid == p) for p in pids}
    assert max(per_pid.values()) <= 150 // 25 + 1, per_pid
    assert "recycling" in run.log()


def test_crash_loop_stops_rmqrun_with_a_clear_error_and_loses_nothing(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    """Workers that keep dying outside any handler call (no message explains it) trip the guard."""
    produce(eb, "WC", 40)
    sizes = queue_max_offsets(eb, "WC")
    record = tmp_path / "records.txt"
    run = runs.start("run", "tests.integration.handlers.dying_handler:record", namesrv=eb.namesrv_address, group="GWC",
                     topic="WC", args=["--workers", "2"],
                     settings={"RMQRUN_CRASH_LIMIT": "3", "RMQRUN_CRASH_WINDOW": "60"},
                     env={"PROBE_RECORD": str(record), "PROBE_DIE_AFTER_MS": "400"})
    code = run.wait(45)  # a guard that never tripped would spin past this; the log says it tripped on the count
    log = run.log()
    assert code == 1, log[-3000:]
    assert "workers died 4 times within 60 s (limit 3)" in log, log[-3000:]
    assert "deaths counted: at boot or outside a handler call" in log, log[-3000:]
    run.wait_group_gone()
    # Nothing is lost: whatever is committed was handled (or, if a worker died in the call on it,
    # sent back to the group's retry topic).
    commit = committed(eb, "GWC", "WC")
    handled = {d.idx for d in oks(record)}
    retried = {m.properties["idx"] for m in topic_messages(eb, "%RETRY%GWC")}
    for m in topic_messages(eb, "WC"):
        assert m.queue_offset >= commit[m.queue_id] or int(m.properties["idx"]) in handled \
            or m.properties["idx"] in retried, \
            f"idx {m.properties['idx']} (queue {m.queue_id} offset {m.queue_offset}) committed but not handled"
    assert sum(sizes.values()) == 40


def test_a_handler_that_kills_its_worker_on_every_message_does_not_stop_rmqrun(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    """Deaths inside handler calls are the messages' doing: each is failed alone, the service stays up."""
    produce(eb, "WD", 6)
    record = tmp_path / "records.txt"
    run = runs.start("run", f"{PROBE}:die", namesrv=eb.namesrv_address, group="GWD", topic="WD",
                     args=["--workers", "2"], settings={"RMQRUN_CRASH_LIMIT": "1"},
                     env={"PROBE_RECORD": str(record)})
    # every message is tried, isolated, failed alone and sent back to the retry topic
    wait_until(lambda: {m.properties["idx"] for m in topic_messages(eb, "%RETRY%GWD")} >= set(map(str, range(6))),
               40, "every message sent back", interval=0.3)
    assert run.poll() is None, run.log()[-3000:]
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0, run.log()[-3000:]
    log = run.log()
    assert "workers died" not in log
    assert log.count("failing that message") >= 6


def test_time_limit_applies_to_each_handler_call_not_to_the_whole_batch(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    """consumeTimeout is per consume call in Java: 15 messages of 0.15 s each, pulled as one batch,
    must not trip a 1.2 s limit (neither the soft one nor the hard one)."""
    produce(eb, "WT", 60)
    record = tmp_path / "records.txt"
    run = runs.start("run", f"{PROBE}:record", namesrv=eb.namesrv_address, group="GWT", topic="WT",
                     args=["--workers", "2", "--consume-timeout", "0.02"], settings={"RMQRUN_KILL_GRACE": "0.5"},
                     env={"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": "150"})
    wait_until(lambda: {d.idx for d in oks(record)} >= set(range(60)), 40, "every message")
    wait_until(lambda: sum(committed(eb, "GWT", "WT").values()) == 60, 10, "all committed", interval=0.2)
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    deliveries = read_deliveries(record)
    assert [d for d in deliveries if d.event != "ok"] == [], "no call was stopped"
    assert "time limit" not in run.log()
    # nor was any message sent back while it waited for or ran in its worker
    assert sorted(d.idx for d in deliveries) == list(range(60)), "each message once, none retried"


def test_hung_orderly_call_is_stopped_and_its_queue_resumes_in_order(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    produce(eb, "WHO", 80, sharding_keys=4)
    sizes = queue_max_offsets(eb, "WHO")
    record = tmp_path / "records.txt"
    run = runs.start("run", f"{PROBE}:hang", namesrv=eb.namesrv_address, group="GWHO", topic="WHO",
                     args=["--workers", "2", "--orderly", "--consume-timeout", "0.02"],
                     env={"PROBE_RECORD": str(record), "PROBE_HANG_IDX": "9"})
    wait_until(lambda: any(d.event == "start" for d in read_deliveries(record)), 20, "idx 9 hangs")
    hung = next(d for d in read_deliveries(record) if d.event == "start")
    time.sleep(0.6)
    assert committed(eb, "GWHO", "WHO")[hung.queue_id] <= hung.offset, "nothing at or past the hung call committed"
    wait_until(lambda: len(oks(record)) >= 80, 30, "every message")
    wait_until(lambda: committed(eb, "GWHO", "WHO") == sizes, 10, "all committed", interval=0.2)
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    for q, offs in per_queue(oks(record)).items():
        assert offs == list(range(sizes[q])), f"queue {q}: {offs}"
    # the stopped call came again first, counted as a retry
    retried = [d for d in read_deliveries(record) if d.idx == 9]
    assert [(d.event, d.reconsume) for d in retried] == [("start", 0), ("ok", 1)]


def test_a_handler_broken_on_disk_after_start_exits_1_not_the_start_up_code_3(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    """Exit code 3 is for a handler that cannot be loaded when rmqrun starts (the unit never restarts it).
    A replacement worker that cannot import the handler later ends the run with 1, so systemd restarts it:
    the restart either recovers (a deploy that was half written) or stops at start-up with 3."""
    mod_dir = tmp_path / "mods"
    mod_dir.mkdir()
    module = mod_dir / "breaks_later_mod.py"
    module.write_text("def handle(msg):\n    pass\n")
    produce(eb, "WB", 4)
    run = runs.start("run", "breaks_later_mod:handle", namesrv=eb.namesrv_address, group="GWB", topic="WB",
                     args=["--workers", "1"], env={"PYTHONPATH": str(mod_dir)})
    (worker,) = run.worker_pids()
    module.write_text("def handle(msg)  # broken on disk after start\n")
    os.kill(worker, signal.SIGKILL)
    code = run.wait(30)
    log = run.log()
    assert code == 1, log[-3000:]
    assert "a replacement for worker 0 cannot load the handler" in log, log[-3000:]
    assert "SyntaxError" in log, log[-3000:]
    run.wait_group_gone()
