"""The admin requests rmqrun builds, against what ``mqadmin`` 4.9.8 sent and a 4.9.8 broker answered.

``tests/data/protocol/scenario_g_admin.jsonl`` holds the frames: each request
rmqrun builds must carry the same header fields as mqadmin's (its ACL
signature aside), and each captured answer must parse into the typed result.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest

from rmqrun.client.admin import AdminClient, TopicConfig
from rmqrun.model import MessageQueue
from rmqrun.remoting.errors import BrokerError
from rmqrun.remoting.frame import RemotingCommand
from tests import captures

CAPTURE = captures.PROTOCOL_DIR / "scenario_g_admin.jsonl"
ACL = {"Signature", "AccessKey"}


def frames() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CAPTURE.read_text().splitlines() if line.strip()]


def exchange(code: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first captured request with ``code`` and the broker's answer to it."""
    rows = frames()
    request = next(r for r in rows if r["kind"] == "request" and r["code"] == code and r["dir"] == "c2s")
    answer = next(r for r in rows if r["kind"] == "response" and r.get("reply_to_seq") == request["seq"])
    return request, answer


class Recorder:
    """A connection pool and name-server client in one: records requests, answers with a captured frame."""

    def __init__(self, answer: dict[str, Any]) -> None:
        self.answer = answer
        self.sent: list[RemotingCommand] = []

    def _reply(self, cmd: RemotingCommand) -> RemotingCommand:
        self.sent.append(cmd)
        body = base64.b64decode(self.answer["body_b64"]) if self.answer.get("body_b64") else None
        return RemotingCommand(self.answer["code"], body=body, remark=self.answer["header"].get("remark"))

    async def request(self, *args: Any) -> RemotingCommand:
        cmd = args[1] if len(args) == 3 else args[0]
        return self._reply(cmd)


def call(code: int, fn: Any) -> tuple[Any, RemotingCommand, dict[str, Any]]:
    request, answer = exchange(code)
    rec = Recorder(answer)
    admin = AdminClient(rec, rec)  # type: ignore[arg-type]
    result = asyncio.run(fn(admin))
    (sent,) = rec.sent
    assert sent.code == code
    return result, sent, {k: v for k, v in request["header"].get("extFields", {}).items() if k not in ACL}


def test_update_and_create_topic_sends_mqadmins_fields() -> None:
    _, sent, theirs = call(17, lambda a: a.create_or_update_topic(
        "b", TopicConfig("ScnG_AdminTopic", 2, 2, 6, False)))
    assert sent.ext_fields == theirs


def test_topic_stats_parse_the_brokers_answer() -> None:
    stats, sent, theirs = call(202, lambda a: a.topic_stats("b", "ScnG_Topic"))
    assert sent.ext_fields == theirs
    assert sorted(stats) == [MessageQueue("ScnG_Topic", "broker-a", q) for q in range(4)]
    q0 = stats[MessageQueue("ScnG_Topic", "broker-a", 0)]
    assert (q0.min_offset, q0.max_offset, q0.last_update_timestamp) == (0, 7, 1795304497211)


def test_consume_stats_parse_the_brokers_answer() -> None:
    stats, sent, theirs = call(208, lambda a: a.consume_stats("b", "CG_scng"))
    assert sent.ext_fields == theirs
    assert stats.consume_tps == pytest.approx(0.8)
    assert {mq.topic for mq in stats.offset_table} == {"ScnG_Topic", "%RETRY%CG_scng"}
    q3 = stats.offset_table[MessageQueue("ScnG_Topic", "broker-a", 3)]
    assert (q3.broker_offset, q3.consumer_offset, q3.last_timestamp) == (9, 9, 1795304518273)


def test_online_reset_sends_mqadmins_fields_and_reads_the_table() -> None:
    request, _ = exchange(222)
    ts = int(request["header"]["extFields"]["timestamp"])
    table, sent, theirs = call(222, lambda a: a.reset_offset_online("b", "CG_scng", "ScnG_Topic", ts))
    assert sent.ext_fields == theirs
    assert table == {MessageQueue("ScnG_Topic", "broker-a", q): 0 for q in range(4)}


def test_delete_topic_in_broker_and_namesrv_send_mqadmins_fields() -> None:
    _, sent, theirs = call(215, lambda a: a.delete_topic_in_broker("b", "%RETRY%CG_scng_admin"))
    assert sent.ext_fields == theirs
    _, sent, theirs = call(216, lambda a: a.delete_topic_in_namesrv("%RETRY%CG_scng_admin", "DefaultCluster"))
    assert sent.ext_fields == theirs


def test_topic_list_and_cluster_info() -> None:
    names, _, _ = call(206, lambda a: a.topic_list())
    assert "ScnG_Topic" in names and names == sorted(names)
    info, _, _ = call(106, lambda a: a.cluster_info())
    assert info.master_addresses("DefaultCluster") == ["127.0.0.1:10911"]
    assert info.broker_name_of("127.0.0.1:10911") == "broker-a"


def test_a_refusal_keeps_its_code() -> None:
    rec = Recorder({"code": 206, "header": {"remark": "Consumer not online"}})
    with pytest.raises(BrokerError) as err:
        asyncio.run(AdminClient(rec, rec).reset_offset_online("b", "G", "T", 0))  # type: ignore[arg-type]
    assert err.value.code == 206 and "Consumer not online" in str(err.value)


def test_consumer_groups_of_topic_sends_mqadmins_fields_and_reads_the_group_list() -> None:
    groups, sent, theirs = call(300, lambda a: a.consumer_groups_of_topic("b", "ScnG_Topic"))
    assert sent.ext_fields == theirs
    assert groups == frozenset({"CG_scng"})


def test_consumer_connection_sends_mqadmins_fields_and_reads_clients_and_topics() -> None:
    conn, sent, theirs = call(203, lambda a: a.consumer_connection("b", "CG_scng"))
    assert sent.ext_fields == theirs
    assert conn.client_ids == frozenset({"192.0.2.2@12840#3456117512264"})
    assert conn.topics == frozenset({"ScnG_Topic", "%RETRY%CG_scng"})


def test_consumer_connection_refused_when_nobody_is_online_and_empty_on_an_empty_answer() -> None:
    rec = Recorder({"code": 206, "header": {"remark": "the consumer group not online"}})
    with pytest.raises(BrokerError) as err:
        asyncio.run(AdminClient(rec, rec).consumer_connection("b", "G"))  # type: ignore[arg-type]
    assert err.value.code == 206
    rec = Recorder({"code": 0, "header": {}})
    conn = asyncio.run(AdminClient(rec, rec).consumer_connection("b", "G"))  # type: ignore[arg-type]
    assert conn.client_ids == frozenset() and conn.topics == frozenset()
