"""``rmqrun broker --acl FILE --tls-cert/--tls-key [--tls-mode]``: a real process that enforces both,
and bad values refused before anything starts, each naming its option."""

from __future__ import annotations

import asyncio
import re
import signal
import subprocess
from pathlib import Path
from typing import Callable

import pytest

from rmqrun.remoting.codes import RequestCode as R, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import ConnectionClosedError
from rmqrun.remoting.frame import RemotingCommand
from tests.acl_kit import USER_AK, USER_SK, sign, write_acl
from tests.integration.broker_kit import send_ext
from tests.integration.cli_kit import Child, run_cli
from tests.tls_kit import TestCA, client_context

pytestmark = pytest.mark.timeout(120)
PORTS = ["--namesrv-port", "0", "--broker-port", "0"]


def _error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("make_args, expected", [
    (lambda d: ["--acl", str(d / "missing.yml")], r"--acl .*missing\.yml: cannot read it"),
    (lambda d: ["--acl", str(write_acl(d / "bad.yml", "accounts:\n  - accessKey: ab\n    secretKey: s3cretvalue\n"))],
     r"--acl .*bad\.yml: accounts\[0\] \(ab\): accessKey must be longer than 6 characters"),
    # the older spelling --tls-cert/--tls-key is kept (hidden); the messages name the flags as --help shows them
    (lambda d: ["--tls-cert", str(d / "c.pem")], r"--tls-cert-file needs --tls-key-file too"),
    (lambda d: ["--tls-cert-file", str(d / "c.pem")], r"--tls-cert-file needs --tls-key-file too"),
    (lambda d: ["--tls-key-file", str(d / "c.key")], r"--tls-key-file needs --tls-cert-file too"),
    (lambda d: ["--tls-mode", "enforcing"], r"--tls-mode enforcing needs --tls-cert-file and --tls-key-file"),
    (lambda d: ["--tls-cert", str(write_acl(d / "c.pem", "not a certificate")), "--tls-key", str(d / "c.pem")],
     r"--tls-cert-file .*c\.pem / --tls-key-file .*c\.pem: not a usable certificate and key"),
    (lambda d: ["--tls-cert-file", str(d / "none.pem"), "--tls-key-file", str(d / "none.key")],
     r"--tls-cert-file .*none\.pem / --tls-key-file .*none\.key: --tls-cert-file .*none\.pem does not exist or is "
     r"not a file"),
    (lambda d: ["--tls-cert-file", str(d / "a.pem"), "--tls-cert", str(d / "b.pem")],
     r"--tls-cert-file and --tls-cert \(its older spelling\) disagree"),
])
def test_bad_security_options_are_refused_before_starting(tmp_path: Path, make_args: Callable[[Path], list[str]],
                                                          expected: str) -> None:
    proc = run_cli(["broker", "--data-dir", str(tmp_path / "data"), *PORTS, *make_args(tmp_path)], timeout=30)
    assert proc.returncode == 2, proc.stderr
    line = _error_line(proc)
    assert line.startswith("rmqrun: error: ") and re.search(expected, line), line
    assert "s3cretvalue" not in proc.stderr
    assert not (tmp_path / "data").exists(), "nothing was started"


def test_broker_process_with_acl_and_enforced_tls(tmp_path: Path) -> None:
    ca = TestCA.create(tmp_path / "ca")
    server = ca.issue(tmp_path / "server")
    acl = write_acl(tmp_path / "plain_acl.yml")
    args = ["broker", "--data-dir", str(tmp_path / "data"), *PORTS, "--acl", str(acl), "--tls-cert",
            str(server.cert), "--tls-key", str(server.key), "--tls-mode", "enforcing"]
    with Child(args, tmp_path, name="broker") as child:
        child.wait_output("RMQRUN_BROKER_READY", timeout=60, stream="stdout")
        marker = next(ln for ln in child.stdout.splitlines() if ln.startswith("RMQRUN_BROKER_READY"))
        info = dict(part.split("=", 1) for part in marker.split()[1:])

        async def main() -> None:
            host, _, port = info["broker"].rpartition(":")
            reader, writer = await asyncio.open_connection(host, int(port), ssl=client_context(ca.cert_path))
            conn = Connection(reader, writer, name=info["broker"])
            conn.start()
            signed = sign(RemotingCommand(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), body=b"hi"),
                          USER_AK, USER_SK)
            assert (await conn.request(signed, 10)).code == ResponseCode.SUCCESS
            unsigned = RemotingCommand(R.SEND_MESSAGE_V2, send_ext("OpenTopic", queue_id=0), body=b"hi")
            refused = await conn.request(unsigned, 10)
            assert refused.code == ResponseCode.SYSTEM_ERROR and "No accessKey is configured" in refused.remark
            conn.close()
            plain = await Connection.open(info["broker"])
            with pytest.raises(ConnectionClosedError):
                await plain.request(RemotingCommand(R.GET_BROKER_RUNTIME_INFO), 10)

        asyncio.run(asyncio.wait_for(main(), 60))
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0
    assert "TLS enforcing" in child.stderr
    assert "ACL refused SEND_MESSAGE_V2(310) from 127.0.0.1:" in child.stderr
    assert USER_SK not in child.stderr + child.stdout
