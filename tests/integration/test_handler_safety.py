"""Handlers that turn on their own service: signal it, fork, hang, outlive it (issue #26, items 1 and 3).

``rmqrun run`` is a real process against an embedded broker; the handlers
(:mod:`tests.integration.handlers.safety_handler`) record what they did, the tests
check the processes left (by pid, with psutil) and the run's log.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil

from rmqrun.remoting.message_props import java_string_hash
from tests.integration.signals_kit import Runs, committed, produce, wait_until

H = "tests.integration.handlers.safety_handler"


def _lines(path: Path, kind: str) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.startswith(kind + " ")]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _title(pid: int) -> str:
    return " ".join(psutil.Process(pid).cmdline()).strip()  # setproctitle pads the area it rewrites


def _start(tmp_path: Path, eb, runs: Runs, handler: str, topic: str, n: int, *, workers: int = 1,  # type: ignore[no-untyped-def]
           keys: int = 0, args: list[str] | None = None, settings: dict[str, str] | None = None, **env: str):
    """``n`` messages on ``topic`` (``keys`` sharding keys), then ``rmqrun run`` of a safety handler on them."""
    record = tmp_path / "record.txt"
    produce(eb, topic, n, sharding_keys=keys)
    run = runs.start("run", f"{H}:{handler}", namesrv=eb.namesrv_address, group=f"G{topic}", topic=topic,
                     args=["--workers", str(workers), *(args or [])], env={"SAFETY_RECORD": str(record), **env},
                     settings=settings)
    return run, record


def test_a_handler_signalling_its_supervisor_does_not_stop_it_and_the_log_names_the_worker(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    run, record = _start(tmp_path, eb, runs, "signal_parent", "SIG", 16, workers=2)
    wait_until(lambda: len(_lines(record, "ok")) >= 16, 40, "16 messages handled")
    log = run.log()
    assert run.poll() is None, log[-3000:]
    # the worker itself sent SIGTERM; a `kill` and a shell it started sent HUP and TTOU
    assert "SIGTERM from worker " in log and "ignored: a handler cannot stop" in log, log[-3000:]
    assert "SIGHUP from pid " in log and ", a process of worker " in log, log[-3000:]
    assert "SIGTTOU from pid " in log, log[-3000:]
    assert "stopping gracefully" not in log and "reloading workers" not in log and "removed;" not in log
    assert len(run.worker_pids()) == 2
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    assert f"SIGTERM received from pid {os.getpid()} (" in run.log(), run.log()[-2000:]


def test_kill_9_of_the_supervisor_during_a_hung_call_leaves_no_worker(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    run, record = _start(tmp_path, eb, runs, "hang_some", "HNG", 8, workers=2, SAFETY_HANG_OFFSETS="0")
    wait_until(lambda: _lines(record, "start"), 30, "a call that hangs")
    workers = run.worker_pids()
    hung = int(_lines(record, "start")[0][1])
    assert hung in workers and len(workers) == 2
    assert _title(hung).startswith("rmqrun: worker "), _title(hung)
    assert _title(hung).endswith(f"[{H}:hang_some]"), _title(hung)
    assert _title(run.pid) == "rmqrun: supervisor [GHNG/HNG]"
    run.kill9()
    wait_until(lambda: not any(_alive(p) for p in workers), 30, "the workers to die with their supervisor")


def test_a_forking_handler_leaves_no_process_behind_after_its_worker_is_replaced(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    run, record = _start(tmp_path, eb, runs, "fork_and_leave", "FRK", 4,
                         settings={"RMQRUN_MAX_MESSAGES_PER_WORKER": "1"})
    wait_until(lambda: len(_lines(record, "ok")) >= 4, 40, "4 messages handled")
    children = [int(x[1]) for x in _lines(record, "child")]
    assert len(children) == 8
    # each worker is recycled after its message; what its handler started dies with it
    wait_until(lambda: len(_lines(record, "ok")) >= 4 and sum(map(_alive, children)) <= 2, 30,
               "the children of replaced workers to be killed")
    log = run.log()
    assert "process(es) of its handler behind" in log, log[-3000:]
    for pid in children:  # the last worker's children: the forked copy is titled as one
        try:  # read once: the last worker is recycled too, so its children may go (or be zombies) meanwhile
            name, title = psutil.Process(pid).name(), _title(pid)
        except psutil.NoSuchProcess:  # ZombieProcess included: gone is what the test wants anyway
            continue
        if "python" in name or title.startswith("rmqrun"):
            assert title.startswith("rmqrun: fork of worker 0 ["), title
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    wait_until(lambda: not any(map(_alive, children)), 30, "every child gone after the stop")
    assert "finished unknown batch" not in run.log()


def test_a_forked_copy_signalled_with_its_group_runs_no_worker_code(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    run, record = _start(tmp_path, eb, runs, "fork_and_leave", "FRG", 2)
    wait_until(lambda: len(_lines(record, "ok")) >= 2, 40, "2 messages handled")
    worker = run.worker_pids()[0]
    forked = [int(x[1]) for x in _lines(record, "child")]
    os.killpg(worker, signal.SIGTERM)  # the worker's whole group: the worker, its `sleep`s, its forked copies
    wait_until(lambda: not any(map(_alive, forked)), 30, "the forked copies to end")
    wait_until(lambda: len(run.worker_pids()) == 1 and worker not in run.worker_pids(), 15, "a replacement")
    assert run.poll() is None
    assert "finished unknown batch" not in run.log(), run.log()[-3000:]


def _hang_run(tmp_path: Path, eb, runs: Runs, topic: str, n: int, keys: int, args: list[str],  # type: ignore[no-untyped-def]
              **env: str):
    """Offset 0 of queue 0 hangs, with 2 workers and a long-call threshold of 1 s."""
    run, record = _start(tmp_path, eb, runs, "hang_some", topic, n, workers=2, keys=keys, args=args,
                         settings={"RMQRUN_LONG_CALL_SECONDS": "1"}, SAFETY_HANG_OFFSETS="0", SAFETY_HANG_QUEUE="0",
                         **env)
    wait_until(lambda: _lines(record, "start"), 30, "a call that hangs")
    return run, record


def test_messages_queued_behind_a_hung_call_are_run_by_the_other_worker_within_seconds(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    # 17 messages in one queue: one pull, one batch; the first hangs, 16 wait behind it in the same worker
    run, record = _hang_run(tmp_path, eb, runs, "HB", 17, 1, [])
    hung_pid = int(_lines(record, "start")[0][1])
    wait_until(lambda: len(_lines(record, "ok")) >= 16, 15, "the 16 queued messages handled elsewhere")
    oks = _lines(record, "ok")
    assert {int(x[1]) for x in oks} != {hung_pid}, "the hung worker cannot have handled them"
    assert sorted(int(x[3]) for x in oks) == list(range(1, 17))
    log = run.log()
    assert "has been in one handler call for " in log and "message at offset 0 of " in log, log[-3000:]
    assert "the 16 message(s) of its batch after the call" in log, log[-3000:]
    assert run.poll() is None


def test_orderly_queues_waiting_behind_a_hung_call_move_to_the_other_worker_in_order(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    run, record = _hang_run(tmp_path, eb, runs, "HBO", 64, 4, ["--orderly"])
    hung = _lines(record, "start")[0]
    hung_queue = int(hung[2])
    wait_until(lambda: len(_lines(record, "ok")) >= 48, 20, "the other queues' 48 messages handled")
    per_queue: dict[int, list[int]] = {}
    for x in _lines(record, "ok"):
        per_queue.setdefault(int(x[2]), []).append(int(x[3]))
    assert hung_queue not in per_queue, "nothing after the hung message of its queue runs before it"
    assert len(per_queue) == 3
    for q, offsets in per_queue.items():
        assert offsets == list(range(16)), f"queue {q} out of order: {offsets}"
    log = run.log()
    assert "batch(es) waiting behind the long call" in log, log[-3000:]
    assert run.poll() is None


def test_a_split_batch_whose_hung_call_hits_the_time_limit_runs_every_message_once(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    """The head (the hung call) fails at the time limit and is retried; the tail ran elsewhere, exactly once."""
    run, record = _hang_run(tmp_path, eb, runs, "HBT", 17, 1, ["--consume-timeout", "0.06"])
    wait_until(lambda: {x[4] for x in _lines(record, "ok")} >= {str(i) for i in range(17)}, 40,
               "all 17 handled, the hung one on its retry")
    idx = sorted(int(x[4]) for x in _lines(record, "ok"))
    assert idx == list(range(17)), f"each message once: {idx}"
    wait_until(lambda: committed(eb, "GHBT", "HBT").get(0) == 17, 10, "the queue committed to its end")
    assert "soft time limit" in run.log()
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    assert sorted(int(x[4]) for x in _lines(record, "ok")) == list(range(17))


def test_a_split_batch_whose_worker_dies_in_the_hung_call_runs_every_message_once(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    """The worker on the head dies: only the head's unfinished message runs again, not the tail taken back."""
    run, record = _hang_run(tmp_path, eb, runs, "HBK", 17, 1, [], SAFETY_HANG_ONCE="1")
    wait_until(lambda: "message(s) of its batch after the call" in run.log(), 15, "the take-back")
    os.kill(int(_lines(record, "start")[0][1]), signal.SIGKILL)
    wait_until(lambda: {x[4] for x in _lines(record, "ok")} >= {str(i) for i in range(17)}, 30, "all 17 handled")
    wait_until(lambda: committed(eb, "GHBK", "HBK").get(0) == 17, 10, "the queue committed to its end")
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    idx = sorted(int(x[4]) for x in _lines(record, "ok"))
    assert idx == list(range(17)), f"each message once: {idx}"


