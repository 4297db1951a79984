"""Golden tests: the assignment bodies against the field names and enum spelling of RocketMQ 5.3.3.

The expected texts are what fastjson writes for the Java classes (fields sorted by name, enums by
name, null fields left out): SetMessageRequestModeRequestBody {topic, consumerGroup, mode,
popShareQueueNum}, QueryAssignmentRequestBody {topic, consumerGroup, clientId, strategyName,
messageModel}, QueryAssignmentResponseBody {messageQueueAssignments: [MessageQueueAssignment
{messageQueue, mode, attachments}]}, and MessageRequestModeManager {messageRequestModeMap}.
"""

from __future__ import annotations

import pytest

from rmqrun.model import MessageQueue
from rmqrun.protocol.assignment import (
    MessageQueueAssignment,
    MessageRequestMode,
    MessageRequestModeTable,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rmqrun.protocol.bodies import MessageModel
from rmqrun.remoting.errors import ProtocolError
from rmqrun.topic_names import is_retry_topic


def test_set_mode_body_is_written_as_fastjson_writes_it() -> None:
    body = SetMessageRequestModeRequestBody("T", "G", MessageRequestMode.POP, 2)
    assert body.encode() == b'{"consumerGroup":"G","mode":"POP","popShareQueueNum":2,"topic":"T"}'


def test_set_mode_body_defaults_are_javas() -> None:
    # A Java body built without setMode/setPopShareQueueNum: PULL and 0.
    body = SetMessageRequestModeRequestBody.decode(b'{"consumerGroup":"G","topic":"T"}')
    assert (body.topic, body.consumer_group, body.mode, body.pop_share_queue_num) == ("T", "G",
                                                                                       MessageRequestMode.PULL, 0)
    assert SetMessageRequestModeRequestBody("T", "G").encode() == \
        b'{"consumerGroup":"G","mode":"PULL","popShareQueueNum":0,"topic":"T"}'


def test_set_mode_body_round_trips_and_reads_ordinals() -> None:
    body = SetMessageRequestModeRequestBody("T", "G", MessageRequestMode.POP, -1)
    assert SetMessageRequestModeRequestBody.decode(body.encode()) == body
    assert SetMessageRequestModeRequestBody.decode(b'{"topic":"T","consumerGroup":"G","mode":1}').mode \
        is MessageRequestMode.POP


@pytest.mark.parametrize("text", [b'{"topic":"T","consumerGroup":"G","mode":"PUSH"}',
                                  b'{"topic":"T","consumerGroup":"G","popShareQueueNum":"x"}',
                                  b'[1]', b'not json'])
def test_set_mode_body_refuses_garbage(text: bytes) -> None:
    with pytest.raises(ProtocolError):
        SetMessageRequestModeRequestBody.decode(text)


def test_query_assignment_request_field_names() -> None:
    body = QueryAssignmentRequestBody("T", "G", "10.0.0.1@123", "AVG", MessageModel.CLUSTERING)
    assert body.encode() == (b'{"clientId":"10.0.0.1@123","consumerGroup":"G","messageModel":"CLUSTERING",'
                             b'"strategyName":"AVG","topic":"T"}')
    assert QueryAssignmentRequestBody.decode(body.encode()) == body
    broadcast = QueryAssignmentRequestBody.decode(b'{"topic":"T","consumerGroup":"G","clientId":"c",'
                                                  b'"strategyName":"AVG_BY_CIRCLE","messageModel":0}')
    assert broadcast.message_model is MessageModel.BROADCASTING
    assert broadcast.strategy_name == "AVG_BY_CIRCLE"


def test_query_assignment_response_field_names() -> None:
    body = QueryAssignmentResponseBody([
        MessageQueueAssignment(MessageQueue("T", "broker-a", -1), MessageRequestMode.POP),
        MessageQueueAssignment(MessageQueue("T", "broker-a", 3), MessageRequestMode.PULL, {"k": "v"}),
    ])
    assert body.encode() == (
        b'{"messageQueueAssignments":['
        b'{"messageQueue":{"brokerName":"broker-a","queueId":-1,"topic":"T"},"mode":"POP"},'
        b'{"attachments":{"k":"v"},"messageQueue":{"brokerName":"broker-a","queueId":3,"topic":"T"},"mode":"PULL"}]}')
    back = QueryAssignmentResponseBody.decode(body.encode())
    assert back == body
    assert back.assignments is not None
    assert [a.pop_all_queues for a in back.assignments] == [True, False]


def test_query_assignment_response_null_and_empty_differ() -> None:
    # Java: a null set (no answer, keep what you have) is left out; an empty set means "drop everything".
    assert QueryAssignmentResponseBody(None).encode() == b"{}"
    assert QueryAssignmentResponseBody.decode(b"{}").assignments is None
    assert QueryAssignmentResponseBody([]).encode() == b'{"messageQueueAssignments":[]}'
    assert QueryAssignmentResponseBody.decode(b'{"messageQueueAssignments":[]}').assignments == []


def test_assignment_without_mode_is_pull() -> None:
    a = MessageQueueAssignment.from_json({"messageQueue": {"brokerName": "b", "queueId": 0, "topic": "T"}})
    assert a.mode is MessageRequestMode.PULL and a.attachments is None and not a.pop_all_queues


@pytest.mark.parametrize("text", [b'{"messageQueueAssignments":{}}', b'{"messageQueueAssignments":[1]}',
                                  b'{"messageQueueAssignments":[{"messageQueue":{"topic":"T"}}]}'])
def test_query_assignment_response_refuses_garbage(text: bytes) -> None:
    with pytest.raises(ProtocolError):
        QueryAssignmentResponseBody.decode(text)


def test_get_all_body_is_the_managers_json() -> None:
    table = MessageRequestModeTable({"T": {"G": SetMessageRequestModeRequestBody("T", "G", MessageRequestMode.POP, 1)}})
    assert table.encode() == (b'{"messageRequestModeMap":{"T":{"G":{"consumerGroup":"G","mode":"POP",'
                              b'"popShareQueueNum":1,"topic":"T"}}}}')
    assert MessageRequestModeTable.decode(table.encode()) == table
    assert MessageRequestModeTable().encode() == b'{"messageRequestModeMap":{}}'
    assert MessageRequestModeTable.decode(b"{}").modes == {}


def test_get_all_rows_are_sorted() -> None:
    def mode(t: str, g: str) -> SetMessageRequestModeRequestBody:
        return SetMessageRequestModeRequestBody(t, g, MessageRequestMode.POP)
    table = MessageRequestModeTable({"b": {"z": mode("b", "z"), "a": mode("b", "a")}, "a": {"m": mode("a", "m")}})
    assert [(r.topic, r.consumer_group) for r in table.rows()] == [("a", "m"), ("b", "a"), ("b", "z")]


def test_get_all_refuses_garbage() -> None:
    with pytest.raises(ProtocolError):
        MessageRequestModeTable.decode(b'{"messageRequestModeMap":{"T":[1]}}')
    with pytest.raises(ProtocolError):
        MessageRequestModeTable.decode(b'{"messageRequestModeMap":[1]}')


def test_retry_topics_are_recognised() -> None:
    assert is_retry_topic("%RETRY%G")
    assert not is_retry_topic("T%RETRY%")
