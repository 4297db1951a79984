"""The pull API's lookups and send-back against the embedded broker over real TCP.

``view_message`` with both kinds of id (the offset id and the client id, UNIQ_KEY),
``query_message`` by key and time range, ``send_message_back`` (by the broker, to
the DLQ, and its re-publish fallback), and an SQL92 pull refused as a Java broker
without ``enablePropertyFilter`` refuses it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Iterator, Sequence

import pytest

import rmqrun
from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.msgid import UniqueIdGenerator
from rmqrun.client.producer import Producer
from rmqrun.model import Message, MessageQueue
from rmqrun.pull import FilterNotSupportedError, MessageNotFoundError, PullStatus, SendBackError
from rmqrun.pull.lookup import offset_id_address
from rmqrun.remoting.message_props import (
    PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
)
from tests.integration.cli_kit import free_port
from tests.integration.signals_kit import start_broker
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    broker = start_broker(tmp_path_factory.mktemp("lookup"))
    try:
        yield broker
    finally:
        broker.stop_in_thread()


def send(eb: EmbeddedBroker, topic: str, items: Sequence[tuple[int, str, str | None, dict[str, str] | None]],
         namespace: str | None = None) -> list:  # type: ignore[type-arg]
    """Send (queue id, body, keys, properties) items in order; returns the send results."""
    async def main() -> list:  # type: ignore[type-arg]
        async with Producer(eb.namesrv_address, "PG_lookup", namespace=namespace) as producer:
            return [await producer.send(topic, body.encode(), keys=keys, properties=props, queue=qid)
                    for qid, body, keys, props in items]
    return asyncio.run(main())


def pull_all(c: rmqrun.PullConsumer, mq: MessageQueue) -> list[Message]:
    result = c.pull(mq, "*", 0, 32)
    return result.messages if result.status is PullStatus.FOUND else []


def wait_for_messages(c: rmqrun.PullConsumer, topic: str, count: int, timeout: float = 30.0) -> list[Message]:
    """Every message of ``topic`` once it holds ``count`` (the retry topic fills after a delay)."""
    def got() -> list[Message]:
        try:
            messages = [m for mq in c.fetch_subscribe_message_queues(topic) for m in pull_all(c, mq)]
        except rmqrun.pull.TopicNotFoundError:
            messages = []
        assert len(messages) >= count, f"{len(messages)} of {count} messages in {topic}"
        return messages

    return eventually(got, what=f"{count} messages in {topic}", timeout=timeout, interval=0.2)


# ------------------------------------------------------------------ view_message

def test_view_message_by_client_id_and_by_offset_id(eb: EmbeddedBroker) -> None:
    sent = send(eb, "LK_view", [(0, "v0", None, None), (1, "v1", None, None)])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_view") as c:
        msg = pull_all(c, MessageQueue("LK_view", "broker-a", 1))[0]
        assert msg.msg_id == sent[1].msg_id != msg.offset_msg_id
        # the crash of issue 25: a client id is not an offset id; now it is found through the index
        assert offset_id_address(msg.msg_id) is None
        by_client_id = c.view_message(msg.msg_id, topic="LK_view")
        by_offset_id = c.view_message(msg.offset_msg_id)
        with_topic_too = c.view_message(msg.offset_msg_id, "LK_view")
        for found in (by_client_id, by_offset_id, with_topic_too):
            assert (found.body, found.topic, found.queue_id, found.queue_offset, found.msg_id,
                    found.commit_log_offset) == (b"v1", "LK_view", 1, 0, msg.msg_id, msg.commit_log_offset)
        with pytest.raises(ValueError, match=r"view_message\(msg_id, topic=\.\.\.\)"):
            c.view_message(msg.msg_id)  # a client id names no broker: the topic is needed
        with pytest.raises(ValueError, match="the topic comes second"):
            c.view_message("LK_view", msg.msg_id)  # Java's argument order
        send(eb, "LK_other", [(0, "o", None, None)])
        with pytest.raises(MessageNotFoundError, match="no broker of topic 'LK_other'") as info:
            c.view_message(msg.msg_id, topic="LK_other")  # the id exists, but not in this topic
        assert info.value.msg_id == msg.msg_id
        unknown = UniqueIdGenerator("127.0.0.1", pid=4242).next_id()
        with pytest.raises(MessageNotFoundError):
            c.view_message(unknown, topic="LK_view")


def test_a_client_id_that_also_decodes_as_an_offset_id_falls_back_to_the_index(eb: EmbeddedBroker) -> None:
    """A producer whose pid is a multiple of 65536 makes ids whose "port" is in range: Java tries the
    offset lookup first and falls back; here the "address" has nobody listening, then the index answers."""
    port = free_port()
    crafted = UniqueIdGenerator("127.0.0.1", pid=65536, loader_hash=port << 16).next_id()
    assert offset_id_address(crafted) == (f"127.0.0.1:{port}", int(crafted[16:], 16))
    send(eb, "LK_pid", [(0, "pid", None, {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: crafted})])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_pid", timeout=2.0) as c:
        found = c.view_message(crafted, topic="LK_pid")
        assert (found.body, found.msg_id) == (b"pid", crafted)
        with pytest.raises(rmqrun.remoting.errors.RemotingError):
            c.view_message(crafted)  # without a topic it is only an offset id, and nobody answers there


def test_two_copies_of_one_client_id_give_the_first_stored(eb: EmbeddedBroker) -> None:
    """A producer's retry can store one message twice (same UNIQ_KEY); Java returns the earliest."""
    uid = UniqueIdGenerator("127.0.0.1").next_id()
    send(eb, "LK_dup", [(0, "first", None, {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uid})])
    time.sleep(0.01)
    send(eb, "LK_dup", [(1, "second", None, {PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uid})])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_dup") as c:
        assert c.view_message(uid, topic="LK_dup").body == b"first"


