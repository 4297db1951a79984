"""A worker process whose supervisor sends garbage, the wrong frame, or goes away.

The worker is started exactly as the pool starts it (``python -m rmqrun.worker <fd>
<progress fd>`` with its end of a socket pair), but the test plays the supervisor.
Whatever arrives, the worker must end with exit code 5 (LOST_SUPERVISOR) and say why,
never hang or run a handler on garbage; a ``worker_exit`` hook that raises is logged
and does not change a clean exit.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rmqrun.pipe import progress as progress_mem
from rmqrun.pipe.wire import Boot, ExitCode, FrameBuffer, Ready, Stop, encode
from rmqrun.pipe.worker_config import WorkerConfig


class FakeSupervisor:
    def __init__(self) -> None:
        self.sock, child = socket.socketpair()
        self.progress_fd = progress_mem.create_fd()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rmqrun.worker", str(child.fileno()), str(self.progress_fd)],
                pass_fds=(child.fileno(), self.progress_fd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT)
        finally:
            child.close()
        self.sock.settimeout(30)
        self.frames = FrameBuffer()

    def boot(self, **settings: object) -> None:
        settings.setdefault("handler", "workers.noop:handle")
        settings.setdefault("log_level", "INFO")
        settings.setdefault("batch_size", 1)
        settings.setdefault("time_limit", 900.0)
        cfg = WorkerConfig(**settings)  # type: ignore[arg-type]
        self.sock.sendall(encode(Boot(0, dataclasses.asdict(cfg), list(sys.path))))
        assert isinstance(self.next_frame(), Ready)

    def next_frame(self):  # type: ignore[no-untyped-def]
        while (frame := self.frames.next()) is None:
            data = self.sock.recv(1 << 16)
            assert data, "the worker closed its pipe"
            self.frames.feed(data)
        return frame

    def finish(self) -> tuple[int, str]:
        out, _ = self.proc.communicate(timeout=30)
        self.sock.close()
        os.close(self.progress_fd)
        return self.proc.returncode, out.decode(errors="replace")


UNKNOWN_KIND = b"\x00\x00\x00\x03\x63ab"  # length 3, frame kind 99


@pytest.mark.parametrize("before_boot, said", [
    (UNKNOWN_KIND, "bad start-up data: unknown frame kind 99"),
    (encode(Stop()), "bad start-up data: expected a BOOT frame first, got Stop"),
    (b"", "bad start-up data: the supervisor closed the pipe before sending BOOT"),
], ids=["garbage", "not-boot", "closed"])
def test_a_worker_without_a_proper_boot_exits_5_and_says_why(before_boot: bytes, said: str) -> None:
    sup = FakeSupervisor()
    if before_boot:
        sup.sock.sendall(before_boot)
    sup.sock.shutdown(socket.SHUT_WR)
    code, out = sup.finish()
    assert code == ExitCode.LOST_SUPERVISOR, out
    assert said in out, out


@pytest.mark.parametrize("after_boot, said", [
    (UNKNOWN_KIND, "bad frame from the supervisor: unknown frame kind 99"),
    (encode(Ready(1)), "unexpected frame from the supervisor: Ready"),
    (b"", "the supervisor closed the pipe; exiting"),
], ids=["garbage", "wrong-frame", "closed"])
def test_a_ready_worker_that_gets_garbage_or_loses_its_supervisor_exits_5(after_boot: bytes, said: str) -> None:
    sup = FakeSupervisor()
    sup.boot()
    if after_boot:
        sup.sock.sendall(after_boot)
    sup.sock.shutdown(socket.SHUT_WR)
    code, out = sup.finish()
    assert code == ExitCode.LOST_SUPERVISOR, out
    assert said in out, out


def test_a_worker_exit_hook_that_raises_is_logged_and_the_exit_stays_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))  # the worker takes its sys.path from BOOT
    (tmp_path / "bad_exit_hook.py").write_text(textwrap.dedent("""
        def worker_exit(info):
            raise RuntimeError("exit hook failing on purpose")
    """))
    sup = FakeSupervisor()
    sup.boot(worker_exit="bad_exit_hook:worker_exit")
    sup.sock.sendall(encode(Stop()))
    code, out = sup.finish()
    assert code == ExitCode.OK, out
    assert "worker_exit 'bad_exit_hook:worker_exit' raised" in out and "exit hook failing on purpose" in out
