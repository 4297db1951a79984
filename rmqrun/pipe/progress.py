"""Per-message progress of a worker, in memory the worker and the supervisor share.

Why: when a worker dies in the middle of a batch, the supervisor must know which
messages already have a result (they must never run again) and which message
was inside the handler call at that moment (the likely killer). Telling it over
the pipe would cost a write per message on the fast path; instead each worker
gets a small memfd, mapped by both processes, that the worker updates with a
few ``struct.pack_into`` calls per handler call (no system call). The
supervisor reads it after the worker is dead, so no locking is needed:
the worker writes statuses before it advances ``done``.

The consume-timeout sweep (Java's cleanExpireMsg) also reads it while the
worker lives, to learn since when the handler call on a message has been
running (Java stamps ``consumeStartTimeStamp`` as the call begins): see
:func:`read_live`, which retries a read torn by a concurrent write. The worker
writes a call's begin time before the fields that announce the call, and
never clears it (``in call`` = 0 makes it meaningless), so a read torn anyway
can only make a call look younger than it is: never swept too early.

Layout (native byte order, one writer per field)::

    0    int64   batch id being run (0 = none)                  worker
    8    float64 call began: time.monotonic() (system-wide clock)  worker
    16   int32   done: messages [0, done) have final statuses     worker
    20   int32   call start  } the handler call in progress        worker
    24   int32   call end    }
    28   int32   in call: 1 while the handler runs                 worker
    32   64 x int64  batch ids to skip (their queue was dropped;  supervisor
                     -1 = empty)
    544  CAPACITY bytes  status per message (model.Status)        worker
    ...  CAPACITY int8   delay level per message                  worker
    ...  int64   cut: batch id whose calls from index on are     supervisor
         int32        taken back (run by another worker)
         int32   cut flag: 1 while a cut is asked               supervisor
    ...  int64   claim: the batch the worker is about to run,    worker
                 written before it reads the skip list
    ...  int32   spread: n > 0 while the batch's calls run at once  worker
         int32   (threads/asyncio worker classes): the statuses of
                 messages [done, n) are final too where not NOT_RUN
    ...  MAX_CALLS x (int32 start, int32 end, float64 began):     worker
                 one slot per handler call in flight (end <= start: free)

With several calls at once (the ``threads`` and ``asyncio`` worker classes,
:mod:`rmqrun.worker.call_slots`), calls end out of order: ``done`` stays the
prefix of final messages, the head names the oldest call in flight (its
start and began) and the end of the furthest one (so a cut after it spares
every call begun), and each call in flight has a slot of its own, so a
worker that dies is known to have died inside those calls, and the messages
that finished beyond the prefix keep their results.

The cut is how the supervisor takes back the messages queued behind a call
that runs far too long (:mod:`rmqrun.supervisor.long_calls`): it writes the
cut, and the worker, which reads the flag each time it announces a call,
stops the batch there (:class:`CallCut`; those messages come back NOT_RUN).
The supervisor gives them to another worker only once it has seen, a while
after writing the cut, that the worker is still in the very same call: the
worker announces a call (the head above) *before* it reads the flag, so a call
announced after that check sees the cut.

The claim is how the supervisor takes back batches from a worker that does not
pick them up at all (stopped, frozen: :mod:`rmqrun.supervisor.liveness`): it
asks the worker to skip them, and moves them only if, a while later, the
claim has not changed: a worker claims a batch *before* it reads the skip
list, so one that claims it after the skip was written sees the skip. The
skip list is a set of slots, each freed when the worker has answered its
batch, so a skipped batch stays skipped however long the worker was away.

Batches longer than ``CAPACITY`` messages record progress for their first
``CAPACITY`` messages only; the rest count as unfinished.
"""

from __future__ import annotations

import mmap
import os
import struct
import tempfile
from dataclasses import dataclass

from rmqrun.errors import RmqrunError
from rmqrun.pipe.wire import Status

CAPACITY = 4096
SKIP_SLOTS = 64  # a worker's pipe holds at most max_inflight_messages (64) one-message batches
_HEAD = struct.Struct("=qdiiii")
HEAD_SIZE = _HEAD.size
_STATE = struct.Struct("=diiii")  # when the call began, done, call start, call end, in call
_FIELDS = struct.Struct("=iiii")  # done, call start, call end, in call
_SKIP = struct.Struct(f"={SKIP_SLOTS}q")
SKIP_AT = 32
STATUS_AT = SKIP_AT + _SKIP.size
DELAY_AT = STATUS_AT + CAPACITY
CUT_AT = DELAY_AT + CAPACITY
_CUT = struct.Struct("=qi")
CUT_FLAG_AT = CUT_AT + _CUT.size
CLAIM_AT = CUT_FLAG_AT + 4
SPREAD_AT = CLAIM_AT + 8
#: the most handler calls in flight at once in one worker (worker_concurrency's bound)
MAX_CALLS = 256
CALLS_AT = SPREAD_AT + 8
CALL = struct.Struct("=iid")  # start, end (end <= start: a free slot), began
SIZE = CALLS_AT + MAX_CALLS * CALL.size


