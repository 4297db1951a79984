"""kill -9 a process writing with SYNC flush: every acknowledged message survives, once, in order.

The child (this module run with ``child`` arguments) writes from several concurrent
asyncio producers into a few queues and prints one line per acknowledged message,
after ``put_sync`` returned. The parent SIGKILLs it mid-stream (in later rounds also
cutting or trashing the unflushed tail, as a power cut could), reopens the store
and checks: each queue holds exactly the prefix 0..n-1 of what was written to it
(nothing lost, duplicated, reordered or corrupt), n covers every acknowledgement,
and the consume queues agree with the commit log. Then the child is started again
on the same directory, so recovery of a recovered store is exercised too.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from rmqrun.broker.store import FlushMode, MessageStore, StoreConfig
from tests.unit.store_records import assert_consistent, build_record

ROOT = Path(__file__).resolve().parents[2]
QUEUES = [("CrashT", 0), ("CrashT", 1), ("CrashU", 0)]
PRODUCERS = 6


def crash_config() -> StoreConfig:
    # Small segments so the run crosses segment ends (and may die in the middle of a roll).
    return StoreConfig(segment_size=64 * 1024, max_message_size=4096, consume_queue_entries_per_file=64,
                       flush_mode=FlushMode.SYNC, checkpoint_interval_ms=100)


def body_of(topic: str, qid: int, seq: int) -> bytes:
    return f"{topic}/{qid}#{seq}|".encode() + b"p" * (seq * 37 % 900)


async def child_main(data_dir: str) -> None:
    store = MessageStore(data_dir, crash_config()).open()
    next_seq = {q: store.max_offset(*q) for q in QUEUES}
    out = sys.stdout

    async def producer(k: int) -> None:
        rnd = random.Random(k)
        while True:
            topic, qid = QUEUES[rnd.randrange(len(QUEUES))]
            seq = next_seq[(topic, qid)]
            next_seq[(topic, qid)] = seq + 1
            # Build and put without awaiting in between: queue order == sequence order.
            r = await store.put_sync(topic, qid, build_record(topic, qid, body_of(topic, qid, seq), tags="t"), 1)
            assert r.queue_offset == seq, (r, seq)
            out.write(f"ACK {topic} {qid} {seq} {r.end_offset}\n")
            out.flush()

    print("READY", flush=True)
    await asyncio.gather(*(producer(k) for k in range(PRODUCERS)))


def run_child_and_kill(data_dir: Path, acks_before_kill: int) -> tuple[dict[tuple[str, int], int], int]:
    """Returns, per queue, 1 + the highest acknowledged sequence number, and the highest
    acknowledged commit-log end offset."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.test_store_crash", "child", str(data_dir)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    acked: dict[tuple[str, int], int] = {}
    acked_end = 0
    seen = 0
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY", proc.stderr.read() if proc.stderr else ""
        for line in proc.stdout:
            if not line.endswith("\n"):
                break  # a half-written line is not an acknowledgement we can rely on
            _, topic, qid, seq, end = line.split()
            key = (topic, int(qid))
            acked[key] = max(acked.get(key, 0), int(seq) + 1)
            acked_end = max(acked_end, int(end))
            seen += 1
            if seen == acks_before_kill:
                os.kill(proc.pid, signal.SIGKILL)
        # Lines already in the pipe when it died are acknowledgements too: read to EOF.
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else proc.returncode
    assert seen >= acks_before_kill
    return acked, acked_end


def lose_unflushed_tail(data_dir: Path, acked_end: int, rnd: random.Random, garbage: bool) -> None:
    """Simulate a power cut on top of the kill: bytes after the last acknowledged one may
    be lost (cut at a random point, possibly mid-record) or be replaced by junk."""
    last = sorted((data_dir / "commitlog").iterdir())[-1]
    start, size = int(last.name), last.stat().st_size
    if acked_end < start:
        return
    cut = rnd.randrange(acked_end - start, size + 1)
    os.truncate(last, cut)
    if garbage:
        with open(last, "ab") as f:
            f.write(rnd.randbytes(rnd.randrange(1, 500)))


def verify(data_dir: Path, acked: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    with MessageStore(data_dir, crash_config()) as store:
        bodies = assert_consistent(store)  # every record valid, queues dense and matching the log
        counts = {}
        for key in QUEUES:
            got = bodies.get(key, [])
            assert got == [body_of(*key, seq) for seq in range(len(got))], f"{key}: not an in-order prefix"
            assert len(got) >= acked.get(key, 0), f"{key}: acknowledged {acked.get(key)} but only {len(got)} survived"
            counts[key] = len(got)
        return counts


def test_sigkill_loses_no_acknowledged_message(tmp_path: Path) -> None:
    data_dir = tmp_path / "store"
    rnd = random.Random(4242)
    total_acked: dict[tuple[str, int], int] = {}
    for round_ in range(3):
        acked, acked_end = run_child_and_kill(data_dir, rnd.randrange(150, 600))
        if round_:
            lose_unflushed_tail(data_dir, acked_end, rnd, garbage=round_ == 2)
        for key, n in acked.items():
            total_acked[key] = max(total_acked.get(key, 0), n)
        counts = verify(data_dir, total_acked)
        assert sum(counts.values()) >= sum(total_acked.values())


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "child":
    try:
        asyncio.run(child_main(sys.argv[2]))
    except BrokenPipeError:
        pass
