"""Signals to the ``rmqrun run`` process itself: TERM (once and twice), HUP, TTIN and TTOU.

``rmqrun run`` is a real child process against an embedded broker; the tests
check the exit code, what the handler recorded and what the broker committed.
"""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

import pytest

from tests.integration.signals_kit import (
    Runs, committed, oks, per_queue, produce, queue_max_offsets, read_deliveries, wait_until,
)

HANDLER = "tests.integration.handlers.probe_handler:record"


def _finish_with_second_run(tmp_path: Path, runs: Runs, eb, group: str, topic: str,  # type: ignore[no-untyped-def]
                            commit: dict[int, int], sizes: dict[int, int], args: list[str]) -> dict[int, list[int]]:
    """Run again until everything is consumed; returns what the second run handled per queue."""
    second = tmp_path / "run2.txt"
    run2 = runs.start("run2", HANDLER, namesrv=eb.namesrv_address, group=group, topic=topic, args=args,
                      env={"PROBE_RECORD": str(second)})
    expected = sum(sizes[q] - max(commit.get(q, -1), 0) for q in sizes)
    wait_until(lambda: len(oks(second)) >= expected, 40, f"{expected} messages in run 2")
    run2.signal(signal.SIGTERM)
    assert run2.wait(30) == 0, run2.log()[-3000:]
    assert committed(eb, group, topic) == sizes
    return per_queue(oks(second))


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_sigterm_under_load_commits_every_finished_message_and_redelivers_the_rest(
        tmp_path: Path, eb, runs: Runs, orderly: bool) -> None:  # type: ignore[no-untyped-def]
    group, topic = f"GST{int(orderly)}", f"ST{int(orderly)}"
    produce(eb, topic, 400, sharding_keys=4 if orderly else 0)
    sizes = queue_max_offsets(eb, topic)
    first = tmp_path / "run1.txt"
    args = ["--workers", "2"] + (["--orderly"] if orderly else [])
    run1 = runs.start("run1", HANDLER, namesrv=eb.namesrv_address, group=group, topic=topic, args=args,
                      env={"PROBE_RECORD": str(first), "PROBE_SLEEP_MS": "15"})
    seen_commits: set[tuple[int, int]] = set()

    def commit_never_ahead() -> bool:
        """While work is in flight: everything below each committed offset was handled.

        The commit is read before the handled set, so a message finished in between
        can only make the check easier to pass, never fail it wrongly.
        """
        commit = committed(eb, group, topic)
        handled = per_queue(oks(first))
        for q, c in commit.items():
            missing = set(range(max(c, 0))) - set(handled.get(q, []))
            assert not missing, f"queue {q}: committed {c} while {sorted(missing)[:10]} were not handled"
            if c > 0:
                seen_commits.add((q, c))
        return len(seen_commits) >= 3 and len(oks(first)) >= 60
    wait_until(commit_never_ahead, 30, "three commits under load and 60 messages", interval=0.1)
    run1.signal(signal.SIGTERM)
    assert run1.wait(30) == 0, run1.log()[-3000:]
    run1.wait_group_gone()
    handled = per_queue(oks(first))
    assert sum(len(v) for v in handled.values()) < 400, "stopped under load, not after the end"
    commit = committed(eb, group, topic)
    for q, size in sizes.items():
        done = set(handled.get(q, []))
        first_unfinished = next((o for o in range(size) if o not in done), size)
        # committed exactly up to the first message this run did not finish: nothing finished
        # below it is left uncommitted, nothing unfinished is committed
        assert max(commit[q], 0) == first_unfinished, f"queue {q}: commit {commit[q]}, handled {sorted(done)}"
    handled2 = _finish_with_second_run(tmp_path, runs, eb, group, topic, commit, sizes, args)
    for q, size in sizes.items():
        start = max(commit[q], 0)
        if orderly:
            assert handled.get(q, []) + handled2.get(q, []) == list(range(size)), f"queue {q}"
        else:
            assert sorted(handled2.get(q, [])) == list(range(start, size)), f"queue {q}"


