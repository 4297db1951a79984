"""The client instance: one client id, one connection pool, the route cache, the
broker→client request dispatch, and the periodic route refresh and heartbeat.

It plays the part of Java's ``MQClientInstance``. Producers and consumers
register with it; it tells every broker about them (HEART_BEAT), answers the
requests brokers send over the same connections (NOTIFY_CONSUMER_IDS_CHANGED,
GET_CONSUMER_RUNNING_INFO, RESET_CONSUMER_CLIENT_OFFSET,
CONSUME_MESSAGE_DIRECTLY, GET_CONSUMER_STATUS_FROM_CLIENT) by handing them to
the callbacks the consumer of that group registered, and keeps the broker
address table that turns a broker name from a route into an address.

The client id is ``ip@instanceName``; in clustering mode the default
instance name ``DEFAULT`` becomes ``<pid>#<random>`` so that two processes
with the same pid (containers) never share an id (see ROCKETMQ_FACTS §1.7).
Broadcasting keeps ``ip@DEFAULT`` so its local offset path stays stable.
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Sequence

from loguru import logger

from rmqrun.aio import cancel_and_wait
from rmqrun.protocol.bodies import (
    ConsumerData,
    GetConsumerStatusBody,
    HeartbeatData,
    MessageModel,
    ProducerData,
    ResetOffsetBody,
    dumps,
)
from rmqrun.client.broker import BrokerClient
from rmqrun.client.errors import NameServerUnavailableError
from rmqrun.client.failure_log import FailureLog, is_transport
from rmqrun.protocol.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from rmqrun.protocol.requests import Server, served_spec
from rmqrun.client.namesrv import NameServerClient
from rmqrun.client.netutil import local_ip
from rmqrun.client.route import MASTER_ID, TopicRouteData, publish_queues, subscribe_queues
from rmqrun.model import MessageQueue
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection, ConnectionPool
from rmqrun.remoting.errors import AccessDeniedError, RemotingError, TopicNotExistError
from rmqrun.remoting.frame import RemotingCommand, SerializeType
from rmqrun.remoting.security import ClientSecurity

DEFAULT_INSTANCE_NAME = "DEFAULT"

NotifyCallback = Callable[[NotifyConsumerIdsChangedRequestHeader], Awaitable[None]]
RunningInfoCallback = Callable[[GetConsumerRunningInfoRequestHeader], Awaitable[Any]]
ResetOffsetCallback = Callable[[ResetOffsetRequestHeader, "dict[MessageQueue, int]"], Awaitable[None]]
ConsumeDirectlyCallback = Callable[[ConsumeMessageDirectlyResultRequestHeader, bytes], Awaitable[Any]]
ConsumerStatusCallback = Callable[[GetConsumerStatusRequestHeader], Awaitable["dict[MessageQueue, int]"]]


@dataclass(slots=True)
class ConsumerCallbacks:
    """What a consumer group answers when a broker asks. A ``None`` callback means the
    request is answered with REQUEST_CODE_NOT_SUPPORTED.

    ``running_info`` and ``consume_message_directly`` return the response body: bytes,
    or an object :func:`rmqrun.protocol.bodies.dumps` can write (dicts keyed by
    MessageQueue are written the fastjson way). ``consume_message_directly`` gets the
    raw stored-message record.
    """

    consumer_ids_changed: NotifyCallback | None = None
    running_info: RunningInfoCallback | None = None
    reset_offset: ResetOffsetCallback | None = None
    consume_message_directly: ConsumeDirectlyCallback | None = None
    consumer_status: ConsumerStatusCallback | None = None


@dataclass(slots=True)
class _Consumer:
    data: Callable[[], ConsumerData] | None
    callbacks: ConsumerCallbacks


@dataclass(frozen=True, slots=True)
class FindBrokerResult:
    address: str
    broker_id: int

    @property
    def slave(self) -> bool:
        return self.broker_id != MASTER_ID


def build_client_id(ip: str, instance_name: str, unit_name: str | None = None) -> str:
    """ClientConfig.buildMQClientId."""
    return f"{ip}@{instance_name}" + (f"@{unit_name}" if unit_name else "")


def unique_instance_name() -> str:
    """``<pid>#<13 random digits>``, shaped like Java's ``pid#System.nanoTime()``."""
    return f"{os.getpid()}#{random.SystemRandom().randrange(10**12, 10**13)}"


RouteListener = Callable[[str, TopicRouteData], None]


