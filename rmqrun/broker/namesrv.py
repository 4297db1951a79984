"""The embedded name server: topic routes for the brokers of this process.

In RocketMQ the broker pushes its topic table to the name server
(REGISTER_BROKER every 30 s and on every new topic) and the name server
answers route queries from that copy. Here both live in one process, so the
name server reads each attached broker's :class:`TopicTable` directly: a topic
has a route the moment it exists, with no registration lag to race.

Answers follow ``DefaultRequestProcessor`` (4.9.8): GET_ROUTEINFO_BY_TOPIC
sends strict JSON when the request's version is >= 401 (V4_9_4) or it asks
with ``acceptStandardJsonOnly``, and fastjson's bare integer keys
(``"brokerAddrs":{0:"…"}``) otherwise, which older clients such as the C++
one expect; an unknown topic gets TOPIC_NOT_EXIST with the real remark.

The KV table (PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE) is Java's
``KVConfigManager``: admin tools keep the ordered topics' ``ORDER_TOPIC_CONFIG``
there (``mqadmin updateTopic -o``, ``rmqrun topic create --order``), and with
``order_message_enable`` (off by default, as in ``NamesrvConfig``) a route
carries the topic's value as ``orderTopicConf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from loguru import logger

from rmqrun.broker.kv_config import ORDER_TOPIC_CONFIG, KVConfigTable
from rmqrun.broker.topics import PERM_READ, PERM_WRITE, TopicConfig, TopicTable
from rmqrun.protocol.admin import (
    AddWritePermOfBrokerResponseHeader, BrokerNameRequestHeader, TopicList, WipeWritePermOfBrokerResponseHeader,
    parse_properties,
)
from rmqrun.protocol.java_order import java_hash_set_order
from rmqrun.protocol.requests import Server, register_served
from rmqrun.remoting.errors import MissingFieldError
from rmqrun.remoting.message_props import java_string_hash
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode, VERSION_V4_9_4
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.server import RemotingServer

FAQ_SUFFIX = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
MASTER_ID = 0


@dataclass(slots=True)
class BrokerEntry:
    """One broker as the name server knows it."""

    cluster: str
    broker_name: str
    address: str
    topics: TopicTable
    broker_id: int = MASTER_ID
    #: The broker's brokerPermission, read at every route (``updateBrokerConfig`` changes it while it runs).
    permission: Callable[[], int] = lambda: PERM_READ | PERM_WRITE
    #: ``mqadmin wipeWritePerm`` took write away from every topic of this broker, until ``addWritePerm``.
    write_wiped: bool = False

    def perm(self, tc: TopicConfig) -> int:
        """A topic's perm in routes: the broker's permission replaces it unless read-write (as Java registers
        it), and a wiped broker's topics lose write."""
        broker_perm = self.permission()
        perm = tc.perm if broker_perm == PERM_READ | PERM_WRITE else broker_perm
        return perm & ~PERM_WRITE if self.write_wiped else perm

    def broker_data(self, *, int_keys: bool) -> dict[str, Any]:
        addrs: dict[Any, str] = {self.broker_id if int_keys else str(self.broker_id): self.address}
        return {"brokerAddrs": addrs, "brokerName": self.broker_name, "cluster": self.cluster}


