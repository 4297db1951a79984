"""The pipe protocol between the supervisor and its workers.

Each worker has one Unix socket pair to the supervisor. Both directions carry
frames: ``uint32 length`` (of what follows) + ``uint8 kind`` + payload, all
big-endian. Every frame kind is a dataclass here with its own encoder and
decoder, so nothing on the pipe is a tagged tuple or a pickle.

Supervisor -> worker::

    BOOT     first frame: the worker id, its settings (JSON) and the supervisor's sys.path
    RUN      batch id, mode, auto-commit flag, broker name, raw stored-message records
    STOP     finish every batch received before this frame, call worker_exit, exit 0

Worker -> supervisor::

    READY        the handler is loaded and worker_init ran; carries the pid
    BOOT_FAILED  the handler or a hook could not be loaded (the exit code follows)
    STARTED      the worker is starting this batch (billiard's lesson: acknowledge
                 on start, so the supervisor knows which batch a dead worker held);
                 sent as a batch begins by the threads / asyncio classes only (a
                 process worker's batches begin in order, each as the one before
                 it is DONE: supervisor/pool.py), and again before calls of a long
                 batch by every class (the hard time limit follows it)
    DONE         per-message statuses, delay levels and queue offsets of a batch
    RETIRING     a recycling limit was reached; please start my replacement and STOP me

Batches travel as raw records (commit-log layout, the bytes a pull returns) so
the supervisor never builds or pickles ``Message`` objects; the worker decodes
them. Each record starts with its own total size, so concatenated records
delimit themselves.

The exit-code table of a worker process lives here too (:class:`ExitCode`),
because it is part of the same contract.
"""

from __future__ import annotations

import enum
import functools
import json
import operator
import signal
import struct
from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence, Union

from rmqrun.errors import RmqrunError
from rmqrun.model import RecordData, Status
from rmqrun.remoting.message import QUEUE_OFFSET_POS



class ConsumeMode(enum.Enum):
    """How the messages of a batch are consumed (Java's listener kinds)."""

    CONCURRENT = "concurrent"
    ORDERLY = "orderly"


_STATUS_BY_BYTE = tuple(Status)


class ExitCode(enum.IntEnum):
    """Exit codes of a worker process, and what the pool does about each.

    =====  ==================  ===================================================
    code   name                pool reaction
    =====  ==================  ===================================================
    0      OK                  expected after STOP (graceful stop, recycle, reload,
                               remove_worker) or SIGTERM; otherwise a death
    1      UNCAUGHT            an exception escaped the worker loop (a bug, or a
                               handler raising SystemExit/BaseException): death
    3      BOOT_ERROR          the handler or a hook could not be imported: not
                               retried; start()/reload() raise, later on_fatal.
                               Only from a worker that never became ready: any
                               exit of a ready worker (a handler's sys.exit(3)
                               included) is a death
    4      INIT_ERROR          worker_init raised: start()/reload() raise; later it
                               counts as a death (it may be transient)
    5      LOST_SUPERVISOR     the pipe closed or carried garbage: death
    < 0    -signal             killed by a signal (SIGKILL from the hard time limit
                               or the OOM killer, SIGSEGV, ...): death
    =====  ==================  ===================================================

    A death is replaced at once. It counts against the restart-frequency limit
    (crash_limit within crash_window) only when no message explains it: deaths
    inside a handler call are the message's doing (the executor isolates and
    fails that message), and kills the pool ordered itself (the hard time
    limit) are not counted either.
    """

    OK = 0
    UNCAUGHT = 1
    BOOT_ERROR = 3
    INIT_ERROR = 4
    LOST_SUPERVISOR = 5


