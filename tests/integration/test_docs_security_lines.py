"""The lines quoted in docs/troubleshooting.md's "Secure clusters" section are what rmqrun prints today.

Those that need no cluster (settings refused with exit 2) are run by test_docs_error_lines.py. This test
runs the others as the page writes them, against the brokers the page describes: an embedded broker with
the ACL file and TLS only (account ``orders-app``: ``Orders`` and ``OrderScoring``), one whose certificate
has expired, and a plain one. Each command runs in a directory holding the files it names (``secret``,
``wrong-secret``, ``ca.pem``, ``other-ca.pem``); the page's address ``127.0.0.1:19876`` becomes the name
server of the broker the expected line is about, and ``myapp.handlers:handle`` the repository's no-op
handler. A quoted line must equal one the command printed, timestamps and ports aside.
"""

from __future__ import annotations

import re
import shlex
import signal
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.acl_kit import ADMIN_AK, ADMIN_SK, write_acl
from tests.integration.cli_kit import ROOT, Child, child_env, run_cli, wait_for
from tests.tls_kit import TestCA

pytestmark = pytest.mark.timeout(300)

PAGE = ROOT / "docs" / "troubleshooting.md"
SECTION = "## Secure clusters: ACL, TLS, namespaces"
PAGE_NAMESRV = "127.0.0.1:19876"
ACL = textwrap.dedent(f"""\
    accounts:
      - accessKey: {ADMIN_AK}
        secretKey: '{ADMIN_SK}'
        admin: true
      - accessKey: orders-app
        secretKey: 'app-Secret-7f3c'
        defaultTopicPerm: DENY
        defaultGroupPerm: DENY
        topicPerms: [Orders=PUB|SUB]
        groupPerms: [OrderScoring=SUB]
    """)


def _normal(line: str) -> str:
    line = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", "TIME", line.strip())
    return re.sub(r"127\.0\.0\.1:\d+", "ADDR", line)


@dataclass
class Quote:
    command: str | None  # None: a line the page shows without its command
    line: str


def quotes() -> list[Quote]:
    text = PAGE.read_text(encoding="utf-8")
    assert SECTION in text, f"{PAGE} lost its section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    out: list[Quote] = []
    for block in re.findall(r"```\n(.*?)```", section, re.S):
        command = None
        for line in block.splitlines():
            if line.startswith("$ "):
                command = line[2:]
            elif line.strip():
                out.append(Quote(command, line))
    return out


ONLINE = [q for q in quotes() if q.command is None or PAGE_NAMESRV in q.command]


class Clusters:
    def __init__(self, tmp: Path) -> None:
        self.dir = tmp / "cwd"
        self.dir.mkdir()
        ca = TestCA.create(tmp / "ca")
        other = TestCA.create(tmp / "other-ca", name="someone else's CA")
        (self.dir / "ca.pem").write_bytes(ca.cert_path.read_bytes())
        (self.dir / "other-ca.pem").write_bytes(other.cert_path.read_bytes())
        for name, secret in (("secret", "app-Secret-7f3c"), ("wrong-secret", "not-the-secret")):
            (self.dir / name).write_text(secret + "\n", encoding="utf-8")
            (self.dir / name).chmod(0o600)
        good, old = ca.issue(tmp / "server"), ca.issue(tmp / "old", expired=True)
        self.secure = EmbeddedBroker(tmp / "secure", flush_mode="async",
                                     acl_file=str(write_acl(tmp / "plain_acl.yml", ACL)), tls_cert=str(good.cert),
                                     tls_key=str(good.key), tls_mode="enforcing").start_in_thread()
        self.expired = EmbeddedBroker(tmp / "expired", flush_mode="async", tls_cert=str(old.cert),
                                      tls_key=str(old.key), tls_mode="enforcing").start_in_thread()
        self.plain = EmbeddedBroker(tmp / "plain", flush_mode="async").start_in_thread()
        admin = child_env(RMQRUN_ACCESS_KEY=ADMIN_AK, RMQRUN_SECRET_KEY=ADMIN_SK)
        r = run_cli(["topic", "create", "Orders", "--namesrv", self.secure.namesrv_address, "--tls",
                     "--tls-ca-file", "ca.pem"], env=admin, cwd=self.dir)
        assert r.returncode == 0, r.stderr

    def namesrv_for(self, quote: Quote) -> str:
        if "certificate has expired" in quote.line:
            return self.expired.namesrv_address
        if "does it speak TLS" in quote.line:
            return self.plain.namesrv_address
        return self.secure.namesrv_address

    def close(self) -> None:
        for eb in (self.secure, self.expired, self.plain):
            eb.stop_in_thread()


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    c = Clusters(tmp_path_factory.mktemp("secure-docs"))
    try:
        yield c
    finally:
        c.close()


def test_the_section_quotes_refusals_and_tls_failures() -> None:
    lines = " ".join(q.line for q in ONLINE)
    for kind in ("No accessKey is configured", "Check signature failed", "No default permission for group:",
                 "Need admin permission", "certificate has expired", "unable to get local issuer certificate",
                 "does it speak TLS", "in namespace"):
        assert kind in lines, kind


def _args(quote: Quote, clusters: Clusters) -> list[str]:
    if quote.command is None:  # the namespace line of rmqrun check
        assert quote.line.startswith("FAIL  topic") and "in namespace 'MQ_INST_1'" in quote.line, quote.line
        return ["check", "workers.noop:handle", "--namesrv", clusters.secure.namesrv_address, "--group",
                "OrderScoring", "--topic", "Orders", "--namespace", "MQ_INST_1", "--access-key", "orders-app",
                "--secret-key-file", "secret", "--tls", "--tls-ca-file", "ca.pem"]
    command = quote.command.replace(PAGE_NAMESRV, clusters.namesrv_for(quote))
    command = command.replace("myapp.handlers:handle", "workers.noop:handle")
    args = shlex.split(command)
    assert args[0] == "rmqrun", command
    return args[1:]


@pytest.mark.parametrize("quote", ONLINE, ids=[q.line[:70] for q in ONLINE])
def test_quoted_line_is_printed(quote: Quote, clusters: Clusters) -> None:
    args = _args(quote, clusters)
    expected = _normal(quote.line)

    def printed(text: str) -> bool:
        return any(_normal(line) == expected for line in text.splitlines())

    if args[0] != "run":
        r = run_cli(args, cwd=clusters.dir)
        assert r.returncode == 1, r.stdout + r.stderr
        assert printed(r.stdout + r.stderr), f"{quote.line}\nnot in\n{r.stdout}{r.stderr}"
        return
    # a Child runs in the repository: the files the command names are given with their directory
    files = ("--secret-key-file", "--tls-ca-file")
    args = [str(clusters.dir / a) if i and args[i - 1] in files else a for i, a in enumerate(args)]
    with Child(args, clusters.dir, name=f"run-{len(list(clusters.dir.glob('run-*.err')))}") as run:
        wait_for(lambda: printed(run.stderr) or run.proc.poll() is not None, 90, what=quote.line)
        assert printed(run.stderr), f"{quote.line}\nnot in\n{run.stderr[-3000:]}"
        if "access denied" in quote.line:
            assert run.wait(60) == 1, run.stderr[-3000:]  # a refusal ends run
        else:
            assert run.proc.poll() is None  # a connection closed is waited out
            run.signal(signal.SIGTERM)
            run.wait(60)
