"""The real processes the chaos suite drives: one ``rmqrun broker`` and several ``rmqrun run``.

Every wait here is on a condition the process itself reports (the broker's
``RMQRUN_BROKER_READY`` line, the supervisor's ``consuming`` line, an exit
status), polled without blocking the suite's event loop; the deadlines are only
there to turn a hang into a report instead of a stuck run.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
READY_MARKER = "RMQRUN_BROKER_READY"


def free_port(host: str) -> int:
    """A port free on ``host`` now (the broker keeps it for every restart)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_port_pair(hosts: tuple[str, str]) -> int:
    """A port free on both hosts (the proxy listens on the advertised host with the broker's port)."""
    for _ in range(100):
        port = free_port(hosts[0])
        try:
            with socket.socket() as s:
                s.bind((hosts[1], port))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no port free on both {hosts}")


async def wait_until(predicate, timeout: float, what: str, interval: float = 0.1) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQRUN_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


class BrokerProc:
    """``rmqrun broker`` on fixed ports and one data directory, killed with SIGKILL and restarted on the same data."""

    def __init__(self, workdir: Path, *, host: str, advertise_host: str, namesrv_port: int, broker_port: int) -> None:
        self.data_dir = workdir / "broker-data"
        self.log_path = workdir / "broker.log"
        self.argv = [sys.executable, "-m", "rmqrun.cli.main", "broker", "--data-dir", str(self.data_dir),
                     "--host", host, "--namesrv-port", str(namesrv_port), "--broker-port", str(broker_port),
                     "--advertise-host", advertise_host, "--flush", "sync"]
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def _markers(self) -> int:
        if not self.log_path.exists():
            return 0
        return self.log_path.read_text(errors="replace").count(READY_MARKER)

    async def start(self, timeout: float = 120.0) -> None:
        before = self._markers()
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=REPO, env=_child_env({}), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        proc = self.proc
        try:
            await wait_until(lambda: self._markers() > before or proc.poll() is not None, timeout, "the broker")
        except TimeoutError:
            self.kill9()
            raise
        if proc.poll() is not None:
            raise RuntimeError(f"rmqrun broker exited with {proc.returncode}; log tail:\n{self.tail()}")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    async def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        proc = self.proc
        try:
            await wait_until(lambda: proc.poll() is not None, timeout, "the broker to stop")
        except TimeoutError:
            self.kill9()

    def rss(self) -> int:
        try:
            return psutil.Process(self.proc.pid).memory_info().rss if self.proc else 0
        except psutil.Error:
            return 0

    def tail(self, n: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""


class RunProc:
    """One ``rmqrun run`` instance of a group; each start writes a new log file (``<name>.<n>.log``)."""

    def __init__(self, workdir: Path, name: str, *, group: str, topic: str, namesrv: str, orderly: bool,
                 workers: int, settings: dict[str, str], handler_env: dict[str, str]) -> None:
        self.workdir = workdir
        self.name = name
        self.group = group
        self.argv = [sys.executable, "-m", "rmqrun.cli.main", "run", "workers.chaos:handle", "--namesrv", namesrv,
                     "--group", group, "--topic", topic, "--workers", str(workers)]
        if orderly:
            self.argv.append("--orderly")
        self.env = _child_env({**settings, **handler_env})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.log_path = workdir / f"{name}.0.log"
        self.exit_codes: list[int] = []
        #: whether the suite wants it running: an instance that is wanted but has exited has crashed
        self.wanted = False

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.starts += 1
        self.log_path = self.workdir / f"{self.name}.{self.starts}.log"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    async def wait_consuming(self, timeout: float = 180.0) -> None:
        """Until the supervisor says it consumes (pool up, first rebalance done)."""
        proc = self.proc
        assert proc is not None
        await wait_until(lambda: "consuming " in self.log() or proc.poll() is not None, timeout,
                         f"{self.name} to start consuming")
        if proc.poll() is not None:
            raise RuntimeError(f"{self.name} exited with {proc.returncode} before consuming:\n{self.log()[-3000:]}")

    def worker_pids(self) -> list[int]:
        if not self.running:
            return []
        try:
            return [c.pid for c in psutil.Process(self.proc.pid).children()]  # type: ignore[union-attr]
        except psutil.Error:
            return []

    def kill9(self) -> None:
        """SIGKILL the whole run at once (supervisor and workers), as the OOM killer or a lost host would."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.exit_codes.append(self.proc.wait())

    async def term(self, timeout: float = 120.0) -> int:
        """SIGTERM and wait for the graceful stop; SIGKILL if it has not ended by ``timeout``."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return proc.returncode if proc else 0
        proc.send_signal(signal.SIGTERM)
        try:
            await wait_until(lambda: proc.poll() is not None, timeout, f"{self.name} to stop on SIGTERM")
        except TimeoutError:
            self.kill9()
            return -9
        self.exit_codes.append(proc.returncode)
        self._kill_leftovers()
        return proc.returncode

    def _kill_leftovers(self) -> None:
        if self.proc is not None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def rss(self) -> tuple[int, list[int]]:
        """(supervisor RSS, workers' RSS) in bytes, 0 / [] when not running."""
        if not self.running:
            return 0, []
        try:
            sup = psutil.Process(self.proc.pid)  # type: ignore[union-attr]
            workers = []
            for child in sup.children():
                try:
                    workers.append(child.memory_info().rss)
                except psutil.Error:
                    pass
            return sup.memory_info().rss, workers
        except psutil.Error:
            return 0, []
