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

Lanes: a ``threads`` or ``asyncio`` worker may run several batches at once
(each in a lane of its own, :func:`lanes_for`). The block above is lane 0;
lanes 1.. follow it, each with the per-batch part of the layout only (the
head, statuses, delays, spread and call slots, at :class:`Lane`'s offsets);
the skip list, the cut (it names a batch id) and the claim stay once per
worker, in lane 0's block. A reader finds a batch's lane by its id
(:func:`find_lane`): a lane keeps the id of the batch it ran last, and batch
ids are never reused, so an id names one lane at most. A ``process`` worker
has one lane, and its block is exactly the layout above (its hot path,
:meth:`Writer.call`, writes at fixed offsets).
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
#: the most batches one worker runs at once (one lane each): a worker's pipe holds at most
#: max_inflight_messages (64) one-message batches, as many as the skip list has slots, so a lane
#: more could never be filled; 64 lanes are ~790 KiB of address space per worker, of which only
#: the pages a lane touches are ever backed by memory
MAX_LANES = SKIP_SLOTS
_LANE_HEAD = HEAD_SIZE
_LANE_STATUS = _LANE_HEAD
_LANE_DELAY = _LANE_STATUS + CAPACITY
_LANE_SPREAD = _LANE_DELAY + CAPACITY
_LANE_CALLS = _LANE_SPREAD + 8
#: the bytes one lane past lane 0 adds to the block
LANE_SIZE = _LANE_CALLS + MAX_CALLS * CALL.size


@dataclass(frozen=True, slots=True)
class Lane:
    """Where one lane's per-batch fields are in the block (lane 0: the module docstring's layout)."""

    head_at: int  # batch id, began, done, call start, call end, in call (HEAD_SIZE bytes)
    status_at: int
    delay_at: int
    spread_at: int
    calls_at: int


def _lane(k: int) -> Lane:
    if k == 0:
        return Lane(0, STATUS_AT, DELAY_AT, SPREAD_AT, CALLS_AT)
    base = SIZE + (k - 1) * LANE_SIZE
    return Lane(base, base + _LANE_STATUS, base + _LANE_DELAY, base + _LANE_SPREAD, base + _LANE_CALLS)


#: every lane's offsets, by lane number
LANES = tuple(_lane(k) for k in range(MAX_LANES))


def lanes_for(worker_class: str, concurrency: int) -> int:
    """How many batches a worker of this class runs at once: one for ``process`` (its calls are one at a
    time), up to its concurrency (capped at MAX_LANES) for ``threads`` and ``asyncio``."""
    if worker_class == "process":
        return 1
    return max(1, min(concurrency, MAX_LANES))


def block_size(lanes: int) -> int:
    """The bytes of a block with ``lanes`` lanes."""
    if not 1 <= lanes <= MAX_LANES:
        raise ValueError(f"between 1 and {MAX_LANES} lanes, not {lanes}")
    return SIZE + (lanes - 1) * LANE_SIZE


def lanes_of(mm: "mmap.mmap | bytearray") -> int:
    """How many lanes a mapped block has (from its size)."""
    return 1 + max(0, len(mm) - SIZE) // LANE_SIZE


class CallCut(RmqrunError):
    """Raised in the worker as it announces a call the supervisor took back (see the module docstring)."""

    def __init__(self, index: int) -> None:
        super().__init__(f"messages from index {index} on were taken back by the supervisor")
        self.index = index


#: the status byte of a message with no result yet
NOT_RUN = int(Status.NOT_RUN)


def create_fd(lanes: int = 1) -> int:
    """An anonymous shared file for ``lanes`` lanes (:func:`block_size`; memfd where available)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("rmqrun-progress", 0)
    else:  # pragma: no cover - non-Linux
        f = tempfile.TemporaryFile()
        fd = os.dup(f.fileno())
        f.close()
    os.ftruncate(fd, block_size(lanes))
    return fd


def map_fd(fd: int) -> mmap.mmap:
    """The block, mapped whole: its size (so its lanes) is the file's, set by :func:`create_fd`."""
    return mmap.mmap(fd, max(SIZE, os.fstat(fd).st_size))


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


def read(mm: mmap.mmap, lane: int = 0) -> Progress:
    """What the worker recorded in one lane (lane 0: a process worker's only one)."""
    at = LANES[lane]
    batch_id, began, done, start, end, in_call = _HEAD.unpack_from(mm, at.head_at)
    done = max(0, min(done, CAPACITY))
    statuses = bytes(mm[at.status_at:at.status_at + done])
    delays = struct.unpack_from(f"={done}b", mm, at.delay_at) if done else ()
    spread = min(struct.unpack_from("=i", mm, at.spread_at)[0], CAPACITY)
    later: tuple[tuple[int, int, int], ...] = ()
    calls: tuple[tuple[int, int, float], ...] = ()
    if spread > 0:
        later = tuple((i, mm[at.status_at + i], struct.unpack_from("=b", mm, at.delay_at + i)[0])
                      for i in range(done, spread) if mm[at.status_at + i] != NOT_RUN)
        calls = tuple(c for c in CALL.iter_unpack(mm[at.calls_at:at.calls_at + MAX_CALLS * CALL.size])
                      if c[1] > c[0] >= 0)
    return Progress(batch_id, done, statuses, tuple(delays), bool(in_call), start, end, began, later, calls)


def find_lane(mm: mmap.mmap, batch_id: int) -> int | None:
    """The lane that holds (or last held) ``batch_id``; None when no lane names it."""
    for k in range(lanes_of(mm)):
        if struct.unpack_from("=q", mm, LANES[k].head_at)[0] == batch_id:
            return k
    return None


def read_batch(mm: mmap.mmap, batch_id: int) -> Progress | None:
    """What the worker recorded of ``batch_id``, in whichever lane it ran (None: it never began it)."""
    lane = find_lane(mm, batch_id)
    return None if lane is None else read(mm, lane)


def read_calls(mm: mmap.mmap) -> int:
    """How many handler calls a living worker has in flight now, over every lane (for status and metrics;
    a torn read can only miscount by the calls that begin or end during it)."""
    n = 0
    for k in range(lanes_of(mm)):
        at = LANES[k]
        if struct.unpack_from("=i", mm, at.spread_at)[0] <= 0:
            n += int(_HEAD.unpack_from(mm, at.head_at)[5] == 1)
        else:
            n += sum(1 for c in CALL.iter_unpack(mm[at.calls_at:at.calls_at + MAX_CALLS * CALL.size])
                     if c[1] > c[0] >= 0)
    return n


def heads(mm: mmap.mmap) -> bytes:
    """Every lane's head as one string: it changes whenever the worker begins, calls or ends anything."""
    return b"".join(bytes(mm[at.head_at:at.head_at + HEAD_SIZE]) for at in LANES[:lanes_of(mm)])


@dataclass(frozen=True, slots=True)
class LiveCall:
    """Where a living worker is in a batch: what the consume-timeout sweep needs."""

    batch_id: int
    done: int  # messages [0, done) have finished (their results come with the batch's DONE)
    in_call: bool
    call_start: int
    call_end: int
    call_began: float  # time.monotonic() when the call on [call_start, call_end) began


def read_live(mm: mmap.mmap, attempts: int = 8, lane: int = 0) -> LiveCall | None:
    """The head of a living worker's lane, or None if every read was torn by a write.

    The worker rewrites the head without a lock before each call (a few stores,
    well under a microsecond); two equal reads in a row cannot be a mix of two
    writes unless a whole call ran in between and left the very same bytes.
    """
    at = LANES[lane].head_at
    prev = bytes(mm[at:at + _HEAD.size])
    for _ in range(attempts):
        cur = bytes(mm[at:at + _HEAD.size])
        if cur == prev:
            batch_id, began, done, start, end, in_call = _HEAD.unpack(cur)
            return LiveCall(batch_id, max(0, min(done, CAPACITY)), bool(in_call), start, end, began)
        prev = cur
    return None


def live_batch(mm: mmap.mmap, batch_id: int) -> LiveCall | None:
    """The head of the lane running ``batch_id`` in a living worker (None: no lane has begun it, or every
    read was torn)."""
    lane = find_lane(mm, batch_id)
    if lane is None:
        return None
    live = read_live(mm, lane=lane)
    return live if live is not None and live.batch_id == batch_id else None


#: where :meth:`Writer.call` announces a call in lane 0 (began, done, call start, call end, in call: one
#: :data:`STATE` pack), for the process worker's loop, which writes it itself (see :meth:`Writer.in_place`)
STATE_AT = 8
STATE = _STATE


class Writer:
    """The worker's side: cheap updates around each handler call, in lane 0 (:meth:`lane` for the others)."""

    __slots__ = ("mm", "done", "batch_id", "at", "placed", "_view")

    def __init__(self, mm: mmap.mmap) -> None:
        self.mm = mm
        self.done = 0
        self.batch_id = 0
        self.at = LANES[0]
        #: the batch's statuses are the block's own bytes (:meth:`in_place`)
        self.placed = False
        self._view: memoryview | None = None

    def lane(self, k: int) -> "Writer":
        """A writer of lane ``k`` of the same block (``self`` for lane 0)."""
        if k == 0:
            return self
        if not 0 < k < lanes_of(self.mm):
            raise ValueError(f"the block has {lanes_of(self.mm)} lane(s), no lane {k}")
        w = LaneWriter(self.mm)
        w.at = LANES[k]
        return w

    def begin(self, batch_id: int) -> None:
        head = self.at.head_at
        struct.pack_into("=q", self.mm, head, batch_id)
        _FIELDS.pack_into(self.mm, head + 16, 0, 0, 0, 0)
        self.done = 0
        self.batch_id = batch_id
        self.placed = False

    def in_place(self, n: int) -> memoryview | None:
        """The statuses of the batch just begun, [0, n), as the block's own bytes (all NOT_RUN, their delay
        levels 0); None past CAPACITY or in a lane past 0 (those batches publish with :meth:`call`).

        Why: copying each call's result into the block (:meth:`call`) was ~0.14 us a message on a
        process worker's hot path. A result written here is in the block the moment the worker records
        it, so announcing the next call is one :data:`STATE` pack at :data:`STATE_AT` with ``done`` =
        the call's start: every message before it has its final status already, as ``done`` promises.
        A delay level goes in with :meth:`set_delays` when it is set, before ``done`` passes it.
        """
        if n > CAPACITY or self.at is not LANES[0]:
            return None
        mm = self.mm
        mm[STATUS_AT:STATUS_AT + n] = bytes([NOT_RUN]) * n
        mm[DELAY_AT:DELAY_AT + n] = bytes(n)
        if self._view is None:
            self._view = memoryview(mm)
        self.placed = True
        return self._view[STATUS_AT:STATUS_AT + n]

    def set_delays(self, start: int, end: int, level: int) -> None:
        """Messages [start, end) of a batch :meth:`in_place` failed asking for ``level`` (nothing otherwise:
        :meth:`call` copies the delays with the statuses)."""
        end = min(end, CAPACITY)
        if self.placed and start < end:
            self.mm[DELAY_AT + start:DELAY_AT + end] = bytes([max(-128, min(127, level)) & 0xFF]) * (end - start)

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
            self.check_cut(start)

    def check_cut(self, start: int) -> None:
        """A cut is asked: raise CallCut if it names this writer's batch at or before ``start``."""
        batch_id, index = _CUT.unpack_from(self.mm, CUT_AT)
        if batch_id == self.batch_id and start >= index:
            raise CallCut(index)

    def publish(self, statuses: bytearray | memoryview, delays: list[int], upto: int) -> None:
        """Messages [0, upto) are final; no call is in progress."""
        if self.placed:  # statuses and delays are in the block already
            self.done = max(self.done, min(upto, CAPACITY))
        elif upto > self.done:
            self._copy(statuses, delays, upto)
        _FIELDS.pack_into(self.mm, self.at.head_at + 16, self.done, 0, 0, 0)

    def _copy(self, statuses: bytearray, delays: list[int], upto: int) -> None:
        upto = min(upto, CAPACITY)
        lo = self.done
        if upto <= lo:
            return
        sa, da = self.at.status_at, self.at.delay_at
        self.mm[sa + lo:sa + upto] = statuses[lo:upto]
        if any(delays[lo:upto]):
            struct.pack_into(f"={upto - lo}b", self.mm, da + lo,
                             *(max(-128, min(127, x)) for x in delays[lo:upto]))
        else:
            self.mm[da + lo:da + upto] = bytes(upto - lo)
        self.done = upto


class LaneWriter(Writer):
    """A writer of a lane past 0: :meth:`call` at the lane's offsets (lane 0 keeps its fixed-offset one)."""

    __slots__ = ()

    def call(self, statuses: bytearray, delays: list[int], start: int, end: int, began: float) -> None:
        """As :meth:`Writer.call`, in this writer's lane."""
        if start > self.done:
            self._copy(statuses, delays, start)
        _STATE.pack_into(self.mm, self.at.head_at + 8, began, self.done, start, end, 1)
        if self.mm[CUT_FLAG_AT]:
            self.check_cut(start)


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
