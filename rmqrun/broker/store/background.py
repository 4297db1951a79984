"""One daemon thread running the store's periodic chores (checkpoint, JSON stores)."""

from __future__ import annotations

from loguru import logger

import threading
import time
from dataclasses import dataclass
from typing import Callable



@dataclass
class _Task:
    name: str
    interval_s: float
    fn: Callable[[], object]
    due: float = 0.0


class PeriodicTasks:
    """Runs each task every ``interval_s``; an exception is logged, never kills the thread."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._tasks: list[_Task] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, name: str, interval_s: float, fn: Callable[[], object]) -> None:
        self._tasks.append(_Task(name, interval_s, fn, time.monotonic() + interval_s))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for task in self._tasks:
                if now >= task.due:
                    task.due = now + task.interval_s
                    try:
                        task.fn()
                    except Exception:
                        logger.opt(exception=True).error("store task {} failed", task.name)
            next_due = min((t.due for t in self._tasks), default=now + 1.0)
            self._stop.wait(max(0.005, next_due - time.monotonic()))
