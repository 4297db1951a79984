"""A frozen orderly owner resumes without going back behind another owner's commit (issue #23, item 1).

Two ``rmqrun run --orderly`` instances share a group. Instance A is frozen (SIGSTOP of its
supervisor) for 45 s, longer than the broker's lock expiry (25 s
here, above the client's 20 s renewal) and client-channel expiry (30 s): the broker drops A,
B takes A's queues and commits ahead. A then resumes and wins its queues back. Its broker lock
was not held continuously, so before consuming on it must check the broker's offset: going on
from its own position in memory, it would handle again everything B committed meanwhile, and
its commits would move the group's offset backwards while it caught up.

A probe in this process reads the broker's committed offsets all along (``time.monotonic_ns``
is one clock for every process of the machine, so its samples and the handler's records
compare). The audit: no handler call starts on an offset below what the broker had committed
for its queue before the call began, and no queue's committed offset ever goes down.

Key mode keeps more jobs outstanding than the workers' pipes take, so some of A's wait in its
executor when it is frozen; they must not start as A wakes (they did: calls behind B's commit,
the executor checks the lock now).
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.signals_kit import Runs, committed, produce, queue_max_offsets, start_broker, wait_until

HANDLER = "tests.integration.handlers.gap_handler:handle"
GROUP, TOPIC = "GGAP", "TGAP"
FREEZE_S = 45.0


@dataclass(frozen=True, slots=True)
class Call:
    pid: int
    queue: int
    offset: int
    start: int
    end: int


def read_calls(path: Path) -> list[Call]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 5:
            out.append(Call(*map(int, parts)))  # type: ignore[arg-type]
    return out


class CommitProbe:
    """Polls the group's committed offsets on a thread of its own: (time after the answer, queue, offset)."""

    def __init__(self, namesrv: str, broker: str) -> None:
        self.samples: list[tuple[int, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._poll(namesrv, broker)), daemon=True)

    async def _poll(self, namesrv: str, broker: str) -> None:
        from rmqrun.client.instance import ClientInstance
        inst = ClientInstance(namesrv, instance_name="gap-probe")
        try:
            mqs = await inst.subscribe_queues(TOPIC)
            while not self._stop.is_set():
                for mq in mqs:
                    try:
                        offset = await inst.broker.query_consumer_offset(broker, GROUP, mq)
                    except Exception:  # noqa: BLE001 - a probe that misses a sample only sees less
                        continue
                    if offset is not None and offset >= 0:
                        self.samples.append((time.monotonic_ns(), mq.queue_id, offset))
                await asyncio.sleep(0.05)
        finally:
            await inst.close()

    def __enter__(self) -> "CommitProbe":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def audit(calls: list[Call], samples: list[tuple[int, int, int]]) -> tuple[list[str], list[str]]:
    """(calls begun behind a commit already on the broker, committed offsets that went down)."""
    behind, backwards = [], []
    by_queue: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for t, q, off in sorted(samples):
        seq = by_queue[q]
        if seq and off < seq[-1][1]:
            backwards.append(f"queue {q}: committed {seq[-1][1]}, then {off}")
        seq.append((t, max(off, seq[-1][1]) if seq else off))
    for c in calls:
        seen = [off for t, off in by_queue.get(c.queue, []) if t < c.start]
        if seen and c.offset < seen[-1]:
            behind.append(f"queue {c.queue} offset {c.offset} handled by pid {c.pid} after {seen[-1]} was committed")
    return behind, backwards


