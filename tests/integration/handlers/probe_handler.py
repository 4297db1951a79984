"""A handler for the delivery-guarantee tests: it records every delivery and misbehaves on request.

Every call appends one line per message to the file named by ``PROBE_RECORD``
(``O_APPEND``, one ``write`` per call, so several workers can share a file and
a killed worker loses at most the call it was in)::

    <event> <pid> <idx> <queue_id> <queue_offset> <reconsume_times> <call>

``idx`` is the message's ``idx`` property (the producer's sequence number, the
same on every retry), ``queue_id``/``queue_offset`` say where the delivery
was pulled from (the retry topic's queue for a retry), ``call`` numbers the
handler calls of one worker (messages of one batch call share it). Events:

* ``ok``: the call returned success for this message;
* ``fail``: it raised / asked for a retry;
* ``start``: written *before* a call that is going to hang, die or sleep long,
  so a test can see that the call began.

The variables use a ``PROBE_`` prefix, not ``RMQRUN_``: ``rmqrun run`` refuses
``RMQRUN_*`` variables it does not know.

======================  =====================================================
``PROBE_SLEEP_MS``      sleep this long per call (default 0)
``PROBE_FAIL_IDX``      comma-separated idx values that fail (``*``: all)...
``PROBE_FAIL_TIMES``    ...while their reconsume count is below this (default 1)
``PROBE_FAIL_PLAN``     ``idx:times,...``: each named message fails while its reconsume count is below its times
``PROBE_HEAL_FILE``     once this file exists nothing fails any more (the operator's fix before a re-drive)
``PROBE_DELAY_LEVEL``   fail by returning ``ReconsumeLater(level)`` instead of raising
``PROBE_HANG_IDX``      idx values whose first delivery hangs (``hang``) or dies
``PROBE_HANG_RELEASE``  ``hang``: hang until this file exists instead of for an hour
``PROBE_ACK_INDEX``     ``ack_batch``: first deliveries return ``AckIndex(n)``
``PROBE_LEAK_MB``       ``leak``: MiB kept for ever per call (default 20)
======================  =====================================================
"""

from __future__ import annotations

import itertools
import os
import signal
import time

import rmqrun

_calls = itertools.count(1)
_leaked: list[bytearray] = []


def _set(name: str) -> set[int] | None:
    """None means "every message"."""
    raw = os.environ.get(name, "").strip()
    if raw == "*":
        return None
    return {int(x) for x in raw.split(",") if x.strip()}


FAIL_IDX = _set("PROBE_FAIL_IDX")
FAIL_TIMES = int(os.environ.get("PROBE_FAIL_TIMES", "1"))
FAIL_PLAN = {int(k): int(v) for k, _, v in (item.partition(":")
                                             for item in os.environ.get("PROBE_FAIL_PLAN", "").split(",")
                                             if item.strip())}
DELAY_LEVEL = os.environ.get("PROBE_DELAY_LEVEL")
HANG_IDX = _set("PROBE_HANG_IDX")
HANG_RELEASE = os.environ.get("PROBE_HANG_RELEASE", "")
SLEEP_S = float(os.environ.get("PROBE_SLEEP_MS", "0")) / 1000.0
ACK_INDEX = int(os.environ.get("PROBE_ACK_INDEX", "0"))
LEAK_MB = float(os.environ.get("PROBE_LEAK_MB", "20"))
HEAL_FILE = os.environ.get("PROBE_HEAL_FILE", "")


def idx_of(msg: rmqrun.Message) -> int:
    return int(msg.properties.get("idx", "-1"))


def _write(event: str, msgs: list[rmqrun.Message], call: int) -> None:
    pid = os.getpid()
    text = "".join(f"{event} {pid} {idx_of(m)} {m.queue_id} {m.queue_offset} {m.reconsume_times} {call}\n"
                   for m in msgs)
    fd = os.open(os.environ["PROBE_RECORD"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _selected(chosen: set[int] | None, msg: rmqrun.Message) -> bool:
    return chosen is None or idx_of(msg) in chosen


def record(msg: rmqrun.Message):  # type: ignore[no-untyped-def]
    """Record, sleep PROBE_SLEEP_MS, fail the chosen messages the chosen number of times."""
    call = next(_calls)
    if SLEEP_S:
        time.sleep(SLEEP_S)
    failing = (_selected(FAIL_IDX, msg) and msg.reconsume_times < FAIL_TIMES
               or msg.reconsume_times < FAIL_PLAN.get(idx_of(msg), 0))
    if failing and HEAL_FILE and os.path.exists(HEAL_FILE):
        failing = False
    if failing:
        _write("fail", [msg], call)
        if DELAY_LEVEL is not None:
            return rmqrun.ReconsumeLater(int(DELAY_LEVEL))
        raise RuntimeError(f"failing idx {idx_of(msg)} on purpose (reconsume_times {msg.reconsume_times})")
    _write("ok", [msg], call)
    return None


@rmqrun.batch
def record_batch(msgs: list[rmqrun.Message]) -> None:
    """Batch form of a plain recorder (sleeps PROBE_SLEEP_MS per call)."""
    call = next(_calls)
    if SLEEP_S:
        time.sleep(SLEEP_S)
    _write("ok", msgs, call)


@rmqrun.batch
def ack_batch(msgs: list[rmqrun.Message]):  # type: ignore[no-untyped-def]
    """First deliveries: acknowledge messages [0..PROBE_ACK_INDEX] of the call; retries: all."""
    call = next(_calls)
    if any(m.reconsume_times == 0 for m in msgs):
        acked = msgs[:ACK_INDEX + 1]
        _write("ok", acked, call)
        _write("fail", msgs[ACK_INDEX + 1:], call)
        return rmqrun.AckIndex(ACK_INDEX)
    _write("ok", msgs, call)
    return None


def hang(msg: rmqrun.Message) -> None:
    """The first delivery of a PROBE_HANG_IDX message sleeps for an hour (the soft limit stops it), or, with
    PROBE_HANG_RELEASE, until that file exists (a test ends the hang at the moment it chooses, not a timer)."""
    call = next(_calls)
    if _selected(HANG_IDX, msg) and msg.reconsume_times == 0:
        _write("start", [msg], call)
        if HANG_RELEASE:
            while not os.path.exists(HANG_RELEASE):
                time.sleep(0.02)
        else:
            time.sleep(3600)
    if SLEEP_S:
        time.sleep(SLEEP_S)
    _write("ok", [msg], call)


def hang_hard(msg: rmqrun.Message) -> None:
    """Like :func:`hang`, but swallows the soft time limit: only the hard limit (SIGKILL) ends it."""
    call = next(_calls)
    if _selected(HANG_IDX, msg) and msg.reconsume_times == 0:
        _write("start", [msg], call)
        end = time.monotonic() + 3600
        while time.monotonic() < end:
            try:
                time.sleep(end - time.monotonic())
            except Exception:  # SoftTimeLimitExceeded included
                continue
    _write("ok", [msg], call)


def leak(msg: rmqrun.Message) -> None:
    """Keep PROBE_LEAK_MB of touched memory per call, for ever (until the worker is recycled)."""
    call = next(_calls)
    chunk = bytearray(int(LEAK_MB * 1024 * 1024))
    chunk[::4096] = b"x" * len(chunk[::4096])
    _leaked.append(chunk)
    if SLEEP_S:
        time.sleep(SLEEP_S)
    _write("ok", [msg], call)


def die(msg: rmqrun.Message) -> None:
    """SIGKILL this worker on every message (a crash loop), after recording the start."""
    _write("start", [msg], next(_calls))
    os.kill(os.getpid(), signal.SIGKILL)
