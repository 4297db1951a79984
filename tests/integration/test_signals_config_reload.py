"""SIGHUP re-reads ``--config`` (issue #33, item 2), as gunicorn's HUP does.

A real ``rmqrun run --config c.yaml`` (supervisor and worker processes), the
file edited under it and ``kill -HUP``: the worker count follows the file, a
changed group is named as needing a restart (the consumer keeps the old one),
and a file that does not validate or does not parse is refused with one ERROR
line naming the key and value while the running pool carries on unchanged.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tests.integration.signals_kit import (
    RmqrunProcess, Runs, committed, produce, queue_max_offsets, wait_until,
)

CONFIG = """\
namesrv: "{namesrv}"
group: GHUPC
topic: HUPC
workers: {workers}
max_messages_per_worker: {max_messages}
"""


def _errors(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if "| ERROR" in ln]


def test_hup_applies_the_edited_file_and_refuses_a_broken_one(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG.format(namesrv=eb.namesrv_address, workers=2, max_messages=0))
    produce(eb, "HUPC", 10)
    run = RmqrunProcess(tmp_path, "run", "workers.noop:handle", namesrv="", group="", topic="")
    run.argv = run.argv[:5] + ["--config", str(cfg)]  # python -m rmqrun.cli.main run HANDLER --config c.yaml
    runs.started.append(run)
    run.start()
    wait_until(lambda: len(run.worker_pids()) == 2, 30, "2 workers")
    first = set(run.worker_pids())

    # workers 2 -> 3 and recycling on: applied; the group change waits for a restart, and says so
    cfg.write_text(CONFIG.format(namesrv=eb.namesrv_address, workers=3, max_messages=100)
                   .replace("group: GHUPC", "group: GHUPC2"))
    run.signal(signal.SIGHUP)
    wait_until(lambda: "SIGHUP: settings applied: " in run.log(), 60, "the new settings applied")
    applied = next(ln for ln in run.log().splitlines() if "SIGHUP: settings applied: " in ln)
    assert f"workers 2 -> 3 (config file {cfg})" in applied, applied
    assert "max_messages_per_worker 0 -> 100" in applied, applied
    assert "group" not in applied, applied
    restart = [ln for ln in run.log().splitlines() if "need a restart" in ln]
    assert len(restart) == 1 and "WARNING" in restart[0] and "group GHUPC -> GHUPC2" in restart[0], restart
    # the reload replaces every worker: count once the first generation is gone (while both live there can
    # be three processes whatever the setting says)
    wait_until(lambda: not set(run.worker_pids()) & first and len(run.worker_pids()) == 3, 30,
               "3 fresh workers")
    produce(eb, "HUPC", 10, start=10)
    wait_until(lambda: committed(eb, "GHUPC", "HUPC") == queue_max_offsets(eb, "HUPC"), 30,
               "everything consumed as group GHUPC")

    # a bad value, then a file that does not parse: one ERROR line each, naming what is wrong; nothing changes
    pids = sorted(run.worker_pids())
    cfg.write_text(CONFIG.format(namesrv=eb.namesrv_address, workers='"two"', max_messages=100))
    run.signal(signal.SIGHUP)
    wait_until(lambda: len(_errors(run.log())) >= 1, 30, "the bad value refused")
    assert "workers='two'" in _errors(run.log())[0] and f"config file {cfg}" in _errors(run.log())[0]
    cfg.write_text("workers: [3\n")
    run.signal(signal.SIGHUP)
    wait_until(lambda: len(_errors(run.log())) >= 2, 30, "the broken file refused")
    errors = _errors(run.log())
    assert len(errors) == 2 and all("SIGHUP refused: " in e for e in errors), errors
    assert str(cfg) in errors[1], errors
    assert run.log().count("reloaded: ") == 1, "a refused configuration reloaded the workers"
    assert sorted(run.worker_pids()) == pids
    assert run.poll() is None

    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0, run.log()[-3000:]