def describe_exit(code: int | None) -> str:
    """Human wording of a worker exit code, for logs and error messages."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    try:
        return f"exit code {code} ({ExitCode(code).name})"
    except ValueError:
        return f"exit code {code}"


# --------------------------------------------------------------------------- batches

def _walk_records(blob: RecordData) -> list[int]:
    """Start positions of the records in ``blob``; raises ValueError if sizes do not add up."""
    starts = []
    pos = 0
    n = len(blob)
    unpack = _INT.unpack_from
    while pos < n:
        if n - pos < 28:
            raise ValueError(f"record at {pos} is truncated ({n - pos} bytes left)")
        (size,) = unpack(blob, pos)
        if size < 28 or pos + size > n:
            raise ValueError(f"record at {pos} claims {size} bytes, {n - pos} available")
        starts.append(pos)
        pos += size
    return starts


def _blobs(records: RecordData | Sequence[RecordData]) -> Sequence[RecordData]:
    return (records,) if isinstance(records, (bytes, bytearray, memoryview)) else records


@dataclass(slots=True, eq=False)
class Batch:
    """A unit of work for one worker: records of ONE queue, consumed in order.

    ``queue_key`` is opaque to the pool (the consumer's process-queue key);
    ``records`` is one blob of concatenated stored-message records or a list of
    blobs. ``count`` is derived from the records (their size fields are
    checked here, so a malformed batch fails at submit, not in a worker),
    unless the caller gives ``count``: then ``records`` must be exactly
    ``count`` blobs of one record each, and only that is checked (each blob's
    size field equals its length), not every record's walk, a Python loop per
    message on the supervisor's hot path (the executor's records come from
    :func:`~rmqrun.remoting.message.scan_records`, which validated them).
    ``auto_commit`` only matters in orderly mode (Java's ``autoCommit``).
    ``alone``: run it with nothing beside it (a worker that runs batches at once
    starts it when it runs no other and starts none while it runs), so that a
    death in it names its message: the re-run of a suspect.
    ``after`` (orderly, 0 = none) chains the batch to an earlier batch of its
    queue sent to the same worker: the worker runs it only if that batch ran
    there just before with every message SUCCESS, else answers it NOT_RUN.
    """

    batch_id: int
    queue_key: Hashable
    mode: ConsumeMode
    broker_name: str
    records: RecordData | Sequence[RecordData] = field(repr=False)
    auto_commit: bool = True
    count: int = -1
    after: int = 0
    #: the topic whose queue holds the records (a retry topic for redeliveries; "" unknown): log positions
    topic: str = ""
    alone: bool = False
    #: with ``count``: each blob was cut from a record's own size field by whoever made it (the puller's
    #: scan), so it is not checked again here
    checked: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        if self.count < 0:
            self.count = sum(len(_walk_records(b)) for b in _blobs(self.records))
            return
        records = self.records
        if isinstance(records, (bytes, bytearray, memoryview)) or len(records) != self.count:
            raise ValueError(f"a batch given count={self.count} needs that many one-record blobs")
        if self.checked:
            return  # each blob was cut from its own size field by whoever made it
        # each blob's size field equals its length, checked in C (no Python loop per message)
        try:
            ok = (not records or min(map(len, records)) >= 28) and all(map(
                operator.eq, map(len, records), map(_FIRST, map(_INT.unpack_from, records))))
        except struct.error:
            ok = False
        if not ok:
            raise ValueError("a batch given its count has a blob that is not exactly one record")

    def split_records(self) -> list[bytes]:
        """Each record as its own bytes, in batch order (to re-run messages one by one)."""
        out = []
        for blob in _blobs(self.records):
            view = memoryview(blob)
            for pos in _walk_records(blob):
                size = _INT.unpack_from(blob, pos)[0]
                out.append(bytes(view[pos:pos + size]))
        return out

    def queue_offsets(self) -> list[int]:
        """Queue offsets of the records, read from the raw bytes (no decoding)."""
        out = []
        for blob in _blobs(self.records):
            for pos in _walk_records(blob):
                out.append(_LONG.unpack_from(blob, pos + QUEUE_OFFSET_POS)[0])
        return out


@dataclass(slots=True)
class BatchResult:
    """Everything a worker reports about a finished batch.

    Per message, in batch order: ``statuses`` (one :class:`Status` value per
    byte), ``delay_levels`` (for RECONSUME_LATER) and ``queue_offsets``. They
    are kept in this compact form because a result is handled once per batch
    on the supervisor's hot path.

    ``suspend_ms`` is the pause asked by an orderly SUSPEND (-1 = consumer
    default). ``timed_out`` is set when a time limit cut the batch short (soft:
    the worker interrupted the handler; hard: the pool killed the worker and
    made this result up, every message failed). ``error`` is the first failure's
    text, for logs and metrics. ``elapsed`` is the worker's time on the batch, s.
    """

    batch: Batch
    worker_id: int
    pid: int
    statuses: bytes = field(repr=False)
    delay_levels: tuple[int, ...] = field(repr=False)
    queue_offsets: tuple[int, ...] = field(repr=False)
    suspend_ms: int = -1
    timed_out: bool = False
    error: str | None = None
    elapsed: float = 0.0
    #: each failed message's own error: (index in the batch, text), for its failure and dead-letter lines
    errors: tuple[tuple[int, str], ...] = ()

    @property
    def batch_id(self) -> int:
        return self.batch.batch_id

    @property
    def queue_key(self) -> Hashable:
        return self.batch.queue_key

    @property
    def mode(self) -> ConsumeMode:
        return self.batch.mode



# --------------------------------------------------------------------------- frames

class Kind(enum.IntEnum):
    RUN = 1
    STOP = 2
    BOOT = 3
    READY = 10
    BOOT_FAILED = 11
    STARTED = 12
    DONE = 13
    RETIRING = 14


_HEADER = struct.Struct(">IB")
_INT = struct.Struct(">i")
_FIRST = operator.itemgetter(0)
_LONG = struct.Struct(">q")
_RUN = struct.Struct(">QBBHQH")  # batch id, mode, flags, broker-name length, chained after (0 = none), topic len
_DONE = struct.Struct(">QQiBHI")  # batch id, elapsed us, suspend ms, flags, error length, count
_ID = struct.Struct(">Q")
_PID = struct.Struct(">I")
_BOOT = struct.Struct(">B")
MAX_FRAME = 1 << 31

_MODE_BYTE = {ConsumeMode.CONCURRENT: 0, ConsumeMode.ORDERLY: 1}
_MODE_BY_BYTE = (ConsumeMode.CONCURRENT, ConsumeMode.ORDERLY)
_FLAG_AUTO_COMMIT = 1
_FLAG_ALONE = 2  # Batch.alone
_FLAG_TIMED_OUT = 1


class WireError(RmqrunError, ValueError):
    """Bytes on the pipe that are not a valid frame (a bug or a corrupted pipe)."""


@dataclass(slots=True)
class Run:
    batch_id: int
    mode: ConsumeMode
    auto_commit: bool
    broker_name: str
    records: RecordData
    #: where ``records`` start inside the bytes object they are a view of (set by :func:`decode`;
    #: -1 = unknown): see :meth:`records_in_bytes`
    records_at: int = field(default=-1, repr=False, compare=False)
    #: the batch this one is chained to (:class:`Batch`.after; 0 = none)
    after: int = 0
    #: the topic whose queue holds the records (:class:`Batch`.topic)
    topic: str = ""
    #: run with no other batch beside it (:class:`Batch`.alone)
    alone: bool = False

    def records_in_bytes(self) -> tuple[bytes, int]:
        """The records as a bytes object and the position they start at, without a copy when possible.

        The worker decodes every record of a batch; slicing bytes is cheaper than slicing a
        memoryview (about 0.2 us a message), and a decoder takes a start position anyway.
        """
        records = self.records
        if type(records) is bytes:
            return records, 0
        if self.records_at >= 0 and isinstance(records, memoryview) and type(records.obj) is bytes:
            return records.obj, self.records_at
        return bytes(records), 0


@dataclass(slots=True)
class Stop:
    pass


@dataclass(slots=True)
class Boot:
    """What a fresh worker needs before anything else (JSON: readable, no pickle)."""

    worker_id: int
    settings: dict[str, Any]
    sys_path: list[str]


@dataclass(slots=True)
class Ready:
    pid: int


@dataclass(slots=True)
class BootFailed:
    exit_code: int
    message: str


@dataclass(slots=True)
class Started:
    batch_id: int


@dataclass(slots=True)
class Done:
    batch_id: int
    statuses: bytes  # one Status byte per message
    delay_levels: tuple[int, ...]
    queue_offsets: tuple[int, ...]
    suspend_ms: int = -1
    timed_out: bool = False
    error: str = ""
    elapsed_us: int = 0
    #: (index, error) of each message whose call failed with an error of its own (``error`` is the first)
    errors: tuple[tuple[int, str], ...] = ()


@dataclass(slots=True)
class Retiring:
    reason: str


Frame = Union[Run, Stop, Boot, Ready, BootFailed, Started, Done, Retiring]


def _frame(kind: Kind, payload: bytes = b"") -> bytes:
    return _HEADER.pack(len(payload) + 1, kind) + payload


def encode_run(batch: Batch) -> list[RecordData]:
    """The RUN frame of a batch, as pieces to write back to back (records are not copied)."""
    broker = batch.broker_name.encode("utf-8")
    topic = batch.topic.encode("utf-8")
    blobs = _blobs(batch.records)
    size = sum(map(len, blobs))
    head = _RUN.pack(batch.batch_id, _MODE_BYTE[batch.mode],
                     (_FLAG_AUTO_COMMIT if batch.auto_commit else 0) | (_FLAG_ALONE if batch.alone else 0),
                     len(broker), batch.after, len(topic))
    prefix = _HEADER.pack(1 + len(head) + len(broker) + len(topic) + size, Kind.RUN) + head + broker + topic
    return [prefix, *blobs]


def encode(frame: Frame) -> bytes:
    """Any frame but RUN (see :func:`encode_run`)."""
    if isinstance(frame, Done):
        n = len(frame.statuses)
        if len(frame.delay_levels) != n or len(frame.queue_offsets) != n:
            raise ValueError("DONE frame: statuses, delay levels and offsets differ in length")
        err = frame.error.encode("utf-8")[:65535]
        payload = b"".join((
            _DONE.pack(frame.batch_id, frame.elapsed_us, frame.suspend_ms,
                       _FLAG_TIMED_OUT if frame.timed_out else 0, len(err), n),
            err, bytes(frame.statuses),
            struct.pack(f">{n}h", *frame.delay_levels), struct.pack(f">{n}q", *frame.queue_offsets),
            _encode_errors(frame.errors, n)))
        return _frame(Kind.DONE, payload)
    if isinstance(frame, Started):
        return _frame(Kind.STARTED, _ID.pack(frame.batch_id))
    if isinstance(frame, Stop):
        return _frame(Kind.STOP)
    if isinstance(frame, Boot):
        doc = {"worker_id": frame.worker_id, "settings": frame.settings, "sys_path": frame.sys_path}
        return _frame(Kind.BOOT, json.dumps(doc).encode("utf-8"))
    if isinstance(frame, Ready):
        return _frame(Kind.READY, _PID.pack(frame.pid))
    if isinstance(frame, BootFailed):
        return _frame(Kind.BOOT_FAILED, _BOOT.pack(frame.exit_code) + frame.message.encode("utf-8"))
    if isinstance(frame, Retiring):
        return _frame(Kind.RETIRING, frame.reason.encode("utf-8"))
    if isinstance(frame, Run):
        raise TypeError("encode RUN frames with encode_run(batch)")
    raise TypeError(f"not a frame: {frame!r}")


_ERRORS = struct.Struct(">H")      # how many per-message errors follow the offsets
_ERROR = struct.Struct(">IH")      # message index, error length (then the UTF-8 text)
#: per-message errors one DONE frame carries at most (the first ones), and bytes of one error at most
MAX_MESSAGE_ERRORS, MAX_ERROR_BYTES = 1024, 4096


def _encode_errors(errors: tuple[tuple[int, str], ...], n: int) -> bytes:
    """The per-message errors section of a DONE frame (empty when there are none: a frame without it is
    read as one with no per-message errors)."""
    if not errors:
        return b""
    kept = [(i, text.encode("utf-8")[:MAX_ERROR_BYTES]) for i, text in errors[:MAX_MESSAGE_ERRORS] if 0 <= i < n]
    return _ERRORS.pack(len(kept)) + b"".join(_ERROR.pack(i, len(raw)) + raw for i, raw in kept)


def _decode_errors(payload: memoryview, p: int, n: int) -> tuple[tuple[int, str], ...]:
    if len(payload) - p < _ERRORS.size:
        raise WireError(f"DONE frame of {len(payload)} bytes does not add up")
    (count,) = _ERRORS.unpack_from(payload, p)
    p += _ERRORS.size
    out = []
    for _ in range(count):
        if len(payload) - p < _ERROR.size:
            raise WireError(f"DONE frame of {len(payload)} bytes does not add up")
        index, length = _ERROR.unpack_from(payload, p)
        p += _ERROR.size
        if index >= n or p + length > len(payload):
            raise WireError(f"DONE frame: a message error at index {index} of {n} does not add up")
        out.append((index, bytes(payload[p:p + length]).decode("utf-8", "replace")))
        p += length
    if p != len(payload):
        raise WireError(f"DONE frame of {len(payload)} bytes does not add up")
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _done_columns(n: int) -> tuple[Any, Any]:
    """The readers of a DONE frame's ``n`` delay levels and ``n`` queue offsets: made once per job size
    (a frame per job on the supervisor's hot path), not formatted and looked up again per frame."""
    return struct.Struct(f">{n}h").unpack_from, struct.Struct(f">{n}q").unpack_from


def decode(kind: int, payload: memoryview) -> Frame:
    """One frame from its kind byte and payload (as split by :class:`FrameBuffer`)."""
    try:
        if kind == Kind.DONE:
            batch_id, elapsed, suspend_ms, flags, err_len, n = _DONE.unpack_from(payload, 0)
            p = _DONE.size
            error = bytes(payload[p:p + err_len]).decode("utf-8", "replace") if err_len else ""
            p += err_len
            statuses = bytes(payload[p:p + n])
            p += n
            delays_of, offsets_of = _done_columns(n)
            delays = delays_of(payload, p)
            p += 2 * n
            offsets = offsets_of(payload, p)
            p += 8 * n
            errors = _decode_errors(payload, p, n) if p < len(payload) else ()
            if p > len(payload) or max(statuses, default=0) >= len(_STATUS_BY_BYTE):
                raise WireError(f"DONE frame of {len(payload)} bytes does not add up")
            return Done(batch_id, statuses, delays, offsets, suspend_ms, bool(flags & _FLAG_TIMED_OUT),
                        error, elapsed, errors)
        if kind == Kind.STARTED:
            return Started(_ID.unpack_from(payload, 0)[0])
        if kind == Kind.RUN:
            batch_id, mode, flags, blen, after, tlen = _RUN.unpack_from(payload, 0)
            p = _RUN.size
            broker = bytes(payload[p:p + blen]).decode("utf-8")
            p += blen
            topic = bytes(payload[p:p + tlen]).decode("utf-8")
            p += tlen
            base = payload.obj
            whole = type(base) is bytes and payload.nbytes == len(base) and payload.format == "B"
            return Run(batch_id, _MODE_BY_BYTE[mode], bool(flags & _FLAG_AUTO_COMMIT), broker,
                       payload[p:], p if whole else -1, after, topic, bool(flags & _FLAG_ALONE))
        if kind == Kind.STOP:
            return Stop()
        if kind == Kind.BOOT:
            doc = json.loads(bytes(payload).decode("utf-8"))
            return Boot(int(doc["worker_id"]), dict(doc["settings"]), [str(p) for p in doc["sys_path"]])
        if kind == Kind.READY:
            return Ready(_PID.unpack_from(payload, 0)[0])
        if kind == Kind.BOOT_FAILED:
            return BootFailed(payload[0], bytes(payload[1:]).decode("utf-8", "replace"))
        if kind == Kind.RETIRING:
            return Retiring(bytes(payload).decode("utf-8", "replace"))
    except WireError:
        raise
    except (struct.error, IndexError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise WireError(f"malformed frame of kind {kind}: {exc}") from exc
    raise WireError(f"unknown frame kind {kind}")


class FrameBuffer:
    """Splits a byte stream into frames; used on both ends of the pipe.

    ``feed`` appends what a read returned; ``next`` returns the next complete
    frame or None. Payloads are copied out of the buffer (one copy per frame)
    so the buffer can be compacted freely.
    """

    __slots__ = ("_buf", "_pos")

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def feed(self, data: bytes | memoryview) -> None:
        if self._pos and self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif self._pos > 65536:
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data

    def has_frame(self) -> bool:
        avail = len(self._buf) - self._pos
        if avail < _HEADER.size:
            return False
        length = _INT.unpack_from(self._buf, self._pos)[0] & 0xFFFFFFFF
        # a length out of range is reported now (next() raises), not awaited: those bytes never come
        return avail >= 4 + length or length < 1 or length > MAX_FRAME

    def next(self) -> Frame | None:
        if not self.has_frame():
            return None
        length, kind = _HEADER.unpack_from(self._buf, self._pos)
        if length < 1 or length > MAX_FRAME:
            raise WireError(f"frame length {length} out of range")
        start = self._pos + _HEADER.size
        end = self._pos + 4 + length
        with memoryview(self._buf) as view:  # one copy (a bytearray slice, then bytes(), made two)
            payload = memoryview(view[start:end].tobytes())
        self._pos = end
        return decode(kind, payload)

    @property
    def pending_bytes(self) -> int:
        return len(self._buf) - self._pos
