"""TLS on the embedded name server and broker: permissive takes TLS and plain clients on one port,
enforcing takes TLS only; clients that do not trust the CA or meet an expired certificate fail. Each on both
event loops (the permissive listener's first-byte peek and its accepted-socket TLS transports are the loop's)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.protocol.bodies import ConsumerData, HeartbeatData
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.codes import RequestCode as R, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ConnectionClosedError
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message import decode_messages
from tests.integration.broker_kit import LOOPS, pull_ext, run_on, send_ext
from tests.tls_kit import CertFiles, TestCA, client_context

pytestmark = pytest.mark.timeout(120)


async def tls_connection(address: str, ctx: ssl.SSLContext) -> Connection:
    host, _, port = address.rpartition(":")
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port), ssl=ctx), 10)
    conn = Connection(reader, writer, name=address)
    conn.start()
    return conn


async def round_trip(conn: Connection, topic: str, body: bytes) -> None:
    resp = await conn.request(RemotingCommand(R.SEND_MESSAGE_V2, send_ext(topic, queue_id=0), body=body), 10)
    assert resp.code == ResponseCode.SUCCESS, resp.remark


async def route(conn: Connection, topic: str) -> int:
    return (await conn.request(RemotingCommand(R.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), 10)).code


@pytest.fixture
def certs(tmp_path: Path) -> CertFiles:
    return TestCA.create(tmp_path / "ca").issue(tmp_path / "server")


@pytest.mark.parametrize("loop", LOOPS)
def test_permissive_serves_tls_and_plain_on_the_same_ports(tmp_path: Path, certs: CertFiles, loop: str) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", tls_cert=str(certs.cert), tls_key=str(certs.key)) as eb:
            ctx = client_context(certs.ca)
            secure = await tls_connection(eb.broker_address, ctx)
            plain = await Connection.open(eb.broker_address)
            await round_trip(secure, "Mixed", b"over tls")
            await round_trip(plain, "Mixed", b"in the clear")
            assert secure._writer.get_extra_info("ssl_object") is not None
            assert plain._writer.get_extra_info("ssl_object") is None
            ns_secure = await tls_connection(eb.namesrv_address, ctx)
            ns_plain = await Connection.open(eb.namesrv_address)
            assert await route(ns_secure, "Mixed") == ResponseCode.SUCCESS
            assert await route(ns_plain, "Mixed") == ResponseCode.SUCCESS
            # the broker's side of the TLS connection is TLS too (not a plain socket that happened to work)
            served = [c for c in eb.broker.server.connections if c._writer.get_extra_info("ssl_object") is not None]
            assert len(served) == 1
            for c in (secure, plain, ns_secure, ns_plain):
                c.close()

    run_on(loop, main(), 100)


@pytest.mark.parametrize("loop", LOOPS)
def test_enforcing_refuses_plain_clients(tmp_path: Path, certs: CertFiles, loop: str) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", tls_cert=str(certs.cert), tls_key=str(certs.key),
                                  tls_mode="enforcing") as eb:
            secure = await tls_connection(eb.broker_address, client_context(certs.ca))
            await round_trip(secure, "OnlyTls", b"ok")
            for address in (eb.broker_address, eb.namesrv_address):
                plain = await Connection.open(address)
                with pytest.raises(ConnectionClosedError):
                    await plain.request(RemotingCommand(R.GET_ROUTEINFO_BY_TOPIC, {"topic": "OnlyTls"}), 10)
            # the plain clients' connections were dropped; the TLS one still works
            await round_trip(secure, "OnlyTls", b"still ok")
            assert all(c._writer.get_extra_info("ssl_object") is not None for c in eb.broker.server.connections)
            secure.close()

    run_on(loop, main(), 100)


@pytest.mark.parametrize("loop", LOOPS)
def test_untrusted_ca_and_expired_certificate_fail_the_handshake(tmp_path: Path, loop: str) -> None:
    ca = TestCA.create(tmp_path / "ca")
    good = ca.issue(tmp_path / "good")
    expired = ca.issue(tmp_path / "expired", expired=True)
    stranger = TestCA.create(tmp_path / "other-ca", name="someone else's CA")

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d1", tls_cert=str(good.cert), tls_key=str(good.key),
                                  tls_mode="enforcing") as eb:
            with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer|self.signed"):
                await tls_connection(eb.broker_address, client_context(stranger.cert_path))
            # without verification (a client's tls_insecure) the same server is reachable
            insecure = await tls_connection(eb.broker_address, client_context(None, verify=False))
            await round_trip(insecure, "Insecure", b"x")
            insecure.close()
            # and the broker survived the failed handshakes
            trusted = await tls_connection(eb.broker_address, client_context(ca.cert_path))
            await round_trip(trusted, "Insecure", b"y")
            trusted.close()
        async with EmbeddedBroker(tmp_path / "d2", tls_cert=str(expired.cert), tls_key=str(expired.key)) as eb:
            with pytest.raises(ssl.SSLCertVerificationError, match="expired"):
                await tls_connection(eb.broker_address, client_context(ca.cert_path))

    run_on(loop, main(), 100)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_silent_or_garbage_client_does_not_stall_others(tmp_path: Path, certs: CertFiles, loop: str) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", tls_cert=str(certs.cert), tls_key=str(certs.key)) as eb:
            host, _, port = eb.broker_address.rpartition(":")
            _, silent = await asyncio.open_connection(host, int(port))        # connects, says nothing
            _, half_tls = await asyncio.open_connection(host, int(port))
            half_tls.write(b"\x16\x03\x01")                                     # a handshake cut short
            await half_tls.drain()
            _, closer = await asyncio.open_connection(host, int(port))
            closer.close()                                                      # closes before a byte
            secure = await tls_connection(eb.broker_address, client_context(certs.ca))
            plain = await Connection.open(eb.broker_address)
            await round_trip(secure, "Busy", b"a")
            await round_trip(plain, "Busy", b"b")
            for w in (silent, half_tls):
                w.close()
            secure.close()
            plain.close()

    run_on(loop, main(), 100)


@pytest.mark.parametrize("loop", LOOPS)
def test_large_messages_round_trip_over_tls(tmp_path: Path, certs: CertFiles, loop: str) -> None:
    body = bytes(range(256)) * 4096  # 1 MiB, every byte value

    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "d", tls_cert=str(certs.cert), tls_key=str(certs.key),
                                  tls_mode="enforcing") as eb:
            conn = await tls_connection(eb.broker_address, client_context(certs.ca))
            await asyncio.gather(*(round_trip(conn, "Big", body) for _ in range(3)))
            hb = HeartbeatData("tls@1", consumer_data_set=[ConsumerData("CG", subscription_data_set=[
                SubscriptionData.build("Big", "*")])])
            assert (await conn.request(RemotingCommand(R.HEART_BEAT, body=hb.encode()), 10)).code == 0
            got: list[bytes] = []
            offset = 0
            while len(got) < 3:
                resp = await conn.request(RemotingCommand(R.PULL_MESSAGE, pull_ext("CG", "Big", 0, offset)), 10)
                assert resp.code == ResponseCode.SUCCESS, resp.remark
                msgs = decode_messages(resp.body or b"")
                got += [m.body for m in msgs]
                offset = int(resp.ext_fields["nextBeginOffset"])
            assert got == [body] * 3
            conn.close()

    run_on(loop, main(), 100)


def test_unknown_tls_mode_is_refused(certs: CertFiles) -> None:
    from rmqrun.broker.tls import server_context
    from rmqrun.remoting.server import RemotingServer
    with pytest.raises(ValueError, match="tls_mode 'strict' is not permissive or enforcing"):
        RemotingServer("127.0.0.1", 0, ssl_context=server_context(str(certs.cert), str(certs.key)), tls_mode="strict")
