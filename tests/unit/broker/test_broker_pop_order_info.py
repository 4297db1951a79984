"""Orderly POP's per-queue state: blocking, redelivery counts, commit-and-next, change-invisible, persistence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rmqrun.broker.pop.order_info import (
    IDLE_EXPIRY_MS,
    Commit,
    CommitStatus,
    OrderInfoTable,
)
from rmqrun.protocol.pop import encode_order_count_info, parse_order_count_info

T, G = "T", "G"
POP = 1_000_000
INV = 60_000


def popped(table: OrderInfoTable, offsets: list[int], *, attempt: str | None = "a1", pop_time: int = POP,
           queue_id: int = 0, topic: str = T) -> dict:
    return table.update(topic, G, queue_id, attempt_id=attempt, pop_time=pop_time, invisible_time=INV,
                        offsets=offsets, now=pop_time)


def test_an_unknown_queue_is_not_blocked() -> None:
    assert not OrderInfoTable().check_block(T, G, 0, "x", INV, now=POP)


def test_blocked_while_unacked_and_invisible_then_free_when_visible() -> None:
    table = OrderInfoTable()
    popped(table, [5, 6, 7])
    assert table.check_block(T, G, 0, "other", INV, now=POP)
    assert table.check_block(T, G, 0, None, INV, now=POP + INV - 1)
    assert not table.check_block(T, G, 0, "other", INV, now=POP + INV)  # visible again: poppable
    assert not table.check_block(T, G, 1, "other", INV, now=POP)  # another queue is its own


def test_the_same_attempt_may_pop_again_but_not_an_anonymous_one() -> None:
    table = OrderInfoTable()
    popped(table, [5], attempt="a1")
    assert not table.check_block(T, G, 0, "a1", INV, now=POP + 1)
    assert table.check_block(T, G, 0, None, INV, now=POP + 1)
    popped(table, [5], attempt=None)
    assert table.check_block(T, G, 0, None, INV, now=POP + 1)  # None never matches None


def test_acks_unblock_only_when_every_offset_is_acked() -> None:
    table = OrderInfoTable()
    popped(table, [5, 6, 7])
    assert table.commit_and_next(T, G, 0, 6, POP) == Commit(CommitStatus.COMMIT, 5)  # 5 still out: stay at 5
    assert table.check_block(T, G, 0, "b", INV, now=POP + 1)
    assert table.commit_and_next(T, G, 0, 5, POP) == Commit(CommitStatus.COMMIT, 7)
    assert table.check_block(T, G, 0, "b", INV, now=POP + 1)
    assert table.commit_and_next(T, G, 0, 7, POP) == Commit(CommitStatus.COMMIT, 8)  # all acked: past the batch
    assert not table.check_block(T, G, 0, "b", INV, now=POP + 1)
    assert table.commit_and_next(T, G, 0, 7, POP) == Commit(CommitStatus.COMMIT, 8)  # a repeated ack is harmless


def test_commit_refusals() -> None:
    table = OrderInfoTable()
    assert table.commit_and_next(T, G, 0, 9, POP) == Commit(CommitStatus.COMMIT, 10)  # nothing recorded
    popped(table, [5, 7])
    assert table.commit_and_next(T, G, 0, 6, POP).status is CommitStatus.ILLEGAL  # not in the batch
    assert table.commit_and_next(T, G, 0, 5, POP - 1).status is CommitStatus.STALE  # an older pop's ack
    assert table.check_block(T, G, 0, "b", INV, now=POP + 1)  # neither acked anything
    assert table.get(T, G, 0).acked == set()  # type: ignore[union-attr]


def test_redelivery_counts_grow_per_new_attempt_and_not_per_retry() -> None:
    table = OrderInfoTable()
    first = popped(table, [5, 6])
    assert first == {("0", 0, None): 0}
    # The batch came back (not acked): popped again by a new attempt, each offset counts one delivery before.
    again = popped(table, [5, 6], attempt="a2", pop_time=POP + INV)
    assert again == {("0", 0, 5): 1, ("0", 0, 6): 1, ("0", 0, None): 1}
    # The same request retried (same attempt id): the counts stay.
    assert popped(table, [5, 6], attempt="a2", pop_time=POP + INV + 5) == again
    third = popped(table, [5, 6, 7], attempt="a3", pop_time=POP + 2 * INV)
    # 7 is new: the per-queue entry (what older clients read) is the smallest count, 0.
    assert third == {("0", 0, 5): 2, ("0", 0, 6): 2, ("0", 0, None): 0}
    # Offset 5 acked meanwhile: the next batch starts at 6 and 5's count is gone.
    table.commit_and_next(T, G, 0, 5, POP + 2 * INV)
    fourth = popped(table, [6, 7], attempt="a4", pop_time=POP + 3 * INV)
    assert fourth == {("0", 0, 6): 3, ("0", 0, 7): 1, ("0", 0, None): 1}
    # What the POP response carries, read back as the client reads it.
    assert parse_order_count_info(encode_order_count_info(fourth)) == fourth


def test_counts_use_the_retry_flag_of_the_popped_topic() -> None:
    table = OrderInfoTable()
    got = popped(table, [0], topic="%RETRY%G_T")
    assert got == {("1", 0, None): 0}


def test_change_invisible_time_moves_one_offset() -> None:
    table = OrderInfoTable()
    popped(table, [5, 6])
    assert table.update_next_visible_time(T, G, 0, 5, POP, POP + 10)
    table.commit_and_next(T, G, 0, 6, POP)
    # 5 is visible at POP + 10 now, 6 is acked: free long before POP + INV.
    assert table.check_block(T, G, 0, "b", INV, now=POP + 9)
    assert not table.check_block(T, G, 0, "b", INV, now=POP + 10)
    # Extended instead: blocked past the original invisible time.
    assert table.update_next_visible_time(T, G, 0, 5, POP, POP + 3 * INV)
    assert table.check_block(T, G, 0, "b", INV, now=POP + 2 * INV)
    assert table.unblock_at(T, G, 0, now=POP + 1) == POP + 3 * INV
    # Refused: another pop's receipt, an offset not popped, an unknown queue.
    assert not table.update_next_visible_time(T, G, 0, 5, POP - 1, POP)
    assert not table.update_next_visible_time(T, G, 0, 8, POP, POP)
    assert not table.update_next_visible_time(T, G, 3, 5, POP, POP)
    assert table.get(T, G, 0).visible_at(5) == POP + 3 * INV  # type: ignore[union-attr]


def test_unblock_at_is_the_latest_outstanding_visibility() -> None:
    table = OrderInfoTable()
    assert table.unblock_at(T, G, 0, now=POP) is None
    popped(table, [5, 6])
    table.update_next_visible_time(T, G, 0, 6, POP, POP + 2 * INV)
    assert table.unblock_at(T, G, 0, now=POP) == POP + 2 * INV
    table.commit_and_next(T, G, 0, 6, POP)
    assert table.unblock_at(T, G, 0, now=POP) == POP + INV
    assert table.unblock_at(T, G, 0, now=POP + INV) is None


def test_clear_block_and_clean() -> None:
    table = OrderInfoTable()
    popped(table, [5])
    popped(table, [1], queue_id=1)
    popped(table, [1], queue_id=2, pop_time=POP + IDLE_EXPIRY_MS)
    table.clear_block(T, G, 0)
    assert not table.check_block(T, G, 0, "b", INV, now=POP)
    # queue 1 is idle for a day; queue 2 is recent but its queue was removed from the topic
    dropped = table.clean(lambda t, g, q: q != 2, now=POP + IDLE_EXPIRY_MS + 1)
    assert dropped == 2 and list(table.keys()) == []


def test_update_needs_offsets() -> None:
    with pytest.raises(ValueError):
        popped(OrderInfoTable(), [])


def test_the_state_survives_a_restart(tmp_path: Path) -> None:
    table = OrderInfoTable.in_data_dir(tmp_path)
    assert not table.flush()  # nothing changed: nothing written
    popped(table, [5, 6, 9], attempt="a1")
    popped(table, [5, 6, 9], attempt="a2", pop_time=POP + 1)
    table.commit_and_next(T, G, 0, 6, POP + 1)
    table.update_next_visible_time(T, G, 0, 9, POP + 1, POP + 5 * INV)
    assert table.flush() and not table.flush()
    on_disk = json.loads((tmp_path / "config" / "consumerOrderInfo.json").read_text())
    entry = on_disk["table"]["T@G"]["0"]
    assert entry["o"] == [5, 1, 4] and entry["cm"] == 0b010 and entry["a"] == "a2"  # Java's layout

    again = OrderInfoTable.in_data_dir(tmp_path)
    again.load()
    assert again.problem is None
    assert again.get(T, G, 0) == table.get(T, G, 0)
    assert again.check_block(T, G, 0, "b", INV, now=POP + 4 * INV)  # 9 is still invisible after the restart
    assert again.commit_and_next(T, G, 0, 5, POP + 1) == Commit(CommitStatus.COMMIT, 9)
    assert popped(again, [9], attempt="a3", pop_time=POP + 6 * INV) == {("0", 0, 9): 2, ("0", 0, None): 2}


def test_a_corrupt_file_is_reported_and_moved_aside(tmp_path: Path) -> None:
    path = tmp_path / "config" / "consumerOrderInfo.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"table": {"no-separator": {"0": {}}}}')
    table = OrderInfoTable(path)
    table.load()
    assert table.problem and "corrupt" in table.problem
    assert list(table.keys()) == []
    assert path.with_name(path.name + ".corrupt").exists()
