"""rmqrun's TLS client presents ``tls_cert_file``/``tls_key_file`` to a server that asks for one.

The embedded broker never asks for client certificates (as Java's default), so the server here is a
remoting server on real TCP whose SSL context requires a certificate signed by the test CA (mutual
TLS, as some managed services use). With the client certificate, the request is answered and the server
saw the certificate's subject; without it, or with one from another CA, the request never reaches the
server's processor. Under TLS 1.3 the server judges the client's certificate after the client's side of the
handshake is done and answers a refusal by closing the connection (the alert is not surfaced by asyncio's
streams), so the client sees a closed connection, retriable like an outage: docs/troubleshooting.md says so.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ConnectionClosedError
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.security import ClientSecurity
from rmqrun.remoting.server import RemotingServer
from tests.tls_kit import TestCA


def test_client_certificate_is_presented_when_the_server_requires_one(tmp_path: Path) -> None:
    ca = TestCA.create(tmp_path / "ca")
    server_certs = ca.issue(tmp_path / "server")
    client_certs = ca.issue(tmp_path / "client", name="orders-app client", client=True)
    stranger = TestCA.create(tmp_path / "other-ca", name="someone else's CA").issue(tmp_path / "stranger",
                                                                                   client=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca.cert_path))
    ctx.load_cert_chain(server_certs.cert, server_certs.key)
    ctx.verify_mode = ssl.CERT_REQUIRED
    subjects: list[str] = []

    async def answer(conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        peer = conn._writer.get_extra_info("peercert")  # what the server's TLS layer verified
        subjects.append(str(peer.get("subject") if peer else None))
        return cmd.response(ResponseCode.SUCCESS)

    async def main() -> None:
        server = RemotingServer("127.0.0.1", 0, name="mtls", ssl_context=ctx, tls_mode="enforcing")
        server.register(RequestCode.GET_BROKER_RUNTIME_INFO, answer)
        await server.start()
        try:
            good = ClientSecurity(tls=True, tls_ca_file=str(ca.cert_path), tls_cert_file=str(client_certs.cert),
                                  tls_key_file=str(client_certs.key))
            conn = await Connection.open(server.address, security=good)
            resp = await conn.request(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO), 10)
            assert resp.code == ResponseCode.SUCCESS
            conn.close()
            assert len(subjects) == 1 and "orders-app client" in subjects[0], subjects

            for security in (ClientSecurity(tls=True, tls_ca_file=str(ca.cert_path)),
                             ClientSecurity(tls=True, tls_ca_file=str(ca.cert_path),
                                            tls_cert_file=str(stranger.cert), tls_key_file=str(stranger.key))):
                with pytest.raises(ConnectionClosedError) as info:
                    conn = await Connection.open(server.address, security=security)
                    # TLS 1.3: the server's verdict on the client's certificate arrives after the handshake
                    await conn.request(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO), 10)
                assert f"connection {server.address} closed" in str(info.value), str(info.value)
            assert len(subjects) == 1  # neither reached the processor
        finally:
            await server.stop()

    asyncio.run(asyncio.wait_for(main(), 60))
