"""The client end to end over real TCP on 127.0.0.1, against small scripted servers.

The servers are :class:`RemotingServer` instances with a few processors that
answer with captured 4.9.8 responses (routes, a FOUND pull) or with answers
built by the typed headers, and record what the client sent. They check the
parts only a socket shows: failover between name servers, timeouts, requests
from the broker to the client, reconnecting, and pending requests failing
when the connection goes.
"""

from __future__ import annotations

import asyncio
import socket
import zlib
from dataclasses import dataclass, field
from typing import Any

import pytest

from rmqrun.client.broker import BrokerClient, PullStatus, SendStatus
from rmqrun.client.errors import NameServerUnavailableError, SendFailedError
from rmqrun.client.instance import ClientInstance, ConsumerCallbacks
from rmqrun.client.namesrv import NameServerClient
from rmqrun.client.producer import Producer
from rmqrun.client.route import BrokerData, QueueData, TopicRouteData
from rmqrun.model import MessageQueue
from rmqrun.protocol.bodies import HeartbeatData
from rmqrun.protocol.headers import (
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
)
from rmqrun.remoting import frame
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection, ConnectionPool
from rmqrun.remoting.errors import (
    ConnectionClosedError,
    MessageIllegalError,
    ProtocolError,
    RequestTimeoutError,
    SubscriptionError,
    TopicNotExistError,
)
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import scan_records
from rmqrun.remoting.message_batch import decode_batch
from rmqrun.remoting.message_props import java_string_hash, string_to_properties
from rmqrun.remoting.msg_id import offset_msg_id
from rmqrun.remoting.server import RemotingServer
from tests import captures
from tests.waiting import eventually_async

NOT_EXIST_REMARK = ("No topic route info in name server for the topic: {}\n"
                    "See http://rocketmq.apache.org/docs/faq/ for further details.")


def run(coro: Any, limit: float = 20) -> Any:
    return asyncio.run(asyncio.wait_for(coro, limit))


def dead_address() -> str:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


