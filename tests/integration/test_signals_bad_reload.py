"""SIGHUP after a bad deploy: the new code does not import, so the reload fails and the old workers carry on.

A real ``rmqrun run`` (supervisor + worker processes). The handler module is
replaced by one with a syntax error, then SIGHUP: the replacement workers fail to
boot, the supervisor says so, keeps the running workers (old code, already
imported) and keeps consuming; SIGTERM still stops it cleanly with everything
committed. This is gunicorn's behaviour on a HUP with broken code.
"""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

from tests.integration.signals_kit import Runs, committed, produce, queue_max_offsets, wait_until
from tests.integration.test_signals_supervisor import HUP_MODULE


def test_a_reload_whose_code_does_not_import_keeps_the_running_workers(tmp_path: Path, eb, runs: Runs) -> None:  # type: ignore[no-untyped-def]
    code_dir = tmp_path / "code"
    code_dir.mkdir()
    module = code_dir / "badhup_handler.py"
    module.write_text(textwrap.dedent(HUP_MODULE.format(version="v1")))
    record = tmp_path / "records.txt"

    def lines() -> list[tuple[str, int]]:
        if not record.exists():
            return []
        return [(p[0], int(p[1])) for p in (ln.split() for ln in record.read_text().splitlines()) if len(p) == 4]

    produce(eb, "BADHUP", 20)
    run = runs.start("run", "badhup_handler:handle", namesrv=eb.namesrv_address, group="GBADHUP", topic="BADHUP",
                     args=["--workers", "2"],
                     env={"PROBE_RECORD": str(record), "PYTHONPATH": str(code_dir), "PYTHONDONTWRITEBYTECODE": "1"})
    wait_until(lambda: len(lines()) >= 20, 30, "the first 20 by v1")
    module.write_text("def handle(msg:\n    pass\n")  # a deploy that does not even parse
    run.signal(signal.SIGHUP)
    wait_until(lambda: "SIGHUP failed" in run.log(), 60, "the failed reload reported")
    assert run.poll() is None, "rmqrun exited on a failed reload"
    assert "the running workers carry on" in run.log()
    produce(eb, "BADHUP", 20, start=20)
    wait_until(lambda: len(lines()) >= 40, 30, "20 more handled by the old workers")
    assert {v for v, _ in lines()} == {"v1"}
    run.signal(signal.SIGTERM)
    assert run.wait(30) == 0, run.log()[-3000:]
    assert sorted(i for _, i in lines()) == list(range(40)), "every message exactly once"
    assert committed(eb, "GBADHUP", "BADHUP") == queue_max_offsets(eb, "BADHUP")
