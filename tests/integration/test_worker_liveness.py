"""A worker stopped with SIGSTOP is noticed: its waiting batches run elsewhere, readiness follows (issue #31, 4).

Real ``rmqrun run`` processes on the embedded broker, real workers, real
SIGSTOP/SIGCONT (helpers in :mod:`tests.integration.liveness_kit`). The
liveness bound is 2 s here (``worker_liveness_timeout``; 20 s by default).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.liveness_kit import BOUND, moved_of, start_liveness_run
from tests.integration.signals_kit import Runs, wait_until

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("mode", ["concurrent", "orderly", "orderly_key", "pop", "orderly_pop"])
def test_a_stopped_worker_s_batches_run_on_the_other_one_and_nothing_runs_twice_after_it_resumes(
        tmp_path: Path, eb: EmbeddedBroker, runs: Runs, mode: str) -> None:
    """The worker is stopped while idle, then messages come: it never picks its batches up. Within the bound
    they run on the other worker (all of them: it had begun none), one warning names it, offsets advance,
    /readyz stays 200 (a worker can take work). After SIGCONT it answers the moved batches unrun."""
    lr = start_liveness_run(tmp_path, eb, runs, mode, f"Live{mode.title().replace('_', '')}")
    victim = lr.run.worker_pids()[0]
    lr.wait_handled(lr.produced)  # the message that created the topic: the pool moves before the stop
    lr.stop(victim)
    before = len(lr.oks())
    lr.produce(120)
    warning = lr.wait_stuck(victim)
    lr.wait_handled(lr.produced)
    assert victim not in {d.pid for d in lr.oks(before)}, "the stopped worker handled nothing"
    assert moved_of(warning) >= 1, warning
    assert "process stopped (SIGSTOP?)" in warning and f"(worker_liveness_timeout {BOUND:g} s)" in warning, warning
    assert lr.readyz()[0] == 200, lr.readyz()
    if "pop" not in mode:
        wait_until(lr.committed_to_end, 30, "every queue committed to its end")
    if "orderly" in mode:  # the pins moved with the work: each queue (or key) still in order
        lanes: dict[int, list[int]] = {}
        for d in lr.oks():
            if mode == "orderly_key":
                lanes.setdefault(d.idx % 8, []).append(d.idx)  # idx i has sharding key i % 8
            else:
                lanes.setdefault(d.queue_id, []).append(d.offset)
        assert all(seq == sorted(seq) for seq in lanes.values()), lanes

    lr.cont(victim)
    wait_until(lambda: f"(pid {victim}) responds again after " in lr.run.log(), 30, "the worker back")
    lr.produce(40)
    lr.wait_handled(lr.produced)
    lr.run.signal(signal.SIGTERM)
    assert lr.run.wait(60) == 0, lr.run.log()[-3000:]
    assert lr.twice() == {}, f"handled twice: {lr.twice()}"
    assert len(lr.stuck_warnings()) == 1, lr.stuck_warnings()
    assert "Traceback" not in lr.run.log(), lr.run.log()[-3000:]


def test_every_worker_stopped_is_not_ready_and_ready_again_after_sigcont(
        tmp_path: Path, eb: EmbeddedBroker, runs: Runs) -> None:
    lr = start_liveness_run(tmp_path, eb, runs, "concurrent", "LiveAll")
    lr.wait_handled(lr.produced)
    wait_until(lambda: lr.readyz()[0] == 200, 30, "ready")
    pids = lr.run.worker_pids()
    for pid in pids:
        lr.stop(pid)
    lr.produce(60)
    for pid in pids:
        lr.wait_stuck(pid)
    wait_until(lambda: lr.readyz()[0] == 503, 15, "not ready")
    status, body = lr.readyz()
    assert body.startswith("not ready: no worker can take work: 2 of 2 not responding"), body
    assert lr.ready_gauge() == 0.0
    assert "nothing moved: no other worker can take work" in lr.stuck_warnings()[0]
    assert lr.run.poll() is None
    for pid in pids:
        lr.cont(pid)
    wait_until(lambda: lr.readyz()[0] == 200, 30, "ready again")
    assert lr.ready_gauge() == 1.0
    lr.wait_handled(lr.produced)
    wait_until(lr.committed_to_end, 30, "every queue committed to its end")
    assert lr.twice() == {}, f"handled twice: {lr.twice()}"
    assert len(lr.stuck_warnings()) == 2, lr.stuck_warnings()  # one per worker
    lr.run.signal(signal.SIGTERM)
    assert lr.run.wait(60) == 0


def test_a_worker_stopped_mid_flow_is_killed_and_replaced_and_every_message_runs_once(
        tmp_path: Path, eb: EmbeddedBroker, runs: Runs) -> None:
    """The issue's case: stopped while messages flow, holding a batch it had begun (most likely inside a
    200 ms call). Its waiting batches move at once; a stopped call is no long call (one warning, not two);
    after stuck_worker_kill_after it is killed, a new worker takes its slot, and the messages of its batch it
    had not finished run again: every message handled once, offsets to the end."""
    lr = start_liveness_run(tmp_path, eb, runs, "concurrent", "LiveKill", kill_after=2.0,
                            env={"PROBE_SLEEP_MS": "200"},
                            settings={"RMQRUN_LONG_CALL_SECONDS": "1", "RMQRUN_CRASH_LIMIT": "1"})
    lr.produce(60)
    victim = lr.run.worker_pids()[0]
    wait_until(lambda: sum(d.pid == victim for d in lr.oks()) >= 3, 60, "the victim handling messages")
    lr.stop(victim)
    lr.wait_stuck(victim)
    assert f"(pid {victim}) has been in one handler call" not in lr.run.log(), "a stopped call is no long call"
    wait_until(lambda: f"(pid {victim}) still not responding after " in lr.run.log(), 30, "the kill")
    wait_until(lambda: len(lr.run.worker_pids()) == 2 and victim not in lr.run.worker_pids(), 30,
               "a replacement")
    lr.wait_handled(lr.produced)
    wait_until(lr.committed_to_end, 30, "every queue committed to its end")
    assert lr.twice() == {}, f"handled twice: {lr.twice()}"
    assert len(lr.stuck_warnings()) == 1, lr.stuck_warnings()
    # a second stuck worker killed: with crash_limit 1 two crashes would stop rmqrun; these are no crashes
    second = next(p for p in lr.run.worker_pids() if p != victim)
    lr.stop(second)
    lr.produce(20)
    lr.wait_stuck(second)
    wait_until(lambda: f"(pid {second}) still not responding after " in lr.run.log(), 30, "the second kill")
    wait_until(lambda: len(lr.run.worker_pids()) == 2 and second not in lr.run.worker_pids(), 30,
               "a second replacement")
    lr.wait_handled(lr.produced)
    assert lr.twice() == {}, f"handled twice: {lr.twice()}"
    assert lr.run.poll() is None and "worker pool failed" not in lr.run.log(), lr.run.log()[-3000:]
    lr.run.signal(signal.SIGTERM)
    assert lr.run.wait(60) == 0


@pytest.mark.parametrize("mode", ["orderly", "orderly_key", "orderly_pop"])
def test_an_orderly_worker_stopped_mid_flow_and_continued_keeps_every_lane_in_order(
        tmp_path: Path, eb: EmbeddedBroker, runs: Runs, mode: str) -> None:
    """Stopped while running a batch of one lane with others waiting behind it: the waiting lanes move (their
    pins with them), the stopped lane waits for its batch (nothing of it runs elsewhere first); after SIGCONT
    every message is handled once and each queue (key) in order. The bound (8 s) is past the time the other
    worker needs for its own lanes (240 x 20 ms): the moved lanes must start on an idle pool, with no result
    of other work to set the dispatch going."""
    lr = start_liveness_run(tmp_path, eb, runs, mode, f"LiveMid{mode.title().replace('_', '')}", bound=8.0,
                            env={"PROBE_SLEEP_MS": "20"})
    lr.wait_handled(lr.produced)
    victim = lr.run.worker_pids()[0]
    lr.produce(480)  # four pulls per queue: batches of one queue chained behind one another in the pipes
    wait_until(lambda: any(d.pid == victim for d in lr.oks(1)), 60, "the victim handling messages")
    lr.stop(victim)
    lr.wait_stuck(victim)
    handled = len(lr.handled())
    wait_until(lambda: len(lr.handled()) > handled + 20, 60, "the other lanes going on without the victim")
    lr.cont(victim)
    lr.wait_handled(lr.produced)
    if "pop" not in mode:
        wait_until(lr.committed_to_end, 30, "every queue committed to its end")
    lanes: dict[int, list[int]] = {}
    for d in lr.oks():
        if mode == "orderly_key":
            lanes.setdefault(d.idx % 8, []).append(d.idx)
        else:
            lanes.setdefault(d.queue_id, []).append(d.offset)
    assert all(seq == sorted(seq) for seq in lanes.values()), lanes
    assert lr.twice() == {}, f"handled twice: {lr.twice()}"
    assert len(lr.stuck_warnings()) == 1, lr.stuck_warnings()
    lr.run.signal(signal.SIGTERM)
    assert lr.run.wait(60) == 0
