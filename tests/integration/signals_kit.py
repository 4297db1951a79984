"""Helpers for tests that run ``rmqrun run`` as a real process and signal it.

The broker is an :class:`EmbeddedBroker` on a private thread of the test
process (real TCP on 127.0.0.1); ``rmqrun run`` is a child process in its own
session, so a test can SIGKILL it (and, at clean-up, its whole process group:
the supervisor and the workers it started) without touching pytest. Durable
facts are read back through the broker (committed offsets, DLQ contents) and
through the probe handler's record file (:mod:`tests.integration.handlers.probe_handler`).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import psutil

from rmqrun.broker.app import EmbeddedBroker
from tests.integration import engine_kit
from tests.waiting import eventually

REPO = Path(__file__).resolve().parents[2]
FAST_DELAYS = engine_kit.FAST_DELAYS


# --------------------------------------------------------------------------- broker

def start_broker(tmp_path: Path, **settings: object) -> EmbeddedBroker:
    """An embedded broker on its own thread; retry delays of 1 s at every level."""
    settings.setdefault("message_delay_levels", FAST_DELAYS)
    return EmbeddedBroker(tmp_path / "broker", **settings).start_in_thread()  # type: ignore[arg-type]


def produce(eb: EmbeddedBroker, topic: str, n: int, **kw: object) -> list[str]:
    return asyncio.run(engine_kit.produce(eb.namesrv_address, topic, n, **kw))  # type: ignore[arg-type]


def committed(eb: EmbeddedBroker, group: str, topic: str) -> dict[int, int]:
    """The broker's committed offset per queue (-1 where the group has none)."""
    got = asyncio.run(engine_kit.committed_offsets(eb, group, topic))
    return {q: (-1 if off is None else off) for q, off in got.items()}


def queue_max_offsets(eb: EmbeddedBroker, topic: str) -> dict[int, int]:
    async def main() -> dict[int, int]:
        from rmqrun.client.instance import ClientInstance
        inst = ClientInstance(eb.namesrv_address, instance_name="probe-max")
        try:
            return {mq.queue_id: await inst.broker.get_max_offset(eb.broker_address, mq)
                    for mq in await inst.subscribe_queues(topic)}
        finally:
            await inst.close()
    return asyncio.run(main())


def topic_messages(eb: EmbeddedBroker, topic: str) -> list:  # type: ignore[type-arg]
    """Every message stored in a topic (e.g. ``%DLQ%<group>``), pulled from offset 0."""
    async def main() -> list:  # type: ignore[type-arg]
        from rmqrun.protocol.headers import PullMessageRequestHeader
        from rmqrun.client.instance import ClientInstance
        from rmqrun.remoting.errors import TopicNotExistError
        from rmqrun.remoting.message import decode_messages
        inst = ClientInstance(eb.namesrv_address, instance_name="probe-pull")
        try:
            try:
                mqs = await inst.subscribe_queues(topic)
            except TopicNotExistError:
                return []
            out = []
            for mq in mqs:
                offset = 0
                while True:
                    header = PullMessageRequestHeader(
                        consumer_group="probe", topic=topic, queue_id=mq.queue_id, queue_offset=offset,
                        max_msg_nums=32, sys_flag=4, commit_offset=0, suspend_timeout_millis=0, sub_version=0,
                        subscription="*", expression_type="TAG")
                    result = await inst.broker.pull(eb.broker_address, header)
                    if not result.body:
                        break
                    msgs = decode_messages(result.body)
                    out.extend(msgs)
                    offset = result.next_begin_offset
            return out
        finally:
            await inst.close()
    return asyncio.run(main())


# --------------------------------------------------------------------------- records

@dataclass(frozen=True, slots=True)
class Delivery:
    event: str
    pid: int
    idx: int
    queue_id: int
    offset: int
    reconsume: int
    call: int


def read_deliveries(path: Path) -> list[Delivery]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 7:  # a line cut by a kill is simply not complete
            out.append(Delivery(parts[0], *map(int, parts[1:])))  # type: ignore[arg-type]
    return out


def oks(path: Path) -> list[Delivery]:
    return [d for d in read_deliveries(path) if d.event == "ok"]


