"""Dispatcher: orderly pinning by stable hash, concurrent spread by load, back-pressure."""

from __future__ import annotations

import math
import zlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.model import MessageQueue
from rmqrun.supervisor.dispatch import Dispatcher, stable_index
from rmqrun.pipe.wire import ConsumeMode

C = ConsumeMode.CONCURRENT
O = ConsumeMode.ORDERLY


def test_stable_index_is_crc32_of_the_key_text() -> None:
    mq = MessageQueue("Orders", "broker-a", 3)
    expected = zlib.crc32(b"MessageQueue [topic=Orders, brokerName=broker-a, queueId=3]") % 5
    assert stable_index(mq, 5) == expected
    assert stable_index("abc", 7) == zlib.crc32(b"abc") % 7


def test_a_pin_is_stable_index_of_its_key_with_any_worker_set_and_past_the_remembered_keys(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from rmqrun.consumer.key_order import KeyLane
    from rmqrun.supervisor import dispatch
    monkeypatch.setattr(dispatch, "_CRC_CACHE_KEYS", 5)  # so that the remembered keys are dropped often
    d = Dispatcher(range(4))
    keys = [MessageQueue("T", "b", i) for i in range(9)] + [KeyLane(MessageQueue("T", "b", 0), f"k{i}")
                                                            for i in range(9)] + ["abc"]
    for ids in ([0, 1, 2, 3], [0, 2, 5], [7]):
        d.set_workers(ids)
        for _ in range(2):  # the second time from what it remembered
            for key in keys:
                assert d.pinned_worker(key) == ids[stable_index(key, len(ids))]
    d.set_workers([0, 1, 2])
    d.set_stuck([stable_index(keys[0], 3)])
    others = [w for w in [0, 1, 2] if w != stable_index(keys[0], 3)]
    assert d.pinned_worker(keys[0]) == others[stable_index(keys[0], 2)]  # a stuck pin: the same hash over the rest


def test_orderly_queue_always_goes_to_its_pinned_worker_one_batch_at_a_time() -> None:
    d = Dispatcher(range(4))
    mq = MessageQueue("T", "b", 1)
    pinned = d.pinned_worker(mq)
    assert pinned == stable_index(mq, 4)
    assert d.assign(1, mq, O, 5) == pinned
    assert d.is_busy(mq)
    assert d.assign(2, mq, O, 5) is None  # a second batch of the same queue waits
    assert d.done(1) is True
    assert not d.is_busy(mq)
    assert d.assign(2, mq, O, 5) == pinned


def test_a_chained_orderly_batch_follows_the_batch_ahead_to_its_worker() -> None:
    d = Dispatcher(range(3))
    mq, other = MessageQueue("T", "b", 1), MessageQueue("T", "b", 2)
    first = d.assign(1, mq, O, 5)
    assert first is not None
    d.set_stuck({first})  # a new pin would avoid that worker now; the chain must not
    assert d.pinned_worker(mq) != first
    assert d.assign(2, mq, O, 5) is None  # not chained: waits until the queue has nothing in flight
    assert d.assign(2, other, O, 5, follow=1) is None  # following another queue's batch: refused
    assert d.assign(2, mq, O, 5, follow=99) is None  # following a batch not in flight: refused
    assert d.assign(2, mq, O, 5, follow=1) == first
    assert d.load(first) == 10
    assert d.done(1)
    assert d.is_busy(mq)  # the chained batch is still in flight
    assert d.assign(3, mq, O, 5) is None
    assert d.done(2)
    assert not d.is_busy(mq)
    assert d.assign(3, mq, O, 5) == d.pinned_worker(mq)


def test_a_chained_orderly_batch_is_not_held_by_the_workers_bound() -> None:
    d = Dispatcher(range(2), max_inflight_messages=6)
    mq = MessageQueue("T", "b", 1)
    worker = d.assign(1, mq, O, 5)
    assert d.assign(2, MessageQueue("T", "b", 7), O, 5) in (None, 1 - worker)  # others: bounded as before
    assert d.assign(3, mq, O, 5, follow=1) == worker  # its own queue's next batch: behind it at once


def test_a_queue_whose_pin_moved_is_not_chained_further() -> None:
    """A chain would keep the queue on its old worker for as long as its backlog lasts: after a resize the
    next batch waits for the one ahead, then goes to the new pin (a worker added for a backlog gets work)."""
    mq = next(MessageQueue("T", "b", i) for i in range(100) if stable_index(MessageQueue("T", "b", i), 2)
              != [0, 1, 2][stable_index(MessageQueue("T", "b", i), 3)])
    d = Dispatcher(range(2))
    old = d.assign(1, mq, O, 5)
    assert d.assign(2, mq, O, 5, follow=1) == old  # the same workers: chained behind it
    d.set_workers(range(3))
    assert d.pinned_worker(mq) != old
    assert d.assign(3, mq, O, 5, follow=2) is None  # the pin moved: not chained, waits
    assert d.done(1) and d.done(2)
    now = d.assign(3, mq, O, 5)
    assert now == d.pinned_worker(mq)  # then pinned anew
    d.set_workers([w for w in range(3) if w != now])  # the worker it runs on goes (TTOU): no chain onto it
    assert d.assign(4, mq, O, 5, follow=3) is None


def test_orderly_queues_spread_over_workers() -> None:
    d = Dispatcher(range(4))
    workers = Counter(d.assign(i, MessageQueue("T", "b", i), O, 1) for i in range(64))
    assert set(workers) == {0, 1, 2, 3}


def test_resize_repins_a_queue_only_once_nothing_is_in_flight() -> None:
    d = Dispatcher(range(2))
    # find a queue whose pin differs between 2 and 3 workers
    mq = next(MessageQueue("T", "b", i) for i in range(100) if stable_index(MessageQueue("T", "b", i), 2)
              != [0, 1, 2][stable_index(MessageQueue("T", "b", i), 3)])
    old = d.assign(1, mq, O, 1)
    d.set_workers(range(3))
    assert d.assign(2, mq, O, 1) is None  # still in flight on the old worker: no reordering possible
    assert d.load(old) == 1
    d.done(1)
    new = d.assign(2, mq, O, 1)
    assert new == stable_index(mq, 3) != old


def test_removed_worker_keeps_its_accounting_until_its_batches_finish() -> None:
    d = Dispatcher(range(3), max_inflight_messages=10)
    assert d.assign(1, "q", C, 4) == 0
    d.set_workers(range(2))  # worker 2 gone; worker 0 still holds batch 1
    assert d.worker_ids == [0, 1]
    ids = [d.assign(i, "q", C, 1) for i in range(2, 6)]
    assert 2 not in ids
    d.set_workers([0, 1, 2])
    assert d.load(2) == 0


def test_concurrent_goes_to_least_loaded_and_ties_rotate() -> None:
    d = Dispatcher(range(3), max_inflight_messages=100)
    first = [d.assign(i, "q", C, 10) for i in range(3)]
    assert sorted(first) == [0, 1, 2]  # idle workers are filled before anyone gets a second batch
    d.done(first.index(1))  # worker 1 is now empty
    assert d.assign(10, "q", C, 10) == 1
    assert [d.load(w) for w in range(3)] == [10, 10, 10]


def test_backpressure_when_every_worker_is_full() -> None:
    d = Dispatcher(range(2), max_inflight_messages=8, pipeline_budget=math.inf)  # the message bound alone
    assert d.assign(1, "q", C, 5) is not None
    assert d.assign(2, "q", C, 5) is not None
    assert d.has_room(3) and not d.has_room(4)
    assert d.assign(3, "q", C, 4) is None  # 5 + 4 > 8 on both
    assert d.assign(3, "q", C, 3) is not None  # one worker now at 8, the other at 5
    assert d.assign(4, "q", C, 4) is None
    assert sorted([d.load(0), d.load(1)]) == [5, 8]
    d.done(1)
    assert d.assign(4, "q", C, 4) is not None


def test_oversized_batch_only_goes_to_an_idle_worker() -> None:
    d = Dispatcher([0], max_inflight_messages=4)
    assert d.assign(1, "q", C, 32) == 0  # never starve a batch bigger than the bound
    assert d.assign(2, "q", C, 1) is None
    d.done(1)
    assert d.assign(2, "q", O, 32) == 0


def test_orderly_respects_the_worker_bound_too() -> None:
    d = Dispatcher([0], max_inflight_messages=4)
    assert d.assign(1, "a", C, 4) == 0
    assert d.assign(2, "b", O, 1) is None
    assert not d.is_busy("b")  # a refused assignment leaves no trace


def test_api_misuse() -> None:
    d = Dispatcher([0])
    d.assign(1, "q", C, 1)
    with pytest.raises(ValueError, match="already in flight"):
        d.assign(1, "q", C, 1)
    with pytest.raises(ValueError, match="at least one message"):
        d.assign(2, "q", C, 0)
    assert d.done(99) is False
    assert Dispatcher([]).assign(1, "q", C, 1) is None
    assert Dispatcher([]).assign(1, "q", O, 1) is None
    with pytest.raises(ValueError):
        Dispatcher([0], max_inflight_messages=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["assign", "done", "resize"]), st.integers(0, 7), st.integers(1, 9),
                          st.booleans()), max_size=80))
