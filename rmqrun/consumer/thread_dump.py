"""A ``jstack``-like dump of the consumer's process: its threads and its asyncio tasks, with their stacks.

``mqadmin consumerStatus -s`` asks a consumer for its thread dump (GET_CONSUMER_RUNNING_INFO with
``jstackEnable``) and prints it as it came. A Java consumer answers with ``jstack``'s text; an rmqrun
consumer lives in the supervisor's asyncio loop, where a thread dump alone would show one thread
waiting in ``select``. So the dump lists every thread (what ``faulthandler`` would show) and then
every asyncio task of the running loop, each with the stack it is suspended in: where the pullers,
rebalance and the dispatch to workers are waiting is what an operator needs to see a stuck consumer.
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
import threading
import time
import traceback
from types import FrameType

#: Frames shown per task (a deep stack is rarely the story; the innermost frames are).
TASK_STACK_LIMIT = 20


def _frames(stack: list[FrameType]) -> list[str]:
    summary = traceback.StackSummary.extract(((f, f.f_lineno) for f in stack), limit=None)
    return [line.rstrip("\n") for line in summary.format()]


def _thread_section() -> list[str]:
    frames = sys._current_frames()
    out: list[str] = []
    for t in sorted(threading.enumerate(), key=lambda t: t.ident or 0):
        head = f'"{t.name}" tid={t.ident} native_id={t.native_id} daemon={str(t.daemon).lower()}'
        out.append(head)
        frame = frames.get(t.ident or -1)
        if frame is not None:
            out += ["   " + line for line in "\n".join(traceback.format_stack(frame)).splitlines() if line]
        out.append("")
    return out


def _task_section() -> list[str]:
    try:
        tasks = asyncio.all_tasks()
    except RuntimeError:  # no running loop (called from a plain thread)
        return ["(no running asyncio loop)"]
    current = asyncio.current_task()
    out = [f"asyncio tasks of the running loop ({len(tasks)}):", ""]
    for task in sorted(tasks, key=lambda t: t.get_name()):
        state = "running" if task is current else ("done" if task.done() else "waiting")
        coro = task.get_coro()
        name = getattr(coro, "__qualname__", type(coro).__name__)
        out.append(f'"{task.get_name()}" {name} {state}')
        out += ["   " + line for line in "\n".join(_frames(task.get_stack(limit=TASK_STACK_LIMIT))).splitlines()
                if line]
        out.append("")
    return out


def thread_dump() -> str:
    """The dump, as one text; never raises (a failure is written into the text instead)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    lines = [stamp, f"Full thread dump rmqrun (Python {platform.python_version()} "
                    f"{platform.python_implementation()}, pid {os.getpid()}):", ""]
    for section in (_thread_section, _task_section):
        try:
            lines += section()
        except Exception as exc:  # pragma: no cover - the dump must not break the running-info answer
            lines += [f"({section.__name__} failed: {type(exc).__name__}: {exc})", ""]
    return "\n".join(lines) + "\n"
