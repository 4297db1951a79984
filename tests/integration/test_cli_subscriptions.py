"""Several subscriptions per consumer (issue #15): one ``rmqrun run`` consuming two topics, each with its tags.

Given as repeated ``--topic TOPIC[:TAGS]`` and as a ``subscriptions:`` map in a
YAML file; ambiguous combinations are refused before anything starts.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cli_kit import Child, child_env, embedded_broker, produce, run_cli, wait_for
from tests.integration.handlers.record_handler import records


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("subs")) as broker:
        yield broker


def _tagged(n: int) -> Any:
    return lambda i: {"TAGS": ("TagA", "TagB", "TagC")[i % 3]}


def consume_two_topics(eb: Any, tmp_path: Path, group: str, orders: str, audit: str, how: list[str],
                       expect: int) -> Counter:
    produce(eb.namesrv_address, orders, 30, props=_tagged(30))  # 10 of each tag
    produce(eb.namesrv_address, audit, 6, props=_tagged(6))
    record = tmp_path / f"{group}.txt"
    args = ["run", "tests.integration.handlers.record_handler:handle", "--namesrv", eb.namesrv_address, "--group", group,
            "--consume-from", "CONSUME_FROM_FIRST_OFFSET", "--workers", "2", *how]
    with Child(args, tmp_path, env=child_env(RMQRUN_HANDLER_RECORD=str(record)), name=group) as child:
        wait_for(lambda: len(records(record)) >= expect, 60, "the matching messages of both topics")
        child.signal(signal.SIGTERM)
        assert child.wait(60) == 0, child.stderr[-2000:]
    return Counter((topic, tags) for topic, _, _, tags, _ in records(record))


def test_repeated_topic_flags_each_with_its_tags(eb: Any, tmp_path: Path) -> None:
    seen = consume_two_topics(eb, tmp_path, "GSUB1", "SUB1_Orders", "SUB1_Audit",
                              ["--topic", "SUB1_Orders:TagA || TagB", "--topic", "SUB1_Audit"], 26)
    assert seen == {("SUB1_Orders", "TagA"): 10, ("SUB1_Orders", "TagB"): 10,
                    ("SUB1_Audit", "TagA"): 2, ("SUB1_Audit", "TagB"): 2, ("SUB1_Audit", "TagC"): 2}


def test_subscriptions_map_in_yaml(eb: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "subs.yaml"
    cfg.write_text("subscriptions:\n  SUB2_Orders: 'TagC'\n  SUB2_Audit:\n")
    seen = consume_two_topics(eb, tmp_path, "GSUB2", "SUB2_Orders", "SUB2_Audit", ["--config", str(cfg)], 16)
    assert seen == {("SUB2_Orders", "TagC"): 10,
                    ("SUB2_Audit", "TagA"): 2, ("SUB2_Audit", "TagB"): 2, ("SUB2_Audit", "TagC"): 2}


def test_print_settings_shows_where_subscriptions_came_from(tmp_path: Path) -> None:
    proc = run_cli(["run", "app:handle", "--group", "G", "--namesrv", "127.0.0.1:1", "--topic", "A:X || Y",
                    "--topic", "B", "--print-settings"])
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.split()[:1] == ["subscriptions"])
    assert "{'A': 'X || Y', 'B': '*'}" in line and line.rstrip().endswith("command line")


@pytest.mark.parametrize(("args", "yaml_text", "message"), [
    (["--topic", "A", "--topic", "B", "--tags", "X"], None,
     "tags (command line --tags) cannot be combined with several topics (subscriptions from command line)"),
    (["--topic", "A:X", "--tags", "Y"], None, "tags (command line --tags) cannot be combined with several topics"),
    (["--topic", "A", "--topic", "A:X"], None, "--topic A is given twice"),
    (["--topic", "A:||"], None, "topic='A:||' (command line --topic) is invalid: a tag expression needs at least "
                                "one tag"),
    (["--topic", "bad topic:X"], None, "topic='bad topic:X' (command line --topic) is invalid"),
    ([], "topic: A\nsubscriptions: {B: X}\n", "topic (config file {cfg}) and subscriptions (config file {cfg}) are "
                                               "both set: give one"),
    ([], "subscriptions: [A, B]\n", "subscriptions=['A', 'B'] (config file {cfg}) is invalid: a mapping of topic"),
    ([], "subscriptions: {A: '||'}\n", "tags of A: a tag expression needs at least one tag"),
])
def test_ambiguous_or_bad_subscriptions_are_refused(tmp_path: Path, args: list[str], yaml_text: str | None,
                                                    message: str) -> None:
    cmd = ["run", "workers.noop:handle", "--namesrv", "127.0.0.1:1", "--group", "G", *args]
    cfg = tmp_path / "bad.yaml"
    if yaml_text is not None:
        cfg.write_text(yaml_text)
        cmd += ["--config", str(cfg)]
    for command in ("run", "check"):
        proc = run_cli([command, *cmd[1:]], timeout=30)
        assert proc.returncode == 2, (command, proc.stdout, proc.stderr)
        out = proc.stdout if command == "check" else proc.stderr  # check's report is on stdout, pass or fail
        assert message.format(cfg=cfg) in out and "Traceback" not in proc.stdout + proc.stderr
