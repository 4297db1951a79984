"""Helpers for worker-liveness tests: a real ``rmqrun run`` whose workers are stopped with SIGSTOP.

Importable by any test (the guarantee x mode matrix uses them): start a run in
a consume mode (:data:`MODES`) with a small liveness bound, stop and continue
its workers with real signals, read ``/readyz`` and ``rmqrun_ready``, and count
the one warning a stuck worker is named in. Every wait is on an event (a log
line, a record, an HTTP answer), bounded.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from rmqrun.broker.app import EmbeddedBroker
from tests.integration.cli_kit import free_port
from tests.integration.pop_run_kit import set_pop_mode
from tests.integration.signals_kit import (
    Delivery, RmqrunProcess, Runs, committed, oks, produce, queue_max_offsets, wait_until,
)
from tests.integration.test_health_endpoints import get

HANDLER = "tests.integration.handlers.probe_handler:record"
#: the consume modes, as ``rmqrun run`` flags
MODES: dict[str, list[str]] = {
    "concurrent": [],
    "orderly": ["--orderly"],
    "orderly_key": ["--orderly", "--order-by", "key"],
    "pop": ["--consume-mode", "pop"],
    "orderly_pop": ["--consume-mode", "pop", "--orderly"],
}
#: the one warning naming a stuck worker (rmqrun/supervisor/liveness.py)
STUCK = "has not responded for "
#: the bound the tests run with (worker_liveness_timeout, seconds)
BOUND = 2.0


class LivenessRun:
    """One ``rmqrun run`` of the probe handler, with its metrics port and record file."""

    def __init__(self, run: RmqrunProcess, port: int, record: Path, eb: EmbeddedBroker, group: str,
                 topic: str) -> None:
        self.run, self.port, self.record, self.eb, self.group, self.topic = run, port, record, eb, group, topic
        #: messages produced so far (idx 0..produced-1)
        self.produced = 0

    def produce(self, n: int, keys: int = 8) -> None:
        """``n`` more messages, idx numbered on from the last (``keys`` sharding keys)."""
        produce(self.eb, self.topic, n, sharding_keys=keys, start=self.produced)
        self.produced += n

    # -- signals
    def stop(self, pid: int) -> None:
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: _state(pid) in ("T", "t"), 10, f"worker {pid} stopped")

    def cont(self, pid: int) -> None:
        os.kill(pid, signal.SIGCONT)

    # -- what it did
    def oks(self, since: int = 0) -> list[Delivery]:
        """Successful deliveries, in the order recorded (from the ``since``-th on)."""
        return oks(self.record)[since:]

    def handled(self) -> set[int]:
        return {d.idx for d in self.oks()}

    def wait_handled(self, n: int, timeout: float = 90.0) -> None:
        """Until messages idx 0..n-1 have each been handled (at least once)."""
        want = set(range(n))
        wait_until(lambda: want <= self.handled(), timeout, f"messages 0..{n - 1} handled")

    def twice(self) -> dict[int, int]:
        """idx handled more than once, with how often."""
        counts: dict[int, int] = {}
        for d in self.oks():
            counts[d.idx] = counts.get(d.idx, 0) + 1
        return {i: c for i, c in counts.items() if c > 1}

    def stuck_warnings(self, pid: int | None = None) -> list[str]:
        lines = [ln for ln in self.run.log().splitlines() if STUCK in ln]
        return lines if pid is None else [ln for ln in lines if f"(pid {pid})" in ln]

    def wait_stuck(self, pid: int, timeout: float = 60.0) -> str:
        wait_until(lambda: self.stuck_warnings(pid), timeout, f"the warning naming stuck worker pid {pid}")
        return self.stuck_warnings(pid)[0]

    def committed_to_end(self) -> bool:
        """Every queue's committed offset at its max offset (pull modes; POP acks instead)."""
        ends = queue_max_offsets(self.eb, self.topic)
        done = committed(self.eb, self.group, self.topic)
        return all(done.get(q, -1) >= end for q, end in ends.items() if end > 0)

    # -- health
    def readyz(self) -> tuple[int, str]:
        return get(self.port, "/readyz")

    def ready_gauge(self) -> float | None:
        status, text = get(self.port, "/metrics")
        if status != 200:
            return None
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "rmqrun_ready":
                    return s.value
        return None


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return "?"
    return stat[stat.rfind(b")") + 2:][:1].decode()


def start_liveness_run(tmp_path: Path, eb: EmbeddedBroker, runs: Runs, mode: str, topic: str, *,
                       workers: int = 2, bound: float = BOUND, kill_after: float = 0.0,
                       settings: dict[str, str] | None = None, env: dict[str, str] | None = None,
                       created: int = 0) -> LivenessRun:
    """``rmqrun run`` in ``mode`` (a key of :data:`MODES`) with ``workers`` workers, ready to consume.

    The topic is created first (``created`` messages, 1 by default; for POP the group's mode is set on it).
    Wait for them (``wait_handled(produced)``) before stopping a worker: the pool has moved once."""
    group = f"G{topic}"
    record = tmp_path / f"{topic}.record"
    port = free_port()
    pop = "pop" in mode
    created = created or 1
    if created:
        produce(eb, topic, created, sharding_keys=8)
    if pop:
        set_pop_mode(eb, group, topic)
    probe = {"PROBE_RECORD": str(record), **(env or {})}
    knobs = {"RMQRUN_WORKER_LIVENESS_TIMEOUT": str(bound), "RMQRUN_STUCK_WORKER_KILL_AFTER": str(kill_after),
             **(settings or {})}
    run = runs.start(topic, HANDLER, namesrv=eb.namesrv_address, group=group, topic=topic,
                     args=["--workers", str(workers), "--metrics-port", str(port), *MODES[mode]], env=probe,
                     settings=knobs, ready_timeout=60.0)
    wait_until(lambda: len(run.worker_pids()) == workers, 30, f"{workers} workers")
    out = LivenessRun(run, port, record, eb, group, topic)
    out.produced = created
    return out


def moved_of(warning: str) -> int:
    """How many batches the stuck warning says were moved."""
    m = re.search(r"(\d+) batch\(es\) moved to other workers", warning)
    return int(m.group(1)) if m else 0


__all__ = ["BOUND", "HANDLER", "MODES", "STUCK", "LivenessRun", "moved_of", "start_liveness_run"]
