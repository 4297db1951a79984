"""A managed cluster as config/README.md describes it: ACL + TLS + an instance namespace, all at once.

The embedded broker enforces an ACL file that names the *wrapped* topic and group (what a managed service's
account is granted) and TLS only (enforcing), with a CA made here. The config file is the managed-cluster
example of config/README.md's "Secure clusters" section, read from the page, with only what must differ on
this machine changed (the name server, the secret file's path, the private CA, the handler) and the namespace
added. ``check`` and ``run`` take it as it is; ``produce`` and ``status`` are run the README's way (access
key and secret file in ``RMQRUN_*`` variables, ``--tls``).

What it shows: every request under the namespace is signed, speaks TLS and is allowed by an ACL that lists
only wrapped names (the broker refuses nothing); a message that fails once goes through the namespaced retry
topic under the same account; the handler, ``status`` and the log see the plain names while the broker holds
the wrapped ones; the group's offsets are stored under the wrapped group; no secret in any output or in a
worker's environment. A group the account may not use is refused with the wrapped name the ACL file must
list.
"""

from __future__ import annotations

import json
import re
import signal
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml

from rmqrun import ClientSecurity, PullConsumer
from rmqrun.broker.app import EmbeddedBroker
from tests.acl_kit import ADMIN_AK, ADMIN_SK, write_acl
from tests.integration.cli_kit import ROOT, Child, child_env, run_cli, wait_for
from tests.integration.handlers.topic_handler import deliveries
from tests.tls_kit import TestCA

pytestmark = pytest.mark.timeout(300)

NS = "MQ_INST_1234_abcd"
SECRET = "managed-Secret-31f9"


def managed_example() -> dict[str, Any]:
    """The YAML block of config/README.md's 'Secure clusters' section, parsed."""
    page = (ROOT / "config" / "README.md").read_text(encoding="utf-8")
    section = page.split("## Secure clusters", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "config/README.md lost its managed-cluster example"
    data = yaml.safe_load(block.group(1))
    assert isinstance(data, dict)
    return data


def test_the_managed_cluster_example_runs_under_acl_tls_and_a_namespace(tmp_path: Path) -> None:
    example = managed_example()
    # the page's example is what this test runs: the settings a managed cluster needs are all there
    assert {"handler", "namesrv", "group", "topic", "access_key", "secret_key_file", "tls"} <= set(example)
    assert example["tls"] is True and "secret_key" not in example
    ak, group, topic = example["access_key"], example["group"], example["topic"]
    wrapped_topic, wrapped_group = f"{NS}%{topic}", f"{NS}%{group}"

    acl = write_acl(tmp_path / "plain_acl.yml", textwrap.dedent(f"""\
        accounts:
          - accessKey: {ADMIN_AK}
            secretKey: '{ADMIN_SK}'
            admin: true
          - accessKey: {ak}
            secretKey: '{SECRET}'
            admin: false
            defaultTopicPerm: DENY
            defaultGroupPerm: DENY
            topicPerms:
              - {wrapped_topic}=PUB|SUB
            groupPerms:
              - {wrapped_group}=SUB
              - {NS}%rmqrun_read=SUB
              - {NS}%Backfill=SUB
        """))
    ca = TestCA.create(tmp_path / "ca")
    certs = ca.issue(tmp_path / "server")
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async", acl_file=str(acl), tls_cert=str(certs.cert),
                        tls_key=str(certs.key), tls_mode="enforcing").start_in_thread()
    try:
        _run_the_example(tmp_path, eb, example, ca.cert_path, wrapped_topic, wrapped_group)
    finally:
        eb.stop_in_thread()


