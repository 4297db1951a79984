"""``order_by: key`` from the command line: the flag, the variable, bad values, and the sharding
key recorded by ``rmqrun produce`` and the producer API so that consumers can order by it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rmqrun.client.producer import Producer
from tests.integration.cli_kit import child_env, run_args, run_cli
from tests.integration.keyed_kit import assert_key_order, finished, read_calls
from tests.integration.signals_kit import Runs, topic_messages, wait_until


def test_produce_sharding_key_is_recorded_on_each_message(eb) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "SKP", "--count", "30",
                    "--sharding-key", "acct-{i%3}", "--body", "{i}"])
    assert proc.returncode == 0, proc.stderr
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "SKN", "--count", "5", "--body", "{i}"])
    assert proc.returncode == 0, proc.stderr
    msgs = topic_messages(eb, "SKP")
    assert len(msgs) == 30
    assert all(m.properties["__SHARDINGKEY"] == f"acct-{int(m.body) % 3}" for m in msgs)
    assert all("__SHARDINGKEY" not in m.properties for m in topic_messages(eb, "SKN"))


def test_producer_api_records_the_sharding_key(eb) -> None:  # type: ignore[no-untyped-def]
    async def main() -> None:
        async with Producer(eb.namesrv_address, "PG_api") as p:
            await p.send("SKA", b"one", sharding_key="order-42")
            await p.send("SKA", b"two", sharding_key="order-42", properties={"__SHARDINGKEY": "mine"})
            await p.send("SKA", b"three")
    asyncio.run(main())
    props = {bytes(m.body): m.properties for m in topic_messages(eb, "SKA")}
    assert props[b"one"]["__SHARDINGKEY"] == "order-42"
    assert props[b"two"]["__SHARDINGKEY"] == "mine"  # a key the caller set is kept
    assert "__SHARDINGKEY" not in props[b"three"]


def test_run_order_by_key_flag_and_variable(eb, runs: Runs, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proc = run_cli(["produce", "--namesrv", eb.namesrv_address, "--topic", "SKR", "--count", "120",
                    "--sharding-key", "{i%12}", "--body", "msg-{i}"])
    assert proc.returncode == 0, proc.stderr
    calls = tmp_path / "calls.txt"
    env = {"RMQRUN_HANDLER_KEYED_FILE": str(calls), "RMQRUN_HANDLER_KEYED_SLEEP_MS": "5"}
    run = runs.start("flag", "tests.integration.handlers.keyed_handler:handle", namesrv=eb.namesrv_address, group="GSKR",
                     topic="SKR", args=["--workers", "3", "--order-by", "key", "--consume-from",
                                        "CONSUME_FROM_FIRST_OFFSET"], env=env)
    # the supervisor's start-up line names the mode; start() returns at the first "consuming " in the log, which
    # the first rebalance's "now consuming N queue(s)" can be, a moment before it
    wait_until(lambda: "orderly by key (sharding_key)" in run.log(), 30, "the start-up line naming the mode")
    wait_until(lambda: len(finished(read_calls(calls))) >= 120, 60, "120 messages")
    done = read_calls(calls)
    assert sorted(c.i for c in done) == list(range(120))
    assert_key_order(done, 12)
    # the same from the environment, with another key source
    out = run_cli(["run", "workers.noop:handle", "--namesrv", eb.namesrv_address, "--group", "G", "--topic", "T",
                   "--print-settings"], env=child_env(RMQRUN_ORDER_BY="KEY", RMQRUN_ORDER_KEY="property:acct"))
    assert out.returncode == 0, out.stderr
    lines = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line.strip()}
    assert lines["order_by"][:1] == ["key"] and lines["order_key"][:1] == ["property:acct"]


def test_bad_order_settings_are_refused_by_name(eb) -> None:  # type: ignore[no-untyped-def]
    for extra, needle in [(["--order-by", "sideways"], "order_by='sideways' (command line --order-by) is invalid"),
                          (["--order-by", "key", "--order-key", "property:"], "order_key='property:'"),
                          (["--order-by", "key", "--order-key", "colour"], "order_key='colour'")]:
        proc = run_cli(run_args(eb.namesrv_address, "GBAD", "BAD", "workers.noop:handle", *extra))
        assert proc.returncode != 0
        assert needle in proc.stderr, proc.stderr
    # manual commit is queue-wide: refused in key mode, naming both settings
    proc = run_cli(run_args(eb.namesrv_address, "GBAD", "BAD", "workers.noop:handle", "--order-by", "key"),
                   env=child_env(RMQRUN_AUTO_COMMIT="false"))
    assert proc.returncode != 0 and "auto_commit=False is invalid: order_by=key" in proc.stderr, proc.stderr


def test_demo_order_by_key_uses_every_worker_on_fewer_queues(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = run_cli(["demo", "--messages", "1200", "--workers", "4", "--cpu-ms", "0.5", "--order-by", "key"],
                   env=child_env(TMPDIR=str(tmp)), timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "1200 messages handled" in out and ", 0 failed" in out
    assert "in order by key (1000 sharding keys on 2 queue(s)" in out
    # the 4 workers shared the work although the topic has 2 queues
    cpu = [float(x) for x in out.split("CPU seconds per worker:")[1].split()]
    assert len(cpu) == 4 and min(cpu) > 0.15 * max(cpu), cpu
    assert list(tmp.iterdir()) == []  # the demo's temporary directory is gone
