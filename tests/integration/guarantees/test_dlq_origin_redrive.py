"""Dead letters after ``max_reconsume_times`` keep the original topic, and ``dlq redrive --topic T``
brings each back once, in every mode.

One message fails every time until the test "fixes the handler" (the probe's heal file), with
``--max-reconsume-times 1``: it runs twice (reconsume 0 and 1) and lands in ``%DLQ%<group>``.
``rmqrun dlq list --topic T`` and ``dlq show`` name T as its origin, whatever topic it was last
consumed from (a POP retry is consumed from ``%RETRY%<group>_<T>``); ``dlq redrive --topic T``
moves it back to T once, where the running instance handles it (reconsume 0), and a second
re-drive moves nothing. Every other message is handled once, in order where the mode orders.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.cli_kit import run_cli
from tests.integration.guarantees.mode_kit import Cell, Mode, each
from tests.integration.signals_kit import Runs, wait_until

TOTAL = 8
DOOMED = 3  # key 1 (of 2)


def dlq(cell: Cell, *args: str) -> Any:
    r = run_cli(["dlq", *args, "--group", cell.group, "--namesrv", cell.eb.namesrv_address])
    assert r.returncode == 0, r.stdout + r.stderr
    return r


@each()
def test_dead_letters_keep_their_topic_and_redrive_once(gb: EmbeddedBroker, runs: Runs, tmp_path: Path,
                                                        mode: Mode) -> None:
    cell = Cell(gb, runs, tmp_path, mode, "Dlq")
    cell.produce(TOTAL, keys=2)
    run = cell.start(args=["--max-reconsume-times", "1"], env={"PROBE_FAIL_PLAN": f"{DOOMED}:1000"})
    wait_until(lambda: cell.dead_letters() == [DOOMED], 90, "the doomed message in the DLQ", interval=0.3)
    cell.wait_handled(set(range(TOTAL)) - {DOOMED})

    rows = [json.loads(line) for line in dlq(cell, "list", "--topic", cell.topic, "--json").stdout.splitlines()]
    assert [(r["origin_topic"], r["keys"][0]) for r in rows] == [(cell.topic, f"k{DOOMED}")], rows
    shown = json.loads(dlq(cell, "show", "--msg-id", rows[0]["msg_id"], "--json").stdout)
    assert shown["origin_topic"] == cell.topic, shown
    assert shown["properties"]["RETRY_TOPIC"] == cell.topic, shown["properties"]

    cell.heal_file.touch()  # the operator's fix, then the re-drive
    moved = dlq(cell, "redrive", "--topic", cell.topic)
    assert moved.stdout.count("moved ") == 1, moved.stdout + moved.stderr
    cell.wait_handled([DOOMED], 60, "the re-driven message handled")
    again = dlq(cell, "redrive", "--topic", cell.topic)
    assert "moved " not in again.stdout, again.stdout + again.stderr
    cell.drain(run)

    cell.assert_once(range(TOTAL))
    doomed = [(d.event, d.reconsume) for d in cell.deliveries() if d.idx == DOOMED]
    assert doomed == [("fail", 0), ("fail", 1), ("ok", 0)], doomed
    assert cell.dead_letters() == [DOOMED], "dead-lettered once"
    if mode.order:
        cell.assert_order(keys=2, moved_on={DOOMED})