class NameServer:
    def __init__(self, host: str = "127.0.0.1", port: int = 9876, **server_options: Any) -> None:
        """``server_options`` go to the RemotingServer (TLS: ``ssl_context``, ``tls_mode``)."""
        self.server = RemotingServer(host, port, name="namesrv", **server_options)
        self.brokers: list[BrokerEntry] = []
        #: PUT/GET/DELETE_KV_CONFIG's table; the embedded broker gives it a file
        #: (``<data-dir>/namesrv/kvConfig.json``) before start, else it lives in memory.
        self.kv = KVConfigTable(None)
        #: NamesrvConfig.orderMessageEnable: routes carry ORDER_TOPIC_CONFIG as orderTopicConf.
        self.order_message_enable = False
        #: NamesrvConfig.productEnvName / clusterTest: shown and settable, they change nothing here.
        self.product_env_name = "center"
        self.cluster_test = False
        register_served(self.server.register, Server.NAMESRV, {
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._get_route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self._get_cluster_info,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._get_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self._delete_topic,
            RequestCode.GET_NAMESRV_CONFIG: self._get_config,
            RequestCode.PUT_KV_CONFIG: self._put_kv,
            RequestCode.GET_KV_CONFIG: self._get_kv,
            RequestCode.DELETE_KV_CONFIG: self._delete_kv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self._get_kv_list,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self._wipe_write_perm,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self._add_write_perm,
            RequestCode.UPDATE_NAMESRV_CONFIG: self._update_config,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self._get_system_topic_list,
        })

    @property
    def address(self) -> str:
        return self.server.address

    def attach(self, entry: BrokerEntry) -> None:
        self.brokers = [b for b in self.brokers if b.broker_name != entry.broker_name] + [entry]

    async def start(self) -> None:
        self.kv.load()
        if self.kv.problem:
            logger.warning("name server KV table {}: {}", self.kv.path, self.kv.problem)
        await self.server.start()

    async def stop(self) -> None:
        await self.server.stop()

    # ------------------------------------------------------------------ routes

    def route(self, topic: str, *, standard_json: bool = True) -> bytes | None:
        """The TopicRouteData body for ``topic``, or None if no broker has it."""
        queue_datas = []
        broker_datas = []
        for entry in self.brokers:
            tc = entry.topics.get(topic)
            if tc is None:
                continue
            queue_datas.append({
                "brokerName": entry.broker_name,
                "perm": entry.perm(tc),
                "readQueueNums": tc.read_queue_nums,
                "topicSysFlag": tc.topic_sys_flag,
                "writeQueueNums": tc.write_queue_nums,
            })
            broker_datas.append(entry.broker_data(int_keys=not standard_json))
        if not queue_datas:
            return None
        body: dict[str, Any] = {"brokerDatas": broker_datas, "filterServerTable": {}}
        if self.order_message_enable:
            order_conf = self.kv.get(ORDER_TOPIC_CONFIG, topic)
            if order_conf is not None:
                body["orderTopicConf"] = order_conf  # fastjson's sorted field order
        body["queueDatas"] = queue_datas
        return fastjson.dumps(body, unquoted_int_keys=not standard_json)

    async def _get_route(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        topic = cmd.ext_fields.get("topic")
        if not topic:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "the custom field <topic> is null")
        accept_standard = cmd.ext_fields.get("acceptStandardJsonOnly", "").lower() == "true"
        standard = cmd.version >= VERSION_V4_9_4 or accept_standard
        body = self.route(topic, standard_json=standard)
        if body is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST,
                                f"No topic route info in name server for the topic: {topic}{FAQ_SUFFIX}")
        return cmd.response(ResponseCode.SUCCESS, body=body)

    async def _get_cluster_info(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        broker_table: dict[str, Any] = {}
        clusters: dict[str, list[str]] = {}
        for entry in self.brokers:
            broker_table[entry.broker_name] = entry.broker_data(int_keys=True)
            names = clusters.setdefault(entry.cluster, [])
            if entry.broker_name not in names:
                names.append(entry.broker_name)
        body = {"brokerAddrTable": broker_table, "clusterAddrTable": clusters}
        # ClusterInfo is always written by plain fastjson: bare integer keys.
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps(body, unquoted_int_keys=True))

    async def _get_topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        names: list[str] = []
        for entry in self.brokers:
            names.extend(t for t in entry.topics.names() if t not in names)
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"topicList": names}))

    async def _delete_topic(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        # The route disappears with the broker's topic (DELETE_TOPIC_IN_BROKER); nothing is kept here.
        logger.info("DELETE_TOPIC_IN_NAMESRV {} acknowledged", cmd.ext_fields.get("topic"))
        return cmd.response(ResponseCode.SUCCESS)

    async def _get_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (``mqadmin getNamesrvConfig``): the settings that mean something here."""
        props = {"listenPort": str(self.server.port),
                 "orderMessageEnable": str(self.order_message_enable).lower(),
                 "clusterTest": str(self.cluster_test).lower(), "productEnvName": self.product_env_name}
        if self.kv.path is not None:
            props["kvConfigPath"] = str(self.kv.path)
        text = "".join(f"{k}={v}\n" for k, v in props.items())
        return cmd.response(ResponseCode.SUCCESS, body=text.encode())

    # ------------------------------------------------------------------ KV config

    async def _put_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ns, key = cmd.ext_fields.get("namespace"), cmd.ext_fields.get("key")
        if ns is None or key is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "namespace or key is null")
        try:
            self.kv.put(ns, key, cmd.ext_fields.get("value", ""))
        except OSError as exc:  # Java logs a failed persist and answers success; say it instead
            logger.error("saving the name server KV table {} failed: {}", self.kv.path, exc.strerror or exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"saving {self.kv.path} failed: {exc.strerror or exc}")
        return cmd.response(ResponseCode.SUCCESS)

    async def _get_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ns, key = cmd.ext_fields.get("namespace", ""), cmd.ext_fields.get("key", "")
        value = self.kv.get(ns, key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns} Key: {key}")
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"value": value})

    async def _delete_kv(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        try:
            self.kv.delete(cmd.ext_fields.get("namespace", ""), cmd.ext_fields.get("key", ""))
        except OSError as exc:
            logger.error("saving the name server KV table {} failed: {}", self.kv.path, exc.strerror or exc)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"saving {self.kv.path} failed: {exc.strerror or exc}")
        return cmd.response(ResponseCode.SUCCESS)

    async def _get_kv_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        ns = cmd.ext_fields.get("namespace", "")
        table = self.kv.namespace(ns)
        if table is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {ns}")
        return cmd.response(ResponseCode.SUCCESS, body=fastjson.dumps({"table": table}))

    # ------------------------------------------------------------------ operator requests

    async def _wipe_write_perm(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER (``mqadmin wipeWritePerm``): producers stop routing to the broker.

        Java strips write from the name server's copy of each topic until the broker registers a changed
        topic table; here the broker stays wiped, new topics included, until ``addWritePerm``.
        """
        return self._operate_write_perm(conn, cmd, wipe=True)

    async def _add_write_perm(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """ADD_WRITE_PERM_OF_BROKER (``mqadmin addWritePerm``): each topic gets its own perm back (Java
        makes every one read-write, read-only topics too)."""
        return self._operate_write_perm(conn, cmd, wipe=False)

    def _operate_write_perm(self, conn: Connection, cmd: RemotingCommand, *, wipe: bool) -> RemotingCommand:
        try:
            name = BrokerNameRequestHeader.from_ext(cmd.ext_fields).broker_name
        except MissingFieldError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the custom field <{exc.field}> is null")
        count = 0
        for entry in self.brokers:
            if entry.broker_name == name:
                entry.write_wiped = wipe
                count += len(entry.topics.names())
        logger.info("{} write perm of broker[{}], client: {}, {}", "wipe" if wipe else "add", name, conn.name, count)
        header = (WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count) if wipe
                  else AddWritePermOfBrokerResponseHeader(add_topic_count=count))
        return cmd.response(ResponseCode.SUCCESS, ext_fields=header.to_ext())

    async def _update_config(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG (``mqadmin updateNamesrvConfig``).

        ``orderMessageEnable``, ``productEnvName`` and ``clusterTest`` change at once (until a restart);
        the black-listed names are NO_PERMISSION as in Java; ``listenPort`` needs a restart and is refused;
        names this name server has no setting for are ignored, as Java ignores them.
        """
        if cmd.body is None:
            return cmd.response(ResponseCode.SUCCESS)
        try:
            props = parse_properties(cmd.body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"UnsupportedEncodingException {exc}")
        if NAMESRV_CONFIG_BLACK_LIST & props.keys():
            return cmd.response(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        if "listenPort" in props:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "listenPort cannot change while the name server runs")
        flags = {}
        for key in ("orderMessageEnable", "clusterTest"):
            if key in props:
                if props[key].lower() not in ("true", "false"):
                    return cmd.response(ResponseCode.SYSTEM_ERROR, f"{key}={props[key]!r} is not true or false")
                flags[key] = props[key].lower() == "true"
        self.order_message_enable = flags.get("orderMessageEnable", self.order_message_enable)
        self.cluster_test = flags.get("clusterTest", self.cluster_test)
        self.product_env_name = props.get("productEnvName", self.product_env_name)
        logger.info("updateNamesrvConfig from {}: {}", conn.name, props)
        return cmd.response(ResponseCode.SUCCESS)

    async def _get_system_topic_list(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        """GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names (topics of their own in RocketMQ), and the
        address of a broker to ask for the rest."""
        names: list[str] = []
        for entry in self.brokers:
            names += [entry.cluster, entry.broker_name]
        body = TopicList(list(java_hash_set_order(dict.fromkeys(names), java_string_hash)),
                         self.brokers[0].address if self.brokers else None)
        return cmd.response(ResponseCode.SUCCESS, body=body.encode())


#: NamesrvConfig names ``updateNamesrvConfig`` may not change.
NAMESRV_CONFIG_BLACK_LIST = frozenset({"configBlackList", "configStorePath", "kvConfigPath", "rocketmqHome"})
