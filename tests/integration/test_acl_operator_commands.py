"""The operator commands with an ordinary (non-admin) account, as config/README.md's table says.

``offsets reset`` needs SUB on the group and the topic (it writes the group's offsets), ``topic list`` and
``topic describe`` only a valid signature (a 4.x broker checks no permission for them), ``topic create``
an admin account; a group the account may not use is refused with the one line.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.topics import TopicConfig
from tests.acl_kit import write_acl
from tests.integration.cli_kit import child_env, run_cli

pytestmark = pytest.mark.timeout(180)

AK, SK = "orders-app", "app-Secret-0e0e"


def test_offsets_and_topic_commands_with_a_non_admin_account(tmp_path: Path) -> None:
    acl = write_acl(tmp_path / "acl.yml", textwrap.dedent(f"""\
        accounts:
          - accessKey: {AK}
            secretKey: '{SK}'
            defaultTopicPerm: DENY
            defaultGroupPerm: DENY
            topicPerms: [Orders=PUB|SUB]
            groupPerms: [OrderScoring=SUB]
        """))
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async", acl_file=str(acl)).start_in_thread()
    try:
        eb.broker.topics.put(TopicConfig("Orders", 2, 2))
        env = child_env(RMQRUN_ACCESS_KEY=AK, RMQRUN_SECRET_KEY=SK)
        ns = eb.namesrv_address
        assert run_cli(["produce", "--namesrv", ns, "--topic", "Orders", "--count", "4"], env=env).returncode == 0

        r = run_cli(["offsets", "reset", "--namesrv", ns, "--group", "OrderScoring", "--topic", "Orders",
                     "--to-offset", "2", "--execute"],
                    env=env)
        assert r.returncode == 0 and "queue 0: 0 -> 2" in r.stdout, r.stdout + r.stderr
        offsets = eb.broker.store.consumer_offsets.offsets("OrderScoring", "Orders")
        assert offsets == {0: 2, 1: 2}, offsets

        r = run_cli(["topic", "list", "--namesrv", ns], env=env)
        assert r.returncode == 0 and "Orders" in r.stdout.split(), r.stdout + r.stderr
        r = run_cli(["topic", "describe", "Orders", "--namesrv", ns], env=env)
        assert r.returncode == 0 and "topic Orders" in r.stdout, r.stdout + r.stderr
        assert eb.broker.acl is not None and eb.broker.acl.refused == 0

        r = run_cli(["offsets", "reset", "--namesrv", ns, "--group", "Other", "--topic", "Orders", "--to-offset", "0",
                     "--execute"],
                    env=env)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "access denied" in r.stderr and "group Other" in r.stderr and f"access key {AK}" in r.stderr, r.stderr
        assert eb.broker.store.consumer_offsets.offsets("Other", "Orders") == {}
        r = run_cli(["topic", "create", "Payments", "--namesrv", ns], env=env)
        assert r.returncode == 1 and "Need admin permission" in r.stderr, r.stdout + r.stderr
        assert "Payments" not in eb.broker.topics
        assert SK not in r.stdout + r.stderr
    finally:
        eb.stop_in_thread()
