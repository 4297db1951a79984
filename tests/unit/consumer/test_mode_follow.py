"""``consume_mode: auto`` and the mode check, without a broker: the state table, the handover order, the one-line
warnings and the pop retry topic's records (rmqrun/consumer/mode_follow.py, broker_mode.py, pop_retry_drain.py).

The live switches against the embedded broker are in tests/integration/test_mode_follow_run.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loguru import logger

from rmqrun.consumer import consume_mode as cm
from rmqrun.consumer import engines
from rmqrun.consumer.broker_mode import ModeWatch, mode_of
from rmqrun.consumer.config import ConsumerConfig
from rmqrun.consumer.mode_follow import POP, PULL, TO_POP, TO_PULL, UNKNOWN, AutoPushConsumer, next_state
from rmqrun.consumer.pop_retry_drain import with_topic
from rmqrun.consumer.process_queue import ProcessQueue, QueuedMessage
from rmqrun.consumer.pull_request import PullRequest
from rmqrun.errors import ConfigError
from rmqrun.model import MessageQueue
from rmqrun.protocol.assignment import MessageQueueAssignment, MessageRequestMode
from rmqrun.remoting.message import decode_message, encode_stored

P, U = MessageRequestMode.POP, MessageRequestMode.PULL


@pytest.mark.parametrize("state, mode, new", [
    (UNKNOWN, None, PULL), (UNKNOWN, U, PULL), (UNKNOWN, P, POP),
    (PULL, None, PULL), (PULL, U, PULL), (PULL, P, TO_POP),
    (POP, None, POP), (POP, P, POP), (POP, U, TO_PULL),
    (TO_POP, U, TO_POP), (TO_POP, P, TO_POP), (TO_PULL, P, TO_PULL), (TO_PULL, U, TO_PULL),
])
def test_next_state(state: str, mode: MessageRequestMode | None, new: str) -> None:
    """A known state changes only through a handover; a handover finishes before the next answer counts;
    an answer that cannot tell leaves a known state alone and starts an unknown one pulling."""
    assert next_state(state, mode) == new


def test_mode_of_an_answer() -> None:
    mq = MessageQueue("T", "b", 0)
    assert mode_of(None) is None and mode_of([]) is None
    assert mode_of([MessageQueueAssignment(mq, U)]) is U
    assert mode_of([MessageQueueAssignment(MessageQueue("T", "b", -1), P)]) is P


def config(**kw: object) -> ConsumerConfig:
    return ConsumerConfig("G", "127.0.0.1:9876", {"T": "*"}, **kw)  # type: ignore[arg-type]


def test_auto_is_a_mode_with_its_own_engine_and_refuses_what_it_cannot_follow() -> None:
    cfg = config(consume_mode="auto").validate()
    assert cfg.mode == cm.AUTO and cfg.mode.follows_broker and not cfg.mode.orderly
    assert engines.ENGINES[cfg.mode.engine] is AutoPushConsumer
    for kw in ({"orderly": True}, {"order_by": "key"}, {"message_model": "BROADCASTING"}):
        with pytest.raises(ConfigError, match="consume_mode='auto' is invalid"):
            config(consume_mode="auto", **kw).validate()


def test_the_watch_says_a_disagreement_once_and_the_agreement_once() -> None:
    lines: list[tuple[str, str]] = []
    sink = logger.add(lambda m: lines.append((m.record["level"].name, m.record["message"])), level="INFO")
    try:
        watch = ModeWatch("G", None, "pull")
        watch.note("T", U)
        watch.note("T", None)
        assert lines == []
        watch.note("T", P)
        watch.note("T", P)
        assert [lvl for lvl, _ in lines] == ["WARNING"]
        assert "(changed from PULL)" in lines[0][1] and "--consume-mode pop (or auto)" in lines[0][1]
        assert "rmqrun group mode --group G --topic T --mode pull" in lines[0][1]
        watch.note("T", U)
        assert lines[-1] == ("INFO", "topic T is in PULL mode for group G now, as this instance consumes it")
        lines.clear()
        pop = ModeWatch("G", None, "pop")
        pop.note("T", U, pull_queues=2)
        assert len(lines) == 1 and "pops only the 2 queue(s)" in lines[0][1] and "--mode pop" in lines[0][1]
        lines.clear()
        auto = ModeWatch("G", None, "auto")
        auto.note("T", U)
        auto.note("T", P)
        assert lines == []
    finally:
        logger.remove(sink)


class _NoExecutor:
    async def run(self, job: Any) -> Any:
        raise AssertionError("not used")


def test_pull_to_pop_commits_only_once_every_pulled_message_is_done() -> None:
    """The handover's order: queues out of the table at once, no commit while a pulled message is not done,
    then the commit, then POP (the pops begin from what was committed)."""
    async def main() -> None:
        engine = AutoPushConsumer(config(consume_mode="auto"), _NoExecutor())  # type: ignore[arg-type]
        try:
            engine.topic_states["T"] = PULL
            mq = MessageQueue("T", "b", 0)
            pq = ProcessQueue(mq)
            pq.put([QueuedMessage(5, 1, b"x"), QueuedMessage(6, 1, b"y")], 7)
            engine.table[mq] = PullRequest(mq, pq, 7)
            committed: list[tuple[int, int]] = []

            async def persist(q: MessageQueue) -> bool:
                committed.append((engine.offset_store.read_memory(q), pq.msg_count))
                return True
            engine.offset_store.persist = persist  # type: ignore[method-assign]
            switch = asyncio.ensure_future(engine._to_pop("T"))
            for _ in range(100):  # the pass lock is free: a few loop turns
                if mq in engine.leaving:
                    break
                await asyncio.sleep(0)
            assert engine.topic_states["T"] == TO_POP and mq not in engine.table and mq in engine.leaving
            assert engine.subscribed_topics() == ["%RETRY%G"], "the rebalance leaves the topic alone"
            assert mq in engine.offset_queues(), "its offset is still kept"
            engine.offset_store.update(mq, pq.remove_messages([5]), True)
            await asyncio.sleep(0.2)  # several of the handover's looks at the queue (no event says "nothing happened")
            assert not committed and not switch.done(), "one message still being handled"
            engine.offset_store.update(mq, pq.remove_messages([6]), True)
            await asyncio.wait_for(switch, 5)
            assert committed == [(7, 0)], "committed once, after the last one, at the offset after it"
            assert engine.topic_states["T"] == POP and not engine.leaving and pq.dropped
            assert mq not in engine.offset_store, "the pops own the offset now"
        finally:
            await engine.instance.close()
    asyncio.run(main())


def test_a_retry_topic_record_is_handed_out_under_the_original_topic() -> None:
    record = encode_stored(topic="%RETRY%G_T", body=b"payload", properties={"idx": "3", "UNIQ_KEY": "ID1"},
                           queue_id=0, queue_offset=7, commit_log_offset=99, reconsume_times=2,
                           born_host="10.0.0.1:1234", store_host="10.0.0.2:10911", born_timestamp=4,
                           store_timestamp=5)
    before = decode_message(record)[0]
    after = decode_message(with_topic(memoryview(record), "T"))[0]
    assert after.topic == "T"
    for name in ("body", "properties", "msg_id", "offset_msg_id", "queue_id", "queue_offset", "commit_log_offset",
                 "reconsume_times", "born_host", "store_host", "born_timestamp", "store_timestamp", "body_crc"):
        assert getattr(after, name) == getattr(before, name), name


def test_peer_holdings_read_from_running_info_tables() -> None:
    """The settle step reads the other clients' mqTable (pulled) and mqPopTable (popped) keys, fastjson style."""
    from rmqrun.consumer.peer_modes import PeerHoldings, _queues

    key = '{"brokerName":"b","queueId":%d,"topic":"%s"}'
    table = {key % (0, "T"): {}, key % (1, "T"): {}, key % (0, "Other"): {}, "not a queue": {}}
    assert _queues(table, "T") == {MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)}
    assert _queues(None, "T") == set()
    peers = PeerHoldings(pulled={"c1": {MessageQueue("T", "b", 2)}, "c2": set()},
                         popped={"c3": {MessageQueue("T", "b", -1)}, "c4": {MessageQueue("T", "b", 3)},
                                 "c5": {MessageQueue("T", "b", 1)}})
    assert peers.pullers() == ["c1"]
    mine = {MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)}
    assert peers.poppers_of(mine) == ["c3", "c5"], "every queue (-1) or one of this instance's share"
