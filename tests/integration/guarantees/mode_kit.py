"""The guarantee × mode matrix's one kit: the five consume modes as test cases, and a cell to run each in.

Every file of ``tests/integration/guarantees/`` checks one guarantee, parametrized over
:data:`MODES` (or over :data:`ORDERED_MODES` where the guarantee is about order, which the other
modes do not promise; ``docs/testing.md`` has the table). A case is a :class:`Cell`: a topic and a
group of its own on the file's embedded broker (the ``gb`` fixture of ``conftest.py``), real
``rmqrun run`` processes in the mode (:class:`tests.integration.signals_kit.RmqrunProcess`), and the
probe handler's record of every delivery (:mod:`tests.integration.handlers.probe_handler`: event, pid, idx,
queue, offset, reconsume count, call number).

The backlog is keyed (:func:`tests.integration.engine_kit.produce`): message ``idx`` has body
``msg-<idx>``, property ``idx`` and sharding key ``str(idx % keys)``, so it lands on the queue its
key hashes to (keys ``0..3`` on the 4 queues of a cell's topic: one key per queue) and the message
before it in its key is ``idx - keys``. The audits read the record in file order, which is the
order calls ended in (one ``O_APPEND`` write per call, after the call).
"""

from __future__ import annotations

import asyncio
import os
import signal
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import psutil
import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.broker.topics import TopicConfig
from tests.integration import engine_kit
from tests.integration.cli_kit import free_port
from tests.integration.pop_run_kit import set_pop_mode
from tests.integration.signals_kit import (
    Delivery, RmqrunProcess, Runs, committed, queue_max_offsets, read_deliveries, topic_messages, wait_until,
)

PROBE = "tests.integration.handlers.probe_handler"
CRASH = "tests.integration.handlers.crash_handler:crash_batch"
#: queues of a cell's topic; with KEYS keys each key has a queue of its own
QUEUES = 4
KEYS = 4


@dataclass(frozen=True)
class Mode:
    """One way ``rmqrun run`` consumes: its flags, and what it promises about order."""

    name: str
    args: tuple[str, ...]
    pop: bool = False
    #: "queue" or "key": the unit the mode keeps in order; None: no order is promised
    order: str | None = None

    def __str__(self) -> str:
        return self.name


CONCURRENT = Mode("concurrent", ())
ORDERLY_QUEUE = Mode("orderly_queue", ("--orderly",), order="queue")
ORDERLY_KEY = Mode("orderly_key", ("--order-by", "key"), order="key")
POP = Mode("pop", ("--consume-mode", "pop"), pop=True)
POP_ORDERLY = Mode("pop_orderly", ("--consume-mode", "pop", "--orderly"), pop=True, order="queue")
MODES = (CONCURRENT, ORDERLY_QUEUE, ORDERLY_KEY, POP, POP_ORDERLY)
ORDERED_MODES = tuple(m for m in MODES if m.order)


def each(modes: Iterable[Mode] = MODES):  # type: ignore[no-untyped-def]
    """``@each()``: the test runs once per mode, the case id being the mode's name."""
    modes = tuple(modes)
    return pytest.mark.parametrize("mode", modes, ids=[m.name for m in modes])


#: what every cell's instances run with: short pauses, so a cell takes seconds
CELL_SETTINGS = {
    "RMQRUN_SUSPEND_CURRENT_QUEUE_TIME_MS": "200",
    "RMQRUN_POP_INVISIBLE_TIME_MS": "5000",  # the shortest allowed: a lost pop comes back in 5 s
    "RMQRUN_POP_POLL_TIME_MS": "1000",
    "RMQRUN_REBALANCE_INTERVAL_MS": "1000",
}


