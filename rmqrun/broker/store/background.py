"""One daemon thread running the store's periodic chores (checkpoint, JSON stores, retention).

A failing chore is logged once, as one line naming the data directory, when it starts
failing and once when it works again: a full disk must not print a traceback every
few seconds (the same error again says nothing new). Unexpected exceptions (not
``OSError``) keep their traceback, once, because they are bugs.
"""

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
    failing: bool = False


class PeriodicTasks:
    """Runs each task every ``interval_s``; an exception is logged, never kills the thread."""

    def __init__(self, name: str, where: str = "") -> None:
        self._name = name
        self._where = where
        self._tasks: list[_Task] = []
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, name: str, interval_s: float, fn: Callable[[], object]) -> None:
        self._tasks.append(_Task(name, interval_s, fn, time.monotonic() + interval_s))

    def run_soon(self, name: str) -> None:
        """Run task ``name`` now instead of at its next period (a write just found the disk full:
        retention should not wait up to a whole interval to free space)."""
        for task in self._tasks:
            if task.name == name:
                task.due = 0.0
        self._kick.set()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for task in self._tasks:
                if now >= task.due:
                    task.due = now + task.interval_s
                    self._run_task(task)
            next_due = min((t.due for t in self._tasks), default=now + 1.0)
            self._kick.wait(max(0.005, next_due - time.monotonic()))
            self._kick.clear()

    def _run_task(self, task: _Task) -> None:
        try:
            task.fn()
        except Exception as exc:
            if not task.failing:
                task.failing = True
                where = f" in {self._where}" if self._where else ""
                if isinstance(exc, OSError):
                    reason = exc.strerror or str(exc)
                    if exc.filename:
                        reason += f" ({exc.filename})"
                    logger.error("store task {} failed{}: {} (logged again only once it works again)",
                                 task.name, where, reason)
                else:
                    logger.opt(exception=True).error("store task {} failed{}", task.name, where)
            return
        if task.failing:
            task.failing = False
            logger.info("store task {} works again{}", task.name, f" in {self._where}" if self._where else "")
