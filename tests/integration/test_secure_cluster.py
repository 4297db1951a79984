"""rmqrun against a secure cluster: the embedded broker with an ACL file and TLS (enforcing), a test CA
and certificates made here, the ``rmqrun`` command as a real child process.

What it shows: ``topic create``, ``produce``, ``run``, ``status`` and ``read`` sign every request and
speak TLS (the broker refuses nothing); the secret never reaches a worker's environment nor any output;
a refused request (denied group or topic, wrong secret, no key) ends each command with one line naming
the operation, the topic/group and the access key, and ``run`` exits non-zero instead of waiting; a CA
that is not the server's and an expired server certificate end them too, and ``tls_insecure`` connects.
"""

from __future__ import annotations

import hashlib
import signal
import textwrap
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.acl_kit import ADMIN_AK, ADMIN_SK, write_acl
from tests.integration.cli_kit import Child, child_env, run_cli, wait_for
from tests.integration.handlers.record_handler import records
from tests.tls_kit import CertFiles, TestCA

pytestmark = pytest.mark.timeout(240)

APP_AK, APP_SK = "orders-app", "app-Secret-7f3c"
TOPIC, GROUP = "SecOrders", "SecScoring"
ACL = textwrap.dedent(f"""\
    accounts:
      - accessKey: {ADMIN_AK}
        secretKey: '{ADMIN_SK}'
        admin: true
      - accessKey: {APP_AK}
        secretKey: '{APP_SK}'
        admin: false
        defaultTopicPerm: DENY
        defaultGroupPerm: DENY
        topicPerms:
          - {TOPIC}=PUB|SUB
          - ClosedTopic=DENY
        groupPerms:
          - {GROUP}=SUB
          - rmqrun_read=SUB
    """)


class Cluster:
    def __init__(self, eb: EmbeddedBroker, ca: Path, tmp: Path) -> None:
        self.eb, self.ca, self.tmp = eb, ca, tmp
        self.secret_file = tmp / "app.secret"
        self.secret_file.write_text(APP_SK + "\n", encoding="utf-8")
        self.secret_file.chmod(0o600)

    @property
    def namesrv(self) -> str:
        return self.eb.namesrv_address

    def tls(self, ca: Path | None = None) -> list[str]:
        return ["--tls", "--tls-ca-file", str(ca or self.ca)]

    def app(self) -> list[str]:
        """The application's credentials as flags: the key, and the secret from a file (no flag for it)."""
        return ["--access-key", APP_AK, "--secret-key-file", str(self.secret_file), *self.tls()]


def _broker(tmp: Path, certs: CertFiles, acl: str = ACL) -> EmbeddedBroker:
    tmp.mkdir(parents=True, exist_ok=True)
    eb = EmbeddedBroker(tmp / "broker", flush_mode="async", acl_file=str(write_acl(tmp / "plain_acl.yml", acl)),
                        tls_cert=str(certs.cert), tls_key=str(certs.key), tls_mode="enforcing")
    return eb.start_in_thread()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    ca = TestCA.create(tmp_path / "ca")
    eb = _broker(tmp_path, ca.issue(tmp_path / "server"))
    try:
        yield Cluster(eb, ca.cert_path, tmp_path)
    finally:
        eb.stop_in_thread()


def _create_topic(c: Cluster) -> None:
    """An admin-only call (UPDATE_AND_CREATE_TOPIC), signed with the admin account from the environment."""
    env = child_env(RMQRUN_ACCESS_KEY=ADMIN_AK, RMQRUN_SECRET_KEY=ADMIN_SK)
    r = run_cli(["topic", "create", TOPIC, "--queues", "4", "--namesrv", c.namesrv, *c.tls()], env=env)
    assert r.returncode == 0, r.stderr
    assert TOPIC in c.eb.broker.topics


def _no_secret(text: str) -> None:
    assert APP_SK not in text and ADMIN_SK not in text