def test_view_and_query_under_a_namespace_use_plain_names(eb: EmbeddedBroker) -> None:
    sent = send(eb, "LK_ns", [(0, "n0", "nskey", None)], namespace="inst1")
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_ns", namespace="inst1") as c:
        found = c.view_message(sent[0].msg_id, topic="LK_ns")
        assert (found.topic, found.body) == ("LK_ns", b"n0")
        assert [m.topic for m in c.query_message("LK_ns", "nskey")] == ["LK_ns"]


# ------------------------------------------------------------------ query_message

def test_query_by_key_checks_every_key_and_the_time_range(eb: EmbeddedBroker) -> None:
    first = send(eb, "LK_query", [(0, "q0", "order-1 user-7", None), (1, "q1", "order-2 user-7", None),
                                  (2, "q2", "order-10", None)])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_query") as c:
        stored0 = c.view_message(first[0].msg_id, "LK_query").store_timestamp
        time.sleep(0.02)
        send(eb, "LK_query", [(3, "q3", "user-7", None)])
        result = c.query_message("LK_query", "user-7")
        assert [m.body for m in result] == [b"q0", b"q1", b"q3"]  # oldest first, across queues
        assert len(result) == 3 and result.errors == {}
        assert result.index_last_update_timestamp >= max(m.store_timestamp for m in result)
        assert [m.body for m in c.query_message("LK_query", "order-1")] == [b"q0"]  # not order-10
        later = [m.body for m in c.query_message("LK_query", "user-7", begin_ms=stored0 + 1)]
        assert later[-1:] == [b"q3"] and b"q0" not in later  # q1 may share q0's millisecond
        assert b"q3" not in [m.body for m in c.query_message("LK_query", "user-7", end_ms=stored0)]
        assert b"q0" in [m.body for m in c.query_message("LK_query", "user-7", end_ms=stored0)]
        assert len(c.query_message("LK_query", "user-7", max_num=1)) == 1
        assert len(c.query_message("LK_query", "nobody")) == 0  # nothing found is an empty result
        with pytest.raises(ValueError, match="begin_ms"):
            c.query_message("LK_query", "user-7", begin_ms=5, end_ms=4)
        with pytest.raises(ValueError, match="max_num must be"):
            c.query_message("LK_query", "user-7", max_num=0)
        with pytest.raises(ValueError, match="without spaces"):
            c.query_message("LK_query", "order-1 user-7")
        with pytest.raises(rmqrun.pull.TopicNotFoundError):
            c.query_message("LK_query_missing", "user-7")


# ------------------------------------------------------------------ send_message_back

def test_send_message_back_to_the_retry_topic_and_to_the_dlq(eb: EmbeddedBroker) -> None:
    send(eb, "LK_back", [(0, "retry me", "rk", {"p": "1"}), (0, "bury me", None, None)])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_back") as c:
        retry_me, bury_me = pull_all(c, MessageQueue("LK_back", "broker-a", 0))
        c.send_message_back(retry_me, delay_level=1)  # level 1: 1 s
        c.send_message_back(bury_me, delay_level=-1)  # straight to the DLQ
        dlq = wait_for_messages(c, "%DLQ%CG_back", 1)
        assert [m.body for m in dlq] == [b"bury me"]
        retried = wait_for_messages(c, "%RETRY%CG_back", 1)
        assert [m.body for m in retried] == [b"retry me"]
        back = retried[0]
        assert back.properties[PROPERTY_RETRY_TOPIC] == "LK_back"
        assert back.properties["p"] == "1" and back.msg_id == retry_me.msg_id
        assert back.reconsume_times == 1
        # a message from the retry topic goes back again with its count raised
        c.send_message_back(back, delay_level=-1, consumer_group="CG_back_other")
        assert [m.body for m in wait_for_messages(c, "%DLQ%CG_back_other", 1)] == [b"retry me"]


