"""The admin protocol on the embedded broker with real clients: key index across restarts, an rmqrun
consumer seen by mqadmin's requests, and an online offset reset that the running consumer follows."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.producer import Producer
from rmqrun.protocol.bodies import GetConsumerStatusBody, ResetOffsetBody
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode as R
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import decode_messages
from tests.integration.engine_kit import (
    Running, broker, by_queue, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)

MAX_TS = str(2**63 - 1)


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 180))


@pytest.fixture
def record_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(path))
    return path


async def call(addr: str, code: int, ext: dict[str, str], body: bytes | None = None) -> RemotingCommand:
    conn = await Connection.open(addr)
    try:
        return await conn.request(RemotingCommand(code, ext, body), 10)
    finally:
        conn.close()


async def query(addr: str, topic: str, key: str, *, unique: bool = False) -> RemotingCommand:
    return await call(addr, R.QUERY_MESSAGE, {"topic": topic, "key": key, "maxNum": "64", "beginTimestamp": "0",
                                              "endTimestamp": MAX_TS, "_UNIQUE_KEY_QUERY": str(unique).lower()})


def bodies(resp: RemotingCommand) -> list[bytes]:
    return sorted(m.body for m in decode_messages(resp.body or b""))


async def send_keyed(namesrv: str, start: int, n: int) -> dict[str, bytes]:
    """n messages with keys ``key-<i>`` and ``shared``; returns unique msg id → body."""
    out = {}
    async with Producer(namesrv, "PG_keys") as p:
        for i in range(start, start + n):
            r = await p.send("KeyT", f"body-{i}".encode(), keys=[f"key-{i}", "shared"])
            out[r.msg_id] = f"body-{i}".encode()
    return out


@pytest.mark.parametrize("how", ["restart", "kill -9"])
def test_key_index_finds_messages_after_a_restart(tmp_path: Path, how: str) -> None:
    """QUERY_MESSAGE by KEYS and by unique key answers from what the recovered commit log holds."""
    data = tmp_path / "data"
    proc = EmbeddedBroker.subprocess(data).start()
    try:
        sent = run(send_keyed(proc.namesrv_address, 0, 6))
        found = run(query(proc.broker_address, "KeyT", "key-2"))
        assert found.code == ResponseCode.SUCCESS and bodies(found) == [b"body-2"]
    finally:
        proc.kill() if how == "kill -9" else proc.stop()
    proc = EmbeddedBroker.subprocess(data).start()
    try:
        addr = proc.broker_address
        shared = run(query(addr, "KeyT", "shared"))
        assert shared.code == ResponseCode.SUCCESS and bodies(shared) == sorted(sent.values())
        assert int(shared.ext_fields["indexLastUpdatePhyoffset"]) > 0
        for msg_id, body in sent.items():
            by_id = run(query(addr, "KeyT", msg_id, unique=True))
            assert by_id.code == ResponseCode.SUCCESS and bodies(by_id) == [body]
        # written after the restart: indexed too, and only under its own topic
        more = run(send_keyed(proc.namesrv_address, 6, 1))
        assert bodies(run(query(addr, "KeyT", "key-6"))) == list(more.values())
        missing = run(query(addr, "OtherTopic", "key-6"))
        assert missing.code == ResponseCode.QUERY_NOT_FOUND
        assert missing.remark == "can not find message, maybe time range not correct"
    finally:
        proc.stop()


def test_admin_sees_a_running_rmqrun_consumer_and_its_progress(tmp_path: Path, record_file: Path) -> None:
    """consumerConnection, consumerProgress, consumerStatus (running info, status) and consumeMessage
    against an rmqrun consumer with real worker processes."""
    async def main() -> None:
        async with broker(tmp_path) as eb:
            addr = eb.broker_address
            ids = await produce(eb.namesrv_address, "AdmT", 20)
            before = int(time.time() * 1000)
            async with Running(consumer_config(eb.namesrv_address, "AdmG", "AdmT"),
                               pool_config("workers.orderly_record:handle")) as r:
                engine = r.supervisor.engine
                assert engine is not None
                client_id = engine.instance.client_id
                await wait_for(lambda: len(read_records(record_file)) >= 20, what="20 messages")

                conns = await call(addr, R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "AdmG"})
                assert conns.code == ResponseCode.SUCCESS
                body = fastjson.loads(conns.body)
                assert [c["clientId"] for c in body["connectionSet"]] == [client_id]
                assert set(body["subscriptionTable"]) == {"AdmT", "%RETRY%AdmG"}
                assert body["consumeType"] == "CONSUME_PASSIVELY" and body["messageModel"] == "CLUSTERING"

                async def caught_up() -> dict:  # type: ignore[type-arg]
                    stats = await call(addr, R.GET_CONSUME_STATS, {"consumerGroup": "AdmG"})
                    assert stats.code == ResponseCode.SUCCESS
                    return fastjson.loads(stats.body)
                for _ in range(100):
                    stats = await caught_up()
                    table = {fastjson.object_key(k)["queueId"]: v for k, v in stats["offsetTable"].items()
                             if fastjson.object_key(k)["topic"] == "AdmT"}
                    if table and all(v["consumerOffset"] == v["brokerOffset"] for v in table.values()):
                        break
                    await asyncio.sleep(0.2)
                assert sum(v["brokerOffset"] for v in table.values()) == 20
                assert all(v["consumerOffset"] == v["brokerOffset"] for v in table.values()), table
                assert all(v["lastTimestamp"] >= before - 60_000 for v in table.values() if v["consumerOffset"])
                assert stats["consumeTps"] > 0

                info = await call(addr, R.GET_CONSUMER_RUNNING_INFO,
                                  {"consumerGroup": "AdmG", "clientId": client_id, "jstackEnable": "false"})
                assert info.code == ResponseCode.SUCCESS, info.remark
                running = fastjson.loads(info.body)
                props = running["properties"]
                assert props["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY" and props["PROP_CONSUMEORDERLY"] == "false"
                assert before - 1000 <= int(props["PROP_CONSUMER_START_TIMESTAMP"]) <= int(time.time() * 1000)
                assert props["PROP_THREADPOOL_CORE_SIZE"] == "2"
                assert {fastjson.object_key(k)["queueId"] for k in running["mqTable"]
                        if fastjson.object_key(k)["topic"] == "AdmT"} == {mq.queue_id for mq in engine.table
                                                                          if mq.topic == "AdmT"}
                assert running["statusTable"]["AdmT"]["consumeOKTPS"] > 0
                assert running["statusTable"]["AdmT"]["pullTPS"] > 0
                assert "jstack" not in running

                # consumerStatus -s: the supervisor's threads and asyncio tasks stand for the JVM's thread dump
                dump = await call(addr, R.GET_CONSUMER_RUNNING_INFO,
                                  {"consumerGroup": "AdmG", "clientId": client_id, "jstackEnable": "true"})
                assert dump.code == ResponseCode.SUCCESS, dump.remark
                jstack = fastjson.loads(dump.body)["jstack"]
                assert jstack.startswith(time.strftime("%Y-%m-%d")) and '"MainThread"' in jstack
                assert "asyncio tasks of the running loop" in jstack
                assert "rmqrun/consumer/puller.py" in jstack, "where the pullers wait"

                status = await call(addr, R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, {"topic": "AdmT", "group": "AdmG"})
                assert status.code == ResponseCode.SUCCESS
                per_client = GetConsumerStatusBody.from_json(status.body).consumer_table
                assert list(per_client) == [client_id]
                assert sum(per_client[client_id].values()) == 20

                # consumeMessage: the offset msg id of message 0 is run through the handler once more
                first = (await call(addr, R.QUERY_MESSAGE, {"topic": "AdmT", "key": ids[0], "maxNum": "1",
                                                            "beginTimestamp": "0", "endTimestamp": MAX_TS,
                                                            "_UNIQUE_KEY_QUERY": "true"}))
                msg = decode_messages(first.body)[0]
                direct = await call(addr, R.CONSUME_MESSAGE_DIRECTLY, {
                    "consumerGroup": "AdmG", "clientId": client_id, "msgId": msg.offset_msg_id})
                assert direct.code == ResponseCode.SUCCESS, direct.remark
                result = fastjson.loads(direct.body)
                assert result["consumeResult"] == "CR_SUCCESS" and result["order"] is False
                await wait_for(lambda: len(read_records(record_file)) >= 21, what="the direct consumption")
                assert read_records(record_file)[-1] == (msg.queue_id, msg.queue_offset)

                groups = fastjson.loads((await call(addr, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})).body)
                assert groups["subscriptionGroupTable"]["AdmG"]["groupName"] == "AdmG"
                topics = fastjson.loads((await call(addr, R.QUERY_TOPICS_BY_CONSUMER, {"group": "AdmG"})).body)
                assert "AdmT" in topics["topicList"] and topics["brokerAddr"] == addr

                gone = await call(addr, R.GET_CONSUMER_RUNNING_INFO,
                                  {"consumerGroup": "AdmG", "clientId": "nobody@1", "jstackEnable": "false"})
                assert gone.code == ResponseCode.SYSTEM_ERROR and "not online" in (gone.remark or "")
                assert await r.stop() == 0
            offline = await call(addr, R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "AdmG"})
            assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    run(main())


def test_online_reset_makes_the_running_consumer_consume_again_from_the_reset_point(
        tmp_path: Path, record_file: Path) -> None:
    """INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime) while `rmqrun run`'s engine consumes:
    the broker tells the client, which drops its queues and re-consumes everything from the new offsets."""
    async def main() -> None:
        async with broker(tmp_path) as eb:
            addr = eb.broker_address
            await produce(eb.namesrv_address, "RstT", 24)
            async with Running(consumer_config(eb.namesrv_address, "RstG", "RstT"),
                               pool_config("workers.orderly_record:handle")) as r:
                await wait_for(lambda: len(read_records(record_file)) >= 24, what="24 messages")
                await wait_for(lambda: len(set(read_records(record_file))) == 24, what="distinct")
                reset = await call(addr, R.INVOKE_BROKER_TO_RESET_OFFSET,
                                   {"topic": "RstT", "group": "RstG", "timestamp": "0", "isForce": "true"})
                assert reset.code == ResponseCode.SUCCESS, reset.remark
                table = ResetOffsetBody.from_json(reset.body).offset_table
                assert sorted(table.values()) == [0, 0, 0, 0]
                await wait_for(lambda: len(read_records(record_file)) >= 48, what="everything consumed again")
                records = read_records(record_file)
                twice = by_queue(records)
                for qid, offs in twice.items():
                    n = len(offs) // 2
                    assert sorted(offs) == sorted(list(range(n)) * 2), (qid, offs)
                # and the group keeps going: new messages arrive once
                await produce(eb.namesrv_address, "RstT", 4, start=24)
                await wait_for(lambda: len(read_records(record_file)) >= 52, what="new messages")
                assert await r.stop() == 0
            assert len(read_records(record_file)) == 52
            offsets = await committed_offsets(eb, "RstG", "RstT")
            assert sum(v or 0 for v in offsets.values()) == 28
    run(main())


def test_offline_reset_to_an_offset_stores_it_and_unknown_topics_are_refused(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            addr = eb.broker_address
            await produce(eb.namesrv_address, "OffT", 16)
            reset = await call(addr, R.INVOKE_BROKER_TO_RESET_OFFSET,
                               {"topic": "OffT", "group": "NeverRan", "timestamp": "-1", "isForce": "true"})
            assert reset.code == ResponseCode.SUCCESS
            assert await committed_offsets(eb, "NeverRan", "OffT") == {q: eb.broker.store.max_offset("OffT", q)
                                                                         for q in range(4)}
            exact = await call(addr, R.INVOKE_BROKER_TO_RESET_OFFSET, {
                "topic": "OffT", "group": "NeverRan", "timestamp": "", "offset": "2", "queueId": "1",
                "isForce": "true"})
            assert exact.code == ResponseCode.SUCCESS
            assert (await committed_offsets(eb, "NeverRan", "OffT"))[1] == 2
            bad = await call(addr, R.INVOKE_BROKER_TO_RESET_OFFSET,
                             {"topic": "Nope", "group": "NeverRan", "timestamp": "0", "isForce": "true"})
            assert bad.code == ResponseCode.SYSTEM_ERROR and "no topic in this broker" in (bad.remark or "")
    run(main())


def test_online_reset_is_followed_by_a_running_rmqrun_run_process(tmp_path: Path) -> None:
    """The same through the CLI: `rmqrun run` in its own process, the reset sent as mqadmin sends it."""
    from tests.integration.cli_kit import Child, child_env, embedded_broker, run_args
    from tests.integration.cli_kit import produce as produce_sync
    from tests.integration.cli_kit import wait_for as wait_sync

    records = tmp_path / "records.txt"
    with embedded_broker(tmp_path) as eb:
        produce_sync(eb.namesrv_address, "CliRstT", 12)
        env = child_env(RMQRUN_HANDLER_RECORD_FILE=str(records))
        with Child(run_args(eb.namesrv_address, "CliRstG", "CliRstT", "workers.orderly_record:handle"),
                   tmp_path, env=env) as child:
            wait_sync(lambda: len(read_records(records)) >= 12, 60, what="12 messages")

            async def committed() -> int:
                return sum(v or 0 for v in (await committed_offsets(eb, "CliRstG", "CliRstT")).values())
            wait_sync(lambda: asyncio.run(committed()) == 12, 60, what="offsets committed", interval=0.3)
            reset = asyncio.run(call(eb.broker_address, R.INVOKE_BROKER_TO_RESET_OFFSET, {
                "topic": "CliRstT", "group": "CliRstG", "timestamp": "0", "isForce": "true"}))
            assert reset.code == ResponseCode.SUCCESS, reset.remark
            wait_sync(lambda: len(read_records(records)) >= 24, 60, what="re-consumed from the reset point")
            again = read_records(records)[12:]
            assert sorted(again) == sorted(read_records(records)[:12]), "each message exactly once more"
            assert child.proc.poll() is None, "still running after the reset"
            assert "resets offsets of 4 queue(s) of CliRstG" in child.stderr


def test_deleted_topic_is_gone_with_its_queues_and_offsets_and_stays_gone_after_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            addr = eb.broker_address
            await produce(eb.namesrv_address, "DelT", 8)
            await produce(eb.namesrv_address, "KeepT", 4)
            assert (await call(addr, R.INVOKE_BROKER_TO_RESET_OFFSET, {
                "topic": "DelT", "group": "DelG", "timestamp": "-1", "isForce": "true"})).code == 0
            deleted = await call(addr, R.DELETE_TOPIC_IN_BROKER, {"topic": "DelT"})
            assert deleted.code == ResponseCode.SUCCESS
            stats = await call(addr, R.GET_TOPIC_STATS_INFO, {"topic": "DelT"})
            assert stats.code == ResponseCode.TOPIC_NOT_EXIST and stats.remark == "topic[DelT] not exist"
            assert eb.broker.store.consumer_offsets.topics_of("DelG") == []
            assert not any(t == "DelT" for t, _ in eb.broker.store.queues())
            system = await call(addr, R.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
            assert system.code == ResponseCode.SYSTEM_ERROR
        async with broker(tmp_path) as eb:
            assert (await call(eb.broker_address, R.GET_TOPIC_STATS_INFO, {"topic": "DelT"})).code == \
                ResponseCode.TOPIC_NOT_EXIST
            kept = await call(eb.broker_address, R.GET_TOPIC_STATS_INFO, {"topic": "KeepT"})
            assert kept.code == ResponseCode.SUCCESS
            assert sum(v["maxOffset"] for v in fastjson.loads(kept.body)["offsetTable"].values()) == 4
    run(main())


def test_broker_config_and_runtime_info_say_what_this_broker_is(tmp_path: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "InfoT", 3)
            config = await call(eb.broker_address, R.GET_BROKER_CONFIG, {})
            props = dict(line.split("=", 1) for line in config.body.decode().splitlines())
            assert props["namesrvAddr"] == eb.namesrv_address
            assert props["listenPort"] == eb.broker_address.rsplit(":", 1)[1]
            assert props["brokerName"] == "broker-a" and props["fileReservedTime"] == "72"
            assert "counter" in fastjson.loads(config.ext_fields["version"])
            info = fastjson.loads((await call(eb.broker_address, R.GET_BROKER_RUNTIME_INFO, {})).body)["table"]
            assert info["brokerVersionDesc"] == "V4_9_8" and info["msgPutTotalTodayNow"] == "3"
            assert int(info["commitLogMaxOffset"]) == eb.broker.store.commit_log_max_offset
            assert float(info["putTps"]) > 0
            namesrv = await call(eb.namesrv_address, R.GET_NAMESRV_CONFIG, {})
            assert f"listenPort={eb.namesrv_address.rsplit(':', 1)[1]}" in namesrv.body.decode()
    run(main())
