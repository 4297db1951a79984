"""The process queue's run tier: whole pulls cached as one unit keep every rule of the per-message cache.

A model (a plain dict of what is cached) is driven beside a real ProcessQueue by hypothesis: pulls put as
runs or message by message, whole runs removed, single offsets removed (a partial result), runs split, the
sweep's walk, an orderly take/rollback, a clear. After every step the queue's answers must equal the
model's: the offset to commit (the smallest cached, else how far everything is done), the counts and size
flow control reads, min/max/span, membership and ``get``.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage, QueuedRun
from rmqrun.model import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)
T0 = 1_700_000_000_000


def run_of(offsets: list[int], size: int = 10) -> QueuedRun:
    return QueuedRun(list(offsets), [size + o % 3 for o in offsets], [b"r%d" % o for o in offsets])


def test_a_run_is_cached_and_forgotten_whole_and_commits_the_smallest_left() -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    a, b = run_of([0, 1, 2]), run_of([3, 5, 6])
    assert pq.put_run(a, max_offset=20) is True  # a consume request is needed
    assert pq.put_run(b) is False
    assert (pq.msg_count, pq.cached_count, pq.msg_size) == (6, 6, a.size + b.size)
    assert pq.msg_acc_cnt == 18 and pq.queue_offset_max == 6
    assert (pq.first_offset(), pq.last_offset(), pq.max_span()) == (0, 6, 6)
    assert 5 in pq and 4 not in pq
    got = pq.get(5)
    assert got is not None and (got.offset, got.payload) == (5, b"r5")
    assert pq.remove_run(b, T0) == 0  # the older run still holds the commit
    assert pq.remove_run(a, T0) == 7  # nothing left: the top + 1
    assert (pq.msg_count, pq.msg_size) == (0, 0)
    assert not a.intact and not b.intact
    info = pq.info()
    assert info["cachedMsgCount"] == 0 and info["cachedMsgMinOffset"] == 0


def test_a_partial_result_splits_the_run_and_settles_message_by_message() -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    a, b = run_of([10, 11, 12, 13]), run_of([14, 15])
    pq.put_run(a)
    pq.put_run(b)
    entries = pq.split_run(a)
    assert [e.offset for e in entries] == [10, 11, 12, 13] and pq.split_run(a) is entries
    assert pq.msg_count == 6 and pq.get(11) is entries[1]
    assert pq.remove_messages([10, 12, 13], T0) == 11  # 11 failed and stays: the commit waits for it
    assert pq.remove_run(b, T0) == 11
    assert pq.remove_messages([11], T0) == 16
    assert pq.msg_count == 0 and pq.msg_size == 0


def test_removing_an_offset_inside_an_intact_run_splits_it_first() -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    a = run_of([0, 1, 2])
    pq.put_run(a)
    assert pq.remove_messages([1], T0) == 0
    assert not a.intact and pq.msg_count == 2
    assert pq.remove_run(a, T0) == 3  # the rest of the run, the one already gone ignored


def test_a_run_that_does_not_fit_is_cached_message_by_message() -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    pq.put([QueuedMessage(5, 10), QueuedMessage(6, 10)])
    late = run_of([3, 4, 5])  # below what is cached, and 5 is cached already
    pq.put_run(late)
    assert not late.intact and pq.msg_count == 4 and pq.first_offset() == 3
    assert pq.remove_run(late, T0) == 6
    odd = run_of([9, 8])  # not ascending
    pq.put_run(odd)
    assert not odd.intact and pq.msg_count == 3 and pq.first_offset() == 6


def test_sweep_stamps_and_take_see_the_runs_messages() -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    a = run_of([0, 1])
    pq.put_run(a)
    pq.mark_run_started(a, T0)
    expired = pq.clean_expired(1000, now_ms=T0 + 5000)
    assert [e.offset for e in expired] == [0, 1] and not a.intact
    assert pq.remove_messages([0], T0) == 1
    b = run_of([2, 3])
    pq.put_run(b)
    taken = pq.take_messages(8, T0)
    assert [e.offset for e in taken] == [1, 2, 3] and pq.cached_count == 0 and pq.msg_count == 3
    pq.rollback()
    assert pq.first_offset() == 1 and pq.cached_count == 3


def test_clear_leaves_nothing_for_a_late_result() -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    a = run_of([0, 1, 2])
    pq.put_run(a)
    pq.clear()
    assert pq.msg_count == 0 and pq.msg_size == 0 and not a.intact
    assert pq.remove_run(a, T0) == -1  # nothing cached: nothing to say
    assert pq.msg_count == 0 and pq.msg_size == 0


def test_a_run_needs_one_size_and_payload_per_offset() -> None:
    with pytest.raises(ValueError, match="one size and one payload per offset: 2 offsets, 1 sizes"):
        QueuedRun([1, 2], [10], [b"a", b"b"])


class Model:
    """What is cached, by offset, and the rules the queue must follow."""

    def __init__(self) -> None:
        self.cached: dict[int, int] = {}
        self.top = 0
        self.pulled_to = -1

    def commit_after_remove(self, was_empty: bool) -> int:
        if was_empty:
            return -1
        if self.cached:
            return min(self.cached)
        return max(self.top + 1, self.pulled_to)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_runs_and_single_messages_answer_like_one_cache(data: st.DataObject) -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    model = Model()
    runs: list[QueuedRun] = []
    next_offset = 0
    for _ in range(data.draw(st.integers(1, 40), label="steps")):
        action = data.draw(st.sampled_from(["pull", "pull", "remove_run", "remove_some", "split", "sweep",
                                            "get", "clear"]), label="action")
        if action == "pull":
            batch = []
            for _ in range(data.draw(st.integers(1, 5), label="n")):
                next_offset += data.draw(st.integers(1, 3), label="gap")
                batch.append(next_offset)
            run = run_of(batch)
            if data.draw(st.booleans(), label="as run"):
                pq.put_run(run)
            else:
                run.split = run.entries()
                pq.put(run.split)
            runs.append(run)
            for o, size in zip(run.offsets, run.sizes):
                model.cached[o] = size
            model.top = max(model.top, batch[-1])
            next_offset += data.draw(st.integers(0, 2), label="filtered tail")
            pq.note_pulled_to(next_offset + 1)
            model.pulled_to = next_offset + 1
        elif action == "remove_run" and runs:
            run = runs.pop(data.draw(st.integers(0, len(runs) - 1), label="which run"))
            was_empty = not model.cached
            for o in run.offsets:
                model.cached.pop(o, None)
            assert pq.remove_run(run, T0) == model.commit_after_remove(was_empty)
        elif action == "remove_some" and model.cached:
            some = data.draw(st.lists(st.sampled_from(sorted(model.cached)), max_size=4), label="offsets")
            some.append(next_offset + 50)  # never cached: ignored
            for o in some:
                model.cached.pop(o, None)
            assert pq.remove_messages(some, T0) == model.commit_after_remove(False)
        elif action == "split" and runs:
            run = runs[data.draw(st.integers(0, len(runs) - 1), label="which run")]
            entries = pq.split_run(run)
            assert [e.offset for e in entries] == run.offsets
        elif action == "sweep":
            pq.clean_expired(60_000, now_ms=T0)  # nothing is stamped: nothing expires, but the walk happens
        elif action == "get" and model.cached:
            o = data.draw(st.sampled_from(sorted(model.cached)), label="offset")
            got = pq.get(o)
            assert got is not None and got.offset == o and got.size == model.cached[o] and got.payload == b"r%d" % o
        elif action == "clear":
            pq.clear()
            model = Model()
            runs.clear()
            next_offset += 1
        # the answers flow control, the commit rule and the status read
        assert pq.msg_count == pq.cached_count == len(model.cached)
        assert pq.msg_size == sum(model.cached.values())
        assert pq.first_offset() == (min(model.cached) if model.cached else None)
        assert pq.last_offset() == (max(model.cached) if model.cached else None)
        assert pq.max_span() == (max(model.cached) - min(model.cached) if model.cached else 0)
        assert pq.has_temp_messages() == bool(model.cached)
        for o in range(max(0, next_offset - 8), next_offset + 1):
            assert (o in pq) == (o in model.cached)
