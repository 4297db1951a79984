"""Route data: every captured name-server answer, both JSON forms, queue derivation."""

from __future__ import annotations

import pytest

from rmqrun.client.route import (
    PERM_INHERIT,
    PERM_READ,
    PERM_WRITE,
    BrokerData,
    QueueData,
    TopicRouteData,
    is_readable,
    is_writeable,
    limit_queue_nums,
    perm_to_string,
    publish_queues,
    subscribe_queues,
)
from rmqrun.model import MessageQueue
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import ProtocolError
from tests import captures


def _route_responses() -> list[captures.CapturedFrame]:
    return [f for f in captures.responses_to(RequestCode.GET_ROUTEINFO_BY_TOPIC) if f["code"] == ResponseCode.SUCCESS]


@captures.requires_captures
def test_every_captured_route_parses_and_reencodes_byte_identical() -> None:
    frames = _route_responses()
    assert len(frames) >= 130
    forms = set()
    for cf in frames:
        req = captures.request_of(cf)
        assert req is not None
        topic = req["header"]["extFields"]["topic"]
        route = TopicRouteData.from_json(cf.body, topic)
        assert route.topic == topic
        assert route.broker_datas and route.queue_datas, cf
        assert route.master_address("broker-a") == "127.0.0.1:10911", cf
        standard = req["header"]["version"] >= 401
        forms.add(standard)
        assert route.to_json(standard=standard) == cf.body, cf
        # Queues follow the counts of the answer.
        qd = route.queue_datas[0]
        assert len(subscribe_queues(route)) == (qd.read_queue_nums if is_readable(qd.perm) else 0)
        assert len(publish_queues(route)) == (qd.write_queue_nums if is_writeable(qd.perm) else 0)
    assert forms == {True, False}, "both the strict (Java) and the bare-key (C++) form were checked"


def test_bare_integer_keys_and_extra_fields() -> None:
    body = (b'{"orderTopicConf":null,"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},'
            b'"brokerName":"b","cluster":"C","zoneName":"z","enableActingMaster":false}],'
            b'"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":2,'
            b'"topicSysFlag":0,"writeQueueNums":3}],"topicQueueMappingByBroker":null}')
    route = TopicRouteData.from_json(body, "T")
    broker = route.broker("b")
    assert broker is not None and broker.broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert broker.master_address == "10.0.0.1:10911" and broker.select_address() == "10.0.0.1:10911"
    assert subscribe_queues(route) == [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1)]
    assert [q.queue_id for q in publish_queues(route)] == [0, 1, 2]
    assert b'"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}' in route.to_json(standard=False)
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}' in route.to_json()


def test_permissions_decide_queues() -> None:
    route = TopicRouteData(
        [QueueData("b1", 4, 4, PERM_READ), QueueData("b2", 2, 2, PERM_WRITE), QueueData("a0", 1, 1, 6)],
        [BrokerData("C", "b1", {0: "h:1"}), BrokerData("C", "b2", {0: "h:2"}), BrokerData("C", "a0", {1: "h:3"})],
        topic="T")
    assert [(q.broker_name, q.queue_id) for q in subscribe_queues(route)] == [
        ("a0", 0), ("b1", 0), ("b1", 1), ("b1", 2), ("b1", 3)]
    # a0 is writable but has no master: Java skips it for publishing.
    assert [(q.broker_name, q.queue_id) for q in publish_queues(route)] == [("b2", 0), ("b2", 1)]
    assert BrokerData("C", "a0", {1: "h:3"}).select_address() == "h:3"
    assert BrokerData("C", "x").select_address() is None


def test_order_topic_conf_overrides_queue_data() -> None:
    route = TopicRouteData([QueueData("b1", 8, 8)], [BrokerData("C", "b1", {0: "h:1"})],
                           order_topic_conf="b1:2;b2:1", topic="T")
    assert publish_queues(route) == [MessageQueue("T", "b1", 0), MessageQueue("T", "b1", 1), MessageQueue("T", "b2", 0)]
    assert b'"orderTopicConf":"b1:2;b2:1"' in route.to_json()


def test_default_topic_route_is_capped() -> None:
    tbw = TopicRouteData([QueueData("b", 8, 8, 7)], [BrokerData("C", "b", {0: "h:1"})], topic="TBW102")
    capped = limit_queue_nums(tbw, 4)
    assert (capped.queue_datas[0].read_queue_nums, capped.queue_datas[0].write_queue_nums) == (4, 4)
    assert tbw.queue_datas[0].write_queue_nums == 8, "the cached TBW102 route is not modified"
    assert len(publish_queues(capped, "NewTopic")) == 4


def test_perm_helpers() -> None:
    assert perm_to_string(6) == "RW-" and perm_to_string(PERM_READ | PERM_INHERIT) == "R-X"
    assert is_readable(7) and is_writeable(7) and not is_writeable(PERM_READ)


@pytest.mark.parametrize("bad", [b"[]", b'{"queueDatas":[{"perm":6}]}', b'{"brokerDatas":[{"brokerAddrs":[]}]}',
                                 b'{"brokerDatas":[{"brokerName":"b","brokerAddrs":{"x":"h:1"}}]}', b"{oops"])
def test_malformed_routes_raise_protocol_error(bad: bytes) -> None:
    with pytest.raises(ProtocolError):
        TopicRouteData.from_json(bad)
