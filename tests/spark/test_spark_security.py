"""The rocketmq source and sink, and ``rmqrun spark``, against an ACL + TLS (enforcing) embedded broker: the
security options reach the planner and every executor; a wrong secret fails the query with the refusal line."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from rmqrun.broker.app import EmbeddedBroker
from tests.acl_kit import write_acl
from tests.integration.cli_kit import child_env, run_cli
from tests.tls_kit import TestCA

pytestmark = pytest.mark.timeout(300)

AK, SK = "spark-app", "spark-Secret-9"
TOPIC, GROUP = "SparkSecure", "SparkSecureGroup"
ACL = f"""\
accounts:
  - accessKey: {AK}
    secretKey: '{SK}'
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - {TOPIC}=PUB|SUB
    groupPerms:
      - {GROUP}=SUB
      - rmqrun_spark=SUB
"""


def stored(secure: "Secure") -> list[Any]:
    """Every message of TOPIC, read with rmqrun's own signed TLS pull consumer."""
    from rmqrun import ClientSecurity, PullConsumer
    security = ClientSecurity(AK, SK, tls=True, tls_ca_file=str(secure.ca))
    out = []
    with PullConsumer(secure.eb.namesrv_address, GROUP, security=security) as consumer:
        for mq in consumer.fetch_subscribe_message_queues(TOPIC):
            offset, end = 0, consumer.max_offset(mq)
            while offset < end:
                result = consumer.pull(mq, "*", offset, 32)
                out.extend(result.messages)
                offset = result.next_begin_offset
    return out


class Secure:
    def __init__(self, eb: EmbeddedBroker, ca: Path, secret_file: Path) -> None:
        self.eb, self.ca, self.secret_file = eb, ca, secret_file

    def options(self, secret_file: Path | None = None, **extra: str) -> dict[str, str]:
        return {**extra, "namesrv": self.eb.namesrv_address, "topic": TOPIC, "accessKey": AK,
                "secretKeyFile": str(secret_file or self.secret_file), "tls": "true", "tlsCaFile": str(self.ca)}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secure]:
    tmp = tmp_path_factory.mktemp("spark-secure")
    ca = TestCA.create(tmp / "ca")
    certs = ca.issue(tmp / "server")
    secret = tmp / "secret"
    secret.write_text(SK + "\n", encoding="utf-8")
    eb = EmbeddedBroker(tmp / "broker", flush_mode="async", acl_file=str(write_acl(tmp / "acl.yml", ACL)),
                        tls_cert=str(certs.cert), tls_key=str(certs.key), tls_mode="enforcing")
    eb.start_in_thread()
    try:
        yield Secure(eb, ca.cert_path, secret)
    finally:
        eb.stop_in_thread()


def test_sink_then_batch_read_over_acl_and_tls(spark: Any, secure: Secure) -> None:
    assert secure.eb.broker.acl is not None
    refused_before = secure.eb.broker.acl.refused
    rows = [(f"secure-{i}", "TagSec", f"k-{i}") for i in range(10)]
    df = spark.createDataFrame(rows, "body string, tags string, keys string")
    writer = df.write.format("rocketmq").mode("append").option("createTopic", "true")  # the sink makes the topic
    for k, v in secure.options().items():
        writer = writer.option(k, v)
    writer.save()
    mine = [m for m in stored(secure) if m.tags == "TagSec"]
    assert sorted(m.body.decode() for m in mine) == sorted(r[0] for r in rows)

    reader = spark.read.format("rocketmq")
    for k, v in secure.options(group=GROUP).items():  # the batch's pulls name a group the account may use
        reader = reader.option(k, v)
    got = sorted(r.body.decode() if isinstance(r.body, (bytes, bytearray)) else str(r.body)
                 for r in reader.load().where("tags = 'TagSec'").select("body").collect())
    assert got == sorted(r[0] for r in rows)
    assert secure.eb.broker.acl.refused == refused_before


def test_a_wrong_secret_fails_the_query_with_the_refusal_line(spark: Any, secure: Secure, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-it\n", encoding="utf-8")
    reader = spark.read.format("rocketmq")
    for k, v in secure.options(wrong, group=GROUP).items():
        reader = reader.option(k, v)
    with pytest.raises(Exception) as info:
        reader.load().collect()
    text = str(info.value)
    assert "access denied" in text and f"access key {AK}" in text and "not-it" not in text, text[-2000:]


def test_rmqrun_spark_runner_with_security_flags(secure: Secure, tmp_path: Path) -> None:
    assert secure.eb.broker.acl is not None
    refused_before = secure.eb.broker.acl.refused
    shutil.copy(Path(__file__).with_name("backfill_handler.py"), tmp_path / "backfill_handler.py")
    (tmp_path / "rec").mkdir()
    args = ["spark", "backfill_handler:handle", "--namesrv", secure.eb.namesrv_address, "--topic", TOPIC,
            "--master", "local[2]", "--conf", "spark.ui.enabled=false", "--group", GROUP,
            "--access-key", AK, "--secret-key-file", str(secure.secret_file), "--tls", "--tls-ca-file",
            str(secure.ca)]
    res = run_cli(args, cwd=tmp_path, timeout=200, env=child_env(RMQRUN_HANDLER_RECORD_DIR=str(tmp_path / "rec")))
    assert res.returncode == 0, res.stderr[-3000:]
    handled = [line for f in (tmp_path / "rec").glob("handled-*") for line in f.read_text().splitlines()]
    assert len(handled) == len(stored(secure)) > 0
    assert SK not in res.stdout + res.stderr
    assert secure.eb.broker.acl.refused == refused_before
