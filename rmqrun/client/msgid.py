"""Client message ids (the UNIQ_KEY property), laid out like the Java client's.

MessageClientIDSetter builds a 16-byte id (28 with an IPv6 address), written
as uppercase hex::

    ip (4 bytes) | pid (2) | class-loader hash (4) | ms since month start (4) | counter (2)

The first ten bytes are fixed per process; Java's class-loader hash only
tells apart two producers in one JVM, so here it is a random number per
generator. The time field is the milliseconds since the first day of the
current month at 00:00 local time, truncated to a signed 32-bit int (a 31-day
month overflows it, as in Java); a value a little below zero (a clock step
back of under 1000 s) is clamped to 0. Tools that read the time or pid out of
an id (``getNearlyTimeFromID``) therefore work on ids made here too.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import os
import random
import struct
import time


def _month_bounds(now_ms: int) -> tuple[int, int]:
    now = _dt.datetime.fromtimestamp(now_ms / 1000)
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value


class UniqueIdGenerator:
    def __init__(self, ip: str = "127.0.0.1", pid: int | None = None, loader_hash: int | None = None) -> None:
        ip_bytes = ipaddress.ip_address(ip).packed
        pid = os.getpid() if pid is None else pid
        loader_hash = random.getrandbits(32) if loader_hash is None else loader_hash
        self.prefix = (ip_bytes + struct.pack(">HI", pid & 0xFFFF, loader_hash & 0xFFFFFFFF)).hex().upper()
        self._counter = 0
        self._start, self._next_start = _month_bounds(int(time.time() * 1000))

    def next_id(self, now_ms: int | None = None) -> str:
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if now >= self._next_start or now < self._start - 1_000_000:
            self._start, self._next_start = _month_bounds(now)
        diff = _int32(now - self._start)
        if -1_000_000 < diff < 0:
            diff = 0  # the clock stepped back a little (NTP)
        counter = self._counter & 0xFFFF
        self._counter += 1
        return f"{self.prefix}{diff & 0xFFFFFFFF:08X}{counter:04X}"

    __call__ = next_id


def id_time_offset(msg_id: str) -> int:
    """The milliseconds-since-month-start field of a client id (4 or 16 byte address)."""
    raw = bytes.fromhex(msg_id)
    ip_len = 16 if len(raw) == 28 else 4
    (diff,) = struct.unpack_from(">i", raw, ip_len + 6)
    return diff


def id_pid(msg_id: str) -> int:
    raw = bytes.fromhex(msg_id)
    (pid,) = struct.unpack_from(">H", raw, len(raw) - 12)
    return pid


def nearly_time_ms(msg_id: str, now_ms: int | None = None) -> int:
    """Roughly when a client id was made (Java ``getNearlyTimeFromID``), as epoch milliseconds.

    The id holds only the milliseconds since a month's start, so the month is
    guessed: the current one, or the previous one when that would put the id in
    the future. A query by unique key starts its time range a second before it,
    which spares the broker's index every older message. Raises ValueError for
    text that is not a client id's hex.
    """
    raw = bytes.fromhex(msg_id)
    if len(raw) not in (16, 28):
        raise ValueError(f"{msg_id!r} has {len(raw)} bytes; a client message id has 16 or 28")
    span = id_time_offset(msg_id) & 0xFFFFFFFF
    now = int(time.time() * 1000) if now_ms is None else now_ms
    start, _ = _month_bounds(now)
    if start + span >= now:
        this_month = _dt.datetime.fromtimestamp(start / 1000)
        previous = (this_month.replace(year=this_month.year - 1, month=12) if this_month.month == 1
                    else this_month.replace(month=this_month.month - 1))
        start = int(previous.timestamp() * 1000)
    return start + span