def _run_the_example(tmp_path: Path, eb: EmbeddedBroker, example: dict[str, Any], ca: Path, wrapped_topic: str,
                     wrapped_group: str) -> None:
    ak, group, topic = example["access_key"], example["group"], example["topic"]
    secret_file = tmp_path / "secret"
    secret_file.write_text(SECRET + "\n", encoding="utf-8")
    secret_file.chmod(0o600)
    config = tmp_path / "app.yaml"
    settings = dict(example, namesrv=eb.namesrv_address, secret_key_file=str(secret_file), tls_ca_file=str(ca),
                    namespace=NS, handler="tests.integration.handlers.topic_handler:handle")
    config.write_text(yaml.safe_dump(settings), encoding="utf-8")
    config.chmod(0o600)

    # the topic, by an admin account (topic create is admin-only), under the namespace
    admin = child_env(RMQRUN_ACCESS_KEY=ADMIN_AK, RMQRUN_SECRET_KEY=ADMIN_SK, RMQRUN_NAMESPACE=NS)
    r = run_cli(["topic", "create", topic, "--queues", "4", "--namesrv", eb.namesrv_address, "--tls",
                 "--tls-ca-file", str(ca)], env=admin)
    assert r.returncode == 0, r.stdout + r.stderr
    assert wrapped_topic in eb.broker.topics and topic not in eb.broker.topics

    # the README's way: key and secret file in the environment, --tls on the command
    readme_env = dict(RMQRUN_ACCESS_KEY=ak, RMQRUN_SECRET_KEY_FILE=str(secret_file), RMQRUN_NAMESPACE=NS,
                      RMQRUN_TLS_CA_FILE=str(ca))
    r = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", topic, "--count", "12", "--tls"],
                env=child_env(**readme_env))
    assert r.returncode == 0 and "sent 12 message(s)" in r.stdout, r.stdout + r.stderr
    r = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", topic, "--count", "1", "--tls",
                 "--property", "idx=7"], env=child_env(**readme_env))
    assert r.returncode == 0, r.stdout + r.stderr

    r = run_cli(["check", "--config", str(config)])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"ACL access key {ak}; TLS, server verified against {ca}" in r.stdout, r.stdout
    assert "readable by other users" not in r.stdout and SECRET not in r.stdout + r.stderr

    record = tmp_path / "deliveries.txt"
    env = child_env(RMQRUN_HANDLER_RECORD=str(record), RMQRUN_HANDLER_FAIL_ONCE_IDX="7")
    with Child(["run", "--config", str(config), "--consume-from", "CONSUME_FROM_FIRST_OFFSET", "--workers", "2"],
               tmp_path, env=env) as run:
        wait_for(lambda: len(deliveries(record)) >= 14, 120, what="13 messages and one retry under ACL + TLS + ns")
        for worker in psutil.Process(run.pid).children():
            assert SECRET.encode() not in open(f"/proc/{worker.pid}/environ", "rb").read()
        # the group's offsets reach the broker under the wrapped names (a commit every 5 s by default)
        offsets = eb.broker.store.consumer_offsets
        wait_for(lambda: sum(offsets.offsets(wrapped_group, wrapped_topic).values()) == 13, 60,
                 what="13 offsets committed under the wrapped group")
        run.signal(signal.SIGTERM)
        assert run.wait(60) == 0, run.stderr[-3000:]
        err = run.stderr
    rows = deliveries(record)
    assert {t for _, t, _, _ in rows} == {topic}, rows  # the handler is shown the plain topic
    assert [(e, n) for e, _, i, n in rows if i == 7] == [("fail", 0), ("ok", 1)], rows
    assert sum(1 for e, _, i, _ in rows if i == -1 and e == "ok") == 12
    assert f"%RETRY%{wrapped_group}" in eb.broker.topics  # the retry went through the namespaced retry topic
    assert offsets.offsets(group, topic) == {} and offsets.offsets(group, wrapped_topic) == {}
    assert f"{NS}%" not in err, [ln for ln in err.splitlines() if f"{NS}%" in ln][:5]  # the log shows plain names
    assert SECRET not in err + run.stdout

    r = run_cli(["status", "--group", group, "--namesrv", eb.namesrv_address, "--tls"], env=child_env(**readme_env))
    assert r.returncode == 0, r.stdout + r.stderr
    assert topic in r.stdout and wrapped_topic not in r.stdout, r.stdout
    assert r.stdout.splitlines()[-1].split()[-1] == "0", r.stdout  # total lag 0

    # read (group rmqrun_read) and the pull consumer, under the same namespace and account
    r = run_cli(["read", "--topic", topic, "--namesrv", eb.namesrv_address, "--count", "13", "--format", "json", "--tls"],
                env=child_env(**readme_env))
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 13, r.stdout + r.stderr
    assert {json.loads(line)["topic"] for line in r.stdout.splitlines()} == {topic}
    security = ClientSecurity(ak, SECRET, tls=True, tls_ca_file=str(ca))
    with PullConsumer(eb.namesrv_address, "Backfill", namespace=NS, security=security) as consumer:
        got = []
        for mq in consumer.fetch_subscribe_message_queues(topic):
            assert mq.topic == topic
            got += consumer.pull(mq, "*", 0, 32).messages
    assert len(got) == 13 and {m.topic for m in got} == {topic}

    assert eb.broker.acl is not None and eb.broker.acl.refused == 0

    # a group the account was not granted: the line names the wrapped group, which is what the ACL must list
    r = run_cli(["check", "--config", str(config), "--group", "Other"])
    assert r.returncode == 1, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "FAIL  access" in ln)
    assert f"group {NS}%Other" in line and f"access key {ak}" in line and f"group:{NS}%Other" in line, line
    assert SECRET not in r.stdout + r.stderr
