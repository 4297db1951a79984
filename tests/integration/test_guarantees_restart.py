"""Restarts of ``rmqrun run``: kill -9 and graceful, concurrent and orderly.

The promises checked here, against the broker's committed offsets and the
handler's own record of what it saw:

* a committed offset never runs ahead of the handler: everything below it
  was handled (kill -9 included);
* after a kill -9 the next run redelivers exactly the messages at and above
  the committed offset, i.e. what was in flight or finished after the last
  commit, and nothing below it; nothing is lost;
* orderly: per queue, each run sees a contiguous, strictly increasing range of
  offsets; a graceful restart continues exactly where the last run stopped
  (no gap, no overlap), a kill -9 restart at the committed offset.
"""

from __future__ import annotations

import signal
from pathlib import Path


from tests.integration.signals_kit import (
    Runs, committed, oks, per_queue, produce, queue_max_offsets, start_broker, wait_until,
)

HANDLER = "tests.integration.handlers.probe_handler:record"


def _assert_commit_not_ahead(handled: dict[int, list[int]], commit: dict[int, int]) -> None:
    for q, c in commit.items():
        missing = sorted(set(range(max(c, 0))) - set(handled.get(q, [])))
        assert not missing, f"queue {q}: committed {c} but offsets {missing[:20]} were never handled"


def test_concurrent_kill9_redelivers_only_what_was_not_committed(tmp_path: Path, runs: Runs) -> None:
    total = 400
    eb = start_broker(tmp_path)
    try:
        produce(eb, "KC", total)
        sizes = queue_max_offsets(eb, "KC")
        first = tmp_path / "run1.txt"
        run1 = runs.start("run1", HANDLER, namesrv=eb.namesrv_address, group="GKC", topic="KC",
                          args=["--workers", "2"], env={"PROBE_RECORD": str(first), "PROBE_SLEEP_MS": "10"})
        wait_until(lambda: sum(max(c, 0) for c in committed(eb, "GKC", "KC").values()) >= 100, 30,
                   "100 committed in run 1", interval=0.1)
        workers = run1.worker_pids()
        run1.kill9()
        run1.wait_group_gone()  # orphaned workers finish their call, see the pipe closed, exit
        assert workers, "the run had workers"
        commit = committed(eb, "GKC", "KC")
        handled1 = per_queue(oks(first))
        assert sum(len(v) for v in handled1.values()) < total, "killed before the end"
        _assert_commit_not_ahead(handled1, commit)

        second = tmp_path / "run2.txt"
        run2 = runs.start("run2", HANDLER, namesrv=eb.namesrv_address, group="GKC", topic="KC",
                          args=["--workers", "2"], env={"PROBE_RECORD": str(second)})
        expected2 = sum(sizes[q] - max(commit.get(q, -1), 0) for q in sizes)
        wait_until(lambda: len(oks(second)) >= expected2, 30, f"{expected2} messages in run 2")
        run2.signal(signal.SIGTERM)
        assert run2.wait(30) == 0, run2.log()[-3000:]

        handled2 = per_queue(oks(second))
        for q, size in sizes.items():
            start = max(commit.get(q, -1), 0)
            got = sorted(handled2.get(q, []))
            # exactly the uncommitted tail, each once: nothing committed comes back, nothing is skipped
            assert got == list(range(start, size)), f"queue {q}: run 2 got {got[:10]}... expected {start}..{size - 1}"
            seen = set(handled1.get(q, [])) | set(got)
            assert seen == set(range(size)), f"queue {q}: lost {sorted(set(range(size)) - seen)}"
        assert committed(eb, "GKC", "KC") == sizes
    finally:
        eb.stop_in_thread()


def _contiguous(offsets: list[int]) -> bool:
    return offsets == list(range(offsets[0], offsets[0] + len(offsets))) if offsets else True