def test_produce_run_status_read_sign_and_speak_tls(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    _create_topic(c)
    r = run_cli(["produce", "--namesrv", c.namesrv, "--topic", TOPIC, "--count", "30", *c.app()])
    assert r.returncode == 0, r.stderr
    assert "sent 30 message(s)" in r.stdout and ", 0 failed" in r.stdout, r.stdout

    # run: the secret in RMQRUN_SECRET_KEY (the supervisor's environment), workers started without it
    record = tmp_path / "record.txt"
    probe = tmp_path / "env.txt"
    env = child_env(RMQRUN_ACCESS_KEY=APP_AK, RMQRUN_SECRET_KEY=APP_SK, RMQRUN_TLS="true",
                    RMQRUN_TLS_CA_FILE=str(c.ca), RMQRUN_HANDLER_RECORD=str(record),
                    RMQRUN_HANDLER_ENV_PROBE=str(probe),
                    RMQRUN_HANDLER_SECRET_SHA256=hashlib.sha256(APP_SK.encode()).hexdigest())
    args = ["run", "tests.integration.handlers.record_handler:handle", "--namesrv", c.namesrv, "--group", GROUP,
            "--topic", TOPIC, "--consume-from", "CONSUME_FROM_FIRST_OFFSET", "--workers", "2",
            "--worker-init", "tests.integration.env_probe:probe", "--log-level", "DEBUG"]
    with Child(args, tmp_path, env=env) as run:
        wait_for(lambda: len(records(record)) >= 30, 90, what="30 messages consumed over ACL + TLS")
        assert env["RMQRUN_SECRET_KEY"] == APP_SK  # it was there to leak (the supervisor's environment)
        workers = psutil.Process(run.pid).children()
        assert len(workers) == 2
        # each worker's own os.environ, written by its worker_init hook (its title covers /proc/PID/environ)
        seen = {int(pid): flags for pid, *flags in (ln.split() for ln in probe.read_text().splitlines())}
        assert {w.pid for w in workers} <= set(seen), seen
        for w in workers:
            key_var, secret_value, handler_var = seen[w.pid]
            assert key_var == "0" and secret_value == "0", f"worker {w.pid} has the secret in its environment"
            assert handler_var == "1"  # the handler's own variables still pass
        run.signal(signal.SIGTERM)
        assert run.wait(60) == 0, run.stderr[-3000:]
        _no_secret(run.stderr + run.stdout)
    assert sorted(body for *_, body in records(record)) == sorted(f"message {i}" for i in range(30))

    r = run_cli(["status", "--group", GROUP, "--namesrv", c.namesrv, *c.app()])
    assert r.returncode == 0, r.stderr
    assert TOPIC in r.stdout and r.stdout.splitlines()[-1].split()[-1] == "0", r.stdout  # total lag 0

    r = run_cli(["read", "--topic", TOPIC, "--namesrv", c.namesrv, "--count", "30", "--format", "json", *c.app()])
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.splitlines()) == 30
    for out in (r.stdout, r.stderr):
        _no_secret(out)
    assert c.eb.broker.acl is not None and c.eb.broker.acl.refused == 0


def test_run_exits_on_a_refused_group_instead_of_waiting(cluster: Cluster, tmp_path: Path) -> None:
    c = cluster
    _create_topic(c)
    args = ["run", "workers.noop:handle", "--namesrv", c.namesrv, "--group", "NotMyGroup", "--topic", TOPIC,
            "--workers", "1", *c.app()]
    with Child(args, tmp_path) as run:
        code = run.wait(90)
        err = run.stderr
    assert code == 1, err[-3000:]
    line = next(ln for ln in err.splitlines() if "access denied" in ln)
    assert "HEART_BEAT" in line and "NotMyGroup" in line and f"access key {APP_AK}" in line, line
    assert "consumer cannot start" in err and "waiting for the cluster" not in err
    _no_secret(err + run.stdout)


def test_refusals_name_operation_subject_and_key_never_the_secret(cluster: Cluster) -> None:
    c = cluster
    _create_topic(c)
    r = run_cli(["produce", "--namesrv", c.namesrv, "--topic", "ClosedTopic", "--count", "50", "--concurrency", "1",
                 *c.app()])
    assert r.returncode == 1
    assert "access denied" in r.stdout and "SEND_MESSAGE_V2 (topic ClosedTopic" in r.stdout, r.stdout + r.stderr
    assert f"access key {APP_AK}" in r.stdout
    # the first refusal stops the run: the 49 others are not sent into the same refusal
    assert "sent 0 message(s)" in r.stdout and ", 1 failed" in r.stdout and "stopped at the refusal" in r.stdout

    wrong = c.tmp / "wrong.secret"
    wrong.write_text("not-the-secret\n", encoding="utf-8")
    wrong.chmod(0o600)
    r = run_cli(["status", "--group", GROUP, "--namesrv", c.namesrv, "--access-key", APP_AK,
                 "--secret-key-file", str(wrong), *c.tls()])
    assert r.returncode == 1
    assert "access denied" in r.stderr and f"access key {APP_AK}" in r.stderr and "signature" in r.stderr.lower()
    assert "not-the-secret" not in r.stderr + r.stdout

    r = run_cli(["read", "--topic", TOPIC, "--namesrv", c.namesrv, "--count", "1", *c.tls()])
    assert r.returncode == 1
    assert "access denied" in r.stderr and "no access key" in r.stderr, r.stderr
    for out in (r.stdout, r.stderr):
        _no_secret(out)
    assert c.eb.broker.acl is not None and c.eb.broker.acl.refused >= 3


