"""Commands started without something they need say which option is missing, exit 2, and do nothing.

``rmqrun produce`` / ``read`` / ``status`` are one-shot tools: a missing name
server or topic, or a produce with nothing to send, must be one line naming the
option (exit 2, the usage-error status) before any connection is made.
"""

from __future__ import annotations

import pytest

from tests.integration.cli_kit import child_env, run_cli


@pytest.mark.parametrize(("args", "words"), [
    (["produce", "--topic", "T", "--count", "1"], "missing namesrv (--namesrv, $NAMESRV_ADDR or RMQRUN_NAMESRV)"),
    (["produce", "--namesrv", "127.0.0.1:9", "--count", "1"], "missing topic (--topic)"),
    (["produce", "--namesrv", "127.0.0.1:9", "--topic", "T"],
     "nothing to send: give --count N, --file FILE, or pipe lines on stdin"),
], ids=["no-namesrv", "no-topic", "nothing-to-send"])
def test_a_missing_input_is_named_in_one_line(args: list[str], words: str) -> None:
    env = {k: v for k, v in child_env().items() if k != "NAMESRV_ADDR"}
    proc = run_cli(args, env=env, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.strip() == f"rmqrun: error: {words}", proc.stderr
    assert proc.stdout == ""
