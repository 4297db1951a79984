"""rmqrun's signer reproduces the Apache C++ client's signatures (PyPI rocketmq 0.4.4, set_session_credentials),
live: the C++ producer sends to the embedded broker, every request is recorded as the broker received it, and
ClientSecurity signs the same fields to the same Signature. A peer nobody here wrote, with a non-empty key."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.security import ClientSecurity
from tests.peers.cpp import cpp_available, cpp_unavailable_reason, run_producer

pytestmark = [pytest.mark.cpp, pytest.mark.timeout(240)]

AK, SK = "cpp-peer-key", "cpp-peer-Secret-42"


def test_cpp_client_signatures_are_what_rmqrun_computes(tmp_path: Path) -> None:
    if not cpp_available():
        pytest.skip(cpp_unavailable_reason())
    seen: list[RemotingCommand] = []
    with EmbeddedBroker(tmp_path / "data") as eb:
        eb.broker.server.guard = lambda conn, cmd: seen.append(cmd)  # records, refuses nothing
        sent = run_producer(eb.namesrv_address, topic="CppSigned", count=4, tags=["TagA"], home=tmp_path / "p",
                            credentials=(AK, SK))
    assert [s["status"] for s in sent] == ["OK"] * 4
    signed = [c for c in seen if c.ext_fields.get("AccessKey") == AK]
    assert 10 in {c.code for c in signed}  # the sends at least (SEND_MESSAGE: 0.4.4 sends the long header)
    for cmd in signed:
        fields = {k: v for k, v in cmd.ext_fields.items() if k not in ("AccessKey", "Signature")}
        ours = RemotingCommand(cmd.code, fields, body=cmd.body)
        ClientSecurity(AK, SK).sign(ours)
        assert ours.ext_fields["Signature"] == cmd.ext_fields["Signature"], (cmd.code, fields)