def test_orderly_graceful_restart_continues_with_no_gap_and_no_overlap(tmp_path: Path, runs: Runs) -> None:
    total = 240
    eb = start_broker(tmp_path)
    try:
        produce(eb, "OR", total, sharding_keys=4)
        sizes = queue_max_offsets(eb, "OR")
        files = [tmp_path / f"run{i}.txt" for i in range(3)]
        for i, path in enumerate(files):
            run = runs.start(f"run{i}", HANDLER, namesrv=eb.namesrv_address, group="GOR", topic="OR",
                             args=["--workers", "2", "--orderly"],
                             env={"PROBE_RECORD": str(path), "PROBE_SLEEP_MS": "20"})
            if i < 2:
                wait_until(lambda: len(oks(path)) >= 50, 30, f"50 messages in run {i}")
            else:
                wait_until(lambda: sum(len(oks(f)) for f in files) >= total, 30, "everything")
            run.signal(signal.SIGTERM)
            assert run.wait(30) == 0, run.log()[-3000:]
            # the graceful stop committed exactly what this run handled
            handled = per_queue(d for f in files[:i + 1] for d in oks(f))
            assert committed(eb, "GOR", "OR") == {q: len(handled.get(q, [])) for q in sizes}
        for q, size in sizes.items():
            pieces = [per_queue(oks(f)).get(q, []) for f in files]
            assert all(_contiguous(p) for p in pieces), f"queue {q}: a run was out of order: {pieces}"
            assert [o for p in pieces for o in p] == list(range(size)), f"queue {q}: gap or overlap: {pieces}"
    finally:
        eb.stop_in_thread()


def test_orderly_kill9_restart_resumes_at_the_committed_offset_in_order(tmp_path: Path, runs: Runs) -> None:
    total = 300
    # The broker frees a dead client's queue locks after lock_max_live_ms (60 s in RocketMQ).
    eb = start_broker(tmp_path, lock_max_live_ms=2000)
    try:
        produce(eb, "OK9", total, sharding_keys=4)
        sizes = queue_max_offsets(eb, "OK9")
        first, second = tmp_path / "run1.txt", tmp_path / "run2.txt"
        run1 = runs.start("run1", HANDLER, namesrv=eb.namesrv_address, group="GOK9", topic="OK9",
                          args=["--workers", "2", "--orderly"],
                          env={"PROBE_RECORD": str(first), "PROBE_SLEEP_MS": "10"})
        # kill it once some progress is committed, mid-stream
        wait_until(lambda: sum(max(c, 0) for c in committed(eb, "GOK9", "OK9").values()) >= 60, 30,
                   "60 committed in run 1", interval=0.1)
        run1.kill9()
        run1.wait_group_gone()
        commit = committed(eb, "GOK9", "OK9")
        handled1 = per_queue(oks(first))
        _assert_commit_not_ahead(handled1, commit)
        for q, offs in handled1.items():
            assert offs[0] == 0 and _contiguous(offs), f"queue {q} in run 1: {offs}"
            assert commit[q] <= offs[-1] + 1

        run2 = runs.start("run2", HANDLER, namesrv=eb.namesrv_address, group="GOK9", topic="OK9",
                          args=["--workers", "2", "--orderly"], env={"PROBE_RECORD": str(second)})
        expected2 = sum(sizes[q] - max(commit.get(q, -1), 0) for q in sizes)
        wait_until(lambda: len(oks(second)) >= expected2, 40, f"{expected2} messages in run 2")
        run2.signal(signal.SIGTERM)
        assert run2.wait(30) == 0, run2.log()[-3000:]
        handled2 = per_queue(oks(second))
        for q, size in sizes.items():
            start = max(commit.get(q, -1), 0)
            # in order, starting exactly at the committed offset: the overlap with run 1 is only
            # what run 1 handled after its last commit
            assert handled2.get(q, []) == list(range(start, size)), f"queue {q}: {handled2.get(q)}"
        assert committed(eb, "GOK9", "OK9") == sizes
    finally:
        eb.stop_in_thread()