def test_second_sigterm_stops_at_once_and_the_interrupted_messages_come_again(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    produce(eb, "ST2", 40)
    sizes = queue_max_offsets(eb, "ST2")
    first = tmp_path / "run1.txt"
    # every first delivery hangs for an hour and the grace is 600 s: a graceful stop would wait for the calls in
    # flight far longer than the test runs, so only the second TERM can end the run within it (no stopwatch)
    run1 = runs.start("run1", "tests.integration.handlers.probe_handler:hang", namesrv=eb.namesrv_address, group="GST2",
                      topic="ST2", args=["--workers", "2", "--graceful-timeout", "600"],
                      env={"PROBE_RECORD": str(first), "PROBE_HANG_IDX": "*"})
    wait_until(lambda: len([d for d in read_deliveries(first) if d.event == "start"]) >= 2, 30,
               "both workers in a hung call")
    run1.signal(signal.SIGTERM)
    wait_until(lambda: "SIGTERM received" in run1.log(), 30, "the first TERM to be taken")
    assert run1.poll() is None, "still finishing the held calls"
    run1.signal(signal.SIGTERM)
    code = run1.wait(60)
    assert code == 0, run1.log()[-3000:]
    assert "second stop signal" in run1.log()
    run1.wait_group_gone()
    handled = per_queue(oks(first))
    commit = committed(eb, "GST2", "ST2")
    for q in sizes:
        assert set(range(max(commit[q], 0))) <= set(handled.get(q, [])), f"queue {q}: committed past the handled"
    handled2 = _finish_with_second_run(tmp_path, runs, eb, "GST2", "ST2", commit, sizes, ["--workers", "2"])
    for q, size in sizes.items():
        assert sorted(handled2.get(q, [])) == list(range(max(commit[q], 0), size))


HUP_MODULE = '''
"""Written by the test: records "<version> <idx> <queue> <offset>" per message."""
import os
import time

VERSION = {version!r}


def handle(msg):
    time.sleep(0.01)
    fd = os.open(os.environ["PROBE_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{{VERSION}} {{msg.properties['idx']}} {{msg.queue_id}} {{msg.queue_offset}}\\n".encode())
    finally:
        os.close(fd)
'''


def test_sighup_swaps_handler_code_without_losing_a_message(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    module = code_dir / "hup_handler.py"
    module.write_text(textwrap.dedent(HUP_MODULE.format(version="v1")))
    record = tmp_path / "records.txt"

    def lines() -> list[tuple[str, int]]:
        if not record.exists():
            return []
        return [(p[0], int(p[1])) for p in (ln.split() for ln in record.read_text().splitlines()) if len(p) == 4]

    produce(eb, "HUP", 300)
    sizes = queue_max_offsets(eb, "HUP")
    run = runs.start("run", "hup_handler:handle", namesrv=eb.namesrv_address, group="GHUP", topic="HUP",
                     args=["--workers", "2"],
                     env={"PROBE_RECORD": str(record), "PYTHONPATH": str(code_dir), "PYTHONDONTWRITEBYTECODE": "1"})
    wait_until(lambda: len(lines()) >= 60, 30, "60 messages by v1")
    module.write_text(textwrap.dedent(HUP_MODULE.format(version="v2-reloaded")))
    run.signal(signal.SIGHUP)
    wait_until(lambda: any(v == "v2-reloaded" for v, _ in lines()), 30, "the new code to run")
    produce(eb, "HUP", 100, start=300)
    wait_until(lambda: {i for _, i in lines()} >= set(range(400)), 40, "all 400 messages")
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0, run.log()[-3000:]
    seen = lines()
    idx = [i for _, i in seen]
    assert sorted(idx) == list(range(400)), "every message exactly once: old workers finish what they hold"
    first_v2 = next(k for k, (v, _) in enumerate(seen) if v == "v2-reloaded")
    assert seen[0][0] == "v1" and first_v2 > 0
    # once the new code has run, the old one runs only what it already held (a batch or two)
    assert sum(1 for v, _ in seen[first_v2:] if v == "v1") <= 2 * 64
    assert all(v == "v2-reloaded" for v, i in seen if i >= 300), "messages sent after the reload see the new code"
    assert "reloaded" in run.log()
    final = queue_max_offsets(eb, "HUP")
    assert sum(sizes.values()) == 300 and sum(final.values()) == 400
    assert committed(eb, "GHUP", "HUP") == final, "every queue committed to its end"


def test_ttin_and_ttou_change_the_worker_count_without_loss_or_disorder(
        tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    # Fresh work on every queue after each change, so the steps cannot outrun the backlog however slow the
    # machine (a fixed backlog drained before a new worker was up on a loaded machine, leaving it no work).
    batch = 120
    produce(eb, "TT", batch, sharding_keys=4)
    total = batch
    record = tmp_path / "records.txt"
    run = runs.start("run", HANDLER, namesrv=eb.namesrv_address, group="GTT", topic="TT",
                     args=["--workers", "2", "--orderly"], env={"PROBE_RECORD": str(record), "PROBE_SLEEP_MS": "10"})
    assert len(run.worker_pids()) == 2
    # 4 queues pinned by crc32 over 3 and 4 workers use every new slot (see Dispatcher.stable_index)
    steps = [(signal.SIGTTIN, 3), (signal.SIGTTIN, 4), (signal.SIGTTOU, 3), (signal.SIGTTOU, 2),
             (signal.SIGTTOU, 1)]
    for sig, expected in steps:
        old = set(run.worker_pids())
        run.signal(sig)
        wait_until(lambda: len(run.worker_pids()) == expected, 60, f"{expected} workers after {sig.name}")
        new = set(run.worker_pids()) - old
        first = total
        produce(eb, "TT", batch, sharding_keys=4, start=first)
        total += batch
        if new:  # the new worker takes its queues over once their job in flight is done
            wait_until(lambda: new <= {d.pid for d in oks(record)}, 60, f"work for the new worker {new}")
        else:
            wait_until(lambda: any(d.idx >= first for d in oks(record)), 60, f"progress with {expected}")
    sizes = queue_max_offsets(eb, "TT")
    assert sum(sizes.values()) == total
    wait_until(lambda: len(oks(record)) >= total, 120, "everything")
    wait_until(lambda: committed(eb, "GTT", "TT") == sizes, 30, "all committed", interval=0.2)
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0, run.log()[-3000:]
    deliveries = oks(record)
    assert len({d.pid for d in deliveries}) == 4, "each of the four worker processes took part"
    for q, offs in per_queue(deliveries).items():
        assert offs == list(range(sizes[q])), f"queue {q}: in order, each once: {offs}"
    assert not [d for d in read_deliveries(record) if d.event != "ok"]


SLOW_IMPORT_MODULE = '''
"""Written by the test: version 2 takes long to import (a big model being loaded, say)."""
import os
import time

if {slow!r}:
    open(os.environ["PROBE_RECORD"] + ".importing", "a").close()  # the test waits for this, not for time
    time.sleep(600)  # longer than the test may run: only the TERM ends it


def handle(msg):
    fd = os.open(os.environ["PROBE_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{{msg.properties['idx']}}\\n".encode())
    finally:
        os.close(fd)
'''


def test_sigterm_during_a_slow_reload_is_not_held_up_by_it(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    module = code_dir / "slow_import_handler.py"
    module.write_text(SLOW_IMPORT_MODULE.format(slow=False))
    record = tmp_path / "records.txt"
    produce(eb, "SR", 20)
    run = runs.start("run", "slow_import_handler:handle", namesrv=eb.namesrv_address, group="GSR", topic="SR",
                     args=["--workers", "2"],
                     env={"PROBE_RECORD": str(record), "PYTHONPATH": str(code_dir), "PYTHONDONTWRITEBYTECODE": "1"})
    wait_until(lambda: record.exists() and len(record.read_text().split()) >= 20, 30, "20 messages")
    module.write_text(SLOW_IMPORT_MODULE.format(slow=True))
    run.signal(signal.SIGHUP)
    wait_until(lambda: "SIGHUP" in run.log(), 30, "the reload to begin")
    importing = record.with_name(record.name + ".importing")
    wait_until(importing.exists, 60, "a new worker to be importing the slow version")
    run.signal(signal.SIGTERM)
    code = run.wait(60)  # the import takes 600 s: a TERM held up by the reload cannot end within the test
    assert code == 0, run.log()[-3000:]
    assert sum(committed(eb, "GSR", "SR").values()) == 20
