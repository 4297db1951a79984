"""The broker's QUERY_ASSIGNMENT allocation (AVG, AVG_BY_CIRCLE, allocate4Pop) and its request-mode table."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from rmqrun.broker.queue_allocation import (
    STRATEGIES,
    allocate_averagely,
    allocate_by_circle,
    allocate_for_pop,
)
from rmqrun.broker.request_modes import RequestModeTable
from rmqrun.consumer.allocate import AllocateAveragely, AllocateAveragelyByCircle
from rmqrun.model import MessageQueue
from rmqrun.protocol import allocation
from rmqrun.protocol.assignment import MessageRequestMode, SetMessageRequestModeRequestBody


def mqs(n: int, broker: str = "b") -> list[MessageQueue]:
    return [MessageQueue("T", broker, i) for i in range(n)]


def cids(n: int) -> list[str]:
    return [f"c{i}" for i in range(n)]


@pytest.mark.parametrize("n_mq,n_cid", list(itertools.product([1, 2, 3, 4, 5, 8, 9], [1, 2, 3, 4, 6, 10])))
def test_broker_strategies_agree_with_the_clients(n_mq: int, n_cid: int) -> None:
    # A client computing its share itself and a broker computing it for the client must agree: both run
    # rmqrun/protocol/allocation.py (the client's classes add Java's argument checks around it).
    assert STRATEGIES is allocation.STRATEGIES
    queues, clients = mqs(n_mq), cids(n_cid)
    for cid in clients:
        assert allocate_averagely(cid, queues, clients) == AllocateAveragely().allocate("G", cid, queues, clients)
        assert allocate_by_circle(cid, queues, clients) == \
            AllocateAveragelyByCircle().allocate("G", cid, queues, clients)


def test_avg_by_hand() -> None:
    # 5 queues, 2 clients: the first gets the extra one; inputs are sorted first.
    clients = ["z", "a"]
    assert [q.queue_id for q in allocate_averagely("a", list(reversed(mqs(5))), clients)] == [0, 1, 2]
    assert [q.queue_id for q in allocate_averagely("z", mqs(5), clients)] == [3, 4]
    assert allocate_averagely("stranger", mqs(5), clients) == []
    assert [q.queue_id for q in allocate_by_circle("z", mqs(5), clients)] == [1, 3]
    assert set(STRATEGIES) == {"AVG", "AVG_BY_CIRCLE"}


@pytest.mark.parametrize("share", [0, -1, 3, 10])
def test_pop_share_none_or_large_gives_every_client_all_queues(share: int) -> None:
    # 4 clients: share >= clients - 1 (3) is the same as "everyone pops everything".
    queues = mqs(4, "b1") + mqs(2, "b2")
    for cid in cids(4):
        assert allocate_for_pop(allocate_averagely, cid, queues, cids(4), share) == [
            MessageQueue("T", "b1", -1), MessageQueue("T", "b2", -1)]


def test_pop_share_one_adds_the_next_clients_share() -> None:
    queues, clients = mqs(8), cids(4)  # AVG: c0 [0,1] c1 [2,3] c2 [4,5] c3 [6,7]
    got = {c: [q.queue_id for q in allocate_for_pop(allocate_averagely, c, queues, clients, 1)] for c in clients}
    assert got == {"c0": [0, 1, 2, 3], "c1": [2, 3, 4, 5], "c2": [4, 5, 6, 7], "c3": [6, 7, 0, 1]}
    # every queue is popped by exactly share + 1 clients
    for q in range(8):
        assert sum(q in ids for ids in got.values()) == 2


def test_pop_share_two_of_five_by_circle() -> None:
    queues, clients = mqs(5), cids(5)  # by circle: ci gets [i]
    got = [q.queue_id for q in allocate_for_pop(allocate_by_circle, "c3", queues, clients, 2)]
    assert got == [3, 4, 0]


def test_pop_share_with_more_clients_than_queues_gives_one_queue_each() -> None:
    queues, clients = mqs(2), cids(5)
    got = [[q.queue_id for q in allocate_for_pop(allocate_averagely, c, queues, clients, 1)] for c in clients]
    assert got == [[0], [1], [0], [1], [0]]
    assert allocate_for_pop(allocate_averagely, "stranger", queues, clients, 1) == []


# --------------------------------------------------------------------------- the persisted table

def test_request_modes_default_pull_and_retry_always_pull(tmp_path: Path) -> None:
    table = RequestModeTable.in_data_dir(tmp_path)
    table.load()
    assert table.get("T", "G") is None
    assert table.effective("T", "G").mode is MessageRequestMode.PULL
    assert table.effective("%RETRY%G", "G").mode is MessageRequestMode.PULL


def test_request_modes_survive_a_reload_in_javas_layout(tmp_path: Path) -> None:
    table = RequestModeTable.in_data_dir(tmp_path)
    table.put(SetMessageRequestModeRequestBody("T", "G", MessageRequestMode.POP, 2))
    table.put(SetMessageRequestModeRequestBody("T", "H", MessageRequestMode.PULL))
    assert table.path == tmp_path / "config" / "messageRequestMode.json"
    on_disk = json.loads(table.path.read_text())
    assert on_disk["messageRequestModeMap"]["T"]["G"] == {"consumerGroup": "G", "mode": "POP",
                                                          "popShareQueueNum": 2, "topic": "T"}
    again = RequestModeTable.in_data_dir(tmp_path)
    again.load()
    assert again.effective("T", "G") == SetMessageRequestModeRequestBody("T", "G", MessageRequestMode.POP, 2)
    assert again.effective("T", "H").mode is MessageRequestMode.PULL
    assert [(r.topic, r.consumer_group) for r in again.snapshot().rows()] == [("T", "G"), ("T", "H")]
    assert again.problem is None


def test_request_modes_corrupt_file_is_reported_not_trusted(tmp_path: Path) -> None:
    path = tmp_path / "config" / "messageRequestMode.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"messageRequestModeMap": {"T": {"G": {"mode": "SIDEWAYS"}}}}')
    table = RequestModeTable(path)
    table.load()
    assert table.problem and "corrupt" in table.problem
    assert table.get("T", "G") is None
    assert path.with_name(path.name + ".corrupt").exists()


def test_request_modes_failed_save_leaves_the_table_as_it_was(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    table = RequestModeTable(blocker / "config" / "messageRequestMode.json")  # parent is a file: cannot save
    first = SetMessageRequestModeRequestBody("T", "G", MessageRequestMode.POP)
    with pytest.raises(OSError):
        table.put(first)
    assert table.get("T", "G") is None and table.snapshot().modes == {}
    memory = RequestModeTable(None)
    memory.put(first)
    assert memory.get("T", "G") == first
