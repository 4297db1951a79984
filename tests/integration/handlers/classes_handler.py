"""Handlers for the threads and asyncio worker classes (issue #36): the body says what a call does.

``sleep`` (the default: 50 ms), ``hang:S`` (S seconds: past a time limit), ``exit`` (``os._exit``: the
call kills its worker), ``raise``, ``leak:MB`` (keeps MB of touched memory for ever, then sleeps 50 ms), ``log`` (logs a WARNING naming
its message before and after a 50 ms sleep), ``gate`` (waits, up to 60 s, until the file named by
``RMQRUN_HANDLER_CLASSES_GATE`` exists), and for the async one ``block:S`` (a blocking ``time.sleep`` that
stops the worker's loop). Each call that returns appends ``<queue_id> <offset> <key> <start> <end> <pid>``
(monotonic times) to the file named by ``RMQRUN_HANDLER_CLASSES_RECORD``, with one ``write``, so the
tests can see every message once and calls that overlapped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

import rmqrun

SLEEP_S = 0.05


def _command(msg: rmqrun.Message) -> tuple[str, float]:
    body = msg.body.decode("utf-8", "replace")
    what, _, arg = body.partition(":")
    return what, float(arg) if arg else SLEEP_S


def _record(msg: rmqrun.Message, start: float, end: float) -> None:
    path = os.environ.get("RMQRUN_HANDLER_CLASSES_RECORD")
    if not path:
        return
    line = f"{msg.queue_id} {msg.queue_offset} {msg.keys or '-'} {start:.6f} {end:.6f} {os.getpid()}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


_leaked: list[bytearray] = []


def _leak(mb: float) -> None:
    chunk = bytearray(int(mb * (1 << 20)))
    chunk[::4096] = b"x" * len(chunk[::4096])  # touch every page so it counts in RSS
    _leaked.append(chunk)


def _says(msg: rmqrun.Message, when: str) -> None:
    logging.getLogger("classes").warning("call says %s queue=%d offset=%d", when, msg.queue_id, msg.queue_offset)


GATE_S = 60.0


def _gate_open() -> bool:
    return os.path.exists(os.environ["RMQRUN_HANDLER_CLASSES_GATE"])


def handle(msg: rmqrun.Message) -> None:
    """For the threads (and process) class: blocking sleeps."""
    start = time.monotonic()
    what, arg = _command(msg)
    if what == "log":
        _says(msg, "before")
        time.sleep(SLEEP_S)
        _says(msg, "after")
        _record(msg, start, time.monotonic())
        return
    if what == "exit":
        os._exit(7)
    if what == "raise":
        raise RuntimeError(f"asked to raise at offset {msg.queue_offset}")
    if what == "leak":
        _leak(arg)
        arg = SLEEP_S
    if what == "gate":
        end = start + GATE_S
        while not _gate_open() and time.monotonic() < end:
            time.sleep(0.01)
        arg = 0.0
    time.sleep(arg)
    _record(msg, start, time.monotonic())


async def handle_async(msg: rmqrun.Message) -> None:
    """For the asyncio class: awaited sleeps (``block`` sleeps without awaiting)."""
    start = time.monotonic()
    what, arg = _command(msg)
    if what == "log":
        _says(msg, "before")
        await asyncio.sleep(SLEEP_S)
        _says(msg, "after")
        _record(msg, start, time.monotonic())
        return
    if what == "exit":
        os._exit(7)
    if what == "raise":
        raise RuntimeError(f"asked to raise at offset {msg.queue_offset}")
    if what == "leak":
        _leak(arg)
        arg = SLEEP_S
    if what == "gate":
        end = start + GATE_S
        while not _gate_open() and time.monotonic() < end:
            await asyncio.sleep(0.01)
        arg = 0.0
    if what == "block":
        time.sleep(arg)
    else:
        await asyncio.sleep(arg)
    _record(msg, start, time.monotonic())


INITS: list[str] = []


async def init_async() -> None:
    """An async worker_init: the handler sees that it ran to its end."""
    await asyncio.sleep(0.01)
    INITS.append("done")


async def handle_after_init(msg: rmqrun.Message) -> None:
    if INITS != ["done"]:
        raise RuntimeError("the async worker_init did not run to its end before the first call")
    _record(msg, time.monotonic(), time.monotonic())


def records(path: str | os.PathLike[str]) -> list[tuple[int, int, str, float, float, int]]:
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        qid, off, key, start, end, pid = line.split()
        out.append((int(qid), int(off), key, float(start), float(end), int(pid)))
    return out


def overlapping(recs: list[tuple[int, int, str, float, float, int]]) -> int:
    """The most calls of one worker (pid) that were in progress at one moment."""
    best = 0
    for pid in {r[5] for r in recs}:
        events = sorted([(r[3], 1) for r in recs if r[5] == pid] + [(r[4], -1) for r in recs if r[5] == pid],
                        key=lambda e: (e[0], e[1]))
        now = 0
        for _, step in events:
            now += step
            best = max(best, now)
    return best


# --------------------------------------------------------------------------- for rmqrun run (the guarantee kit)
# The probe handler's record (tests/integration/handlers/probe_handler.py: ``<event> <pid> <idx> ...`` in
# PROBE_RECORD) and, per call that returned, ``<pid> <idx> <start> <end>`` in PROBE_TIMES.
# PROBE_FAIL_IDX / PROBE_FAIL_TIMES / PROBE_FAIL_PLAN fail, PROBE_HANG_IDX hangs on the first delivery, PROBE_CRASH_IDX
# ends the worker with os._exit(7); PROBE_SLEEP_MS is each call's wait (default 50 ms).

PROBE_SLEEP_S = float(os.environ.get("PROBE_SLEEP_MS", "50")) / 1000.0


def _times(msg: rmqrun.Message, start: float) -> None:
    from tests.integration.handlers.probe_handler import idx_of
    path = os.environ.get("PROBE_TIMES")
    if not path:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, f"{os.getpid()} {idx_of(msg)} {start:.6f} {time.monotonic():.6f}\n".encode())
    finally:
        os.close(fd)


def _before(msg: rmqrun.Message, call: int) -> str:
    """What this delivery does: "crash", "hang" or "run" (a crash or hang is recorded as ``start`` first)."""
    from tests.integration.handlers import probe_handler as p
    crash = p._set("PROBE_CRASH_IDX")
    if crash and p._selected(crash, msg):
        p._write("start", [msg], call)
        return "crash"
    if p.HANG_IDX and p._selected(p.HANG_IDX, msg) and msg.reconsume_times == 0:
        p._write("start", [msg], call)
        return "hang"
    return "run"


def _after(msg: rmqrun.Message, call: int, start: float) -> None:
    from tests.integration.handlers import probe_handler as p
    if (p.FAIL_IDX is not None and p._selected(p.FAIL_IDX, msg) and msg.reconsume_times < p.FAIL_TIMES
            or msg.reconsume_times < p.FAIL_PLAN.get(p.idx_of(msg), 0)):
        p._write("fail", [msg], call)
        raise RuntimeError(f"failing idx {p.idx_of(msg)} on purpose")
    _times(msg, start)
    p._write("ok", [msg], call)


class _Finishing:
    """The threads probe's calls between their ``ok`` record and their return, and a crash that waits for them.

    The record says "handled" a moment before the worker stores the call's status; a crash from another
    thread in that moment (one call of 32 in flight ends as the poison's ``os._exit`` runs) makes a message
    that was handled run again, as at-least-once allows but a test of "finished calls are not run again"
    cannot tell from a lost result (seen once in CI: ``handled more than once``). So the crash first stops
    new records (a call that would record from then on stays in flight, to run again once), waits until the
    calls recording have returned, and gives the worker 50 ms to store their statuses."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count = 0
        self.crashing = False

    def enter(self) -> bool:
        """A call is about to record: False (and it must not) once a crash is under way."""
        with self.lock:
            if self.crashing:
                return False
            self.count += 1
            return True

    def leave(self) -> None:
        with self.lock:
            self.count -= 1

    def crash(self) -> None:
        with self.lock:
            self.crashing = True
        while True:
            with self.lock:
                if self.count == 0:
                    break
            time.sleep(0.001)
        time.sleep(0.05)
        os._exit(7)


_finishing = _Finishing()


def probe_threads(msg: rmqrun.Message) -> None:
    from tests.integration.handlers.probe_handler import _calls
    start, call = time.monotonic(), next(_calls)
    what = _before(msg, call)
    if what == "crash":
        _finishing.crash()
    time.sleep(3600 if what == "hang" else PROBE_SLEEP_S)
    if not _finishing.enter():
        time.sleep(3600)  # the worker is going down: this call stays in flight and runs again elsewhere
        return
    try:
        _after(msg, call, start)
    finally:
        _finishing.leave()


async def probe_async(msg: rmqrun.Message) -> None:
    from tests.integration.handlers.probe_handler import _calls
    start, call = time.monotonic(), next(_calls)
    what = _before(msg, call)
    if what == "crash":
        os._exit(7)
    await asyncio.sleep(3600 if what == "hang" else PROBE_SLEEP_S)
    _after(msg, call, start)


def times(path: str | os.PathLike[str]) -> list[tuple[int, int, str, float, float, int]]:
    """PROBE_TIMES as records() has them: (queue 0, idx, key '-', start, end, pid) for :func:`overlapping`."""
    try:
        text = open(path, encoding="utf-8").read()
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        pid, idx, start, end = line.split()
        out.append((0, int(idx), "-", float(start), float(end), int(pid)))
    return out
