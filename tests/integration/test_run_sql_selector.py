"""``rmqrun run --sql``: a topic subscribed by an SQL92 selector (Java's ``MessageSelector.bySql``).

The embedded broker filters by tag only and refuses SQL92 as a Java broker without ``enablePropertyFilter``
does (at CHECK_CLIENT_CONFIG and at the pull): run stops at start with that cause (exit 2), as Java's push
consumer fails its start, and ``rmqrun check`` says the same. What a broker that filters receives is pinned
on the wire: the broker's CHECK_CLIENT_CONFIG handler is swapped for one that records and accepts, and the
heartbeat's subscription is read from the broker's consumer table. (The filtering itself is the broker's:
verified by hand against a real 4.9.8 broker with enablePropertyFilter=true, docs/configuration.md.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rmqrun.broker.processors.common import answer
from rmqrun.remoting.codes import RequestCode
from tests.integration.cli_kit import Child, embedded_broker, produce, run_args, run_cli, wait_for

SELECTOR = "region = 'eu' AND amount > 100"


def test_a_broker_that_filters_by_tag_only_stops_run_and_fails_check(tmp_path: Path) -> None:
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "SqlOrders", 2)
        args = run_args(eb.namesrv_address, "GSql", "SqlOrders", "workers.noop:handle", "--sql", SELECTOR,
                        "--workers", "1")
        ran = run_cli(args)
        assert ran.returncode == 2, ran.stderr[-2000:]
        assert (f"sql: broker broker-a at {eb.broker_address} refuses the SQL92 subscription of SqlOrders"
                in ran.stderr), ran.stderr[-2000:]
        assert "enablePropertyFilter=true" in ran.stderr and "subscribe with --tags there" in ran.stderr
        assert eb.broker.consumers.group("GSql") is None  # refused before its first heartbeat, as Java's start

        checked = run_cli(["check", *args[1:]])
        assert checked.returncode == 2, checked.stdout + checked.stderr
        assert "FAIL  filter       sql: broker broker-a" in checked.stdout, checked.stdout


def test_the_selector_reaches_a_broker_that_filters(tmp_path: Path) -> None:
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "SqlOrders", 2)
        checked: list[dict[str, Any]] = []

        async def accept(conn: Any, cmd: Any) -> Any:  # a broker with enablePropertyFilter=true
            checked.append(json.loads(cmd.body))
            return answer(cmd, typed=False)

        eb.broker.server.processors[int(RequestCode.CHECK_CLIENT_CONFIG)] = accept
        args = run_args(eb.namesrv_address, "GSql", "SqlOrders", "workers.noop:handle", "--sql", SELECTOR,
                        "--workers", "1")
        with Child(args, tmp_path) as child:
            child.wait_output("consuming SqlOrders[SQL92: region = 'eu' AND amount > 100] as group GSql")
            sub: Any = wait_for(lambda: eb.broker.consumers.find_subscription("GSql", "SqlOrders"), 20,
                           what="the heartbeat's subscription")
            assert (sub.expression_type, sub.sub_string) == ("SQL92", SELECTOR)
            retry = eb.broker.consumers.find_subscription("GSql", "%RETRY%GSql")
            assert retry is not None and (retry.expression_type, retry.sub_string) == ("TAG", "*")
        assert [c["subscriptionData"]["expressionType"] for c in checked] == ["SQL92"], checked
        (body,) = checked
        assert body["group"] == "GSql" and body["clientId"] and body["subscriptionData"]["subString"] == SELECTOR
        assert body["subscriptionData"]["topic"] == "SqlOrders"

        checked.clear()
        out = run_cli(["check", *args[1:]])
        assert out.returncode == 0, out.stdout + out.stderr
        assert "ok    filter       SQL92 selector accepted by 1 broker(s)" in out.stdout
        assert f"would subscribe to SqlOrders [SQL92: {SELECTOR}], %RETRY%GSql [*]" in out.stdout


@pytest.mark.parametrize("mode", [
    ["--orderly"], ["--order-by", "key"], ["--consume-mode", "pop"], ["--consume-mode", "pop", "--orderly"],
], ids=["orderly-by-queue", "orderly-by-key", "pop", "orderly-pop"])
def test_every_consume_mode_asks_the_brokers_before_it_starts(tmp_path: Path, mode: list[str]) -> None:
    """The check runs in the engine's start, which every mode's engine goes through: in each, a broker that
    filters by tag only stops run with exit 2 before the group's first heartbeat (concurrent: above)."""
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "SqlOrders", 2)
        args = run_args(eb.namesrv_address, "GSqlModes", "SqlOrders", "workers.noop:handle", "--sql", SELECTOR,
                        "--workers", "1", *mode)
        ran = run_cli(args)
        assert ran.returncode == 2, ran.stderr[-2000:]
        assert "refuses the SQL92 subscription of SqlOrders" in ran.stderr, ran.stderr[-2000:]
        assert eb.broker.consumers.group("GSqlModes") is None


def test_a_selector_the_broker_cannot_parse_is_named_with_the_broker_s_first_line(tmp_path: Path) -> None:
    """A broker that filters by SQL92 but cannot parse this selector answers SUBSCRIPTION_PARSE_FAILED with its
    parser's multi-line message (a real 4.9.8 broker's, shortened): the error names the selector and the
    first line, not the enablePropertyFilter advice meant for a broker that does not filter so."""
    from rmqrun.remoting.codes import ResponseCode

    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "SqlOrders", 2)

        async def cannot_parse(conn: Any, cmd: Any) -> Any:
            return answer(cmd, ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                          "org.apache.rocketmq.filter.parser.ParseException: Encountered \" \"=\" \"= \"\" at line 1, "
                          "column 10.\nWas expecting one of:\n    \"NOT\" ...", typed=False)

        eb.broker.server.processors[int(RequestCode.CHECK_CLIENT_CONFIG)] = cannot_parse
        bad = "region = = 'eu'"
        args = run_args(eb.namesrv_address, "GSqlBad", "SqlOrders", "workers.noop:handle", "--sql", bad)
        checked = run_cli(["check", *args[1:]])
        assert checked.returncode == 2, checked.stdout + checked.stderr
        line = next(ln for ln in checked.stdout.splitlines() if ln.startswith("FAIL  filter"))
        assert line.endswith(f"cannot parse the SQL92 selector {bad!r} of SqlOrders: org.apache.rocketmq.filter."
                             "parser.ParseException: Encountered \" \"=\" \"= \"\" at line 1, column 10."), line
        assert "Was expecting" not in checked.stdout and "enablePropertyFilter" not in checked.stdout