def test_invariants_under_random_operations(ops) -> None:  # type: ignore[no-untyped-def]
    d = Dispatcher(range(3), max_inflight_messages=10)
    flights: dict[int, tuple[int, int, str, bool]] = {}
    next_id = 0
    for op, a, size, orderly in ops:
        if op == "assign":
            key = f"q{a}"
            wid = d.assign(next_id, key, O if orderly else C, size)
            if wid is not None:
                if orderly:
                    assert not any(k == key and o for (_, _, k, o) in flights.values())
                    assert wid == d.worker_ids[stable_index(key, len(d.worker_ids))]
                flights[next_id] = (wid, size, key, orderly)
            next_id += 1
        elif op == "done" and flights:
            bid = sorted(flights)[a % len(flights)]
            assert d.done(bid)
            del flights[bid]
        elif op == "resize":
            d.set_workers(range(1 + a % 4))
        loads: Counter[int] = Counter()
        for wid, sz, _, _ in flights.values():
            loads[wid] += sz
        for wid in set(loads) | set(d.worker_ids):
            assert d.load(wid) == loads[wid]
        assert d.in_flight == len(flights)


def test_workers_stuck_by_either_watch_get_no_new_work_while_another_can_take_it() -> None:
    """The long-call watch and the liveness watch each keep their own set; the dispatcher avoids the union."""
    d = Dispatcher(range(3), max_inflight_messages=100)
    d.set_stuck({0}, "long call")
    d.set_stuck({1}, "not responding")
    assert d.stuck == {0, 1}
    # idle 0 and 1 are stuck: never chosen; busy 2 takes no second batch before a time per message is known
    assert [d.assign(i, "q", C, 1) for i in range(3)] == [2, None, None]
    assert not d.has_room(1)  # the idle ones are stuck: nothing to try until worker 2 is done
    pinned = next(k for k in range(100) if stable_index(str(k), 3) == 1)
    assert d.assign(10, str(pinned), O, 1) == 2  # a new pin hashes over the workers that can take work
    d.set_stuck(set(), "not responding")  # worker 1 responds again; worker 0's long call goes on
    assert d.stuck == {0}
    assert d.assign(11, "q", C, 1) == 1
    d.set_stuck({0, 1, 2}, "not responding")  # nobody can take work: the work still goes somewhere, bounded
    assert d.assign(12, "q", C, 1) is not None