def test_key_lanes_waiting_behind_a_hung_call_move_to_the_other_worker_in_key_order(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    """Keys of other queues are never in the hung job: all of them run within seconds, each in order; the hung
    key waits. (Lanes of the hung message's own queue packed into its job wait with it: docs/operations.md.)"""
    keys = 16
    queue_of = {k: abs(java_string_hash(str(k))) % 4 for k in range(keys)}
    free = [k for k in range(keys) if queue_of[k] != 0]
    run, record = _hang_run(tmp_path, eb, runs, "HBY", 128, keys, ["--orderly", "--order-by", "key"])

    def by_key() -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for x in _lines(record, "ok"):
            out.setdefault(int(x[4]) % keys, []).append(int(x[4]))
        return out
    wait_until(lambda: sum(len(by_key().get(k, [])) for k in free) >= 8 * len(free), 20,
               "every message of the keys of other queues")
    seen = by_key()
    assert 0 not in seen, "nothing after the hung message of its key runs before it"
    for k, idx in seen.items():
        assert idx == list(range(k, 128, keys))[:len(idx)], f"key {k} out of order: {idx}"
    assert "batch(es) waiting behind the long call" in run.log(), run.log()[-3000:]
    assert run.poll() is None


def test_a_long_call_that_ends_by_itself_after_the_take_back_runs_nothing_twice(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    """The call returns a while after its batch was cut: its worker runs none of the messages taken back."""
    run, record = _hang_run(tmp_path, eb, runs, "HBE", 17, 1, [], SAFETY_HANG_SECONDS="4")
    wait_until(lambda: "message(s) of its batch after the call" in run.log(), 15, "the take-back")
    wait_until(lambda: {x[4] for x in _lines(record, "ok")} >= {str(i) for i in range(17)}, 30, "all 17 handled")
    wait_until(lambda: committed(eb, "GHBE", "HBE").get(0) == 17, 10, "the queue committed to its end")
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0
    oks = _lines(record, "ok")
    assert sorted(int(x[4]) for x in oks) == list(range(17)), "each message once"
    hung_pid = _lines(record, "start")[0][1]
    assert [x[4] for x in oks if x[1] == hung_pid] == ["0"], "the worker of the long call ran only that call"