class CallCut(RmqrunError):
    """Raised in the worker as it announces a call the supervisor took back (see the module docstring)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"messages from index {index} on were taken back by the supervisor")
        self.index = index


#: the status byte of a message with no result yet
NOT_RUN = int(Status.NOT_RUN)


def create_fd() -> int:
    """An anonymous shared file of SIZE bytes (memfd where available)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("rmqrun-progress", 0)
    else:  # pragma: no cover - non-Linux
        f = tempfile.TemporaryFile()
        fd = os.dup(f.fileno())
        f.close()
    os.ftruncate(fd, SIZE)
    return fd


def map_fd(fd: int) -> mmap.mmap:
    return mmap.mmap(fd, SIZE)


@dataclass(frozen=True, slots=True)
class Progress:
    """What a dead worker had done of the batch it was running."""

    batch_id: int
    done: int  # messages [0, done) have final statuses
    statuses: bytes
    delay_levels: tuple[int, ...]
    in_call: bool  # it died inside a handler call
    call_start: int
    call_end: int
    #: time.monotonic() in the worker when the call on [call_start, call_end) began (0: none)
    call_began: float = 0.0
    #: calls at once: messages past ``done`` that finished, by index: (status, delay level)
    later: tuple[tuple[int, int, int], ...] = ()
    #: calls at once: each call in flight as (start, end, began)
    calls: tuple[tuple[int, int, float], ...] = ()


def read(mm: mmap.mmap) -> Progress:
    batch_id, began, done, start, end, in_call = _HEAD.unpack_from(mm, 0)
    done = max(0, min(done, CAPACITY))
    statuses = bytes(mm[STATUS_AT:STATUS_AT + done])
    delays = struct.unpack_from(f"={done}b", mm, DELAY_AT) if done else ()
    spread = min(struct.unpack_from("=i", mm, SPREAD_AT)[0], CAPACITY)
    later: tuple[tuple[int, int, int], ...] = ()
    calls: tuple[tuple[int, int, float], ...] = ()
    if spread > 0:
        later = tuple((i, mm[STATUS_AT + i], struct.unpack_from("=b", mm, DELAY_AT + i)[0])
                      for i in range(done, spread) if mm[STATUS_AT + i] != NOT_RUN)
        calls = tuple(c for c in CALL.iter_unpack(mm[CALLS_AT:SIZE]) if c[1] > c[0] >= 0)
    return Progress(batch_id, done, statuses, tuple(delays), bool(in_call), start, end, began, later, calls)


def read_calls(mm: mmap.mmap) -> int:
    """How many handler calls a living worker has in flight now (for status and metrics; a torn read
    can only miscount by the calls that begin or end during it)."""
    if struct.unpack_from("=i", mm, SPREAD_AT)[0] <= 0:
        return int(_HEAD.unpack_from(mm, 0)[5] == 1)
    return sum(1 for c in CALL.iter_unpack(mm[CALLS_AT:SIZE]) if c[1] > c[0] >= 0)


@dataclass(frozen=True, slots=True)
class LiveCall:
    """Where a living worker is in a batch: what the consume-timeout sweep needs."""

    batch_id: int
    done: int  # messages [0, done) have finished (their results come with the batch's DONE)
    in_call: bool
    call_start: int
    call_end: int
    call_began: float  # time.monotonic() when the call on [call_start, call_end) began


def read_live(mm: mmap.mmap, attempts: int = 8) -> LiveCall | None:
    """The head of a living worker's block, or None if every read was torn by a write.

    The worker rewrites the head without a lock before each call (a few stores,
    well under a microsecond); two equal reads in a row cannot be a mix of two
    writes unless a whole call ran in between and left the very same bytes.
    """
    prev = bytes(mm[0:_HEAD.size])
    for _ in range(attempts):
        cur = bytes(mm[0:_HEAD.size])
        if cur == prev:
            batch_id, began, done, start, end, in_call = _HEAD.unpack(cur)
            return LiveCall(batch_id, max(0, min(done, CAPACITY)), bool(in_call), start, end, began)
        prev = cur
    return None