@pytest.mark.timeout(600)
@pytest.mark.parametrize("order_by", ["queue", "key"])
def test_a_resumed_owner_goes_on_from_the_other_owners_commit(tmp_path: Path, runs: Runs, order_by: str) -> None:
    eb = start_broker(tmp_path, lock_max_live_ms=25_000, channel_expired_ms=30_000, channel_scan_interval_ms=1000)
    record = tmp_path / "calls.txt"
    first, later = 2400, 400
    try:
        produce(eb, TOPIC, first, sharding_keys=40)

        def start(name: str):  # type: ignore[no-untyped-def]
            return runs.start(name, HANDLER, namesrv=eb.namesrv_address, group=GROUP, topic=TOPIC,
                              args=["--workers", "2", "--orderly", "--order-by", order_by],
                              settings={"RMQRUN_HEARTBEAT_INTERVAL_MS": "3000"},
                              env={"GAP_RECORD": str(record), "GAP_SLEEP_MS": "10"})
        with CommitProbe(eb.namesrv_address, eb.broker_address) as probe:
            a = start("a")
            b = start("b")
            pids_a, pids_b = set(a.worker_pids()), set(b.worker_pids())
            wait_until(lambda: sum(c.pid in pids_a for c in read_calls(record)) >= 150 and
                       sum(c.pid in pids_b for c in read_calls(record)) >= 50, 60, "both instances consuming")
            queues_a = {c.queue for c in read_calls(record) if c.pid in pids_a}
            a.signal(signal.SIGSTOP)  # the supervisor (its workers finish what they hold, then wait)
            frozen_at = time.monotonic_ns()
            try:
                wait_until(lambda: any(c.pid in pids_b and c.queue in queues_a and c.start > frozen_at
                                       for c in read_calls(record)), FREEZE_S + 30, "B taking A's queues")
                time.sleep(max(0.0, FREEZE_S - (time.monotonic_ns() - frozen_at) / 1e9))
            finally:
                a.signal(signal.SIGCONT)
            resumed_at = time.monotonic_ns()
            produce(eb, TOPIC, later, sharding_keys=40, start=first)
            sizes = queue_max_offsets(eb, TOPIC)
            wait_until(lambda: {(c.queue, c.offset) for c in read_calls(record)} >=
                       {(q, o) for q, n in sizes.items() for o in range(n)}, 180, "every message handled")
            wait_until(lambda: committed(eb, GROUP, TOPIC) == sizes, 60, "everything committed", interval=0.2)
            time.sleep(1.0)  # a last round of samples
        for run in (a, b):
            run.signal(signal.SIGTERM)
            assert run.wait(60) == 0, run.log()[-3000:]
        calls = read_calls(record)
        behind, backwards = audit(calls, probe.samples)
        assert not backwards, backwards[:10]
        assert not behind, f"{len(behind)} call(s) behind a committed offset, e.g. {behind[:10]}"
        # the scenario happened: B worked on A's queues while A was frozen, and A consumed again after
        assert any(c.pid in pids_b and c.queue in queues_a and frozen_at < c.start < resumed_at for c in calls)
        assert any(c.pid in pids_a and c.start > resumed_at for c in calls), "A never consumed after resuming"
        assert "locked again after a gap" in a.log(), a.log()[-3000:]
    finally:
        eb.stop_in_thread()


@pytest.mark.parametrize("order_by", ["queue", "key"])
def test_a_broken_connection_holds_the_queue_until_the_broker_grants_its_lock_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order_by: str) -> None:
    """What a broker restart does to an orderly owner, in one process: the broker forgets the lock (another
    client takes it and commits ahead) and the owner's connections break. The owner's local lock is still
    fresh (no renewal is due for 20 s), but it starts nothing new until the broker grants the lock again,
    and then it goes on from the other client's commit, not from its own position."""
    from tests.integration.engine_kit import Running, broker, consumer_config, pool_config
    from tests.integration.engine_kit import produce as produce_async
    from tests.integration.engine_kit import wait_for as wait_async
    from tests.integration.test_engine_orderly_locks import Thief

    monkeypatch.setenv("GAP_RECORD", str(tmp_path / "calls.txt"))
    monkeypatch.setenv("GAP_SLEEP_MS", "100")
    record = tmp_path / "calls.txt"
    total = 300

    async def main() -> tuple[int, int, int]:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce_async(eb.namesrv_address, "TC", total, sharding_keys=4)
            cfg = consumer_config(eb.namesrv_address, "GTC", "TC", orderly=True, order_by=order_by,
                                  broker_suspend_max_time_ms=300)
            thief = Thief(eb, "GTC")
            try:
                async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                    engine = r.supervisor.engine
                    assert engine is not None
                    (mq,) = [mq for mq in engine.table if mq.topic == "TC"]
                    await wait_async(lambda: len(read_calls(record)) >= 20, what="20 calls")
                    await thief.take(mq, owner=engine.instance.client_id)  # the broker forgot our lock ...
                    for conn in engine.instance.pool.connections().values():
                        conn.close()  # ... and our connections broke
                    broke_at = time.monotonic_ns()
                    await asyncio.sleep(4.0)  # the jobs handed to workers finish; nothing new may start
                    ahead = max(c.offset for c in read_calls(record)) + 40
                    await thief.inst.broker.update_consumer_offset(eb.broker_address, "GTC", mq, ahead, oneway=False)
                    given_back_at = time.monotonic_ns()
                    await thief.give_back(mq)
                    await wait_async(lambda: {c.offset for c in read_calls(record)} >= set(range(ahead, total)),
                                     timeout=120, what="the rest after the other client's commit")
                    assert await r.stop() == 0
            finally:
                await thief.close()
            return broke_at, given_back_at, ahead

    broke_at, given_back_at, ahead = asyncio.run(asyncio.wait_for(main(), 240))
    calls = read_calls(record)
    # what was with the workers when the connection broke ran within ~2 s; nothing started after that
    started_unlocked = [c for c in calls if broke_at + 2_000_000_000 < c.start < given_back_at]
    assert not started_unlocked, started_unlocked[:5]
    # relocked after the gap: on from the other client's commit, nothing behind it handled again
    after = [c.offset for c in calls if c.start > given_back_at]
    assert after and min(after) >= ahead, sorted(after)[:10]
