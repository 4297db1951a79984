"""JSON bodies: the exact fastjson shape out, every peer's shape in."""

from __future__ import annotations

import json

import pytest

from rmqrun.model import MessageQueue
from rmqrun.protocol.bodies import (
    ConsumeFromWhere,
    ConsumerData,
    ConsumerListBody,
    ConsumeType,
    GetConsumerStatusBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageModel,
    ProducerData,
    ResetOffsetBody,
    UnlockBatchRequestBody,
    dumps,
)
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.errors import ProtocolError

MQ0 = MessageQueue("T", "broker-a", 0)
MQ1 = MessageQueue("T", "broker-a", 1)


def test_heartbeat_built_from_api_matches_java_bytes() -> None:
    # A 4.9.8 consumer's heartbeat (scenario b), rebuilt from values, not parsed.
    expected = (
        b'{"clientID":"192.0.2.2@25001#2765409674791","consumerDataSet":[{"consumeFromWhere":'
        b'"CONSUME_FROM_FIRST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"CG_scnb","messageModel":'
        b'"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[],"expressionType":"TAG",'
        b'"subString":"*","subVersion":1795303787687,"tagsSet":[],"topic":"%RETRY%CG_scnb"},{"classFilterMode":'
        b'false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB","subVersion":'
        b'1795303787673,"tagsSet":["TagA","TagB"],"topic":"ScnB_Topic"}],"unitMode":false}],"producerDataSet":'
        b'[{"groupName":"CLIENT_INNER_PRODUCER"}]}')
    data = HeartbeatData(
        "192.0.2.2@25001#2765409674791",
        [ProducerData("CLIENT_INNER_PRODUCER")],
        [ConsumerData("CG_scnb", ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                      ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                      [SubscriptionData.retry("CG_scnb", 1795303787687),
                       SubscriptionData.build("ScnB_Topic", "TagA || TagB", sub_version=1795303787673)])])
    assert data.encode() == expected
    back = HeartbeatData.from_json(expected)
    assert back.client_id == data.client_id
    assert back.encode() == expected
    assert back.consumer_data_set[0].subscription_data_set[1].tags == ("TagA", "TagB")


def test_heartbeat_accepts_plain_dict_subscriptions_and_string_enums() -> None:
    sub = {"classFilterMode": False, "codeSet": [], "expressionType": "TAG", "subString": "*", "subVersion": 1,
           "tagsSet": [], "topic": "T"}
    data = HeartbeatData("c", [], [ConsumerData("G", "CONSUME_ACTIVELY", "BROADCASTING",  # type: ignore[arg-type]
                                                "CONSUME_FROM_TIMESTAMP", [sub])])  # type: ignore[arg-type]
    obj = json.loads(data.encode())
    assert obj["consumerDataSet"][0]["messageModel"] == "BROADCASTING"
    assert obj["consumerDataSet"][0]["subscriptionDataSet"] == [sub]
    with pytest.raises(TypeError):
        HeartbeatData("c", [], [ConsumerData("G", subscription_data_set=[object()])]).encode()


def test_cpp_heartbeat_with_ordinal_enums_and_string_versions() -> None:
    body = (b'{"clientID":"6425-127.0.0.1@DEFAULT","consumerDataSet":[{"consumeFromWhere":0,"consumeType":1,'
            b'"groupName":"CG_scnf","messageModel":1,"subscriptionDataSet":[{"subString":"*","subVersion":'
            b'"1795304269857","topic":"%RETRY%CG_scnf"},{"codeSet":[0,0],"subString":"TagA || TagB","subVersion":'
            b'"1795304269857","tagsSet":["TagA","TagB"],"topic":"ScnF_Topic"}]}]}\n')
    data = HeartbeatData.from_json(body)
    consumer = data.consumer_data_set[0]
    assert consumer.consume_type is ConsumeType.CONSUME_PASSIVELY
    assert consumer.message_model is MessageModel.CLUSTERING
    assert consumer.consume_from_where is ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET
    assert consumer.subscription_data_set[0].sub_version == 1795304269857
    assert consumer.subscription_data_set[0].expression_type == "TAG"
    assert data.producer_data_set == []


@pytest.mark.parametrize("bad", [b"[]", b'{"producerDataSet":[]}', b'{"clientID":"c","consumerDataSet":[{}]}',
                                 b'{"clientID":"c","consumerDataSet":[{"groupName":"G","messageModel":7}]}'])
def test_malformed_heartbeats_raise_protocol_error(bad: bytes) -> None:
    with pytest.raises(ProtocolError):
        HeartbeatData.from_json(bad)


def test_enum_parse() -> None:
    assert ConsumeFromWhere.parse(4) is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
    assert ConsumeFromWhere.parse("5") is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP
    assert MessageModel.parse("CLUSTERING") is MessageModel.CLUSTERING
    with pytest.raises(ProtocolError):
        ConsumeType.parse("PUSH")


def test_lock_bodies() -> None:
    req = LockBatchRequestBody("CG_scnc", "192.0.2.2@orderly-c1", [MQ0])
    assert req.encode() == (b'{"clientId":"192.0.2.2@orderly-c1","consumerGroup":"CG_scnc","mqSet":'
                            b'[{"brokerName":"broker-a","queueId":0,"topic":"T"}]}')
    assert LockBatchRequestBody.from_json(req.encode()) == req
    five = LockBatchRequestBody("G", "c", [MQ0, MQ1], only_this_broker=True)
    assert json.loads(five.encode())["onlyThisBroker"] is True
    assert LockBatchRequestBody.from_json(five.encode()).only_this_broker is True
    unlock = UnlockBatchRequestBody.from_json(req.encode())
    assert isinstance(unlock, UnlockBatchRequestBody) and unlock.mq_set == [MQ0]
    resp = LockBatchResponseBody([MQ1])
    assert resp.encode() == b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":1,"topic":"T"}]}'
    assert LockBatchResponseBody.from_json(b"{}").lock_ok_mq_set == []


def test_consumer_list_body() -> None:
    body = ConsumerListBody(["a@1", "b@2"])
    assert body.encode() == b'{"consumerIdList":["a@1","b@2"]}'
    assert ConsumerListBody.from_json(body.encode()) == body


def test_queue_keyed_maps_use_fastjson_object_keys() -> None:
    reset = ResetOffsetBody({MQ1: 0, MQ0: 7})
    raw = reset.encode()
    assert raw == (b'{"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:0,'
                   b'{"brokerName":"broker-a","queueId":0,"topic":"T"}:7}}')
    assert ResetOffsetBody.from_json(raw) == reset
    # gson-style entry lists and the C++ ResetOffsetBodyForC form are read too.
    assert ResetOffsetBody.from_json(
        b'{"offsetTable":[[{"topic":"T","brokerName":"broker-a","queueId":0},7]]}').offset_table == {MQ0: 7}
    assert ResetOffsetBody.from_json(
        b'{"offsetTable":[{"topic":"T","brokerName":"broker-a","queueId":1,"offset":3}]}').offset_table == {MQ1: 3}
    status = GetConsumerStatusBody({MQ0: 9}, {"c1": {MQ1: 2}})
    assert GetConsumerStatusBody.from_json(status.encode()) == status
    with pytest.raises(ProtocolError):
        ResetOffsetBody.from_json(b'{"offsetTable":{"nope":1}}')


def test_dumps_handles_nested_objects() -> None:
    assert dumps({"mqTable": {MQ0: {"commitOffset": 3}}, "model": MessageModel.CLUSTERING, "l": (1, 2)}) == (
        b'{"mqTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"commitOffset":3}},'
        b'"model":"CLUSTERING","l":[1,2]}')
