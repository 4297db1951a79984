"""rmqrun's pull API against the Apache C++ client (``rocketmq==0.4.4``), both directions.

What that client offers shapes what is tested. Its Python wrapper does expose a
pull consumer (``rocketmq.client.PullConsumer``), but the C API under it has
only ``FetchSubscriptionMessageQueues`` and ``Pull``: no fetchConsumeOffset or
updateConsumeOffset, and the wrapper keeps offsets in a process-local dict. So:

* the C++ *pull* consumer reads exactly what rmqrun's pull API reads (same
  queues, offsets, ids, bodies, tags, also with a tag expression), and from the
  positions rmqrun committed (read back with ``fetch_consume_offset``) it reads
  exactly the messages after them;
* offsets committed by rmqrun's pull API are honoured by the C++ *push*
  consumer of the same group, which starts from the broker's offsets;
* offsets the C++ push consumer committed are read back by rmqrun's
  ``fetch_consume_offset``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Iterator

import pytest

import rmqrun
from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.producer import Producer
from rmqrun.model import Message, MessageQueue
from rmqrun.pull import PullStatus
from tests.integration.cli_kit import wait_for
from tests.integration.signals_kit import start_broker
from tests.peers.cpp import cpp_available, cpp_unavailable_reason, run_pull, start_consumer

pytestmark = [pytest.mark.cpp, pytest.mark.timeout(180)]

QUEUES = 4
CPP_PERSIST_S = 5.0  # the C++ client commits offsets every 5 s and at shutdown


@pytest.fixture(autouse=True)
def _need_cpp() -> None:
    if not cpp_available():
        pytest.skip(cpp_unavailable_reason())


@pytest.fixture
def eb(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    broker = start_broker(tmp_path)
    try:
        yield broker
    finally:
        broker.stop_in_thread()


def produce(eb: EmbeddedBroker, topic: str, n: int) -> list[str]:
    """n messages round robin over the 4 queues, tags A/B/C cycling; returns their UNIQ_KEY ids."""
    async def main() -> list[str]:
        async with Producer(eb.namesrv_address, "PG_pull_cpp") as producer:
            return [(await producer.send(topic, f"body-{i}".encode(), tags="ABC"[i % 3], keys=f"k{i}",
                                         properties={"idx": str(i)}, queue=i % QUEUES)).msg_id
                    for i in range(n)]
    return asyncio.run(main())


def read_all(c: rmqrun.PullConsumer, topic: str, tags: str = "*",
             starts: dict[int, int] | None = None) -> list[Message]:
    out: list[Message] = []
    for mq in c.fetch_subscribe_message_queues(topic):
        offset = (starts or {}).get(mq.queue_id, 0)
        while True:
            r = c.pull(mq, tags, offset)
            out.extend(r.messages)
            if r.status is PullStatus.NO_NEW_MSG:
                break
            assert r.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG), r
            offset = r.next_begin_offset
    return out


def key_of_rmqrun(m: Message) -> tuple[int, int, str, str, str | None]:
    return (m.queue_id, m.queue_offset, m.msg_id, m.body.decode(), m.tags)


def key_of_cpp(m: dict[str, Any]) -> tuple[int, int, str, str, str | None]:
    return (m["queue_id"], m["queue_offset"], m["properties"].get("UNIQ_KEY") or m["msg_id"], m["body"],
            m["tags"] or None)


def test_cpp_pull_consumer_reads_exactly_what_rmqrun_pulls(eb: EmbeddedBroker, tmp_path: Path) -> None:
    topic = "PC_same"
    ids = produce(eb, topic, 24)
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_pc_same") as c:
        ours = sorted(key_of_rmqrun(m) for m in read_all(c, topic))
        ours_a = sorted(key_of_rmqrun(m) for m in read_all(c, topic, "A || C"))
    assert sorted(k[2] for k in ours) == sorted(ids)
    theirs, queues = run_pull(eb.namesrv_address, topic=topic, group="CG_pc_same", home=tmp_path / "all")
    assert sorted(key_of_cpp(m) for m in theirs) == ours
    assert sorted((q["queue_id"], q["next"]) for q in queues) == [(q, 6) for q in range(QUEUES)]
    theirs_a, _ = run_pull(eb.namesrv_address, topic=topic, group="CG_pc_same", tags="A || C",
                           home=tmp_path / "tags")
    assert sorted(key_of_cpp(m) for m in theirs_a) == ours_a
    assert len(ours_a) == 16 and {k[4] for k in ours_a} == {"A", "C"}


def test_offsets_committed_by_rmqrun_are_where_the_cpp_consumers_start(eb: EmbeddedBroker, tmp_path: Path) -> None:
    topic, group = "PC_commit", "CG_pc_commit"
    produce(eb, topic, 24)  # 6 per queue
    committed = {0: 2, 1: 6, 2: 0, 3: 5}
    with rmqrun.PullConsumer(eb.namesrv_address, group) as c:
        everything = read_all(c, topic)
        for qid, offset in committed.items():
            c.update_consume_offset(MessageQueue(topic, "broker-a", qid), offset)
    expected = sorted(key_of_rmqrun(m) for m in everything if m.queue_offset >= committed[m.queue_id])
    assert len(expected) == 4 + 0 + 6 + 1

    # the positions, read back through the pull API by a fresh consumer, drive the C++ pull consumer
    with rmqrun.PullConsumer(eb.namesrv_address, group) as fresh:
        starts = {mq.queue_id: fresh.fetch_consume_offset(mq) for mq in fresh.fetch_subscribe_message_queues(topic)}
    assert starts == committed
    theirs, _ = run_pull(eb.namesrv_address, topic=topic, group=group, starts=starts, home=tmp_path / "pull")
    assert sorted(key_of_cpp(m) for m in theirs) == expected

    # the C++ push consumer of the group starts from the broker's offsets: exactly the rest, nothing before
    with start_consumer(eb.namesrv_address, topic=topic, group=group, expect=len(expected), timeout=60,
                        linger=2.0, home=tmp_path / "push") as consumer:
        consumer.wait_ok(len(expected), timeout=60)
        assert consumer.wait(60) == 0, consumer.report("C++ push consumer did not finish")
    got = sorted(key_of_cpp(m) for m in consumer.messages())
    assert got == expected, consumer.report("C++ push consumer consumed other messages than rmqrun left")


def test_offsets_committed_by_the_cpp_push_consumer_are_read_by_rmqrun(eb: EmbeddedBroker, tmp_path: Path) -> None:
    topic, group = "PC_cpp_commit", "CG_pc_cpp_commit"
    produce(eb, topic, 20)  # 5 per queue
    with start_consumer(eb.namesrv_address, topic=topic, group=group, expect=20, timeout=60,
                        home=tmp_path / "push") as consumer:
        consumer.wait_ok(20, timeout=60)
        assert consumer.wait(60) == 0, consumer.report("C++ push consumer did not finish")  # shutdown persists
    with rmqrun.PullConsumer(eb.namesrv_address, group) as c:
        mqs = c.fetch_subscribe_message_queues(topic)

        def all_committed() -> bool:
            return [c.fetch_consume_offset(mq) for mq in mqs] == [5] * QUEUES
        wait_for(all_committed, timeout=CPP_PERSIST_S * 3, what="the C++ consumer's offsets on the broker")
        assert [c.max_offset(mq) for mq in mqs] == [5] * QUEUES
        # and rmqrun continues from there: nothing left to read for the group
        assert all(c.pull(mq, "*", c.fetch_consume_offset(mq)).status is PullStatus.NO_NEW_MSG for mq in mqs)
