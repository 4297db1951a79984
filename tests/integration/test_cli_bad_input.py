"""The bad input of issue #15, each as a real ``rmqrun`` process: one line naming the option, exit 2.

Also what produce does with a piped stdin, and the one documented precedence
for ``NAMESRV_ADDR`` against a config file's ``namesrv:``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from rmqrun.cli import settings as table
from rmqrun.client.instance import ClientInstance
from rmqrun.model import Message
from rmqrun.remoting.errors import TopicNotExistError
from tests.integration.broker_kit import Client, drain
from tests.integration.cli_kit import ROOT, child_env, embedded_broker, run_cli


@pytest.fixture(scope="module")
def eb(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with embedded_broker(tmp_path_factory.mktemp("bad")) as broker:
        yield broker


def has_route(eb: Any, topic: str) -> bool:
    async def main() -> bool:
        inst = ClientInstance(eb.namesrv_address, instance_name="bad-input-test")
        try:
            await inst.namesrv.get_route(topic)
            return True
        except TopicNotExistError:
            return False
        finally:
            await inst.close()
    return asyncio.run(main())


def stored(eb: Any, topic: str, expect: int) -> list[Message]:
    async def main() -> list[Message]:
        client = await Client.connect(eb.namesrv_address, eb.broker_address)
        try:
            await client.heartbeat("reader@1", "G_bad_reader", {topic: "*"})
            return await drain(client, "G_bad_reader", topic, 4, expect=expect, deadline_s=10, to_the_end=True)
        finally:
            await client.close()
    return asyncio.run(main())


def one_line(proc: Any) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_empty_tag_expression_run_and_check_agree(eb: Any) -> None:
    base = ["workers.noop:handle", "--namesrv", eb.namesrv_address, "--group", "GBAD", "--topic", "BAD_T",
            "--tags", "||"]
    expected = ("tags='||' (command line --tags) is invalid: a tag expression needs at least one tag, e.g. 'TagA' "
                "or 'TagA || TagB' ('*' or empty: every tag)")
    run = run_cli(["run", *base], timeout=30)
    assert run.returncode == 2 and one_line(run) == f"rmqrun: error: {expected}"
    check = run_cli(["check", *base], timeout=30)
    assert check.returncode == 2 and f"FAIL  settings     {expected}" in check.stdout  # one stream: stdout
    assert "Traceback" not in check.stdout + check.stderr


def test_broker_log_level_is_checked_before_it_starts(tmp_path: Path) -> None:
    proc = run_cli(["broker", "--data-dir", str(tmp_path / "data"), "--namesrv-port", "0", "--broker-port", "0",
                    "--log-level", "verbose"], timeout=30)
    assert proc.returncode == 2
    assert one_line(proc) == ("rmqrun: error: --log-level 'verbose' is invalid: one of TRACE, DEBUG, INFO, SUCCESS, "
                              "WARNING, ERROR, CRITICAL")
    assert not (tmp_path / "data").exists(), "nothing was started"


def test_produce_reads_piped_stdin_also_with_count(eb: Any) -> None:
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "BAD_Stdin", "--count", "2"],
                   input=b"first line\nsecond line\nthird line\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sent 2 message(s) to BAD_Stdin")
    assert sorted(m.body for m in stored(eb, "BAD_Stdin", 2)) == [b"first line", b"second line"]


@pytest.mark.parametrize(("args", "message"), [
    (["--body", "{x}"], "--body: template '{x}': unknown field {x}; the fields are {i} (the message number) and "
                        "{i%N}"),
    (["--body", "order {index}"], "unknown field {index}"),
    (["--keys", "k-{id}"], "--keys: template 'k-{id}': unknown field {id}"),
    (["--sharding-key", "{user}"], "--sharding-key: template '{user}': unknown field {user}"),
])
def test_unknown_template_fields_are_refused(eb: Any, args: list[str], message: str) -> None:
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "BAD_Tpl", "--count", "1", *args])
    assert proc.returncode == 2 and message in one_line(proc)
    assert not has_route(eb, "BAD_Tpl"), "nothing was sent"


def test_json_bodies_with_the_number_field_still_work(eb: Any) -> None:
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "BAD_Json", "--count", "2",
                    "--body", '{"n": {i}, "k": "v"}'])
    assert proc.returncode == 0, proc.stderr
    assert sorted(m.body for m in stored(eb, "BAD_Json", 2)) == [b'{"n": 0, "k": "v"}', b'{"n": 1, "k": "v"}']


def test_produce_to_two_topics_is_refused(eb: Any) -> None:
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "BAD_A", "--topic", "BAD_B", "--count", "1"])
    assert proc.returncode == 2
    assert one_line(proc) == ("rmqrun: error: --topic is given 2 times (BAD_A, BAD_B): produce sends to one topic; "
                              "run it once per topic")
    assert not has_route(eb, "BAD_A") and not has_route(eb, "BAD_B")


def test_one_namesrv_precedence_in_code_readme_example_and_unit(eb: Any, tmp_path: Path) -> None:
    cfg = tmp_path / "ns.yaml"
    cfg.write_text("namesrv: 127.0.0.1:1\n")
    r = table.resolve({}, config_file=cfg, environ={"NAMESRV_ADDR": eb.namesrv_address})
    assert r["namesrv"] == eb.namesrv_address and r.sources["namesrv"] == "environment NAMESRV_ADDR"
    r = table.resolve({}, config_file=cfg, environ={"NAMESRV_ADDR": "127.0.0.1:2", "RMQRUN_NAMESRV": "127.0.0.1:3"})
    assert r["namesrv"] == "127.0.0.1:3"
    # a real process: NAMESRV_ADDR wins over the file's unreachable address
    proc = run_cli(["status", "--config", str(cfg), "--group", "GBAD_None"],
                   env=child_env(NAMESRV_ADDR=eb.namesrv_address), timeout=30)
    assert proc.returncode == 1 and "consumer group 'GBAD_None' is unknown" in proc.stderr
    # ... and every document says so
    readme = (ROOT / "README.md").read_text()
    assert "`--namesrv` > `RMQRUN_NAMESRV` > `NAMESRV_ADDR` > `namesrv:` in the file" in readme
    unit = (ROOT / "config" / "rmqrun.service").read_text()
    assert "command line > RMQRUN_NAMESRV > NAMESRV_ADDR > --config file > default" in unit
    example = (ROOT / "config" / "example.yaml").read_text()
    assert "$NAMESRV_ADDR / RMQRUN_NAMESRV, when set, win over this line" in example