class Cell:
    """One guarantee in one mode: its topic and group on the file's broker, its instances and its record."""

    def __init__(self, eb: EmbeddedBroker, runs: Runs, tmp_path: Path, mode: Mode, name: str) -> None:
        self.eb, self.runs, self.mode = eb, runs, mode
        self.topic, self.group = f"T{name}_{mode.name}", f"G{name}_{mode.name}"
        self.record = tmp_path / "records.txt"
        self.heal_file = tmp_path / "healed"
        eb.broker.topics.put(TopicConfig(self.topic, QUEUES, QUEUES))
        if mode.pop:
            set_pop_mode(eb, self.group, self.topic)  # rmqrun group mode --mode pop: every instance pops every queue
        self.dlq = f"%DLQ%{self.group}"

    # ----------------------------------------------------------------- messages

    def produce(self, n: int, *, keys: int = KEYS, start: int = 0) -> None:
        asyncio.run(engine_kit.produce(self.eb.namesrv_address, self.topic, n, sharding_keys=keys, start=start))

    # ----------------------------------------------------------------- instances

    def start(self, name: str = "a", *, handler: str = f"{PROBE}:record", workers: int = 2,
              args: Iterable[str] = (), env: dict[str, str] | None = None, settings: dict[str, str] | None = None,
              metrics: bool = False) -> RmqrunProcess:
        """``rmqrun run`` in this cell's mode, ready (pool up, first rebalance or assignment done)."""
        probe = {"PROBE_RECORD": str(self.record), "PROBE_HEAL_FILE": str(self.heal_file), **(env or {})}
        extra = ["--workers", str(workers), *self.mode.args, *args]
        if metrics:
            extra += ["--metrics-port", str(free_port())]
        proc = self.runs.start(name, handler, namesrv=self.eb.namesrv_address, group=self.group, topic=self.topic,
                               args=extra, env=probe, settings={**CELL_SETTINGS, **(settings or {})},
                               ready_timeout=60.0)
        if self.mode.pop:
            wait_until(lambda: "POP: popping" in proc.log(), 30, "the instance popping")
        return proc

    @staticmethod
    def metrics_port(proc: RmqrunProcess) -> int:
        return int(proc.argv[proc.argv.index("--metrics-port") + 1])

    @staticmethod
    def drain(proc: RmqrunProcess, timeout: float = 60) -> None:
        """SIGTERM, and the instance exits 0 within ``timeout``."""
        proc.signal(signal.SIGTERM)
        assert proc.wait(timeout) == 0, proc.log()[-3000:]

    # ----------------------------------------------------------------- the record

    def deliveries(self) -> list[Delivery]:
        return read_deliveries(self.record)

    def ok_counts(self) -> Counter[int]:
        return Counter(d.idx for d in self.deliveries() if d.event == "ok")

    def wait_handled(self, idxs: Iterable[int], timeout: float = 60, what: str = "") -> None:
        want = set(idxs)
        wait_until(lambda: want <= set(self.ok_counts()), timeout,
                   what or f"{len(want)} message(s) handled", interval=0.1)

    def wait_events(self, count: int, timeout: float = 60, event: str = "ok") -> None:
        wait_until(lambda: sum(d.event == event for d in self.deliveries()) >= count, timeout,
                   f"{count} '{event}' deliveries", interval=0.05)

    def dead_letters(self) -> list[int]:
        """The idx of every message in the group's DLQ."""
        return sorted(int(m.properties.get("idx", "-1")) for m in topic_messages(self.eb, self.dlq))

    def committed_all(self) -> bool:
        """Pull modes: the group's committed offset is every queue's end (POP acks, there is nothing to read)."""
        return committed(self.eb, self.group, self.topic) == queue_max_offsets(self.eb, self.topic)

    # ----------------------------------------------------------------- audits

    def assert_once(self, idxs: Iterable[int], *, allowed_twice: Iterable[int] = ()) -> None:
        """Each message handled (``ok``) exactly once; ``allowed_twice`` may have come twice."""
        counts = self.ok_counts()
        want = set(idxs)
        assert set(counts) == want, f"lost: {sorted(want - set(counts))}, unexpected: {sorted(set(counts) - want)}"
        extra = set(allowed_twice)
        twice = {i: c for i, c in counts.items() if c > 1 and not (i in extra and c == 2)}
        assert not twice, f"handled more than once: {twice}"

    def assert_order(self, keys: int = KEYS, *, moved_on: Iterable[int] = (), per_queue: bool = True) -> None:
        """Where the mode orders: per key (and per queue in queue mode) nothing ran before its predecessor
        succeeded (or was dead-lettered: ``moved_on``), in the order calls ended; a message that came
        again after a failure comes before every later message of its key. ``per_queue=False`` where an
        instance was killed (what it had handled and not committed runs again: a queue restarts)."""
        done: set[int] = set(moved_on)
        by_queue: dict[int, list[int]] = defaultdict(list)
        for d in self.deliveries():
            before = d.idx - keys
            assert before < 0 or before in done, \
                f"{self.mode}: idx {d.idx} ({d.event}) ran before idx {before} of its key had succeeded"
            if d.event == "ok":
                done.add(d.idx)
                by_queue[d.queue_id].append(d.offset)
        if self.mode.order == "queue" and per_queue:
            for q, offsets in by_queue.items():
                assert offsets == sorted(offsets), f"{self.mode}: queue {q} out of order: {offsets}"


def stop_worker(pid: int) -> None:
    """SIGSTOP a worker, and wait until the kernel says it is stopped."""
    os.kill(pid, signal.SIGSTOP)
    wait_until(lambda: psutil.Process(pid).status() == psutil.STATUS_STOPPED, 10, f"worker {pid} stopped")


def continue_worker(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:  # killed meanwhile (stuck_worker_kill_after)
        pass


def http_status(port: int, path: str) -> int:
    """The status of GET ``path`` on an instance's metrics port (503 included)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0
