"""Orderly queues take a pull whole (:meth:`ProcessQueue.take_run`) when a job is exactly that pull.

The taken set then holds runs beside single entries. Driven by hypothesis, a queue fed and taken the
orderly service's way (pulls cached as runs, a job taken whole when it can be) must answer every question
exactly as a queue fed message by message and taken with :meth:`ProcessQueue.take_messages`: what a take
returns, in which order and with which payloads (a reconsume count written on an entry of a failed job is
what the queue hands out next), what commit / commit_through return, what is put back or rolled back, the
counts and size flow control reads, the running info, the oldest-unfinished look.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage, QueuedRun
from rmqrun.model import MessageQueue

MQ = MessageQueue("T", "broker-a", 0)
T0 = 1_700_000_000_000


def run_of(offsets: list[int]) -> QueuedRun:
    return QueuedRun(list(offsets), [10 + o % 3 for o in offsets], [b"r%d" % o for o in offsets])


def take_like_the_service(pq: ProcessQueue, size: int) -> tuple[list[int], list[Any], Any]:
    """(offsets, payloads, what the service keeps) of a job, as OrderlyConsumeService._fill takes it."""
    run = pq.take_run(size, now_ms=T0)
    if run is not None:
        return list(run.offsets), list(run.payloads), run
    entries = pq.take_messages(size, now_ms=T0)
    return [e.offset for e in entries], [e.payload for e in entries], entries


def entries_of(pq: ProcessQueue, kept: Any) -> list[QueuedMessage]:
    return pq.taken_entries(kept) if isinstance(kept, QueuedRun) else kept


def answers(pq: ProcessQueue) -> tuple[Any, ...]:
    info = pq.info(commit_offset=7)
    for key in ("lastConsumeTimestamp", "lastLockTimestamp", "lastPullTimestamp"):
        info.pop(key)
    taken = info["transactionMsgMinOffset"] if pq.has_consuming() else None
    look = pq.get_taken(taken) if taken is not None else None
    return (pq.msg_count, pq.cached_count, pq.msg_size, pq.has_consuming(), pq.has_temp_messages(),
            pq.first_offset(), pq.last_offset(), pq.max_span(), pq.consuming, info,
            None if look is None else (look.offset, look.size, look.payload))


@settings(max_examples=400, deadline=None)
@given(data=st.data())
def test_taking_whole_pulls_answers_like_taking_message_by_message(data: st.DataObject) -> None:
    fast = ProcessQueue(MQ, now_ms=T0)  # the orderly service's way
    slow = ProcessQueue(MQ, now_ms=T0)  # message by message
    jobs: list[tuple[list[int], Any, Any]] = []  # taken and not settled: offsets, fast's, slow's
    next_offset = 0
    for _ in range(data.draw(st.integers(1, 40), label="steps")):
        action = data.draw(st.sampled_from(["pull", "pull", "take", "take", "commit_through", "commit_mid", "commit",
                                            "fail", "put_back", "rollback", "clear"]), label="action")
        if action == "pull":
            batch = []
            for _ in range(data.draw(st.integers(1, 5), label="n")):
                next_offset += data.draw(st.integers(1, 2), label="gap")
                batch.append(next_offset)
            assert fast.put_run(run_of(batch), max_offset=next_offset + 9) == \
                slow.put(run_of(batch).entries(), max_offset=next_offset + 9)
            next_offset += data.draw(st.integers(0, 2), label="filtered tail")
            fast.note_pulled_to(next_offset + 1)
            slow.note_pulled_to(next_offset + 1)
        elif action == "take":
            size = data.draw(st.integers(1, 8), label="size")
            offsets, payloads, kept = take_like_the_service(fast, size)
            expected = slow.take_messages(size, now_ms=T0)
            assert offsets == [e.offset for e in expected]
            assert payloads == [e.payload for e in expected]
            if offsets:
                jobs.append((offsets, kept, expected))
        elif action == "commit_through" and jobs:
            offsets, _, _ = jobs.pop(0)  # the oldest job succeeded in full
            assert fast.commit_through(offsets[-1]) == slow.commit_through(offsets[-1])
        elif action == "commit_mid" and jobs:
            # an offset inside what is taken (a pull split across it): both finish exactly what lies at or below
            o = data.draw(st.sampled_from([o for offsets, _, _ in jobs for o in offsets]), label="through")
            assert fast.commit_through(o) == slow.commit_through(o)
            jobs = [job for job in jobs if job[0][-1] > o]
        elif action == "commit":
            assert fast.commit() == slow.commit()
            jobs.clear()
        elif action == "fail" and jobs:
            # the oldest job failed part-way: the jobs behind it come back, then its rest goes back
            # first in line with its reconsume count raised on the queue's own entries
            offsets, kept, expected = jobs[0]
            for behind in jobs[1:]:
                fast.make_messages_to_consume_again(behind[0])
                slow.make_messages_to_consume_again(behind[0])
            cut = data.draw(st.integers(0, len(offsets) - 1), label="first bad")
            for pq, entries in ((fast, entries_of(fast, kept)), (slow, expected)):
                assert [e.offset for e in entries] == offsets
                for e in entries[cut:]:
                    e.payload = e.payload + b"+"
                pq.make_messages_to_consume_again([e.offset for e in entries[cut:]])
            assert fast.commit() == slow.commit()
            jobs.clear()
        elif action == "put_back" and jobs:
            offsets, _, _ = jobs.pop()  # the newest job was not run (its queue lost the lock)
            fast.make_messages_to_consume_again(offsets)
            slow.make_messages_to_consume_again(offsets)
        elif action == "rollback":
            fast.rollback()
            slow.rollback()
            jobs.clear()
        elif action == "clear":
            fast.clear()
            slow.clear()
            jobs.clear()
            next_offset += 1
        assert answers(fast) == answers(slow)
        assert fast.msg_size == sum(10 + o % 3 for o in range(next_offset + 1) if o in fast or _taken(fast, o))


def _taken(pq: ProcessQueue, offset: int) -> bool:
    return pq.get_taken(offset) is not None


def test_a_job_of_exactly_one_pull_takes_it_whole_and_commits_it_in_one_step() -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    a, b = run_of([0, 1, 2]), run_of([3, 4, 6])
    pq.put_run(a)
    pq.put_run(b)
    pq.note_pulled_to(9)
    assert pq.take_run(2, now_ms=T0) is None  # a job of 2 is not the first pull: message by message
    assert pq.take_run(3, now_ms=T0) is a
    assert pq.take_run(3, now_ms=T0) is b  # pipelined behind it
    assert (pq.msg_count, pq.cached_count, pq.has_consuming()) == (6, 0, True)
    assert pq.commit_through(2) == 3
    assert pq.msg_count == 3 and pq.msg_size == sum(b.sizes)
    assert pq.commit_through(6) == 9  # everything done: past the filtered tail
    assert (pq.msg_count, pq.msg_size, pq.has_consuming()) == (0, 0, False)


def test_a_failed_whole_pull_gives_the_queue_its_own_entries_back_first_in_line() -> None:
    pq = ProcessQueue(MQ, now_ms=T0)
    a = run_of([0, 1, 2])
    pq.put_run(a)
    assert pq.take_run(32, now_ms=T0) is a  # the whole cache, shorter than the job size
    entries = pq.taken_entries(a)
    assert pq.taken_entries(a) is entries  # the same entries every time
    entries[1].payload = b"reconsumed"
    pq.make_messages_to_consume_again([1, 2])
    assert pq.commit() == 1
    again = pq.take_messages(32, now_ms=T0)
    assert again == entries[1:] and again[0].payload == b"reconsumed"