def test_send_back_falls_back_to_re_publishing_and_says_when_both_fail(eb: EmbeddedBroker) -> None:
    send(eb, "LK_fallback", [(0, "fb", None, None)])
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_fallback") as c:
        msg = pull_all(c, MessageQueue("LK_fallback", "broker-a", 0))[0]
        # the broker cannot find the message at this commit-log offset and refuses the send-back
        gone = dataclasses.replace(msg, commit_log_offset=10**12)
        c.send_message_back(gone, delay_level=1, max_reconsume_times=3)
        copy = wait_for_messages(c, "%RETRY%CG_fallback", 1)
        assert [m.body for m in copy] == [b"fb"]
        props = copy[0].properties
        assert props[PROPERTY_RETRY_TOPIC] == "LK_fallback"
        assert props[PROPERTY_ORIGIN_MESSAGE_ID] == msg.msg_id
        # the retry properties Java's re-publish sets (the producer moves MAX_RECONSUME_TIMES into the header)
        assert props["DELAY"] == "3" and copy[0].reconsume_times == 1
        with pytest.raises(SendBackError, match="re-publishing to its retry topic failed too") as info:
            c.send_message_back(gone, consumer_group="bad group!")  # no retry topic can be named so
        assert isinstance(info.value.__cause__, rmqrun.remoting.errors.RemotingError)


# ------------------------------------------------------------------ SQL92

def test_sql92_pull_is_refused_clearly_by_a_broker_without_property_filtering(eb: EmbeddedBroker) -> None:
    send(eb, "LK_sql", [(0, "s", None, {"a": "2"})])
    mq = MessageQueue("LK_sql", "broker-a", 0)
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_sql") as c:
        with pytest.raises(FilterNotSupportedError, match="does not filter by SQL92.*enablePropertyFilter=true"):
            c.pull(mq, "a > 1", 0, expression_type="SQL92")
        with pytest.raises(FilterNotSupportedError):
            c.pull_block_if_not_found(mq, "a > 1", 1, timeout=1.0, expression_type="SQL92")
        with pytest.raises(ValueError, match="unknown expression type"):
            c.pull(mq, "a > 1", 0, expression_type="sql")
        # a TAG pull of the same text is still a tag pull (matching nothing here)
        assert c.pull(mq, "a > 1", 0).messages == []


def test_the_async_twin_has_the_same_lookups(eb: EmbeddedBroker) -> None:
    sent = send(eb, "LK_async", [(0, "a0", "ak", None)])

    async def main() -> None:
        async with rmqrun.AsyncPullConsumer(eb.namesrv_address, "CG_async") as c:
            by_id = await c.view_message(sent[0].msg_id, "LK_async")
            by_key = await c.query_message("LK_async", "ak")
            assert by_id.body == b"a0" and [m.msg_id for m in by_key] == [sent[0].msg_id]
            await c.send_message_back(by_id, delay_level=-1)
            with pytest.raises(FilterNotSupportedError):
                await c.pull(MessageQueue("LK_async", "broker-a", 0), "a > 1", 0, expression_type="SQL92")
    asyncio.run(main())
    with rmqrun.PullConsumer(eb.namesrv_address, "CG_async") as c:
        assert [m.body for m in wait_for_messages(c, "%DLQ%CG_async", 1)] == [b"a0"]


# ------------------------------------------------------------------ fetch_topic_list (Spark's subscribePattern)

def test_topic_list_names_the_plain_topics_of_the_consumers_namespace(eb: EmbeddedBroker) -> None:
    send(eb, "ListPlain", [(0, "a", None, None)])
    send(eb, "ListInNs", [(0, "b", None, None)], namespace="NS_list")
    with rmqrun.PullConsumer(eb.namesrv_address) as c:
        plain = c.fetch_topic_list()
    with rmqrun.PullConsumer(eb.namesrv_address, namespace="NS_list") as c:
        wrapped = c.fetch_topic_list()
    assert "ListPlain" in plain and "ListInNs" not in plain and "NS_list%ListInNs" not in plain
    assert plain == sorted(plain) and not [t for t in plain if t.startswith("%") or t == "TBW102"]
    assert wrapped == ["ListInNs"]
