"""ProcessQueue.note_pulled_to: a drained cache commits past records the tag filter dropped."""

from __future__ import annotations

from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage


def entries(offsets: list[int]) -> list[QueuedMessage]:
    return [QueuedMessage(o, 1) for o in offsets]


def test_concurrent_drain_commits_the_last_pulls_next_begin_offset() -> None:
    pq = ProcessQueue()
    pq.put(entries([3, 5]))
    pq.note_pulled_to(9)          # 6, 7, 8 were filtered out by tag
    assert pq.remove_messages([5]) == 3  # 3 is still cached: it holds the commit
    assert pq.remove_messages([3]) == 9


def test_without_a_pull_offset_or_below_the_cache_the_rule_is_javas() -> None:
    pq = ProcessQueue()
    pq.put(entries([3, 5]))
    assert pq.remove_messages([3, 5]) == 6
    pq = ProcessQueue()
    pq.put(entries([3, 5]))
    pq.note_pulled_to(4)          # stale: never below the highest cached offset + 1
    assert pq.remove_messages([3, 5]) == 6


def test_orderly_commit_reaches_the_tail_only_when_nothing_is_cached() -> None:
    pq = ProcessQueue()
    pq.put(entries([1, 2, 4]))
    pq.note_pulled_to(7)
    pq.take_messages(2)
    assert pq.commit() == 3       # 4 is still cached
    pq.take_messages(1)
    assert pq.commit() == 7       # drained: 5 and 6 were filtered out
    pq.clear()
    assert pq.pulled_to == -1
