"""The README's "Secure clusters: ACL and TLS" example, run as written against an ACL + TLS embedded broker.

The shell block (the exported key and secret file, ``rmqrun run ... --tls``, ``rmqrun status ... --tls``) and
the Python lines (``ClientSecurity`` + ``PullConsumer``) are read from README.md. Only what names another
machine changes: ``ns.example.com:9876`` becomes the embedded name server, ``/etc/rmqrun/secret`` a file
here, ``myapp.handlers:handle`` a recording handler. The example verifies the server against the system's
CAs (no ``tls_ca_file``): OpenSSL's ``SSL_CERT_FILE`` points "the system's CAs" at the test CA, so
verification stays on and nothing in the commands is added.
"""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.acl_kit import ADMIN_AK, ADMIN_SK, write_acl
from tests.integration.cli_kit import ROOT, Child, child_env, run_cli, wait_for
from tests.integration.handlers.record_handler import records
from tests.tls_kit import TestCA

pytestmark = pytest.mark.timeout(300)

SECRET = "readme-Secret-77aa"


def _section() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "### Secure clusters: ACL and TLS" in text
    return text.split("### Secure clusters: ACL and TLS", 1)[1].split("\n## ", 1)[0]


def readme_shell() -> tuple[dict[str, str], list[list[str]]]:
    """The exported variables and the rmqrun commands of the section's shell block."""
    block = re.search(r"```sh\n(.*?)```", _section(), re.S)
    assert block is not None
    env: dict[str, str] = {}
    commands = []
    for line in block.group(1).splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        if words[0] == "export":
            env.update(w.split("=", 1) for w in words[1:])
        else:
            assert words[0] == "rmqrun", line
            commands.append(words[1:])
    return env, commands


def readme_python() -> str:
    block = re.search(r"```python\n(.*?)```", _section(), re.S)
    assert block is not None
    return block.group(1)


def test_the_readme_secure_cluster_example_runs_as_written(tmp_path: Path) -> None:
    exported, commands = readme_shell()
    assert set(exported) == {"RMQRUN_ACCESS_KEY", "RMQRUN_SECRET_KEY_FILE"}, exported
    assert [c[0] for c in commands] == ["run", "status"], commands
    ak = exported["RMQRUN_ACCESS_KEY"]
    ca = TestCA.create(tmp_path / "ca")
    certs = ca.issue(tmp_path / "server")
    acl = write_acl(tmp_path / "acl.yml", textwrap.dedent(f"""\
        accounts:
          - accessKey: {ADMIN_AK}
            secretKey: '{ADMIN_SK}'
            admin: true
          - accessKey: {ak}
            secretKey: '{SECRET}'
            defaultTopicPerm: DENY
            defaultGroupPerm: DENY
            topicPerms: [Orders=PUB|SUB]
            groupPerms: [OrderScoring=SUB, Backfill=SUB]
        """))
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async", acl_file=str(acl), tls_cert=str(certs.cert),
                        tls_key=str(certs.key), tls_mode="enforcing").start_in_thread()
    try:
        secret_file = tmp_path / "secret"
        secret_file.write_text(SECRET + "\n", encoding="utf-8")
        secret_file.chmod(0o600)

        def here(words: list[str]) -> list[str]:
            return [w.replace("ns.example.com:9876", eb.namesrv_address)
                    .replace("myapp.handlers:handle", "tests.integration.handlers.record_handler:handle") for w in words]

        record = tmp_path / "record.txt"
        env = child_env(**{k: v.replace("/etc/rmqrun/secret", str(secret_file)) for k, v in exported.items()},
                        SSL_CERT_FILE=str(ca.cert_path), RMQRUN_HANDLER_RECORD=str(record))
        admin = child_env(RMQRUN_ACCESS_KEY=ADMIN_AK, RMQRUN_SECRET_KEY=ADMIN_SK, SSL_CERT_FILE=str(ca.cert_path))
        assert run_cli(["topic", "create", "Orders", "--namesrv", eb.namesrv_address, "--tls"],
                       env=admin).returncode == 0
        r = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "Orders", "--count", "5", "--tls"],
                    env=env)
        assert r.returncode == 0, r.stdout + r.stderr

        run_args, status_args = (here(c) for c in commands)
        with Child(run_args + ["--consume-from", "CONSUME_FROM_FIRST_OFFSET"], tmp_path, env=env) as run:
            wait_for(lambda: len(records(record)) >= 5, 90, what="the README's run consuming 5 messages")
            run.signal(signal.SIGTERM)
            assert run.wait(60) == 0, run.stderr[-3000:]
            assert SECRET not in run.stderr + run.stdout
        r = run_cli(status_args, env=env)
        assert r.returncode == 0 and "Orders" in r.stdout, r.stdout + r.stderr
        assert r.stdout.splitlines()[-1].split()[-1] == "0", r.stdout  # total lag 0

        # the Python lines: the pull consumer with ClientSecurity, verification against the system's CAs
        snippet = readme_python().replace("ns.example.com:9876", eb.namesrv_address)
        snippet = snippet.replace(": ...", ":\n    got = sum(len(consumer.pull(mq, '*', 0, 32).messages) "
                                           "for mq in consumer.fetch_subscribe_message_queues('Orders'))\n"
                                           "print('pulled', got)")
        program = f"import rmqrun\nsecret = {SECRET!r}\n{snippet}"
        proc = subprocess.run([sys.executable, "-c", program], env=env, cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0 and "pulled 5" in proc.stdout, proc.stdout + proc.stderr
        assert eb.broker.acl is not None and eb.broker.acl.refused == 0
    finally:
        eb.stop_in_thread()
