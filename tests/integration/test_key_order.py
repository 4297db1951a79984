"""``order_by: key`` end to end: embedded broker, real supervisor, real worker processes.

What the mode promises (issue #11), each checked from what the handler recorded:
every message once, each key strictly in order and one call at a time on the
worker its key hashes to, different keys on all workers at once, the committed
offset below the oldest unfinished message, failures suspending only their key.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import zlib
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest

from rmqrun.cli.run.metrics import registry_for
from rmqrun.consumer.key_order import key_of, parse_order_key
from tests.integration.cli_kit import run_cli
from tests.integration.engine_kit import Running, broker, committed_offsets, consumer_config, pool_config, wait_for
from tests.integration.keyed_kit import (
    assert_key_order, finished, max_overlap, produce_keyed, read_calls, stored_messages,
)

HANDLER = "tests.integration.handlers.keyed_handler:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 300))


@pytest.fixture
def calls_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "calls.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_FILE", str(path))
    return path


def test_thousand_keys_two_queues_four_workers(tmp_path: Path, calls_file: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """2 queues, 1,000 keys, 4 workers: once each, in order per key, all 4 workers at once."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "5")
    keys, total = 1000, 3000

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce_keyed(eb.namesrv_address, "K1", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK1", "K1", order_by="key")
            assert cfg.orderly  # key mode is an orderly mode: broker locks as in queue mode
            async with Running(cfg, pool_config(HANDLER, workers=4)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                mine = [req for mq, req in engine.table.items() if mq.topic == "K1"]
                assert len(mine) == 2 and all(req.pq.locked for req in engine.table.values())
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= total, timeout=180,
                               what=f"{total} messages")
                slots = {s.worker_id: s.pid for s in r.supervisor.executor.pool.workers()}
                ids = sorted(slots)
                await wait_for(lambda: all(req.pq.msg_count == 0 for req in engine.table.values()),
                               what="every queue drained")
                assert engine.consume_service.suspensions == 0
                assert await r.stop() == 0
            calls = read_calls(calls_file)
            # every message once
            assert sorted(c.i for c in calls) == list(range(total))
            assert all(c.status == "ok" for c in calls)
            # each key strictly in order, one call at a time
            assert_key_order(calls, keys)
            # each key always on the worker its key hashes to
            per_key_pids = defaultdict(set)
            for c in calls:
                per_key_pids[c.key].add(c.pid)
            for key, pids in per_key_pids.items():
                assert pids == {slots[ids[zlib.crc32(key.encode()) % len(ids)]]}, key
            # all 4 workers busy, at the same time, although the topic has only 2 queues
            share = Counter(c.pid for c in calls)
            assert len(share) == 4 and min(share.values()) >= total // 10, share
            assert max_overlap(calls) >= 4
            # committed: everything
            offsets = await committed_offsets(eb, "GK1", "K1")
            per_queue = Counter(c.queue for c in calls)
            assert offsets == {q: per_queue[q] for q in (0, 1)}
    run(main())


def test_a_failing_key_suspends_only_itself_then_goes_to_the_dlq(tmp_path: Path, calls_file: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """One queue, 50 keys: key 7's first message always fails. Only key 7 waits (its later messages
    do not overtake it); every other key flows past it in the same queue meanwhile; after
    max_reconsume_times it goes to the DLQ and key 7 continues in order."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "5")
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_FAIL", "7:7")
    keys, total = 50, 500

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce_keyed(eb.namesrv_address, "K2", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK2", "K2", order_by="key", max_reconsume_times=2,
                                  suspend_current_queue_time_ms=1500)
            async with Running(cfg, pool_config(HANDLER, workers=4)) as r:
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= total - 1, timeout=180,
                               what=f"{total - 1} successes")
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: all(req.pq.msg_count == 0 for req in engine.table.values()),
                               what="the queue drained")
                # only key 7 was ever suspended (twice; the third failure dead-letters it): keys that shared
                # a job with it and stood behind it were put back, not suspended
                assert engine.consume_service.suspensions == 2
                assert await r.stop() == 0
            calls = read_calls(calls_file)
            assert_key_order(calls, keys, moved_on={7})
            poison = [c for c in calls if c.i == 7]
            # max_reconsume_times 2: delivered with reconsume 0, 1, 2, then dead-lettered
            assert [(c.reconsume, c.status) for c in poison] == [(0, "fail"), (1, "fail"), (2, "fail")]
            # the suspension held key 7 only: other keys, stored behind it in the same queue, ran
            # in the pause between its first failure and its retry
            first_fail, retry = poison[0].end, poison[1].start
            assert first_fail is not None
            assert retry - first_fail >= 1_400_000_000  # the lane waited its suspend time
            overtook = [c for c in calls if c.key != "7" and c.offset > poison[0].offset
                        and first_fail < c.start < retry and c.status == "ok"]
            assert len(overtook) >= 100, len(overtook)
            # the rest of key 7 only after the poison message was dead-lettered, in order
            key7 = [c.i for c in calls if c.key == "7" and c.status == "ok"]
            assert key7 == list(range(57, total, keys))
            assert min(c.start for c in calls if c.key == "7" and c.i > 7) > poison[-1].end
            # every other message exactly once
            assert sorted(c.i for c in calls if c.key != "7") == [i for i in range(total) if i % keys != 7]
            dlq = await stored_messages(eb.namesrv_address, eb.broker_address, "%DLQ%GK2")
            assert [m.body for m in dlq] == [b"msg-7"]
            assert (await committed_offsets(eb, "GK2", "K2"))[0] == total
    run(main())


def test_worker_sigkill_reruns_only_its_keys_in_order(tmp_path: Path, calls_file: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL one of 4 workers mid-stream: nothing is lost, every key stays in order, and only
    the keys that were on the killed worker run anything again (on its replacement)."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "10")
    keys, total = 200, 2000

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce_keyed(eb.namesrv_address, "K3", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK3", "K3", order_by="key")
            async with Running(cfg, pool_config(HANDLER, workers=4)) as r:
                pool = r.supervisor.executor.pool
                before = {s.worker_id: s.pid for s in pool.workers()}
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= 300, timeout=120, what="300 done")
                victim = before[1]
                os.kill(victim, signal.SIGKILL)
                await wait_for(lambda: len({c.i for c in finished(read_calls(calls_file))}) >= total,
                               timeout=180, what=f"all {total} messages")
                after = {s.worker_id: s.pid for s in pool.workers()}
                assert after[1] != victim and all(after[w] == before[w] for w in (0, 2, 3))
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: all(req.pq.msg_count == 0 for req in engine.table.values()),
                               what="every queue drained")
                assert await r.stop() == 0
            calls = read_calls(calls_file)
            assert {c.i for c in finished(calls)} == set(range(total))  # nothing lost
            assert_key_order(calls, keys)
            ids = sorted(before)
            victim_keys = {str(k) for k in range(keys) if ids[zlib.crc32(str(k).encode()) % len(ids)] == 1}
            # a message handled more than once (or cut off) belongs to a key of the killed worker
            runs = Counter(c.i for c in calls)
            again = {c.key for c in calls if runs[c.i] > 1 or c.end is None}
            assert again <= victim_keys, again - victim_keys
            # the killed worker's keys continue on its replacement; the others never moved
            for c in calls:
                home = before[ids[zlib.crc32(c.key.encode()) % len(ids)]]
                assert c.pid in ({before[1], after[1]} if c.key in victim_keys else {home}), (c.key, c.pid)
            offsets = await committed_offsets(eb, "GK3", "K3")
            assert offsets == {q: max(c.offset for c in calls if c.queue == q) + 1 for q in (0, 1)}
    run(main())


def test_second_instance_joining_drains_before_unlock(tmp_path: Path, calls_file: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A second instance joins mid-stream and takes one of the two queues. The first finishes every
    call it had running on that queue and commits below its oldest unfinished message before it
    unlocks; the second starts exactly there. Per key: no overlap, no skipping ahead, nothing lost."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "10")
    keys, total = 400, 2400

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce_keyed(eb.namesrv_address, "K4", total, keys)
            cfg = lambda: consumer_config(eb.namesrv_address, "GK4", "K4", order_by="key")  # noqa: E731
            async with Running(cfg(), pool_config(HANDLER, workers=2)) as a:
                pids_a = {s.pid for s in a.supervisor.executor.pool.workers()}
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= 400, timeout=120, what="400 done")
                async with Running(cfg(), pool_config(HANDLER, workers=2)) as b:
                    eb_ = b.supervisor.engine
                    assert eb_ is not None
                    await wait_for(lambda: any(mq.topic == "K4" for mq in eb_.table), timeout=60,
                                   what="the second instance owning a queue")
                    moved = next(mq.queue_id for mq in eb_.table if mq.topic == "K4")
                    await wait_for(lambda: len({c.i for c in finished(read_calls(calls_file))}) >= total,
                                   timeout=180, what=f"all {total} messages")
                    assert await b.stop() == 0
                assert await a.stop() == 0
            calls = read_calls(calls_file)
            assert all(c.end is not None for c in calls)  # no call was cut off, by the handover or the stops
            assert {c.i for c in finished(calls)} == set(range(total))  # nothing lost
            assert_key_order(calls, keys)  # across both instances: no overlap, no skipping ahead
            on_moved = [c for c in calls if c.queue == moved]
            by_a = [c for c in on_moved if c.pid in pids_a]
            by_b = [c for c in on_moved if c.pid not in pids_a]
            assert by_a and by_b
            # drain before unlock: every call of the first instance on that queue had ended before
            # the second started anything on it
            assert max(c.end for c in by_a) < min(c.start for c in by_b)  # type: ignore[type-var]
            # committed before unlock: the second starts at the first instance's oldest unfinished offset
            queue_size = max(c.offset for c in on_moved) + 1
            unfinished_by_a = set(range(queue_size)) - {c.offset for c in by_a if c.status == "ok"}
            assert min(c.offset for c in by_b) == min(unfinished_by_a)
    run(main())


def test_stop_drains_running_keys_and_commits_below_the_oldest_unfinished(tmp_path: Path, calls_file: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped while calls run: every running call finishes, and the committed offset of each queue
    is its oldest message not finished (nothing finished is behind it, nothing unfinished below it)."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "200")
    keys, total = 40, 400

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce_keyed(eb.namesrv_address, "K5", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK5", "K5", order_by="key")
            async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= 10, timeout=60, what="10 done")
                assert await r.stop() == 0
            calls = read_calls(calls_file)
            assert calls and all(c.end is not None and c.status == "ok" for c in calls)
            assert_key_order(calls, keys)
            offsets = await committed_offsets(eb, "GK5", "K5")
            for q in (0, 1):
                done = {c.offset for c in calls if c.queue == q}
                oldest_unfinished = min(set(range(max(done, default=-1) + 2)) - done)
                assert offsets[q] == oldest_unfinished, (q, offsets[q], sorted(done))
    run(main())


def test_a_stuck_key_keeps_memory_bounded_and_shows_in_metrics_and_status(tmp_path: Path, calls_file: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A key whose message never succeeds (unlimited reconsumes, as orderly's default): the other keys
    flow past it until the queue's offset span limit stops pulling, so the cache stays bounded; the
    committed offset stays at the stuck message, which metrics and ``rmqrun status --json`` show."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_FAIL", "3:3")
    keys, total, span, pull_batch = 20, 1500, 300, 32

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce_keyed(eb.namesrv_address, "K6", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK6", "K6", order_by="key", max_reconsume_times=-1,
                                  suspend_current_queue_time_ms=200, consume_concurrently_max_span=span,
                                  pull_batch_size=pull_batch)
            async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= 250, timeout=120, what="250 done")
                stable: list[int] = []

                def settled() -> bool:  # no success for 2 s: the span limit holds the queue
                    stable.append(len(finished(read_calls(calls_file))))
                    return len(stable) > 20 and stable[-1] == stable[-21]
                await wait_for(settled, timeout=120, what="progress to stop at the span limit")
                stuck = next(c for c in read_calls(calls_file) if c.i == 3)
                req = next(req for mq, req in engine.table.items() if mq.topic == "K6")
                # the cache is bounded: the span limit stops pulling (the stuck key's own later messages
                # come to fill it), and what stays cached is few
                assert req.pq.max_span() > span
                assert req.pq.msg_count <= span + pull_batch
                assert req.pq.first_offset() == stuck.offset
                pulled = req.next_offset
                # metrics: the queue's oldest unfinished message and its age
                text = generate_latest(registry_for(r.supervisor, time.time())).decode()
                labels = '{broker="broker-a",group="GK6",queue_id="0",topic="K6"}'
                assert f"rmqrun_queue_oldest_unfinished_offset{labels} {float(stuck.offset)}" in text
                age = float(next(line.split()[-1] for line in text.splitlines()
                                 if line.startswith(f"rmqrun_queue_oldest_unfinished_age_seconds{labels}")))
                assert 1.0 <= age < 600
                await wait_for(lambda: engine.offset_store.read_memory(req.mq) == stuck.offset, what="commit")
                await engine.offset_store.persist(req.mq)
                # rmqrun status --json (another process, while the loop keeps the broker serving)
                proc = await asyncio.to_thread(run_cli, ["status", "--namesrv", eb.namesrv_address, "--group",
                                                         "GK6", "--topic", "K6", "--json"])
                assert proc.returncode == 0, proc.stderr
                row = json.loads(proc.stdout)["queues"][0]
                assert row["consumer_offset"] == row["oldest_unfinished_offset"] == stuck.offset
                assert row["oldest_unfinished_age_s"] >= age
                calls = read_calls(calls_file)
                assert req.next_offset == pulled, "pulling went on past the span limit"
                # everything pulled has run once, except what is cached: key 3's messages, waiting
                done = sorted(c.offset for c in finished(calls))
                missing = sorted(set(range(pulled)) - set(done))
                assert len(done) == len(set(done)) and len(missing) == req.pq.msg_count
                assert {key_of(req.pq.get(o).payload, parse_order_key("sharding_key")) for o in missing} == {"3"}
                assert await r.stop() == 0
            # only key 3 waits: none of its later messages ran; the other keys ran up to the span limit
            assert {c.i for c in calls if c.key == "3"} == {3}
            assert len([o for o in done if o > stuck.offset]) >= 250
            assert_key_order(calls, keys)
            assert (await committed_offsets(eb, "GK6", "K6"))[0] == stuck.offset
    run(main())


def test_lock_lost_no_new_key_job_until_locked_again(tmp_path: Path, calls_file: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The queue's broker lock is taken away mid-stream (as another client would): what was handed to
    workers finishes, no lane starts a new job, the relock is asked for; once the lock is back every key
    goes on in order."""
    from tests.integration.test_engine_orderly_locks import Thief
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "20")
    keys, total = 20, 400

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce_keyed(eb.namesrv_address, "K7", total, keys)
            thief = Thief(eb, "GK7")
            try:
                cfg = consumer_config(eb.namesrv_address, "GK7", "K7", order_by="key", lock_interval_ms=1000,
                                      broker_suspend_max_time_ms=300)
                async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                    engine = r.supervisor.engine
                    assert engine is not None
                    (mq,) = [mq for mq in engine.table if mq.topic == "K7"]
                    req = engine.table[mq]
                    await wait_for(lambda: len(finished(read_calls(calls_file))) >= 40, what="40 done")
                    await thief.take(mq, owner=engine.instance.client_id)
                    await wait_for(lambda: engine.rebalancer.lock_losses >= 1 and not req.pq.locked, timeout=20,
                                   what="the lock renewal noticing the loss")
                    seen: list[int] = []

                    def quiet() -> bool:  # what was with the workers has run; nothing new starts
                        seen.append(len(read_calls(calls_file)))
                        return len(seen) > 15 and seen[-1] == seen[-16]
                    await wait_for(quiet, timeout=60, what="no new call without the lock")
                    held = len(read_calls(calls_file))
                    assert held < total and engine.consume_service.lanes(mq)["lanes"] > 0
                    assert engine.consume_service.in_flight == 0
                    await thief.give_back(mq)
                    await wait_for(lambda: len(finished(read_calls(calls_file))) >= total, timeout=120,
                                   what=f"all {total} after relocking")
                    await wait_for(lambda: engine.offset_store.read_memory(mq) == total, what="the commit")
                    assert await r.stop() == 0
                calls = read_calls(calls_file)
                assert sorted(c.i for c in calls) == list(range(total))
                assert_key_order(calls, keys)
                assert (await committed_offsets(eb, "GK7", "K7"))[0] == total
            finally:
                await thief.close()
    run(main())


def test_several_messages_per_call_keep_one_key_per_job(tmp_path: Path, calls_file: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """With consume_message_batch_max_size > 1 a handler call could mix keys, so lanes do not share
    jobs: each job is one key's messages. A failing call suspends only its own key and, at
    max_reconsume_times, its messages go to the DLQ together (the orderly rule for a call)."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "2")
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_FAIL", "5:5")
    keys, total, per_call = 100, 1000, 4

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce_keyed(eb.namesrv_address, "K8", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK8", "K8", order_by="key",
                                  consume_message_batch_max_size=per_call, max_reconsume_times=1,
                                  suspend_current_queue_time_ms=300)
            async with Running(cfg, pool_config(HANDLER, workers=3)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: len(engine.table) >= 2 and all(
                    req.pq.msg_count == 0 and req.next_offset > 0 for mq, req in engine.table.items()
                    if mq.topic == "K8") and len(finished(read_calls(calls_file))) >= total - per_call,
                    timeout=180, what="every queue drained")
                assert await r.stop() == 0
            calls = read_calls(calls_file)
            dlq = await stored_messages(eb.namesrv_address, eb.broker_address, "%DLQ%GK8")
            dead = [int(bytes(m.body).decode().split("-")[1]) for m in dlq]
            # the failing call: message 5 and the next messages of key 5 that shared its call, in order
            assert 1 <= len(dead) <= per_call and dead == list(range(5, 5 + keys * len(dead), keys)), dead
            assert [(c.reconsume, c.status) for c in calls if c.i == 5] == [(0, "fail"), (1, "fail")]
            assert_key_order(calls, keys, moved_on=set(dead))
            ok = sorted(c.i for c in finished(calls))
            assert ok == [i for i in range(total) if i not in dead]  # everything else once
            # no job mixed keys: a call's messages all came from one key, so only key 5 ever waited
            assert {c.key for c in calls if c.status == "fail"} == {"5"}
            offsets = await committed_offsets(eb, "GK8", "K8")
            sizes = Counter(c.queue for c in calls if c.status == "ok")
            q5 = next(c.queue for c in calls if c.i == 5)
            sizes[q5] += len(dead)
            assert offsets == dict(sizes)
    run(main())


def test_broadcasting_key_order_without_locks(tmp_path: Path, calls_file: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Broadcasting takes no broker locks (as queue mode); key order holds all the same, offsets are local."""
    monkeypatch.setenv("RMQRUN_HANDLER_KEYED_SLEEP_MS", "2")
    keys, total = 200, 1000

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce_keyed(eb.namesrv_address, "K9", total, keys)
            cfg = consumer_config(eb.namesrv_address, "GK9", "K9", order_by="key", message_model="BROADCASTING",
                                  offset_store_dir=str(tmp_path / "offsets"))
            async with Running(cfg, pool_config(HANDLER, workers=3)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                assert not any(req.pq.locked for req in engine.table.values())
                await wait_for(lambda: len(finished(read_calls(calls_file))) >= total, timeout=120,
                               what=f"{total} messages")
                await wait_for(lambda: all(engine.offset_store.read_memory(mq) == req.next_offset
                                           for mq, req in engine.table.items() if mq.topic == "K9"),
                               what="offsets at the end")
                assert await r.stop() == 0
            calls = read_calls(calls_file)
            assert sorted(c.i for c in calls) == list(range(total))
            assert_key_order(calls, keys)
            assert len({c.pid for c in calls}) == 3
    run(main())
