"""Helpers for tests that run the ``rmqrun`` command as a real child process.

The broker is the embedded one on a private thread of the test process (real
TCP on 127.0.0.1, free ports); ``rmqrun`` runs as a child with stdout and
stderr in files, so a test can wait for a line, signal it and read
everything it said afterwards. The child's environment is the test's minus
every ``RMQRUN_*`` variable (the settings table refuses unknown ones, and a
variable set around the test suite must not change what is tested).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Sequence

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.producer import Producer
from tests.waiting import SEND_ANSWER_TIMEOUT_S, eventually

ROOT = Path(__file__).resolve().parents[2]
_SCRIPT = Path(sys.executable).with_name("rmqrun")
#: the installed console script when there is one (what users run), else the module
RMQRUN: list[str] = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "rmqrun.cli.main"]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQRUN_") and k != "NAMESRV_ADDR"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def env_without_uvloop(tmp_path: Path) -> dict[str, str]:
    """A child's environment in which ``import uvloop`` fails, as where it is not installed."""
    shadow = tmp_path / "shadow"
    (shadow / "uvloop").mkdir(parents=True)
    (shadow / "uvloop" / "__init__.py").write_text("raise ImportError('uvloop hidden by the test')\n")
    env = child_env()
    env["PYTHONPATH"] = f"{shadow}:{env['PYTHONPATH']}"
    return env


_GIVEN: set[int] = set()


def free_port() -> int:
    """A port nothing listens on now, never one this process handed out before: two calls in a row may get
    the same port from the kernel once the first probe socket is closed, and a broker then given it for both
    its name server and its broker fails to bind the second."""
    for _ in range(1000):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port
    raise RuntimeError("no free port left that this process has not handed out already")


@contextmanager
def embedded_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    eb = EmbeddedBroker(tmp_path / "broker", flush_mode="async")
    eb.start_in_thread()
    try:
        yield eb
    finally:
        eb.stop_in_thread()


def produce(namesrv: str, topic: str, n: int, *, props: Callable[[int], dict[str, str]] | None = None) -> None:
    """Send ``n`` messages with bodies ``m<i>`` (round robin over the topic's queues)."""
    async def main() -> None:
        async with Producer(namesrv, "PG_cli_tests", send_timeout=SEND_ANSWER_TIMEOUT_S) as producer:
            for i in range(n):
                await producer.send(topic, f"m{i}".encode(), properties=props(i) if props else None)
    asyncio.run(main())


def wait_for(cond: Callable[[], object], timeout: float = 30.0, what: str = "condition",
             interval: float = 0.05) -> object:
    """:func:`tests.waiting.eventually` with this kit's argument order (``timeout`` second), for its many callers."""
    return eventually(cond, what=what, timeout=timeout, interval=interval)


def run_cli(args: Sequence[str], *, env: dict[str, str] | None = None, input: bytes | None = None,
            timeout: float = 60.0, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``rmqrun ARGS`` to completion; text stdout/stderr."""
    # no input: stdin is /dev/null, never the test runner's (produce reads a piped stdin)
    proc = subprocess.run([*RMQRUN, *args], env=env or child_env(), input=input, capture_output=True,
                          timeout=timeout, cwd=cwd or ROOT, stdin=None if input is not None else subprocess.DEVNULL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


class Child:
    """``rmqrun ARGS`` running in the background, output in files."""

    def __init__(self, args: Sequence[str], tmp_path: Path, *, env: dict[str, str] | None = None,
                 name: str = "rmqrun") -> None:
        self.out_path = tmp_path / f"{name}.out"
        self.err_path = tmp_path / f"{name}.err"
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen([*RMQRUN, *args], env=env or child_env(), stdout=out, stderr=err,
                                         stdin=subprocess.DEVNULL, cwd=ROOT)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def stdout(self) -> str:
        return self.out_path.read_text(encoding="utf-8", errors="replace")

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(encoding="utf-8", errors="replace")

    def wait_output(self, text: str, timeout: float = 30.0, *, stream: str = "stderr") -> None:
        def seen() -> bool:
            if self.proc.poll() is not None and text not in getattr(self, stream):
                raise AssertionError(f"rmqrun exited with {self.proc.returncode} before printing {text!r}:\n"
                                     f"{self.stderr[-3000:]}")
            return text in getattr(self, stream)
        wait_for(seen, timeout, what=f"{text!r} in {stream}")

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_args(namesrv: str, group: str, topic: str, handler: str = "workers.noop:handle",
             *extra: str) -> list[str]:
    return ["run", handler, "--namesrv", namesrv, "--group", group, "--topic", topic,
            "--consume-from", "CONSUME_FROM_FIRST_OFFSET", *extra]