def per_queue(deliveries: Iterable[Delivery]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = defaultdict(list)
    for d in deliveries:
        out[d.queue_id].append(d.offset)
    return out


def wait_until(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.05) -> None:
    """:func:`tests.waiting.eventually` with this kit's argument order, for its many callers."""
    eventually(predicate, what=what, timeout=timeout, interval=interval)


# --------------------------------------------------------------------------- rmqrun run

BASE_SETTINGS = {
    "RMQRUN_CONSUME_FROM_WHERE": "CONSUME_FROM_FIRST_OFFSET",
    "RMQRUN_PERSIST_OFFSET_INTERVAL_MS": "300",
    "RMQRUN_REBALANCE_INTERVAL_MS": "2000",
    "RMQRUN_STATUS_INTERVAL": "0",
    "RMQRUN_LOG_LEVEL": "INFO",
}


class RmqrunProcess:
    """``python -m rmqrun.cli.main run HANDLER ...`` with its log in a file.

    ``settings`` are ``RMQRUN_*`` variables (added to :data:`BASE_SETTINGS`);
    ``env`` adds anything else (the probe handler's ``PROBE_*``, PYTHONPATH).
    """

    def __init__(self, tmp_path: Path, name: str, handler: str, *, namesrv: str, group: str, topic: str,
                 args: Iterable[str] = (), settings: dict[str, str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.log_path = tmp_path / f"{name}.log"
        self.argv = [sys.executable, "-m", "rmqrun.cli.main", "run", handler, "--namesrv", namesrv,
                     "--group", group, "--topic", topic, *args]
        full = {k: v for k, v in os.environ.items() if not k.startswith("RMQRUN_") and not k.startswith("PROBE_")}
        full.update(BASE_SETTINGS)
        full.update(settings or {})
        full.update(env or {})
        full["PYTHONPATH"] = os.pathsep.join(p for p in (full.get("PYTHONPATH", ""), str(REPO)) if p)
        self.env = full
        self.proc: subprocess.Popen[bytes] | None = None
        self.pgid = 0

    def start(self, ready_timeout: float = 30.0) -> "RmqrunProcess":
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=REPO, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self.pgid = self.proc.pid
        if ready_timeout:
            self.wait_ready(ready_timeout)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_log(self, text: str, timeout: float, what: str) -> None:
        """Until ``text`` is in the log; when it does not come, the failure carries the log's tail and whether the
        run still runs (a bare "timed out" told nothing of where a CI run's supervisor was)."""
        try:
            eventually(lambda: text in self.log(), what=what, timeout=timeout)
        except AssertionError as exc:
            assert self.proc is not None
            state = "still running" if self.proc.poll() is None else f"exit code {self.proc.returncode}"
            raise AssertionError(f"{exc} ({state}); the log's end:\n{self.log()[-4000:]}") from None

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until the supervisor logs that it consumes (pool up, first rebalance done).

        That is the supervisor's start-up line ("consuming T[*] as group G ..."), not the first rebalance's
        "now consuming N queue(s)", which can come a moment before it (ready, the mode line and the status
        loop follow the supervisor's line).
        """
        assert self.proc is not None
        proc = self.proc

        def consuming() -> bool:
            if any("consuming " in line and " as group " in line for line in self.log().splitlines()):
                return True
            if proc.poll() is not None:
                raise RuntimeError(f"rmqrun exited with {proc.returncode} before consuming:\n{self.log()[-3000:]}")
            return False

        try:
            eventually(consuming, what="rmqrun to log that it consumes", timeout=timeout, interval=0.05)
        except AssertionError as exc:
            raise AssertionError(f"{exc}:\n{self.log()[-3000:]}") from None

    def worker_pids(self) -> list[int]:
        try:
            return [c.pid for c in psutil.Process(self.pid).children()]
        except psutil.NoSuchProcess:
            return []

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        """SIGKILL the supervisor only; its workers notice the closed pipe and exit on their own."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def poll(self) -> int | None:
        assert self.proc is not None
        return self.proc.poll()

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"rmqrun still running after {timeout:g} s:\n{self.log()[-3000:]}") from None

    def wait_group_gone(self, timeout: float = 15.0) -> None:
        """Until no process of the run's session (the supervisor's group, and each worker's own) is left."""
        wait_until(lambda: not _group_alive(self.pgid), timeout, "the run's processes to exit")

    def close(self) -> None:
        """Clean-up: SIGKILL whatever is left of this run (by its process group id)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        for pid in _session_pids(self.pgid):  # each worker leads a process group of its own
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _session_pids(sid: int) -> list[int]:
    """Living processes of the run's session: the supervisor started it, workers and their children stay in it."""
    out = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return out


def _group_alive(pgid: int) -> bool:
    return bool(_session_pids(pgid))


class Runs:
    """Every RmqrunProcess a test starts, closed at the end (a pytest fixture wraps it)."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.started: list[RmqrunProcess] = []

    def start(self, name: str, handler: str, **kw: object) -> RmqrunProcess:
        ready_timeout = float(kw.pop("ready_timeout", 30.0))  # type: ignore[arg-type]
        run = RmqrunProcess(self.tmp_path, name, handler, **kw)  # type: ignore[arg-type]
        self.started.append(run)
        return run.start(ready_timeout)

    def close(self) -> None:
        for run in self.started:
            run.close()


__all__ = ["start_broker", "produce", "committed", "queue_max_offsets", "topic_messages", "Delivery",
           "read_deliveries", "oks", "per_queue", "wait_until", "RmqrunProcess", "Runs", "FAST_DELAYS", "REPO"]