class ClientInstance:
    def __init__(self, namesrv: str | Sequence[str], *,
                 instance_name: str = DEFAULT_INSTANCE_NAME,
                 message_model: MessageModel | str = MessageModel.CLUSTERING,
                 client_ip: str | None = None,
                 unit_name: str | None = None,
                 api_timeout: float = 3.0,
                 connect_timeout: float = 3.0,
                 poll_name_server_interval: float = 30.0,
                 heartbeat_interval: float = 30.0,
                 serialize_type: SerializeType = SerializeType.JSON,
                 security: ClientSecurity | None = None) -> None:
        self.client_ip = client_ip or local_ip()
        if MessageModel.parse(message_model) is MessageModel.CLUSTERING and instance_name == DEFAULT_INSTANCE_NAME:
            instance_name = unique_instance_name()
        self.instance_name = instance_name
        self.client_id = build_client_id(self.client_ip, instance_name, unit_name)
        #: ACL credentials and TLS, carried by every connection of this instance
        self.security = security
        #: the first ACL refusal any request of this instance got (None: none); see on_refusal
        self.refusal: AccessDeniedError | None = None
        self.refusal_listeners: list[Callable[[AccessDeniedError], None]] = []
        self._refusals_logged: set[str] = set()
        self.pool = ConnectionPool(handler=self._serve, connect_timeout=connect_timeout,
                                   serialize_type=serialize_type, security=security,
                                   on_refused=self._on_refused)
        self.namesrv = NameServerClient(namesrv, self.pool, timeout=api_timeout)
        self.broker = BrokerClient(self.pool, timeout=api_timeout)
        self.poll_name_server_interval = poll_name_server_interval
        self.heartbeat_interval = heartbeat_interval
        self.route_listeners: list[RouteListener] = []
        self._routes: dict[str, TopicRouteData] = {}
        #: route refreshes refused for a reason other than an outage: one incident for every topic
        self._route_failures = FailureLog()
        self._broker_addrs: dict[str, dict[int, str]] = {}
        self._producers: set[str] = set()
        self._consumers: dict[str, _Consumer] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._started = False

    def __repr__(self) -> str:
        return f"ClientInstance({self.client_id})"

    def _on_refused(self, error: AccessDeniedError) -> None:
        """An ACL refusal: kept (the first), logged once per distinct line, passed to the listeners.

        Waiting never fixes a refusal, so a long-running owner (``rmqrun run``) listens and stops.
        """
        if self.refusal is None:
            self.refusal = error
        if str(error) not in self._refusals_logged:
            self._refusals_logged.add(str(error))
            logger.error("{}", error)
        for listener in list(self.refusal_listeners):
            listener(error)

    # ----------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Start the periodic route refresh and heartbeat (idempotent)."""
        if self._started:
            return
        self._started = True
        self._spawn(self._every(0.01, self.poll_name_server_interval, self.refresh_routes), "route refresh")
        self._spawn(self._every(1.0, self.heartbeat_interval, self.send_heartbeat), "heartbeat")

    async def close(self) -> None:
        """Stop the periodic tasks and close every connection (pending requests fail)."""
        tasks = list(self._tasks)
        self._tasks = set()
        await cancel_and_wait(tasks)
        self._started = False
        await self.pool.close()

    def _spawn(self, coro: Awaitable[Any], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(f"{name} {self.client_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    @staticmethod
    async def _every(first_delay: float, interval: float, job: Callable[[], Awaitable[Any]]) -> None:
        await asyncio.sleep(first_delay)
        # While the cluster is down a periodic job fails every round: one incident (its start with the
        # cause, a summary now and then, its end), a traceback only for a cause that is a bug, once.
        failures = FailureLog()
        name = getattr(job, "__qualname__", repr(job))
        while True:
            try:
                await job()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a periodic job must survive a bad round
                failures.failed(name, f"periodic client task {name}", exc)
            else:
                failures.recovered(name)
            await asyncio.sleep(interval)

    # ----------------------------------------------------------------- registration

    def register_producer(self, group: str) -> None:
        self._producers.add(group)

    def register_consumer(self, group: str, *, data: Callable[[], ConsumerData] | None = None,
                          callbacks: ConsumerCallbacks | None = None) -> None:
        """``data`` is called for every heartbeat, so it always reports current subscriptions."""
        self._consumers[group] = _Consumer(data, callbacks or ConsumerCallbacks())

    async def unregister_producer(self, group: str) -> None:
        self._producers.discard(group)
        await self._unregister(producer_group=group)

    async def unregister_consumer(self, group: str) -> None:
        self._consumers.pop(group, None)
        await self._unregister(consumer_group=group)

    async def _unregister(self, *, producer_group: str | None = None, consumer_group: str | None = None) -> None:
        """UNREGISTER_CLIENT to every known broker, so a group rebalances at once."""
        async def one(addr: str) -> None:
            try:
                await self.broker.unregister_client(addr, self.client_id, producer_group=producer_group,
                                                    consumer_group=consumer_group)
            except RemotingError as exc:
                logger.warning("unregister {} from {} failed: {}", producer_group or consumer_group, addr, exc)
        await asyncio.gather(*(one(a) for a in self.broker_addresses()))

    # ----------------------------------------------------------------- routes

    def route(self, topic: str) -> TopicRouteData | None:
        """The cached route, without asking the name server."""
        return self._routes.get(topic)

    def topics(self) -> list[str]:
        return list(self._routes)

    async def update_route(self, topic: str) -> TopicRouteData:
        """Fetch the topic's route now and cache it; raises TopicNotExistError."""
        route = await self.namesrv.get_route(topic)
        self.set_route(topic, route)
        return route

    async def get_route(self, topic: str, *, refresh: bool = False) -> TopicRouteData:
        route = None if refresh else self._routes.get(topic)
        return route if route is not None else await self.update_route(topic)

    def set_route(self, topic: str, route: TopicRouteData) -> None:
        """Cache a route (e.g. a producer's TBW102-derived route for a topic not yet created)."""
        route.topic = topic
        old = self._routes.get(topic)
        self._routes[topic] = route
        new_brokers = self._rebuild_broker_table()
        if old is None or old.to_dict() != route.to_dict():
            for listener in list(self.route_listeners):
                try:
                    listener(topic, route)
                except Exception as exc:
                    logger.opt(exception=exc).error("route listener failed for {}", topic)
        if new_brokers and (self._producers or self._consumers) and self._started:
            # A broker we never told about our groups: tell it now, not in 30 s.
            self._spawn(self._heartbeat_to(new_brokers), "heartbeat to new brokers")

    def forget_route(self, topic: str) -> None:
        if self._routes.pop(topic, None) is not None:
            self._rebuild_broker_table()

    async def refresh_routes(self) -> None:
        """Refresh every cached route. A topic the name server no longer knows keeps its old
        route (a producer's auto-create route, or a transient name-server gap)."""
        failed = False
        for topic in list(self._routes):
            try:
                await self.update_route(topic)
            except TopicNotExistError:
                pass
            except (NameServerUnavailableError, RemotingError) as exc:
                failed = True
                if is_transport(exc):
                    # dead or hung: the name server's own incident line says it (namesrv.py), not one per topic
                    logger.debug("route refresh of {} failed: {}", topic, exc)
                else:  # e.g. a refusal: one incident whatever the topic count, naming the first topic
                    self._route_failures.failed("routes", "route refresh", f"{topic}: {exc}")
        if not failed:
            self._route_failures.recovered("routes")

    async def subscribe_queues(self, topic: str, *, refresh: bool = False) -> list[MessageQueue]:
        return subscribe_queues(await self.get_route(topic, refresh=refresh), topic)

    async def publish_queues(self, topic: str, *, refresh: bool = False) -> list[MessageQueue]:
        return publish_queues(await self.get_route(topic, refresh=refresh), topic)

    def _rebuild_broker_table(self) -> list[str]:
        """brokerAddrTable from every cached route (which also drops brokers no route names:
        cleanOfflineBroker). Returns addresses that were not in the table before."""
        before = set(self.broker_addresses())
        table: dict[str, dict[int, str]] = {}
        for route in self._routes.values():
            for data in route.broker_datas:
                table.setdefault(data.broker_name, {}).update(data.broker_addrs)
        self._broker_addrs = table
        return [a for a in self.broker_addresses() if a not in before]

    # ----------------------------------------------------------------- brokers

    def broker_address(self, broker_name: str) -> str | None:
        """The master's address (findBrokerAddressInPublish)."""
        return self._broker_addrs.get(broker_name, {}).get(MASTER_ID)

    def find_broker(self, broker_name: str, master_only: bool = False, *, broker_id: int = MASTER_ID,
                    only_this_broker: bool = False) -> FindBrokerResult | None:
        """A member of the named broker set (findBrokerAddressInSubscribe).

        Prefers ``broker_id`` (a pull's ``suggestWhichBrokerId``), then for a slave id the
        next id, then any member unless ``only_this_broker``. ``master_only`` accepts id 0 only.
        """
        members = self._broker_addrs.get(broker_name)
        if not members:
            return None
        if master_only:
            addr = members.get(MASTER_ID)
            return FindBrokerResult(addr, MASTER_ID) if addr else None
        addr = members.get(broker_id)
        if addr:
            return FindBrokerResult(addr, broker_id)
        if broker_id != MASTER_ID and members.get(broker_id + 1):
            return FindBrokerResult(members[broker_id + 1], broker_id + 1)
        if only_this_broker:
            return None
        bid = min(members)
        return FindBrokerResult(members[bid], bid)

    def broker_addresses(self, master_only: bool = False) -> list[str]:
        out: list[str] = []
        for members in self._broker_addrs.values():
            for bid, addr in sorted(members.items()):
                if (not master_only or bid == MASTER_ID) and addr not in out:
                    out.append(addr)
        return out

    # ----------------------------------------------------------------- heartbeat

    def heartbeat_data(self) -> HeartbeatData:
        consumers = [c.data() for c in self._consumers.values() if c.data is not None]
        return HeartbeatData(self.client_id, [ProducerData(g) for g in sorted(self._producers)], consumers)

    async def send_heartbeat(self) -> int:
        """HEART_BEAT to every broker (only masters when there is no consumer, like Java).
        Returns how many brokers accepted it; failures are logged, not raised."""
        if not self._producers and not self._consumers:
            return 0
        return await self._heartbeat_to(self.broker_addresses(master_only=not self._consumers))

    async def _heartbeat_to(self, addresses: Iterable[str]) -> int:
        data = self.heartbeat_data()

        async def one(addr: str) -> bool:
            try:
                await self.broker.heartbeat(addr, data)
                return True
            except AccessDeniedError:
                return False  # logged once, with its line, by _on_refused
            except RemotingError as exc:
                (logger.debug if self.broker.reported(exc) else logger.warning)("heartbeat to {} failed: {}",
                                                                                addr, exc)
                return False
        results = await asyncio.gather(*(one(a) for a in addresses))
        return sum(results)

    # ----------------------------------------------------------------- broker → client requests

    _SERVED = {
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: "consumer_ids_changed",
        RequestCode.GET_CONSUMER_RUNNING_INFO: "running_info",
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET: "reset_offset",
        RequestCode.CONSUME_MESSAGE_DIRECTLY: "consume_message_directly",
        RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: "consumer_status",
    }

    async def _serve(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        name = self._SERVED.get(cmd.code)  # type: ignore[call-overload]
        if name is None or not any(getattr(c.callbacks, name) for c in self._consumers.values()):
            return self._answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"{cmd.code} request type not supported")
        # the header's class is the spec's (rmqrun/protocol/requests.py): one place says what each code carries
        header: Any = served_spec(cmd.code, Server.CLIENT).header.from_ext(cmd.ext_fields)  # type: ignore[union-attr]
        args: tuple[Any, ...] = (header,)
        if cmd.code in (RequestCode.RESET_CONSUMER_CLIENT_OFFSET, RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT):
            group = header.group
            if cmd.code == RequestCode.RESET_CONSUMER_CLIENT_OFFSET:
                args = (header, ResetOffsetBody.from_json(cmd.body).offset_table if cmd.body else {})
        else:
            group = header.consumer_group
            if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
                args = (header, cmd.body or b"")
        consumer = self._consumers.get(group)
        if consumer is None:
            # Java: nothing to do for the oneway notifications, an error for the questions.
            if cmd.is_oneway or cmd.code in (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                             RequestCode.RESET_CONSUMER_CLIENT_OFFSET):
                return None
            return self._answer(cmd, ResponseCode.SYSTEM_ERROR,
                                f"The Consumer Group <{group}> not exist in this consumer")
        callback = getattr(consumer.callbacks, name)
        if callback is None:
            return self._answer(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"group {group} does not answer request code {cmd.code}")
        result = await callback(*args)
        if cmd.code in (RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, RequestCode.RESET_CONSUMER_CLIENT_OFFSET):
            return None  # the broker sends these oneway; Java never answers them
        if cmd.code == RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT:
            body = GetConsumerStatusBody(message_queue_table=dict(result or {})).encode()
        else:
            body = bytes(result) if isinstance(result, (bytes, bytearray)) else dumps(result)
        # Java's client sets the code of a response created with the default remark and leaves the remark.
        return self._answer(cmd, ResponseCode.SUCCESS, "not set any response code", body=body)

    @staticmethod
    def _answer(cmd: RemotingCommand, code: int, remark: str | None = None,
                body: bytes | None = None) -> RemotingCommand:
        resp = cmd.response(code, remark, body=body)
        resp.language = "PYTHON"
        return resp
