"""ProcessQueue: the min-offset commit rule and the orderly take/commit/rollback cycle."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rmqrun.consumer.defaults import (
    PULL_MAX_IDLE_TIME_MS,
    REBALANCE_LOCK_MAX_LIVE_TIME_MS,
    UNLOCK_DELAY_TIME_MS,
)
from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage
from rmqrun.model import Message, MessageQueue

T0 = 1_700_000_000_000


def entries(offsets, size: int = 10) -> list[QueuedMessage]:
    return [QueuedMessage(o, size, f"m{o}") for o in offsets]


def new_pq(**kw) -> ProcessQueue:
    return ProcessQueue(MessageQueue("T", "broker-a", 0), now_ms=T0, **kw)


# --- concurrent: putMessage / removeMessage ---------------------------------------------


def test_remove_returns_min_in_flight_then_max_plus_one() -> None:
    pq = new_pq()
    pq.put(entries(range(10, 15)))
    assert pq.remove_messages([12, 13], now_ms=T0 + 1) == 10
    assert pq.remove_messages([10], now_ms=T0 + 2) == 11
    assert pq.remove_messages([11], now_ms=T0 + 3) == 14
    assert pq.remove_messages([14], now_ms=T0 + 4) == 15  # empty now: queue_offset_max + 1
    assert pq.last_consume_timestamp == T0 + 4


def test_remove_on_empty_cache_returns_minus_one() -> None:
    pq = new_pq()
    assert pq.remove_messages([1, 2]) == -1  # nothing ever put
    pq.put(entries([5]))
    assert pq.remove_messages([5]) == 6
    assert pq.remove_messages([5]) == -1  # already empty before the call (Java: -1, not 6)


def test_remove_unknown_offsets_still_reports_the_head() -> None:
    pq = new_pq()
    pq.put(entries([3, 4]))
    assert pq.remove_messages([99]) == 3
    assert pq.msg_count == 2


def test_gaps_from_filtered_messages_commit_past_the_gap() -> None:
    pq = new_pq()
    pq.put(entries([100, 104, 109]))  # tag filtering dropped the others
    assert pq.remove_messages([100]) == 104
    assert pq.remove_messages([109, 104]) == 110


def test_counters_sizes_and_duplicates() -> None:
    pq = new_pq()
    assert pq.put([QueuedMessage(0, 100), QueuedMessage(1, 50)]) is True
    assert pq.put([QueuedMessage(1, 999), QueuedMessage(2, 7)]) is False  # 1 is a duplicate
    assert (pq.msg_count, pq.msg_size, pq.queue_offset_max) == (3, 157, 2)
    pq.remove_messages([1])
    assert (pq.msg_count, pq.msg_size) == (2, 107)
    pq.remove_messages([0, 2])
    assert (pq.msg_count, pq.msg_size) == (0, 0)
    assert pq.queue_offset_max == 2  # kept: the next commit after an empty cache is 3


def test_dispatch_flag_like_java_consuming() -> None:
    pq = new_pq()
    assert pq.put([]) is False  # nothing cached: no request needed
    assert pq.put(entries([0])) is True
    assert pq.put(entries([1])) is False  # a request is already pending
    assert pq.consuming
    pq.take_messages(10)
    assert pq.consuming  # took something, still consuming
    assert pq.take_messages(10) == []
    assert not pq.consuming
    assert pq.put(entries([2])) is True


def test_msg_acc_cnt_from_max_offset() -> None:
    pq = new_pq()
    pq.put(entries([0, 1, 2]), max_offset=50)
    assert pq.msg_acc_cnt == 48
    pq.put(entries([3]), max_offset=3)  # not positive: keeps the old value (Java)
    assert pq.msg_acc_cnt == 48
    msgs = [
        Message("T", b"abc", {"MAX_OFFSET": "100"}, queue_offset=10),
        Message("T", b"hello", {"MAX_OFFSET": "100"}, queue_offset=11),
    ]
    assert pq.put_messages(msgs) is False
    assert pq.msg_acc_cnt == 89
    assert pq.get(11).payload is msgs[1] and pq.get(11).size == 5
    assert pq.msg_size == 4 * 10 + 3 + 5


def test_max_span_and_bounds() -> None:
    pq = new_pq()
    assert pq.max_span() == 0 and pq.first_offset() is None
    pq.put(entries(range(0, 2001)))
    assert pq.max_span() == 2000
    pq.remove_messages(range(1, 2001))
    assert pq.max_span() == 0 and pq.first_offset() == pq.last_offset() == 0
    pq.remove_messages([0])
    pq.put(entries([5000]))
    assert pq.max_span() == 0


def test_out_of_order_put_keeps_order() -> None:
    pq = new_pq()
    pq.put(entries([10, 20, 30]))
    pq.put(entries([25, 5, 15]))
    assert pq.queue_offset_max == 30
    assert [e.offset for e in pq.take_messages(10)] == [5, 10, 15, 20, 25, 30]


def test_removed_offset_put_again_is_cached_once() -> None:
    pq = new_pq()
    pq.put(entries([1, 2, 3]))
    pq.remove_messages([2])
    pq.put(entries([2]))
    pq.put(entries([2]))
    assert [e.offset for e in pq.take_messages(10)] == [1, 2, 3]


def test_stale_offsets_stay_bounded_by_the_span() -> None:
    pq = new_pq()
    next_offset = 0
    for _ in range(200):  # head stuck at 0 while everything else completes
        batch = list(range(next_offset + 1, next_offset + 33))
        pq.put(entries(batch if next_offset else [0] + batch))
        next_offset = batch[-1]
        assert pq.remove_messages(batch) == 0
    span = pq.max_span()
    assert span == 0
    assert len(pq._tree._order) <= span + 1
    assert pq.remove_messages([0]) == next_offset + 1
    assert len(pq._tree._order) == 0


def test_clean_expired_returns_stuck_heads_only() -> None:
    pq = new_pq()
    pq.put(entries(range(40)))
    pq.mark_consume_started(range(20), now_ms=T0)
    pq.mark_consume_started(range(20, 40), now_ms=T0 + 10_000)
    timeout = 15 * 60 * 1000
    assert pq.clean_expired(timeout, now_ms=T0 + timeout) == []  # not strictly older yet
    expired = pq.clean_expired(timeout, now_ms=T0 + timeout + 1)
    assert [e.offset for e in expired] == list(range(16))  # at most 16 per pass
    pq.remove_messages([e.offset for e in expired])
    assert [e.offset for e in pq.clean_expired(timeout, now_ms=T0 + timeout + 1)] == [16, 17, 18, 19]
    # A head never dispatched stops the scan, like Java's missing CONSUME_START_TIME.
    pq2 = new_pq()
    pq2.put(entries([1, 2]))
    pq2.mark_consume_started([2], now_ms=T0)
    assert pq2.clean_expired(1, now_ms=T0 + 100) == []


def test_clean_expired_by_handler_call_begin_times_skips_waiting_and_finished_messages() -> None:
    """With the executor's call begin times, a message counts only once its call has begun.

    Hand-over stamps are ignored then: offsets 3..5 were handed over long ago but wait behind
    the stuck call on 2; 0 finished (its result waits for its batch), 1 is in a call within the
    limit, 2 is in a call past it.
    """
    pq = new_pq()
    pq.put(entries(range(6)))
    pq.mark_consume_started(range(6), now_ms=T0)
    timeout = 1_000
    now = T0 + 10_000
    calls: dict[int, int | None] = {0: None, 1: now - 10, 2: now - timeout - 1}
    # the head's call is over: passed over; 1 is within its limit: the scan stops there
    assert pq.clean_expired(timeout, now_ms=now, started_ms=calls) == []
    calls[1] = None
    assert [e.offset for e in pq.clean_expired(timeout, now_ms=now, started_ms=calls)] == [2]
    pq.remove_messages([2])
    # 3..5 have not begun (absent): never swept, however old their hand-over stamp
    assert pq.clean_expired(timeout, now_ms=now, started_ms=calls) == []
    assert pq.clean_expired(timeout, now_ms=now, started_ms={}) == []
    # without the executor's word, the hand-over stamps count (an in-process executor)
    assert [e.offset for e in pq.clean_expired(timeout, now_ms=now)] == [0, 1, 3, 4, 5]


# --- orderly: takeMessages / commit / rollback --------------------------------------------


def test_orderly_take_commit() -> None:
    pq = new_pq()
    pq.put(entries(range(5)))
    taken = pq.take_messages(3, now_ms=T0 + 5)
    assert [e.offset for e in taken] == [0, 1, 2]
    assert pq.has_consuming() and pq.msg_count == 5 and pq.last_consume_timestamp == T0 + 5
    assert pq.commit() == 3
    assert not pq.has_consuming() and pq.msg_count == 2 and pq.msg_size == 20
    assert pq.commit() == -1  # nothing taken


def test_orderly_rollback_and_consume_again() -> None:
    pq = new_pq()
    pq.put(entries(range(6)))
    pq.take_messages(2)
    pq.rollback()
    assert not pq.has_consuming()
    assert [e.offset for e in pq.take_messages(4)] == [0, 1, 2, 3]
    pq.make_messages_to_consume_again([2, 3, 1, 0, 77])
    assert not pq.has_consuming() and pq.msg_count == 6
    assert [e.offset for e in pq.take_messages(1)] == [0]
    assert pq.commit() == 1


def test_lock_and_pull_expiry_boundaries() -> None:
    pq = new_pq()
    assert not pq.is_lock_expired(T0 + REBALANCE_LOCK_MAX_LIVE_TIME_MS)
    assert pq.is_lock_expired(T0 + REBALANCE_LOCK_MAX_LIVE_TIME_MS + 1)
    assert not pq.is_pull_expired(T0 + PULL_MAX_IDLE_TIME_MS)
    assert pq.is_pull_expired(T0 + PULL_MAX_IDLE_TIME_MS + 1)
    pq.last_lock_timestamp = T0 + 20_000
    assert not pq.is_lock_expired(T0 + 40_000)
    short = new_pq(lock_max_live_ms=5, pull_max_idle_ms=7)
    assert short.is_lock_expired(T0 + 6) and not short.is_pull_expired(T0 + 7)
    assert not pq.dropped and not pq.locked  # Java defaults; rebalance sets them


def test_unlock_delay_and_try_unlock_times() -> None:
    pq = new_pq()
    assert pq.unlock_delay_ms() == 0
    pq.put(entries([1]))
    assert pq.unlock_delay_ms() == UNLOCK_DELAY_TIME_MS
    pq.inc_try_unlock_times()
    pq.inc_try_unlock_times()
    assert pq.try_unlock_times == 2


def test_clear_and_info() -> None:
    pq = new_pq()
    pq.put([QueuedMessage(o, 1024 * 1024) for o in range(3, 8)])
    pq.take_messages(2)
    pq.locked = True
    info = pq.info(commit_offset=3)
    assert list(info) == sorted(info)  # fastjson order
    assert info["cachedMsgCount"] == 3 and info["cachedMsgMinOffset"] == 5 and info["cachedMsgMaxOffset"] == 7
    assert info["transactionMsgCount"] == 2 and info["transactionMsgMinOffset"] == 3
    assert info["transactionMsgMaxOffset"] == 4 and info["cachedMsgSizeInMiB"] == 5
    assert info["locked"] is True and info["droped"] is False and info["commitOffset"] == 3
    pq.clear()
    assert pq.msg_count == 0 and pq.msg_size == 0 and pq.queue_offset_max == 0
    assert pq.remove_messages([1]) == -1


def test_wall_clock_default() -> None:
    before = int(time.time() * 1000)
    pq = ProcessQueue()
    assert before <= pq.last_pull_timestamp <= int(time.time() * 1000)
    assert not pq.is_pull_expired() and not pq.is_lock_expired()


# --- properties ---------------------------------------------------------------------------


@st.composite
def batches_and_completion_order(draw):
    """Ascending batches with random gaps, and a random order of completions."""
    offsets: list[int] = []
    batches: list[list[int]] = []
    nxt = draw(st.integers(0, 1000))
    for _ in range(draw(st.integers(1, 6))):
        batch = []
        for _ in range(draw(st.integers(1, 12))):
            nxt += draw(st.integers(1, 3))
            batch.append(nxt)
        batches.append(batch)
        offsets += batch
    order = draw(st.permutations(offsets))
    return batches, order


@settings(max_examples=300, deadline=None)
@given(data=batches_and_completion_order(), chunk=st.integers(1, 5))
def test_random_completion_never_commits_past_unfinished(data, chunk: int) -> None:
    batches, order = data
    pq = new_pq()
    for batch in batches:
        pq.put(entries(batch))
    all_offsets = sorted(o for b in batches for o in b)
    done: set[int] = set()
    committed = -1
    for i in range(0, len(order), chunk):
        finished = order[i : i + chunk]
        done.update(finished)
        result = pq.remove_messages(finished)
        assert result >= 0
        unfinished = [o for o in all_offsets if o not in done]
        assert result == (unfinished[0] if unfinished else all_offsets[-1] + 1)
        assert all(o in done for o in all_offsets if o < result)
        committed = max(committed, result)  # what increase-only storage keeps
        assert committed == result  # here results are monotone on their own
    assert committed == all_offsets[-1] + 1


class ConcurrentModel(RuleBasedStateMachine):
    """Interleaved pulls and completions against a plain sorted-set model."""

    def __init__(self) -> None:
        super().__init__()
        self.pq = new_pq()
        self.model: dict[int, int] = {}
        self.next_offset = 0
        self.top = 0
        self.last_commit = -1

    @rule(n=st.integers(1, 8), gap=st.integers(0, 3), size=st.integers(0, 100))
    def pull(self, n: int, gap: int, size: int) -> None:
        batch = []
        for _ in range(n):
            self.next_offset += gap + 1
            batch.append(QueuedMessage(self.next_offset, size))
            self.model[self.next_offset] = size
        self.top = self.next_offset
        self.pq.put(batch)

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def complete(self, data) -> None:
        keys = sorted(self.model)
        chosen = data.draw(st.lists(st.sampled_from(keys), max_size=6, unique=True))
        for k in chosen:
            del self.model[k]
        result = self.pq.remove_messages(chosen)
        expected = min(self.model) if self.model else self.top + 1
        assert result == expected
        assert result >= self.last_commit  # monotone
        self.last_commit = result

    @invariant()
    def agrees_with_model(self) -> None:
        pq = self.pq
        assert pq.msg_count == len(self.model)
        assert pq.msg_size == sum(self.model.values())
        if self.model:
            assert pq.first_offset() == min(self.model)
            assert pq.last_offset() == max(self.model)
            assert pq.max_span() == max(self.model) - min(self.model)
        else:
            assert pq.max_span() == 0 and pq.first_offset() is None


TestConcurrentModel = ConcurrentModel.TestCase
TestConcurrentModel.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)


class OrderlyModel(RuleBasedStateMachine):
    """take / commit / rollback / consume-again keep the queue's order: no gaps, no overlaps."""

    def __init__(self) -> None:
        super().__init__()
        self.pq = new_pq()
        self.put_order: list[int] = []
        self.committed: list[int] = []
        self.taken: list[int] = []
        self.next_offset = 0
        self.next_commit = -1

    @rule(n=st.integers(1, 6), gap=st.integers(0, 2))
    def pull(self, n: int, gap: int) -> None:
        batch = []
        for _ in range(n):
            self.next_offset += gap + 1
            batch.append(self.next_offset)
        self.put_order += batch
        self.pq.put(entries(batch))

    @precondition(lambda self: not self.taken)
    @rule(k=st.integers(1, 5))
    def take(self, k: int) -> None:
        got = [e.offset for e in self.pq.take_messages(k)]
        pending = [o for o in self.put_order if o not in self.committed]
        assert got == pending[: len(got)]  # always the head, in order
        assert len(got) == min(k, len(pending))
        self.taken = got

    @precondition(lambda self: self.taken)
    @rule()
    def commit(self) -> None:
        result = self.pq.commit()
        assert result == self.taken[-1] + 1
        assert result > self.next_commit
        self.next_commit = result
        self.committed += self.taken
        self.taken = []

    @precondition(lambda self: self.taken)
    @rule()
    def rollback(self) -> None:
        self.pq.rollback()
        self.taken = []

    @precondition(lambda self: self.taken)
    @rule()
    def suspend(self) -> None:
        self.pq.make_messages_to_consume_again(self.taken)
        self.taken = []

    @invariant()
    def no_gaps_no_overlaps(self) -> None:
        assert self.committed == self.put_order[: len(self.committed)]
        assert self.pq.msg_count == len(self.put_order) - len(self.committed)
        assert self.pq.has_consuming() == bool(self.taken)


TestOrderlyModel = OrderlyModel.TestCase
TestOrderlyModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