def test_wrong_ca_expired_certificate_and_tls_insecure(tmp_path: Path) -> None:
    ca = TestCA.create(tmp_path / "ca")
    stranger = TestCA.create(tmp_path / "other-ca", name="someone else's CA")
    eb = _broker(tmp_path / "good", ca.issue(tmp_path / "server"))
    try:
        c = Cluster(eb, ca.cert_path, tmp_path)
        r = run_cli(["status", "--group", GROUP, "--namesrv", c.namesrv, "--access-key", APP_AK,
                     "--secret-key-file", str(c.secret_file), *c.tls(stranger.cert_path)])
        assert r.returncode == 1
        assert "certificate is not accepted" in r.stderr and str(stranger.cert_path) in r.stderr, r.stderr
        # run does not wait for a cluster whose certificate it does not trust
        with Child(["run", "workers.noop:handle", "--namesrv", c.namesrv, "--group", GROUP, "--topic", TOPIC,
                    "--workers", "1", "--access-key", APP_AK, "--secret-key-file", str(c.secret_file),
                    *c.tls(stranger.cert_path)], tmp_path, name="run-wrong-ca") as run:
            assert run.wait(90) == 1, run.stderr[-3000:]
            assert "certificate is not accepted" in run.stderr and "waiting for the cluster" not in run.stderr
        # tls_insecure: the same server, verification off, works (a test cluster's switch)
        r = run_cli(["produce", "--namesrv", c.namesrv, "--topic", TOPIC, "--count", "2", "--access-key", APP_AK,
                     "--secret-key-file", str(c.secret_file), "--tls", "--tls-insecure"])
        assert r.returncode == 0, r.stderr
    finally:
        eb.stop_in_thread()

    old = _broker(tmp_path / "old", ca.issue(tmp_path / "expired", expired=True))
    try:
        r = run_cli(["status", "--group", GROUP, "--namesrv", old.namesrv_address, "--access-key", APP_AK,
                     "--secret-key-file", str(c.secret_file), "--tls", "--tls-ca-file", str(ca.cert_path)])
        assert r.returncode == 1
        assert "certificate has expired" in r.stderr, r.stderr
    finally:
        old.stop_in_thread()


def test_pull_consumer_with_client_security(cluster: Cluster) -> None:
    from rmqrun import ClientSecurity, PullConsumer
    from rmqrun.remoting.errors import AccessDeniedError

    c = cluster
    _create_topic(c)
    assert run_cli(["produce", "--namesrv", c.namesrv, "--topic", TOPIC, "--count", "8", *c.app()]).returncode == 0
    good = ClientSecurity(APP_AK, APP_SK, tls=True, tls_ca_file=str(c.ca))
    with PullConsumer(c.namesrv, GROUP, security=good) as consumer:
        got = 0
        for mq in consumer.fetch_subscribe_message_queues(TOPIC):
            result = consumer.pull(mq, "*", 0, 32)
            got += len(result.messages)
            consumer.update_consume_offset(mq, result.next_begin_offset)
        consumer.persist_consume_offsets()
    assert got == 8
    bad = ClientSecurity(APP_AK, "wrong", tls=True, tls_ca_file=str(c.ca))
    with PullConsumer(c.namesrv, GROUP, security=bad) as consumer:
        mq = consumer.fetch_subscribe_message_queues(TOPIC)[0]
        with pytest.raises(AccessDeniedError, match=f"PULL_MESSAGE .*topic {TOPIC}, group {GROUP}.*{APP_AK}"):
            consumer.pull(mq, "*", 0, 32)


