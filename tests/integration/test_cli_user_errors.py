"""A user's typo is one ``rmqrun: error:`` line naming the option and exit 2, never a traceback (issue #33).

Each command runs as a real ``rmqrun`` child. The name server address is a closed port: every refusal
here happens before anything connects, so none of them needs a broker.
"""

from __future__ import annotations

import pytest

from tests.integration.cli_kit import free_port, run_cli

NAMESRV = f"127.0.0.1:{free_port()}"


@pytest.mark.parametrize("args, message", [
    # was AttributeError: 'NoneType' object has no attribute 'render'
    (["produce", "--topic", "T", "--count", "1", "--body", ""], "--body '' is empty"),
    # was a ValueError worded for the Python API (view_message(msg_id, topic=...))
    (["read", "--topic", "T", "--msg-id", "ZZZ"], "--msg-id 'ZZZ' is not a message id: a client id (UNIQ_KEY"),
    # was ValueError: year 3170843 is out of range
    (["read", "--topic", "T", "--from", "99999999999999999"],
     "--from '99999999999999999' is epoch milliseconds after the year 9999"),
    (["read", "--topic", "T", "--to", "time:99999999999999999"], "--to 'time:99999999999999999' is epoch "
                                                                  "milliseconds after the year 9999"),
    (["offsets", "reset", "-g", "G", "-t", "T", "--to-timestamp-ms", "99999999999999999"],
     "--to-timestamp-ms 99999999999999999 is after the year 9999"),
    # was UnicodeEncodeError ... surrogates not allowed, naming nothing
    (["produce", "--topic", "T", "--count", "1", "--tags", "T\udcff"],
     "--tags is not valid UTF-8 text: 'T\\udcff' holds the byte 0xff"),
    (["read", "--topic", "T", "--tags=T\udcff"], "--tags is not valid UTF-8 text"),
    (["status", "--group", "G\udcfe"], "--group is not valid UTF-8 text: 'G\\udcfe' holds the byte 0xfe"),
    # rmqrun spark: a JSON start at latest or end at earliest reads nothing (Kafka refuses both, item 14)
    (["spark", "workers.noop:handle", "--topic", "T", "--from", '{"T": {"broker-a:0": -1}}'],
     "--from: T broker-a:0 can't be latest (-1) for batch queries"),
    (["spark", "workers.noop:handle", "--topic", "T", "--to", '{"T": {"broker-a:0": -2}}'],
     "--to: T broker-a:0 can't be earliest (-2) for batch queries"),
    # was "0 message(s)", exit 0, where rmqrun spark refuses the same range (item 4)
    (["read", "--topic", "T", "--from", "30", "--to", "10"], "--to offset 10 is before --from offset 30"),
    (["read", "--topic", "T", "--from", "2024-11-24T09:00:00Z", "--to", "2024-11-24T08:00:00Z"],
     "--to 2024-11-24T08:00:00.000Z is before --from 2024-11-24T09:00:00.000Z"),
])
def test_a_typo_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    proc = run_cli([*args, "--namesrv", NAMESRV])
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("rmqrun: error: ") and message in proc.stderr, proc.stderr


def test_a_range_in_order_or_empty_is_not_refused() -> None:
    """--from equal to --to is an empty range, not a reversed one: it reaches the name server (exit 1 here)."""
    proc = run_cli(["read", "--topic", "T", "--from", "10", "--to", "10", "--namesrv", NAMESRV], timeout=120)
    assert proc.returncode == 1 and "before --from" not in proc.stderr, proc.stderr
