"""What the run log says about a handler that misbehaves in ways that look like something else.

A ``KeyboardInterrupt`` raised by a handler (no signal was sent: workers ignore SIGINT) was logged as the
worker "killed by SIGINT inside the handler call"; it is an exception of the call and is reported as one,
the message retried, the worker kept. A module that raises while it is imported printed the same traceback
once per worker and once more from the supervisor; it is printed once.
"""

from __future__ import annotations

import signal
from pathlib import Path

from tests.integration.cli_kit import Child, child_env, embedded_broker, produce, run_args, run_cli, wait_for


def test_keyboard_interrupt_from_a_handler_is_an_exception_not_a_signal(tmp_path: Path) -> None:
    record = tmp_path / "handled.txt"
    with embedded_broker(tmp_path) as eb:
        produce(eb.namesrv_address, "HR_Interrupt", 4)
        args = run_args(eb.namesrv_address, "GHR", "HR_Interrupt", "tests.integration.handlers.interrupt_handler:handle",
                        "--workers", "1")
        with Child(args, tmp_path, env=child_env(RMQRUN_HANDLER_RECORD=str(record))) as child:
            child.wait_output("handler 'tests.integration.handlers.interrupt_handler:handle' raised KeyboardInterrupt "
                              "(queue offset ", 60)
            wait_for(lambda: record.exists() and "m1 1" in record.read_text().split("\n"), 60,
                     "m1 retried and handled")
            child.signal(signal.SIGTERM)
            assert child.wait(60) == 0
        log = child.stderr
    assert sorted(record.read_text().split("\n")[:-1]) == ["m0 0", "m1 1", "m2 0", "m3 0"]
    assert "raised by the handler, no signal sent" in log
    for wrong in ("SIGINT", "killed by", "exit code", "inside the handler call"):
        assert wrong not in log, f"{wrong!r} in the log:\n{log[-3000:]}"


def test_a_module_that_raises_at_import_is_printed_once(tmp_path: Path) -> None:
    (tmp_path / "boom_at_import.py").write_text("raise RuntimeError('boom at import')\n\ndef handle(msg):\n    pass\n")
    proc = run_cli(["run", "boom_at_import:handle", "-n", "127.0.0.1:1", "-g", "G", "-t", "T", "-w", "3"],
                   cwd=tmp_path, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr.count("Traceback (most recent call last)") == 1, proc.stderr
    assert proc.stderr.count("workers cannot start: worker ") == 1
    assert "RuntimeError: boom at import" in proc.stderr