class Writer:
    """The worker's side: cheap updates around each handler call."""

    __slots__ = ("mm", "done", "batch_id")

    def __init__(self, mm: mmap.mmap) -> None:
        self.mm = mm
        self.done = 0
        self.batch_id = 0

    def begin(self, batch_id: int) -> None:
        struct.pack_into("=q", self.mm, 0, batch_id)
        _FIELDS.pack_into(self.mm, 16, 0, 0, 0, 0)
        self.done = 0
        self.batch_id = batch_id

    def skipped(self, batch_id: int) -> bool:
        """About to run ``batch_id``: claim it, then read the skip list (in this order: see the module
        docstring). True when the supervisor asked for the batch to be skipped."""
        struct.pack_into("=q", self.mm, CLAIM_AT, batch_id)
        return batch_id in _SKIP.unpack_from(self.mm, SKIP_AT)

    def call(self, statuses: bytearray, delays: list[int], start: int, end: int, began: float) -> None:
        """Publish results up to ``start`` and announce the call on [start, end), begun at ``began``
        (time.monotonic()) (the hot path: ~0.5 us)."""
        lo = self.done
        if start == lo + 1 and start <= CAPACITY:  # one message per call: single-byte writes
            mm = self.mm
            mm[STATUS_AT + lo] = statuses[lo]
            d = delays[lo]
            mm[DELAY_AT + lo] = (d if d >= 0 else d + 256) if -128 <= d <= 127 else 0
            self.done = start
        elif start > lo:
            self._copy(statuses, delays, start)
        _STATE.pack_into(self.mm, 8, began, self.done, start, end, 1)
        if self.mm[CUT_FLAG_AT]:  # one byte read per call; the cut itself only when one is asked
            batch_id, index = _CUT.unpack_from(self.mm, CUT_AT)
            if batch_id == self.batch_id and start >= index:
                raise CallCut(index)

    def publish(self, statuses: bytearray, delays: list[int], upto: int) -> None:
        """Messages [0, upto) are final; no call is in progress."""
        if upto > self.done:
            self._copy(statuses, delays, upto)
        _FIELDS.pack_into(self.mm, 16, self.done, 0, 0, 0)

    def _copy(self, statuses: bytearray, delays: list[int], upto: int) -> None:
        upto = min(upto, CAPACITY)
        lo = self.done
        if upto <= lo:
            return
        self.mm[STATUS_AT + lo:STATUS_AT + upto] = statuses[lo:upto]
        if any(delays[lo:upto]):
            struct.pack_into(f"={upto - lo}b", self.mm, DELAY_AT + lo,
                             *(max(-128, min(127, x)) for x in delays[lo:upto]))
        else:
            self.mm[DELAY_AT + lo:DELAY_AT + upto] = bytes(upto - lo)
        self.done = upto


class SkipRing:
    """The supervisor's side of the skip list: batch ids the worker must answer NOT_RUN (their queue was
    dropped, or they were taken back). A batch keeps its slot until its answer came (:meth:`discard`): a
    skip that fell out of a ring while its worker was stopped would let it run a batch run elsewhere."""

    __slots__ = ("mm", "slots")

    def __init__(self, mm: mmap.mmap) -> None:
        self.mm = mm
        #: batch id -> its slot
        self.slots: dict[int, int] = {}
        _SKIP.pack_into(mm, SKIP_AT, *([-1] * SKIP_SLOTS))  # -1: no batch has that id (0 may)

    def add(self, batch_id: int) -> bool:
        """Ask for the skip (again: nothing changes); False when every slot is taken (not asked)."""
        if batch_id in self.slots:
            return True
        if len(self.slots) >= SKIP_SLOTS:
            return False
        slot = min(set(range(SKIP_SLOTS)) - set(self.slots.values()))
        struct.pack_into("=q", self.mm, SKIP_AT + 8 * slot, batch_id)
        self.slots[batch_id] = slot
        return True

    def discard(self, batch_id: int) -> None:
        """The worker answered the batch: it never looks for that id again."""
        slot = self.slots.pop(batch_id, None)
        if slot is not None:
            struct.pack_into("=q", self.mm, SKIP_AT + 8 * slot, -1)


def read_claim(mm: mmap.mmap) -> int:
    """The batch the worker claimed last (0: none yet)."""
    return struct.unpack_from("=q", mm, CLAIM_AT)[0]


def ask_cut(mm: mmap.mmap, batch_id: int, index: int) -> None:
    """The supervisor's side: the calls of ``batch_id`` from message ``index`` on must not start."""
    _CUT.pack_into(mm, CUT_AT, batch_id, index)
    mm[CUT_FLAG_AT] = 1


def clear_cut(mm: mmap.mmap) -> None:
    mm[CUT_FLAG_AT] = 0