def test_check_shows_security_warns_on_a_readable_secret_and_never_shows_it(cluster: Cluster) -> None:
    c = cluster
    _create_topic(c)
    config = c.tmp / "app.yaml"
    config.write_text(f"namesrv: '{c.namesrv}'\ngroup: {GROUP}\ntopic: {TOPIC}\naccess_key: {APP_AK}\n"
                      f"secret_key: '{APP_SK}'\ntls: true\ntls_ca_file: '{c.ca}'\n", encoding="utf-8")
    config.chmod(0o644)
    r = run_cli(["check", "--config", str(config), "workers.noop:handle"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"ACL access key {APP_AK}" in r.stdout and f"server verified against {c.ca}" in r.stdout, r.stdout
    assert f"config file {config} holds a secret and is readable by other users (mode 0644)" in r.stdout
    _no_secret(r.stdout + r.stderr)
    config.chmod(0o600)
    r = run_cli(["check", "--config", str(config), "workers.noop:handle"])
    assert r.returncode == 0 and "readable by other users" not in r.stdout, r.stdout
    r = run_cli(["run", "--config", str(config), "workers.noop:handle", "--print-settings"])
    assert r.returncode == 0 and "(set, hidden)" in r.stdout, r.stdout
    _no_secret(r.stdout + r.stderr)
    # check meets the refusals run would meet: a group the key may not use, a topic it may not read
    r = run_cli(["check", "--config", str(config), "--group", "NotMyGroup", "workers.noop:handle"])
    assert r.returncode == 1 and "FAIL  access" in r.stdout and "NotMyGroup" in r.stdout, r.stdout + r.stderr
    _no_secret(r.stdout + r.stderr)
    admin = child_env(RMQRUN_ACCESS_KEY=ADMIN_AK, RMQRUN_SECRET_KEY=ADMIN_SK)
    assert run_cli(["topic", "create", "ClosedTopic", "--namesrv", c.namesrv, *c.tls()], env=admin).returncode == 0
    r = run_cli(["check", "--config", str(config), "--topic", "ClosedTopic", "workers.noop:handle"])
    assert r.returncode == 1 and "FAIL  access" in r.stdout, r.stdout + r.stderr
    assert "QUERY_MESSAGE (topic ClosedTopic)" in r.stdout and f"access key {APP_AK}" in r.stdout
    _no_secret(r.stdout + r.stderr)


def test_run_stops_when_the_cluster_starts_refusing(cluster: Cluster, tmp_path: Path) -> None:
    """Permissions withdrawn while consuming: the next refused request stops run gracefully, exit 1."""
    from rmqrun.broker.acl.config import load_acl_file

    c = cluster
    _create_topic(c)
    env = child_env(RMQRUN_SECRET_KEY=APP_SK, RMQRUN_HEARTBEAT_INTERVAL_MS="300")
    args = ["run", "workers.noop:handle", "--namesrv", c.namesrv, "--group", GROUP, "--topic", TOPIC,
            "--workers", "1", "--access-key", APP_AK, *c.tls()]
    with Child(args, tmp_path, env=env, name="run-revoked") as run:
        run.wait_output("consuming", 90)
        revoked = write_acl(c.tmp / "revoked.yml", ACL.replace(f"- {GROUP}=SUB", f"- {GROUP}=DENY"))
        assert c.eb.broker.acl is not None
        c.eb.broker.acl.config = load_acl_file(revoked)
        code = run.wait(90)
        err = run.stderr
    assert code == 1, err[-3000:]
    assert "stopping: the cluster refuses this consumer: access denied" in err and GROUP in err, err[-3000:]
    assert "stopped:" in err  # the graceful stop ran (offsets, unregister) before the exit
    _no_secret(err)


def test_permissive_broker_takes_rmqrun_over_tls_and_in_the_clear(tmp_path: Path) -> None:
    """A broker in permissive mode (Java's default tlsMode): rmqrun with tls and without both work."""
    ca = TestCA.create(tmp_path / "ca")
    certs = ca.issue(tmp_path / "server")
    tmp_path.joinpath("b").mkdir()
    eb = EmbeddedBroker(tmp_path / "b" / "broker", flush_mode="async",
                        acl_file=str(write_acl(tmp_path / "b" / "acl.yml", ACL)),
                        tls_cert=str(certs.cert), tls_key=str(certs.key), tls_mode="permissive").start_in_thread()
    try:
        c = Cluster(eb, ca.cert_path, tmp_path)
        _create_topic(c)
        secured = run_cli(["produce", "--namesrv", c.namesrv, "--topic", TOPIC, "--count", "3", *c.app()])
        plain = run_cli(["produce", "--namesrv", c.namesrv, "--topic", TOPIC, "--count", "3", "--access-key", APP_AK,
                         "--secret-key-file", str(c.secret_file)])
        assert secured.returncode == 0 and plain.returncode == 0, secured.stderr + plain.stderr
        r = run_cli(["read", "--topic", TOPIC, "--namesrv", c.namesrv, "--count", "6", *c.app()])
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 6, r.stdout + r.stderr
        assert eb.broker.acl is not None and eb.broker.acl.refused == 0
    finally:
        eb.stop_in_thread()
