"""Client identity (client id, local address, UNIQ_KEY) and the instance's dispatch and broker table."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re

import pytest

from rmqrun.client import msgid
from rmqrun.client.instance import ClientInstance, ConsumerCallbacks, build_client_id
from rmqrun.client.netutil import choose_address, local_ip
from rmqrun.client.route import BrokerData, QueueData, TopicRouteData
from rmqrun.model import MessageQueue
from rmqrun.protocol.bodies import GetConsumerStatusBody, MessageModel
from rmqrun.protocol.headers import NotifyConsumerIdsChangedRequestHeader
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message_props import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, string_to_properties
from tests import captures


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 10))


# --------------------------------------------------------------------------- client id

def test_client_id_shapes() -> None:
    clustering = ClientInstance("127.0.0.1:9876", client_ip="10.1.2.3")
    assert re.fullmatch(rf"10\.1\.2\.3@{os.getpid()}#\d{{13}}", clustering.client_id)
    other = ClientInstance("127.0.0.1:9876", client_ip="10.1.2.3")
    assert other.client_id != clustering.client_id, "two instances of one process never share an id"
    broadcasting = ClientInstance("127.0.0.1:9876", client_ip="10.1.2.3", message_model=MessageModel.BROADCASTING)
    assert broadcasting.client_id == "10.1.2.3@DEFAULT"
    named = ClientInstance("127.0.0.1:9876", client_ip="10.1.2.3", instance_name="orderly-c1", unit_name="u")
    assert named.client_id == "10.1.2.3@orderly-c1@u"
    assert build_client_id("1.2.3.4", "x") == "1.2.3.4@x"


def test_address_choice_follows_java() -> None:
    assert choose_address(["192.168.1.5", "10.0.0.7", "172.17.0.1"]) == "10.0.0.7"
    assert choose_address(["192.168.1.5", "192.168.9.9"]) == "192.168.9.9", "last private one"
    assert choose_address(["fe80::1", "192.168.1.5"]) == "192.168.1.5", "IPv4 preferred"
    assert choose_address(["2001:db8::1"]) == "2001:db8::1"
    assert choose_address([]) == "127.0.0.1"
    ip = local_ip()
    assert ip == "127.0.0.1" or not ip.startswith("127.")


# --------------------------------------------------------------------------- UNIQ_KEY

def test_unique_ids_have_the_java_layout() -> None:
    gen = msgid.UniqueIdGenerator("192.0.2.2", pid=23957, loader_hash=0x4E0E2F2A)
    now = 1795303759249  # born timestamp of a captured Java message
    first = gen.next_id(now)
    assert re.fullmatch(r"[0-9A-F]{32}", first)
    assert first.startswith("C0000202" + "5D95" + "4E0E2F2A")
    assert msgid.id_pid(first) == 23957
    local_month = dt.datetime.fromtimestamp(now / 1000).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    assert msgid.id_time_offset(first) == now - int(local_month.timestamp() * 1000)
    second = gen.next_id(now)
    assert first[:-4] == second[:-4] and int(second[-4:], 16) == int(first[-4:], 16) + 1
    # A small step back of the clock (before the month the generator is in) keeps the time
    # field at 0 rather than negative, like Java's NTP guard.
    start = int(local_month.timestamp() * 1000)
    assert msgid.id_time_offset(gen.next_id(start - 5)) == 0
    assert msgid.id_time_offset(gen.next_id(start + 7)) == 7


def test_counter_wraps_at_16_bits() -> None:
    gen = msgid.UniqueIdGenerator("10.0.0.1")
    gen._counter = 0xFFFF  # noqa: SLF001
    assert gen.next_id().endswith("FFFF") and gen.next_id().endswith("0000")


@captures.requires_captures
def test_captured_java_ids_decode_with_the_same_layout() -> None:
    # The 4.9.8 producer's ids (IPv6 host address, 28 bytes): pid and month offset read back
    # from the id agree with the client id and the born timestamp of the same frame.
    checked = 0
    for cf in captures.requests(RequestCode.SEND_MESSAGE_V2, "a"):
        ext = cf["header"]["extFields"]
        uniq = string_to_properties(ext["i"])[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]
        assert msgid.id_pid(uniq) == 23957
        month_start = int(ext["g"]) - msgid.id_time_offset(uniq)
        start = dt.datetime.fromtimestamp(month_start / 1000, dt.timezone.utc)
        assert (start.day, start.hour, start.minute, start.second) == (1, 0, 0, 0)
        checked += 1
    assert checked >= 10


# --------------------------------------------------------------------------- broker table

def _route(*brokers: BrokerData) -> TopicRouteData:
    return TopicRouteData([QueueData(b.broker_name, 4, 4, 6) for b in brokers], list(brokers))


def test_broker_table_and_find_broker() -> None:
    inst = ClientInstance("127.0.0.1:9876", client_ip="10.0.0.1")
    inst.set_route("T1", _route(BrokerData("C", "a", {0: "h:1", 1: "h:2"})))
    inst.set_route("T2", _route(BrokerData("C", "b", {1: "h:3", 2: "h:4"})))
    assert inst.broker_address("a") == "h:1" and inst.broker_address("b") is None
    assert inst.find_broker("a").address == "h:1"  # type: ignore[union-attr]
    slave = inst.find_broker("a", broker_id=1)
    assert slave is not None and slave.address == "h:2" and slave.slave
    assert inst.find_broker("a", master_only=True).address == "h:1"  # type: ignore[union-attr]
    assert inst.find_broker("b", master_only=True) is None
    assert inst.find_broker("b", broker_id=1).address == "h:3"  # type: ignore[union-attr]
    assert inst.find_broker("b").broker_id == 1  # type: ignore[union-attr]
    assert inst.find_broker("b", broker_id=0, only_this_broker=True) is None
    assert inst.find_broker("zzz") is None
    assert inst.broker_addresses() == ["h:1", "h:2", "h:3", "h:4"]
    assert inst.broker_addresses(master_only=True) == ["h:1"]
    inst.forget_route("T2")
    assert inst.broker_addresses() == ["h:1", "h:2"], "brokers no route names are dropped"


def test_route_listeners_fire_on_change_only() -> None:
    inst = ClientInstance("127.0.0.1:9876", client_ip="10.0.0.1")
    seen: list[str] = []
    inst.route_listeners.append(lambda topic, route: seen.append(topic))
    inst.set_route("T", _route(BrokerData("C", "a", {0: "h:1"})))
    inst.set_route("T", _route(BrokerData("C", "a", {0: "h:1"})))
    inst.set_route("T", _route(BrokerData("C", "a", {0: "h:9"})))
    assert seen == ["T", "T"]


# --------------------------------------------------------------------------- dispatch

def test_dispatch_to_group_callbacks() -> None:
    async def main() -> None:
        inst = ClientInstance("127.0.0.1:9876", client_ip="10.0.0.1")
        notified: list[str] = []

        async def on_ids(header: NotifyConsumerIdsChangedRequestHeader) -> None:
            notified.append(header.consumer_group)

        async def status(header):  # type: ignore[no-untyped-def]
            return {MessageQueue(header.topic, "b", 0): 9}

        async def running(header):  # type: ignore[no-untyped-def]
            return {"properties": {"group": header.consumer_group}}

        inst.register_consumer("G", callbacks=ConsumerCallbacks(consumer_ids_changed=on_ids,
                                                                consumer_status=status, running_info=running))
        serve = inst._serve  # noqa: SLF001 - the pool's request handler
        notify = RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"}, flag=2)
        assert await serve(None, notify) is None  # type: ignore[arg-type]
        assert notified == ["G"]
        other = RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "H"}, flag=2)
        assert await serve(None, other) is None and notified == ["G"]  # type: ignore[arg-type]

        resp = await serve(None, RemotingCommand(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,  # type: ignore[arg-type]
                                                 {"topic": "T", "group": "G"}, opaque=5))
        assert resp is not None and resp.code == ResponseCode.SUCCESS and resp.is_response and resp.opaque == 5
        assert GetConsumerStatusBody.from_json(resp.body).message_queue_table == {MessageQueue("T", "b", 0): 9}

        resp = await serve(None, RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO,  # type: ignore[arg-type]
                                                 {"consumerGroup": "H", "clientId": "c", "jstackEnable": "false"}))
        assert resp.code == ResponseCode.SYSTEM_ERROR and "<H> not exist" in resp.remark
        resp = await serve(None, RemotingCommand(RequestCode.CONSUME_MESSAGE_DIRECTLY,  # type: ignore[arg-type]
                                                 {"consumerGroup": "G"}, body=b"x"))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "nobody answers this code"
        resp = await serve(None, RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, {}))  # type: ignore[arg-type]
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED

        inst.register_consumer("H", callbacks=ConsumerCallbacks(running_info=None))
        resp = await serve(None, RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO,  # type: ignore[arg-type]
                                                 {"consumerGroup": "H", "clientId": "c"}))
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "group H registered no running_info"
        resp = await serve(None, RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO,  # type: ignore[arg-type]
                                                 {"consumerGroup": "G", "clientId": "c"}))
        assert resp.code == ResponseCode.SUCCESS and resp.body == b'{"properties":{"group":"G"}}'
    run(main())


def test_heartbeat_data_lists_groups() -> None:
    from rmqrun.protocol.bodies import ConsumerData
    inst = ClientInstance("127.0.0.1:9876", client_ip="10.0.0.1")
    assert run(inst.send_heartbeat()) == 0, "nothing registered, nothing sent"
    inst.register_producer("PG2")
    inst.register_producer("PG1")
    inst.register_consumer("CG", data=lambda: ConsumerData("CG"))
    data = inst.heartbeat_data()
    assert data.client_id == inst.client_id
    assert [p.group_name for p in data.producer_data_set] == ["PG1", "PG2"]
    assert [c.group_name for c in data.consumer_data_set] == ["CG"]


@pytest.mark.parametrize("bad", ["", ";", "localhost", "h:port"])
def test_bad_name_server_addresses_are_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        ClientInstance(bad)
