"""A security token (``security_token``, an STS token) travels signed with every request, end to end.

A 4.x broker checks the signature over all fields, the token included, and nothing else about it; the
embedded ACL broker does the same. ``produce`` and ``read`` with ``RMQRUN_SECURITY_TOKEN`` pass; the same
token under a wrong secret is refused; and the token, like the secret, is in no output.
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

AK, SK, TOKEN = "sts-account", "sts-Secret-0c4d", "sts-Token-Value-91b2"


def test_requests_with_a_security_token_pass_and_a_wrong_secret_does_not(tmp_path: Path) -> None:
    acl = write_acl(tmp_path / "acl.yml", textwrap.dedent(f"""\
        accounts:
          - accessKey: {AK}
            secretKey: '{SK}'
            defaultTopicPerm: PUB|SUB
            defaultGroupPerm: SUB
        """))
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async", acl_file=str(acl)).start_in_thread()
    try:
        eb.broker.topics.put(TopicConfig("Tokens", 2, 2))
        validator = eb.broker.acl
        assert validator is not None
        tokens: list[str | None] = []
        check = validator.check

        def seeing(cmd, client_ip):  # type: ignore[no-untyped-def]
            tokens.append(cmd.ext_fields.get("SecurityToken"))
            return check(cmd, client_ip)
        validator.check = seeing  # type: ignore[method-assign]
        env = child_env(RMQRUN_ACCESS_KEY=AK, RMQRUN_SECRET_KEY=SK, RMQRUN_SECURITY_TOKEN=TOKEN)
        r = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "Tokens", "--count", "4"], env=env)
        assert r.returncode == 0 and "sent 4 message(s)" in r.stdout, r.stdout + r.stderr
        r = run_cli(["read", "--topic", "Tokens", "--namesrv", eb.namesrv_address, "--count", "4"], env=env)
        assert r.returncode == 0 and len(r.stdout.splitlines()) == 4, r.stdout + r.stderr
        assert TOKEN not in r.stdout + r.stderr and SK not in r.stdout + r.stderr
        assert validator.refused == 0
        assert tokens and set(tokens) == {TOKEN}, tokens  # every request the broker checked carried it

        wrong = child_env(RMQRUN_ACCESS_KEY=AK, RMQRUN_SECRET_KEY="not-the-secret", RMQRUN_SECURITY_TOKEN=TOKEN)
        r = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "Tokens", "--count", "1"], env=wrong)
        assert r.returncode == 1, r.stdout + r.stderr
        assert f"Check signature failed for accessKey={AK}" in r.stdout + r.stderr
        assert TOKEN not in r.stdout + r.stderr and "not-the-secret" not in r.stdout + r.stderr
        assert validator.refused >= 1
    finally:
        eb.stop_in_thread()
