"""mqadmin's name-server requests against the embedded name server (issue #22 item 6).

``wipeWritePerm`` / ``addWritePerm`` (205 / 327), ``updateNamesrvConfig`` (318) and the system topic
list (304), each sent as the 4.9.8 ``MQClientAPIImpl`` sends it, over TCP, and checked for the
response header fields and body keys the Java tool reads.
"""

from __future__ import annotations

from pathlib import Path

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.admin import TopicList, parse_properties
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.broker_kit import TIMEOUT, Client
from tests.integration.test_broker_admin_ops import with_broker


async def ns_call(c: Client, code: int, ext: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    return await c.namesrv.request(RemotingCommand(code, dict(ext or {}), body, language="JAVA"), TIMEOUT)


def perms(route: RemotingCommand) -> list[int]:
    assert route.code == ResponseCode.SUCCESS, route.remark
    return [q["perm"] for q in fastjson.loads(route.body)["queueDatas"]]


def test_wipe_and_add_write_perm_take_and_give_back_write_in_routes(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        assert (await c.send("WipeT", b"x")).code == ResponseCode.SUCCESS
        assert perms(await c.route("WipeT")) == [6]
        topics = len(eb.broker.topics.names()) if eb.broker.topics else 0
        # MQClientAPIImpl.wipeWritePermOfBroker: WipeWritePermOfBrokerRequestHeader{brokerName}
        wiped = await ns_call(c, R.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert wiped.code == ResponseCode.SUCCESS
        assert int(wiped.ext_fields["wipeTopicCount"]) == topics > 0
        assert perms(await c.route("WipeT")) == [4]
        assert (await c.send("NewAfterWipeT", b"x")).code == ResponseCode.SUCCESS
        assert perms(await c.route("NewAfterWipeT")) == [4], "the broker stays wiped, new topics too"

        other = await ns_call(c, R.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "no-such-broker"})
        assert other.code == ResponseCode.SUCCESS and other.ext_fields["wipeTopicCount"] == "0"
        missing = await ns_call(c, R.WIPE_WRITE_PERM_OF_BROKER, {})
        assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "the custom field <brokerName> is null")

        added = await ns_call(c, R.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        assert added.code == ResponseCode.SUCCESS and int(added.ext_fields["addTopicCount"]) == topics + 1
        assert perms(await c.route("WipeT")) == [6]
    with_broker(tmp_path, body)


def test_update_namesrv_config_changes_what_get_namesrv_config_shows(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        # MQClientAPIImpl.updateNameServerConfig: no header, the properties text as body
        ok = await ns_call(c, R.UPDATE_NAMESRV_CONFIG, body=b"orderMessageEnable=true\nproductEnvName=test\n")
        assert (ok.code, ok.remark) == (ResponseCode.SUCCESS, None)
        cfg = parse_properties((await ns_call(c, R.GET_NAMESRV_CONFIG)).body.decode())
        assert (cfg["orderMessageEnable"], cfg["productEnvName"]) == ("true", "test")
        assert eb.namesrv.order_message_enable
        black = await ns_call(c, R.UPDATE_NAMESRV_CONFIG, body=b"kvConfigPath=/tmp/kv.json\n")
        assert (black.code, black.remark) == (ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        bad = await ns_call(c, R.UPDATE_NAMESRV_CONFIG, body=b"clusterTest=yes\n")
        assert bad.code == ResponseCode.SYSTEM_ERROR and "clusterTest" in (bad.remark or "")
        port = await ns_call(c, R.UPDATE_NAMESRV_CONFIG, body=b"listenPort=1\n")
        assert port.code == ResponseCode.SYSTEM_ERROR
        assert (await ns_call(c, R.UPDATE_NAMESRV_CONFIG, body=b"serverWorkerThreads=4\n")).code == ResponseCode.SUCCESS
    with_broker(tmp_path, body)


def test_system_topic_list_from_name_server_names_cluster_broker_and_a_broker_to_ask(tmp_path: Path) -> None:
    async def body(eb: EmbeddedBroker, c: Client) -> None:
        resp = await ns_call(c, R.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        assert resp.code == ResponseCode.SUCCESS
        tl = TopicList.from_json(resp.body or b"")
        assert sorted(tl.topic_list) == ["DefaultCluster", "broker-a"] and tl.broker_addr == eb.broker_address
    with_broker(tmp_path, body)
