"""The embedded broker with ``acl_file``: real signed frames pass, every kind of refusal is
answered as a 4.9.8 broker answers it, logged once per client, and changes nothing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
from loguru import logger

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.bodies import ConsumerData, HeartbeatData
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.codes import RequestCode as R, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand, SerializeType, decode_with_prefix
from tests.acl_kit import ADMIN_AK, ADMIN_SK, USER_AK, USER_SK, sign, write_acl
from tests.captures import load, requires_captures
from tests.integration.broker_kit import pull_ext, send_ext

pytestmark = pytest.mark.timeout(120)
ACL = "org.apache.rocketmq.acl.common.AclException: "


def run(tmp_path: Path, body: Callable[[EmbeddedBroker], Awaitable[None]], acl_text: str | None = None,
        **settings: Any) -> None:
    tmp_path.mkdir(parents=True, exist_ok=True)
    if acl_text is not None or "acl_file" not in settings:
        settings["acl_file"] = str(write_acl(tmp_path / "plain_acl.yml", *([acl_text] if acl_text else [])))

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "data", **settings) as eb:
            await body(eb)

    asyncio.run(asyncio.wait_for(main(), 100))


def cmd(code: int, ext: dict[str, str] | None = None, body: bytes | None = None) -> RemotingCommand:
    return RemotingCommand(code, dict(ext or {}), body=body, language="JAVA")


def as_user(c: RemotingCommand) -> RemotingCommand:
    return sign(c, USER_AK, USER_SK)


def as_admin(c: RemotingCommand) -> RemotingCommand:
    return sign(c, ADMIN_AK, ADMIN_SK)


async def max_offset(conn: Connection, topic: str) -> int:
    resp = await conn.request(as_admin(cmd(R.GET_MAX_OFFSET, {"topic": topic, "queueId": "0"})), 5)
    assert resp.code == ResponseCode.SUCCESS, resp.remark
    return int(resp.ext_fields["offset"])


def _signed_broker_requests() -> list[Any]:
    return [f for f in load("g") if f["kind"] == "request" and f["dir"] == "c2s" and f["peer"] == "broker"
            and "AccessKey" in (f["header"].get("extFields") or {})]


@requires_captures
def test_real_mqadmin_requests_pass_and_a_changed_secret_refuses_them(tmp_path: Path) -> None:
    frames = _signed_broker_requests()
    create = next(f for f in frames if f["code"] == R.UPDATE_AND_CREATE_TOPIC)

    async def accepted(eb: EmbeddedBroker) -> None:
        conn = await Connection.open(eb.broker_address)
        for f in frames:
            resp = await conn.request(decode_with_prefix(f.raw), 5)
            assert ACL not in (resp.remark or ""), (f.seq, f["code_name"], resp.remark)
            if f is create:
                assert "ScnG_AdminTopic" in eb.broker.topics  # the admin call really ran
        assert eb.broker.acl is not None and eb.broker.acl.refused == 0
        conn.close()

    run(tmp_path / "right", accepted,
        acl_text=f"accounts:\n  - accessKey: {ADMIN_AK}\n    secretKey: '{ADMIN_SK}'\n    admin: true\n")

    async def refused(eb: EmbeddedBroker) -> None:
        conn = await Connection.open(eb.broker_address)
        for f in frames:
            resp = await conn.request(decode_with_prefix(f.raw), 5)
            assert resp.code == ResponseCode.SYSTEM_ERROR
            assert resp.remark.startswith(f"{ACL}Check signature failed for accessKey={ADMIN_AK}")
        assert "ScnG_AdminTopic" not in eb.broker.topics
        conn.close()

    run(tmp_path / "wrong", refused,
        acl_text=f"accounts:\n  - accessKey: {ADMIN_AK}\n    secretKey: '87654321'\n    admin: true\n")


def test_every_refusal_is_answered_logged_once_and_changes_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING", format="{message}")

    async def body(eb: EmbeddedBroker) -> None:
        conn = await Connection.open(eb.broker_address)
        admin = await Connection.open(eb.broker_address)
        assert (await admin.request(as_admin(cmd(R.UPDATE_AND_CREATE_TOPIC, {
            "topic": "ClosedTopic", "defaultTopic": "TBW102", "readQueueNums": "1", "writeQueueNums": "1",
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})), 5)).code == 0

        async def refused(c: RemotingCommand, reason: str) -> None:
            resp = await conn.request(c, 5)
            assert (resp.code, resp.remark.split(", rmqrun")[0]) == (ResponseCode.SYSTEM_ERROR, ACL + reason)

        unsigned = cmd(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), b"unsigned")
        await refused(unsigned, "No accessKey is configured")
        bad = sign(cmd(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), b"bad"), USER_AK, "wrong-secret")
        await refused(bad, f"Check signature failed for accessKey={USER_AK}")
        tampered = as_user(cmd(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), b"signed"))
        tampered.body = b"changed"
        await refused(tampered, f"Check signature failed for accessKey={USER_AK}")
        stranger = sign(cmd(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), b"x"), "Stranger1", "whatever")
        await refused(stranger, "No acl config for Stranger1")
        for _ in range(5):  # the same refusal again and again: one log line
            await refused(as_user(cmd(R.SEND_MESSAGE_V2, send_ext("ClosedTopic", queue_id=0), b"no")),
                          "No default permission for topic:ClosedTopic")
        await refused(as_user(cmd(R.PULL_MESSAGE, pull_ext("ClosedGroup", "OpenTopic", 0, 0))),
                      "No default permission for group:ClosedGroup")
        update = {"consumerGroup": "ClosedGroup", "topic": "ClosedTopic", "queueId": "0", "commitOffset": "7"}
        await refused(as_user(cmd(R.UPDATE_CONSUMER_OFFSET, update)), "No default permission for group:ClosedGroup")
        await refused(as_user(cmd(R.UPDATE_AND_CREATE_TOPIC, {"topic": "UserMade", "defaultTopic": "TBW102",
                                                              "readQueueNums": "1", "writeQueueNums": "1",
                                                              "perm": "6"})),
                      f"Need admin permission for request code=17, but accessKey={USER_AK} is not")
        await refused(as_user(cmd(R.DELETE_TOPIC_IN_BROKER, {"topic": "ClosedTopic"})),
                      f"Need admin permission for request code=215, but accessKey={USER_AK} is not")

        # nothing was stored, created, deleted or committed
        assert "OpenTopic" not in eb.broker.topics and "UserMade" not in eb.broker.topics
        assert await max_offset(admin, "ClosedTopic") == 0
        query = {"consumerGroup": "ClosedGroup", "topic": "ClosedTopic", "queueId": "0"}
        offset = await admin.request(as_admin(cmd(R.QUERY_CONSUMER_OFFSET, query)), 5)
        assert offset.ext_fields.get("offset") == "0"
        # (the same update from the admin does land, so the query above would have seen it)
        assert (await admin.request(as_admin(cmd(R.UPDATE_CONSUMER_OFFSET, update)), 5)).code == 0
        offset = await admin.request(as_admin(cmd(R.QUERY_CONSUMER_OFFSET, query)), 5)
        assert offset.ext_fields.get("offset") == "7"

        # the same connection still serves a well-signed client
        ok = await conn.request(as_user(cmd(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), b"hello")), 5)
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        hb = HeartbeatData("user@1", consumer_data_set=[ConsumerData("OpenGroup", subscription_data_set=[
            SubscriptionData.build("OpenTopic", "*")])])
        assert (await conn.request(as_user(cmd(R.HEART_BEAT, body=hb.encode())), 5)).code == ResponseCode.SUCCESS
        pulled = await conn.request(as_user(cmd(R.PULL_MESSAGE, pull_ext("OpenGroup", "OpenTopic", 0, 0))), 5)
        assert pulled.code == ResponseCode.SUCCESS and b"hello" in (pulled.body or b"")

        # the name server stays open (as in 4.x): an unsigned route query is answered
        ns = await Connection.open(eb.namesrv_address)
        route = await ns.request(cmd(R.GET_ROUTEINFO_BY_TOPIC, {"topic": "OpenTopic"}), 5)
        assert route.code == ResponseCode.SUCCESS
        assert eb.broker.acl is not None and eb.broker.acl.refused == 13
        for c in (conn, admin, ns):
            c.close()

    try:
        run(tmp_path, body)
    finally:
        logger.remove(sink)
    refusals = [ln for ln in lines if ln.startswith("ACL refused")]
    assert len([ln for ln in refusals if "topic:ClosedTopic" in ln]) == 1, refusals
    # one line per client address and reason, each naming the address (127.0.0.1:port)
    assert len(refusals) == 7, refusals
    assert all(" from 127.0.0.1:" in ln for ln in refusals)
    assert not any(USER_SK in ln or "wrong-secret" in ln for ln in lines)


def test_without_acl_credentials_are_ignored(tmp_path: Path) -> None:
    """The C++ client sends ``AccessKey: ""`` and a Signature even with no credentials."""

    async def body(eb: EmbeddedBroker) -> None:
        conn = await Connection.open(eb.broker_address)
        ext = {**send_ext("Plain", queue_id=0), "AccessKey": "", "Signature": "bm90IGEgc2lnbmF0dXJl"}
        resp = await conn.request(cmd(R.SEND_MESSAGE_V2, ext, b"x"), 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        bogus = sign(cmd(R.UPDATE_AND_CREATE_TOPIC, {"topic": "Made", "defaultTopic": "TBW102", "readQueueNums": "1",
                                                     "writeQueueNums": "1", "perm": "6"}), "Stranger1", "nope")
        assert (await conn.request(bogus, 5)).code == ResponseCode.SUCCESS
        assert eb.broker.acl is None and "Made" in eb.broker.topics
        conn.close()

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "data") as eb:
            await body(eb)

    asyncio.run(asyncio.wait_for(main(), 100))


def test_binary_headers_are_checked_the_same_way(tmp_path: Path) -> None:
    """A client using ROCKETMQ (binary) header serialization signs the same fields."""

    async def body(eb: EmbeddedBroker) -> None:
        conn = await Connection.open(eb.broker_address, serialize_type=SerializeType.ROCKETMQ)
        good = as_user(cmd(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), b"binary"))
        good.serialize_type = SerializeType.ROCKETMQ
        resp = await conn.request(good, 5)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        bad = sign(cmd(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), b"binary"), USER_AK, "wrong-secret")
        bad.serialize_type = SerializeType.ROCKETMQ
        resp = await conn.request(bad, 5)
        assert resp.code == ResponseCode.SYSTEM_ERROR and "Check signature failed" in resp.remark
        assert resp.serialize_type == SerializeType.ROCKETMQ  # answered in the request's serialization
        assert await max_offset(conn, "OpenTopic") == 1
        conn.close()

    run(tmp_path, body)
