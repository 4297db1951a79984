"""Refusals that do not come from a 4.x broker's ``AclException``: a name server (or a managed endpoint in
front of it) that checks credentials, and a 5.x broker's ``NO_PERMISSION`` answers.

A name server on real TCP answers the route request with a refusal; rmqrun's name-server client turns it
into the same non-retriable one-line error as a broker's (operation, topic, access key, never the secret),
``rmqrun run`` exits 1 at once instead of waiting for the cluster, and ``produce`` exits 1. A
``NO_PERMISSION`` that is a topic's or broker's permission (set by operators, "... is forbidden") stays the
waitable error it was. The 5.x remarks are those of its auth pipeline (``AuthenticationPipeline``).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Iterator

import pytest

from rmqrun.client.namesrv import NameServerClient
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection, ConnectionPool
from rmqrun.remoting.errors import AccessDeniedError, NoPermissionError, error_for_code, is_access_refusal
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.security import ClientSecurity
from rmqrun.remoting.server import RemotingServer
from tests.integration.cli_kit import Child, child_env, run_cli

pytestmark = pytest.mark.timeout(180)

AK, SK = "orders-app", "app-Secret-5b1e"
V5_NO_USER = "username cannot be null."
V5_DENIED = "User:orders-app has no permission to access Topic:Orders from 127.0.0.1, the decision is DENY."
V4_ACL = ("org.apache.rocketmq.acl.common.AclException: No acl config for orders-app, "
          "org.apache.rocketmq.acl.plain.PlainPermissionManager.validate(PlainPermissionManager.java:668)")


@pytest.mark.parametrize("code, remark, refusal", [
    (ResponseCode.NO_PERMISSION, V5_NO_USER, True),
    (ResponseCode.NO_PERMISSION, V5_DENIED, True),
    (ResponseCode.NO_PERMISSION, "User:orders-app is not found.", True),
    (ResponseCode.SYSTEM_ERROR, V4_ACL, True),
    # what 4.9.8's processors answer with NO_PERMISSION: permissions operators set, not credentials
    (ResponseCode.NO_PERMISSION, "subscription group no permission, OrderScoring", False),
    (ResponseCode.NO_PERMISSION, "the consumer group[OrderScoring] can not consume by broadcast way", False),
    (ResponseCode.NO_PERMISSION, "the broker[10.0.0.5] sending transaction message is forbidden", False),
    (ResponseCode.NO_PERMISSION, "Can not update config in black list.", False),
])
def test_no_permission_is_a_refusal_only_when_it_is_about_credentials(code: int, remark: str, refusal: bool) -> None:
    assert is_access_refusal(code, remark) is refusal
    error = error_for_code(code, remark)
    assert isinstance(error, AccessDeniedError) is refusal and not error.retriable
    if not refusal:
        assert isinstance(error, NoPermissionError) and error.refresh_route


class RefusingNameServer:
    """A name server in a thread of its own that answers every route request with ``code`` / ``remark``."""

    def __init__(self, code: int, remark: str) -> None:
        self.code, self.remark = code, remark
        self.seen: list[RemotingCommand] = []
        self.loop = asyncio.new_event_loop()
        self.server = RemotingServer("127.0.0.1", 0, name="refusing-namesrv")
        self.server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, self._refuse)
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)

    async def _refuse(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        self.seen.append(cmd)
        return cmd.response(self.code, self.remark)

    @property
    def address(self) -> str:
        return self.server.address

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def v5_namesrv() -> Iterator[RefusingNameServer]:
    ns = RefusingNameServer(ResponseCode.NO_PERMISSION, V5_DENIED)
    try:
        yield ns
    finally:
        ns.close()


def test_name_server_client_raises_the_refusal_line(v5_namesrv: RefusingNameServer) -> None:
    async def main() -> None:
        pool = ConnectionPool(security=ClientSecurity(AK, SK))
        client = NameServerClient(v5_namesrv.address, pool)
        with pytest.raises(AccessDeniedError) as info:
            await client.get_route("Orders", timeout=5)
        await pool.close()
        text = str(info.value)
        assert text == (f"access denied by {v5_namesrv.address}: GET_ROUTEINFO_BY_TOPIC (topic Orders) with access "
                        f"key {AK}: {V5_DENIED}")
        assert SK not in text and not info.value.retriable
    asyncio.run(asyncio.wait_for(main(), 30))
    assert v5_namesrv.seen and v5_namesrv.seen[0].ext_fields.get("AccessKey") == AK  # it was signed


def test_run_exits_when_the_name_server_refuses_instead_of_waiting(v5_namesrv: RefusingNameServer,
                                                                   tmp_path: Path) -> None:
    env = child_env(RMQRUN_ACCESS_KEY=AK, RMQRUN_SECRET_KEY=SK)
    args = ["run", "workers.noop:handle", "--namesrv", v5_namesrv.address, "--group", "OrderScoring",
            "--topic", "Orders", "--workers", "1"]
    with Child(args, tmp_path, env=env) as run:
        code = run.wait(90)
        err = run.stderr
    assert code == 1, err[-3000:]
    line = next(ln for ln in err.splitlines() if "access denied" in ln)
    assert f"GET_ROUTEINFO_BY_TOPIC (topic Orders) with access key {AK}: {V5_DENIED}" in line, line
    assert "waiting for the cluster" not in err and SK not in err + run.stdout


def test_produce_without_credentials_meets_a_5x_refusal(tmp_path: Path) -> None:
    ns = RefusingNameServer(ResponseCode.NO_PERMISSION, V5_NO_USER)
    try:
        r = run_cli(["produce", "--namesrv", ns.address, "--topic", "Orders", "--count", "3"])
    finally:
        ns.close()
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout + r.stderr
    assert "GET_ROUTEINFO_BY_TOPIC (topic Orders) with no access key (set access_key and secret_key): " \
           f"{V5_NO_USER}" in out, out


def test_run_says_a_refused_heartbeat_once_and_why_it_stops(tmp_path: Path) -> None:
    """A 4.x ACL broker refusing the group: one ERROR line with the refusal, one saying the consumer stops."""
    from rmqrun.broker.app import EmbeddedBroker
    from rmqrun.broker.topics import TopicConfig
    from tests.acl_kit import write_acl

    acl = write_acl(tmp_path / "acl.yml", f"""\
        accounts:
          - accessKey: {AK}
            secretKey: '{SK}'
            defaultTopicPerm: PUB|SUB
            defaultGroupPerm: DENY
        """)
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async", acl_file=str(acl)).start_in_thread()
    try:
        eb.broker.topics.put(TopicConfig("Orders", 4, 4))
        env = child_env(RMQRUN_ACCESS_KEY=AK, RMQRUN_SECRET_KEY=SK)
        args = ["run", "workers.noop:handle", "--namesrv", eb.namesrv_address, "--group", "OrderScoring",
                "--topic", "Orders", "--workers", "1"]
        with Child(args, tmp_path, env=env) as run:
            code = run.wait(90)
            err = run.stderr
    finally:
        eb.stop_in_thread()
    assert code == 1, err[-3000:]
    lines = [ln for ln in err.splitlines() if "access denied" in ln]
    why = f"HEART_BEAT (group OrderScoring) with access key {AK}: No default permission for group:OrderScoring"
    assert len(lines) == 2 and all(why in ln for ln in lines), lines
    assert "| ERROR" in lines[0] and "consumer cannot start: access denied" in lines[1], lines
