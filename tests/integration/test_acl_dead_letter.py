"""Failed messages reach the retry and dead-letter topics under an ACL that grants only the group.

A 4.9.8 broker checks a send to a retry topic (the re-publish of a failed message, and the orderly
consumer's way to the DLQ) as a consumer's send-back: SUB on the retry topic of the producer group the
request names. rmqrun names the consumer group there, which the account already holds for consuming, so
an account with ``groupPerms: [G=SUB]`` and the topic's SUB is enough (the Java client names its inner
producer group ``CLIENT_INNER_PRODUCER``, which such an account cannot use, and a 4.9.8 broker refuses it).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.topics import TopicConfig
from tests.acl_kit import write_acl
from tests.integration.cli_kit import Child, child_env, run_cli, wait_for
from tests.integration.handlers.topic_handler import deliveries

pytestmark = pytest.mark.timeout(240)

AK, SK = "orders-app", "app-Secret-2d8e"


@pytest.mark.parametrize("mode", ["orderly", "concurrently"])
def test_failed_messages_reach_the_dlq_with_only_the_group_granted(tmp_path: Path, mode: str) -> None:
    group, topic = f"G{mode.capitalize()}", "Orders"
    acl = write_acl(tmp_path / "acl.yml", textwrap.dedent(f"""\
        accounts:
          - accessKey: {AK}
            secretKey: '{SK}'
            defaultTopicPerm: DENY
            defaultGroupPerm: DENY
            topicPerms: [{topic}=PUB|SUB]
            groupPerms: [{group}=SUB]
        """))
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async", acl_file=str(acl),
                        message_delay_levels="1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
                        ).start_in_thread()
    try:
        eb.broker.topics.put(TopicConfig(topic, 2, 2))
        env = child_env(RMQRUN_ACCESS_KEY=AK, RMQRUN_SECRET_KEY=SK)
        for idx in (1, 2):
            r = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", topic, "--count", "1",
                         "--property", f"idx={idx}"], env=env)
            assert r.returncode == 0, r.stdout + r.stderr
        record = tmp_path / "record.txt"
        args = ["run", "tests.integration.handlers.topic_handler:handle", "--namesrv", eb.namesrv_address, "--group", group,
                "--topic", topic, "--workers", "1", "--max-reconsume-times", "1",
                "--consume-from", "CONSUME_FROM_FIRST_OFFSET"] + (["--orderly"] if mode == "orderly" else [])
        run_env = dict(env, RMQRUN_HANDLER_RECORD=str(record), RMQRUN_HANDLER_FAIL_IDX="2",
                       RMQRUN_SUSPEND_CURRENT_QUEUE_TIME_MS="200")
        with Child(args, tmp_path, env=run_env) as run:
            dlq = f"%DLQ%{group}"
            wait_for(lambda: dlq in eb.broker.topics or run.proc.poll() is not None, 120,
                     what=f"{dlq} created by the dead-lettered message")
            assert run.proc.poll() is None, run.stderr[-3000:]
            assert "access denied" not in run.stderr, run.stderr[-3000:]
        rows = deliveries(record)
        assert ("ok", topic, 1, 0) in rows and [r for r in rows if r[2] == 2][:2] == [
            ("fail", topic, 2, 0), ("fail", topic, 2, 1)], rows
        assert eb.broker.acl is not None and eb.broker.acl.refused == 0
    finally:
        eb.stop_in_thread()