class FakeNameServer:
    def __init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0, name="fake-namesrv")
        self.routes: dict[str, TopicRouteData] = {}
        self.asked: list[tuple[str, int]] = []
        self.hang = False
        self.server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self._route)

    async def _route(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        topic = cmd.ext_fields["topic"]
        self.asked.append((topic, cmd.version))
        if self.hang:
            await asyncio.sleep(3600)
        route = self.routes.get(topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, NOT_EXIST_REMARK.format(topic))
        return cmd.response(ResponseCode.SUCCESS, body=route.to_json(standard=cmd.version >= 401))

    @property
    def address(self) -> str:
        return self.server.address


@dataclass
class FakeBroker:
    name: str
    server: RemotingServer = field(init=False)
    sends: list[tuple[int, SendMessageRequestHeader, bytes, bool]] = field(default_factory=list)
    heartbeats: list[HeartbeatData] = field(default_factory=list)
    unregisters: list[UnregisterClientRequestHeader] = field(default_factory=list)
    fail_codes: list[int] = field(default_factory=list)
    client_conns: list[Connection] = field(default_factory=list)
    offsets: dict[int, int] = field(default_factory=dict)
    pull_answer: RemotingCommand | None = None
    got_send: asyncio.Event = field(default_factory=asyncio.Event)
    pulls_held: int = 0
    answer_delay: float = 0.0  # seconds a stored send waits for its answer

    def __post_init__(self) -> None:
        self.server = RemotingServer("127.0.0.1", 0, name=f"fake-{self.name}")
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            self.server.register(code, self._send)
        self.server.register(RequestCode.HEART_BEAT, self._heartbeat)
        self.server.register(RequestCode.UNREGISTER_CLIENT, self._unregister)
        self.server.register(RequestCode.PULL_MESSAGE, self._pull)

    @property
    def address(self) -> str:
        return self.server.address

    async def _send(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        header = SendMessageRequestHeader.from_ext(cmd.ext_fields)
        self.sends.append((cmd.code, header, cmd.body or b"", cmd.is_oneway))
        self.got_send.set()
        if self.fail_codes:
            return cmd.response(self.fail_codes.pop(0), "scripted failure")
        offset = self.offsets.get(header.queue_id, 0)
        count = len(decode_batch(cmd.body or b"")) if header.batch else 1
        self.offsets[header.queue_id] = offset + count
        ids = ",".join(offset_msg_id(self.address, 1000 * len(self.sends) + i) for i in range(count))
        if self.answer_delay:
            await asyncio.sleep(self.answer_delay)
        answer = SendMessageResponseHeader(msg_id=ids, queue_id=header.queue_id, queue_offset=offset,
                                           msg_region="DefaultRegion", trace_on=True)
        return cmd.response(ResponseCode.SUCCESS, ext_fields=answer.to_ext())

    async def _heartbeat(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.heartbeats.append(HeartbeatData.from_json(cmd.body or b""))
        self.client_conns.append(conn)
        return cmd.response(ResponseCode.SUCCESS)

    async def _unregister(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.unregisters.append(UnregisterClientRequestHeader.from_ext(cmd.ext_fields))
        return cmd.response(ResponseCode.SUCCESS)

    async def _pull(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        if self.pull_answer is None:
            self.pulls_held += 1
            await asyncio.sleep(3600)  # a long poll nobody answers
        answer = self.pull_answer
        assert answer is not None
        return RemotingCommand(answer.code, dict(answer.ext_fields), answer.body, opaque=cmd.opaque,
                               flag=answer.flag, remark=answer.remark, language="JAVA")


def route_of(topic: str, *brokers: FakeBroker, queues: int = 4, perm: int = 6) -> TopicRouteData:
    return TopicRouteData([QueueData(b.name, queues, queues, perm) for b in brokers],
                          [BrokerData("DefaultCluster", b.name, {0: b.address}) for b in brokers], topic=topic)


async def start(*servers: Any) -> None:
    for s in servers:
        await s.server.start()


async def stop(*servers: Any) -> None:
    for s in servers:
        await s.server.stop()


# --------------------------------------------------------------------------- name server

def test_name_server_failover_when_the_first_is_down() -> None:
    async def main() -> None:
        ns = FakeNameServer()
        await start(ns)
        broker = FakeBroker("broker-a")
        ns.routes["T"] = route_of("T", broker)  # unstarted broker: only its address is used
        pool = ConnectionPool()
        # One deadline covers the failover: a dead server that were waited out would leave the live one no time;
        # 600 s is past run()'s limit, so only a refusal noticed at once lets the route come back.
        client = NameServerClient([dead_address(), ns.address], pool, timeout=600)
        client._index = 0  # noqa: SLF001 - make the dead one preferred
        route = await client.get_route("T")
        assert route.topic == "T" and route.queue_datas[0].read_queue_nums == 4
        assert client.preferred == ns.address, "the working server stays preferred"
        assert ns.asked == [("T", 409)], "version >= 401 asks for strict JSON"
        await client.get_route("T")
        assert len(ns.asked) == 2
        with pytest.raises(TopicNotExistError) as info:
            await client.get_route("Nope")
        assert "Nope" in info.value.remark and not info.value.retriable
        await pool.close()
        await stop(ns)
        with pytest.raises(NameServerUnavailableError):
            await NameServerClient(f"{dead_address()};{dead_address()}", ConnectionPool()).get_route("T")
    run(main())


def test_name_server_timeout_and_next_call_prefers_another() -> None:
    async def main() -> None:
        slow, good = FakeNameServer(), FakeNameServer()
        await start(slow, good)
        slow.hang = True
        good.routes["T"] = route_of("T", FakeBroker("b"))
        pool = ConnectionPool()
        client = NameServerClient([slow.address, good.address], pool, timeout=0.3)
        client._index = 0  # noqa: SLF001
        with pytest.raises(RequestTimeoutError):
            await client.get_route("T")
        # the timeout is the hanging server's: it was asked and never answered, and no other was asked meanwhile
        assert [topic for topic, _ in slow.asked] == ["T"] and good.asked == []
        assert (await client.get_route("T")).topic == "T"
        assert client.preferred == good.address
        await pool.close()
        await stop(slow, good)
    run(main())


@captures.requires_captures
def test_captured_route_answers_through_a_socket() -> None:
    # Replay the captured name-server answers (strict for Java, bare keys for C++) over TCP.
    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)
        answers = {}
        for cf in captures.responses_to(RequestCode.GET_ROUTEINFO_BY_TOPIC):
            if cf["code"] == 0:
                req = captures.request_of(cf)
                answers.setdefault(req["header"]["version"] >= 401, cf.body)  # type: ignore[index]
        assert set(answers) == {True, False}

        async def answer(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            strict = cmd.ext_fields["topic"] == "strict"
            return cmd.response(0, body=answers[strict])
        server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, answer)
        await server.start()
        pool = ConnectionPool()
        client = NameServerClient(server.address, pool)
        for topic in ("strict", "quirky"):
            route = await client.get_route(topic)
            assert route.master_address("broker-a") == "127.0.0.1:10911"
        await pool.close()
        await server.stop()
    run(main())


# --------------------------------------------------------------------------- connections

def test_pool_reconnects_after_the_server_drops_the_connection() -> None:
    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)
        calls = 0

        async def max_offset(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
            nonlocal calls
            calls += 1
            if calls == 1:
                conn.close()
                return None
            return cmd.response(0, ext_fields={"offset": "42"})
        server.register(RequestCode.GET_MAX_OFFSET, max_offset)
        await server.start()
        pool = ConnectionPool()
        client = BrokerClient(pool)
        mq = MessageQueue("T", "b", 0)
        with pytest.raises(ConnectionClosedError):
            await client.get_max_offset(server.address, mq)
        first = pool.connections().get(server.address)
        assert first is None, "the dropped connection is gone from the pool"
        assert await client.get_max_offset(server.address, mq) == 42
        assert pool.connections()[server.address] is not None
        await pool.close()
        await server.stop()
    run(main())


@captures.requires_captures
def test_pull_found_and_pending_pulls_fail_when_the_connection_closes() -> None:
    async def main() -> None:
        broker = FakeBroker("broker-a")
        await start(broker)
        pool = ConnectionPool()
        client = BrokerClient(pool)
        header = PullMessageRequestHeader(consumer_group="G", topic="ScnB_Topic", queue_id=3, queue_offset=0,
                                          max_msg_nums=32, sys_flag=2, commit_offset=0,
                                          suspend_timeout_millis=15000, sub_version=1, expression_type="TAG")
        # Two long polls held by the broker, then the broker goes away. Their timeout is past run()'s limit:
        # they can only end within the test by failing with the connection.
        held = [asyncio.create_task(client.pull(broker.address, header, timeout=600)) for _ in range(2)]
        await eventually_async(lambda: broker.pulls_held == 2, what="the broker to hold both pulls")
        assert not any(t.done() for t in held)
        await broker.server.stop()
        for task in held:
            with pytest.raises(ConnectionClosedError):
                await task

        found = next(cf for cf in captures.responses_to(RequestCode.PULL_MESSAGE, "b") if cf["code"] == 0)
        broker2 = FakeBroker("broker-a")
        broker2.pull_answer = frame.decode_with_prefix(found.raw)
        await start(broker2)
        result = await client.pull(broker2.address, header)
        assert result.status is PullStatus.FOUND and result.remark == "FOUND"
        assert result.body == found.body and len(scan_records(result.body)) >= 1
        assert result.next_begin_offset == int(found["header"]["extFields"]["nextBeginOffset"])
        await pool.close()
        await stop(broker2)
    run(main())


def test_query_not_found_is_none_and_other_codes_raise() -> None:
    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0)
        answers = [ResponseCode.QUERY_NOT_FOUND, ResponseCode.SUCCESS, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST]

        async def query(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
            code = answers.pop(0)
            return cmd.response(code, "scripted", ext_fields={"offset": "17"} if code == 0 else {})
        server.register(RequestCode.QUERY_CONSUMER_OFFSET, query)
        await server.start()
        pool = ConnectionPool()
        client = BrokerClient(pool)
        mq = MessageQueue("T", "b", 1)
        assert await client.query_consumer_offset(server.address, "G", mq) is None
        assert await client.query_consumer_offset(server.address, "G", mq) == 17
        with pytest.raises(SubscriptionError) as info:
            await client.query_consumer_offset(server.address, "G", mq)
        assert info.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and info.value.remark == "scripted"
        await pool.close()
        await server.stop()
    run(main())


def test_broker_requests_reach_the_instance_callbacks() -> None:
    async def main() -> None:
        ns, broker = FakeNameServer(), FakeBroker("broker-a")
        await start(ns, broker)
        ns.routes["T"] = route_of("T", broker)
        inst = ClientInstance(ns.address, client_ip="127.0.0.1")
        notified = asyncio.Event()
        groups: list[str] = []

        async def ids_changed(header: Any) -> None:
            groups.append(header.consumer_group)
            notified.set()

        async def running_info(header: Any) -> dict[str, Any]:
            return {"properties": {"clientId": header.client_id}}
        from rmqrun.protocol.bodies import ConsumerData
        inst.register_consumer("G", data=lambda: ConsumerData("G"),
                               callbacks=ConsumerCallbacks(consumer_ids_changed=ids_changed, running_info=running_info))
        await inst.get_route("T")
        assert await inst.send_heartbeat() == 1
        assert broker.heartbeats[-1].client_id == inst.client_id
        assert [c.group_name for c in broker.heartbeats[-1].consumer_data_set] == ["G"]
        conn = broker.client_conns[-1]

        await conn.oneway(RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"},
                                          language="JAVA"))
        await asyncio.wait_for(notified.wait(), 2)
        assert groups == ["G"]
        resp = await conn.request(RemotingCommand(RequestCode.GET_CONSUMER_RUNNING_INFO,
                                                  {"consumerGroup": "G", "clientId": inst.client_id,
                                                   "jstackEnable": "false"}), 2)
        assert resp.code == ResponseCode.SUCCESS and inst.client_id.encode() in (resp.body or b"")
        resp = await conn.request(RemotingCommand(RequestCode.CHECK_TRANSACTION_STATE, {}), 2)
        assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        await inst.unregister_consumer("G")
        assert broker.unregisters[-1].consumer_group == "G"
        assert broker.unregisters[-1].client_id == inst.client_id
        await inst.close()
        await stop(ns, broker)
    run(main())


# --------------------------------------------------------------------------- producer

def test_producer_sends_like_the_java_producer() -> None:
    async def main() -> None:
        ns, broker = FakeNameServer(), FakeBroker("broker-a")
        await start(ns, broker)
        ns.routes["T"] = route_of("T", broker)
        ns.routes["TBW102"] = route_of("TBW102", broker, queues=8, perm=7)
        async with Producer(ns.address, "PG") as producer:
            results = [await producer.send("T", f"m{i}".encode(), tags="TagA", keys=["k1", "k2"],
                                           properties={"color": "red"}) for i in range(8)]
            assert all(r.status is SendStatus.SEND_OK for r in results)
            queue_ids = [r.queue.queue_id for r in results]
            assert sorted(queue_ids) == [0, 0, 1, 1, 2, 2, 3, 3]
            assert all((b - a) % 4 == 1 for a, b in zip(queue_ids, queue_ids[1:])), "round robin"
            code, header, body, oneway = broker.sends[0]
            assert code == RequestCode.SEND_MESSAGE_V2 and not oneway and body == b"m0"
            assert (header.producer_group, header.default_topic, header.default_topic_queue_nums) == ("PG", "TBW102", 4)
            assert header.bname == "broker-a" and header.sys_flag == 0 and header.reconsume_times == 0
            props = string_to_properties(header.properties or "")
            assert props["TAGS"] == "TagA" and props["KEYS"] == "k1 k2" and props["color"] == "red"
            assert props["WAIT"] == "true" and props["UNIQ_KEY"] == results[0].msg_id
            assert len({r.msg_id for r in results}) == 8 and all(len(r.msg_id) == 32 for r in results)

            big = bytes(range(256)) * 20  # 5120 bytes, compressible
            await producer.send("T", big)
            _, header, body, _ = broker.sends[-1]
            assert header.sys_flag == 769 and zlib.decompress(body) == big
            await producer.send("T", b"x" * 4095)
            assert broker.sends[-1][1].sys_flag == 0, "below 4096 bytes nothing is compressed"

            expected_q = abs(java_string_hash("order-101")) % 4
            for _ in range(3):
                r = await producer.send("T", b"o", sharding_key="order-101")
                assert r.queue.queue_id == expected_q
            r = await producer.send("T", b"q", queue=2, delay_level=3)
            assert r.queue.queue_id == 2 and string_to_properties(broker.sends[-1][1].properties or "")["DELAY"] == "3"

            batch = await producer.send_batch("T", [b"b0", b"b1", b"b2"])
            code, header, body, _ = broker.sends[-1]
            assert code == RequestCode.SEND_BATCH_MESSAGE and header.batch
            items = decode_batch(body)
            assert [i.body for i in items] == [b"b0", b"b1", b"b2"]
            assert batch.msg_id == ",".join(i.properties["UNIQ_KEY"] for i in items)
            assert batch.offset_msg_id.count(",") == 2

            broker.got_send.clear()
            await producer.send_oneway("T", b"fire")
            await asyncio.wait_for(broker.got_send.wait(), 2)
            assert broker.sends[-1][3] is True and broker.sends[-1][2] == b"fire"

            await asyncio.sleep(0)
            assert any(p.group_name == "PG" for hb in broker.heartbeats for p in hb.producer_data_set)
        assert [u.producer_group for u in broker.unregisters] == ["PG"]
        await stop(ns, broker)
    run(main())


def test_producer_auto_creates_through_tbw102() -> None:
    async def main() -> None:
        ns, broker = FakeNameServer(), FakeBroker("broker-a")
        await start(ns, broker)
        ns.routes["TBW102"] = route_of("TBW102", broker, queues=8, perm=7)
        async with Producer(ns.address, "PG") as producer:
            ids = {(await producer.send("NewTopic", b"x")).queue.queue_id for _ in range(8)}
            assert ids == {0, 1, 2, 3}, "the TBW102 route is capped at defaultTopicQueueNums"
            assert ("NewTopic", 409) in ns.asked and ("TBW102", 409) in ns.asked
            # Once the name server knows the topic, a refresh switches to its real route.
            ns.routes["NewTopic"] = route_of("NewTopic", broker, queues=2)
            await producer.instance.refresh_routes()
            ids = {(await producer.send("NewTopic", b"x")).queue.queue_id for _ in range(4)}
            assert ids == {0, 1}
        await stop(ns, broker)
    run(main())


def test_producer_retries_on_another_broker_and_gives_up_cleanly() -> None:
    async def main() -> None:
        ns, a, b = FakeNameServer(), FakeBroker("broker-a"), FakeBroker("broker-b")
        await start(ns, a, b)
        ns.routes["T"] = route_of("T", a, b)
        async with Producer(ns.address, "PG") as producer:
            a.fail_codes = [ResponseCode.SERVICE_NOT_AVAILABLE] * 100
            # Round robin over [a0..a3, b0..b3] reaches broker-a within 8 sends; every attempt
            # after a failure avoids the broker that failed, so all land on broker-b.
            results = [await producer.send("T", b"x") for _ in range(8)]
            assert all(r.queue.broker_name == "broker-b" for r in results)
            assert len(b.sends) == 8 and a.sends, "broker-a was tried, failed, and was left"

            a.fail_codes = []
            b.fail_codes = [ResponseCode.MESSAGE_ILLEGAL]
            with pytest.raises(MessageIllegalError):
                # Not retriable: raised by the first attempt that reaches broker-b (within 5 sends).
                for _ in range(5):
                    await producer.send("T", b"x")
            assert not b.fail_codes

            a.fail_codes = [ResponseCode.SYSTEM_ERROR] * 5
            b.fail_codes = [ResponseCode.SYSTEM_ERROR] * 5
            before = len(a.sends) + len(b.sends)
            with pytest.raises(SendFailedError) as info:
                await producer.send("T", b"x")
            assert info.value.attempts == 3 and len(a.sends) + len(b.sends) - before == 3
            assert info.value.__cause__ is not None
            a.fail_codes, b.fail_codes = [], []

            await b.server.stop()
            for _ in range(4):
                r = await producer.send("T", b"x")  # connection refused on b: retried on a
                assert r.queue.broker_name == "broker-a"
        await stop(ns, a)
    run(main())


def test_a_send_answered_too_late_is_not_sent_again() -> None:
    """A broker may store a message and answer after the send timeout: the timed-out attempt ends
    the send (as the Java client's spent budget does). The C++ client sends it again to the next
    queue and stores a second copy (tests/unit/test_cpp_peer_against_stub_broker.py)."""
    async def main() -> None:
        ns, a, b = FakeNameServer(), FakeBroker("broker-a"), FakeBroker("broker-b")
        await start(ns, a, b)
        ns.routes["T"] = route_of("T", a, b)
        async with Producer(ns.address, "PG", send_timeout=0.3) as producer:
            a.answer_delay = b.answer_delay = 2.0
            with pytest.raises(SendFailedError) as info:
                await producer.send("T", b"late")
            assert info.value.attempts == 1 and isinstance(info.value.__cause__, RequestTimeoutError)
            assert len(a.sends) + len(b.sends) == 1

            # The same when the attempt's timer fires before the send's budget is spent (a loop whose
            # timers round, as uvloop's do to the millisecond): still one attempt, one stored copy.
            real_send = producer.instance.broker.send

            async def early_timer(*args: Any, timeout: float, **kwargs: Any) -> Any:
                return await real_send(*args, timeout=min(timeout, 0.3), **kwargs)

            producer.instance.broker.send = early_timer  # type: ignore[method-assign]
            with pytest.raises(SendFailedError) as info:
                await producer.send("T", b"late", timeout=5.0)
            assert info.value.attempts == 1 and isinstance(info.value.__cause__, RequestTimeoutError)
            assert len(a.sends) + len(b.sends) == 2
        await stop(ns, a, b)
    run(main())


def test_a_name_server_that_drops_the_connection_is_skipped_and_an_empty_route_refused() -> None:
    async def main() -> None:
        dropping, good = FakeNameServer(), FakeNameServer()

        async def drop(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
            dropping.asked.append((cmd.ext_fields["topic"], cmd.version))
            conn.close()  # a name server going down in the middle of the request
            return None
        dropping.server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, drop)
        await start(dropping, good)
        good.routes["T"] = route_of("T", FakeBroker("broker-a"))
        pool = ConnectionPool()
        client = NameServerClient([dropping.address, good.address], pool)
        client._index = 0  # noqa: SLF001 - make the dropping one preferred
        route = await client.get_route("T")
        assert route.topic == "T" and dropping.asked == [("T", 409)] and good.asked == [("T", 409)]
        assert client.preferred == good.address

        async def empty(conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
            return cmd.response(ResponseCode.SUCCESS)  # SUCCESS without a body
        good.server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, empty)
        with pytest.raises(ProtocolError, match="answered the route of 'T' with an empty body"):
            await client.get_route("T")
        await pool.close()
        await stop(dropping, good)
    run(main())
