"""The live checkpoints, kept durably in an append-only log so a restart still revives what was popped.

Each change is one line in ``<data>/pop/checkpoints.log``, tab-separated: ``c`` (a new checkpoint with its
number, :meth:`PopCheckpoint.to_record`), ``a <number> <bits>`` (offsets acked in one, as a hex bitmask of
its offsets list), ``d <number>`` (a checkpoint done: fully acked or revived). A data directory written
before this format holds JSON lines (``{"op":"ck"|"ack"|"del",...}``, naming a checkpoint by its key): they
are still read, and a checkpoint whose names cannot go into a tab-separated record is still written so.
:meth:`CheckpointLog.open` replays the log and rewrites it with only the live checkpoints (numbered afresh);
it is rewritten the same way while running when dead lines outnumber live ones. Every line is handed to
the OS before the answer of the request that wrote it (a killed broker loses none); in SYNC flush mode
:meth:`CheckpointLog.durable` also fsyncs first, several waiters sharing one fsync; in ASYNC mode
:meth:`CheckpointLog.sync` runs periodically.

The table also remembers, per (topic, group, queue), the end of the newest checkpoint: a pop never starts
before it, even when the consumer offset file saved before a crash is older than the log.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import os
from pathlib import Path
from typing import Any, Awaitable, Generator, Iterable

from loguru import logger

from rmqrun.broker.pop.checkpoint import RECORD_CK, CheckpointKey, PopCheckpoint, plain_names

LOG_NAME = "checkpoints.log"
#: Rewrite the log once it holds this many lines more than live checkpoints (and twice as many).
COMPACT_SLACK = 5000
#: (topic, group, broker) verdicts of :func:`plain_names` kept; the table starts afresh when full
PLAIN_KEPT = 1024


class _Handed:
    """What :meth:`CheckpointLog.durable` gives in ASYNC mode, where nothing is left to wait for: an awaitable
    that is done at once, made once (an answer awaits it without a coroutine or a future being created)."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())


_HANDED = _Handed()


def _key_json(key: CheckpointKey) -> list[Any]:
    return list(key)


def _key_from(raw: Any) -> CheckpointKey:
    t, c, q, so, pt, bn = raw
    return (str(t), str(c), int(q), int(so), int(pt), str(bn))


class CheckpointLog:
    def __init__(self, directory: Path, *, fsync: bool) -> None:
        self.path = directory / LOG_NAME
        self._fsync = fsync
        self._cks: dict[CheckpointKey, PopCheckpoint] = {}
        self._heap: list[tuple[int, int, CheckpointKey]] = []
        self._seq = 0
        #: the end of the newest checkpoint by (topic, group, queue id), read in place by a pop's restNum pass
        self.latest_ends: dict[tuple[str, str, int], int] = {}
        #: the log's file descriptor (append-only, unbuffered: :meth:`flush` writes the pending lines itself)
        self._fd: int | None = None
        #: lines written and not yet handed to the OS (a flush is scheduled while there are any)
        self._pending: list[str] = []
        #: the last write failed in the middle of a line
        self._torn = False
        #: the loop on which a :meth:`_flush_turn` is scheduled and has not run yet (None: none is)
        self._turn_flush: asyncio.AbstractEventLoop | None = None
        self._lines = 0
        #: the last checkpoint number handed out (numbers are unique for the life of the process)
        self._next_id = 0
        self._written = 0
        self._synced = 0
        self._sync_task: asyncio.Task[None] | None = None
        #: whether (topic, group, broker name) can go into a compact record (see :meth:`_ck_line`)
        self._plain: dict[tuple[str, str, str], bool] = {}

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._replay()
        self._rewrite()
        if self._cks:
            logger.info("POP: {} checkpoint(s) with un-acked messages restored from {}", len(self._cks), self.path)

    def close(self) -> None:
        if self._fd is not None:
            try:
                self.flush()
                os.fsync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = None

    def _replay(self) -> None:
        bad = 0
        by_id: dict[int, CheckpointKey] = {}
        with open(self.path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    if line.startswith("{"):
                        self._replay_json(json.loads(line))
                    else:
                        self._replay_record(line.rstrip("\n").split("\t"), by_id)
                except (ValueError, KeyError, TypeError, IndexError):
                    bad += 1  # a torn last line after a crash
        if bad:
            logger.warning("POP checkpoint log {}: {} unreadable line(s) skipped", self.path, bad)
        for key in [k for k, ck in self._cks.items() if ck.fully_acked]:
            del self._cks[key]

    def _replay_record(self, fields: list[str], by_id: dict[int, CheckpointKey]) -> None:
        op = fields[0]
        if op == RECORD_CK:
            ck = PopCheckpoint.from_record(fields)
            by_id[ck.log_id] = ck.key
            self._put(ck)
            return
        if op not in ("a", "d") or len(fields) != (3 if op == "a" else 2):
            raise ValueError(f"not a checkpoint log record: {fields!r}")
        key = by_id.get(int(fields[1]))
        if key is None:
            return  # its checkpoint line was torn or compacted away: nothing to apply it to
        if op == "a":
            found = self._cks.get(key)
            if found is not None:
                found.ack_bits(int(fields[2], 16))
        else:
            self._cks.pop(key, None)

    def _replay_json(self, rec: dict[str, Any]) -> None:
        """A line of the JSON format that data directories written before the compact records hold."""
        op = rec["op"]
        if op == "ck":
            self._put(PopCheckpoint.from_json(rec))
        elif op == "ack":
            ck = self._cks.get(_key_from(rec["k"]))
            if ck is not None:
                for o in rec["o"]:
                    ck.ack(int(o))
        elif op == "del":
            self._cks.pop(_key_from(rec["k"]), None)

    def _rewrite(self) -> None:
        """Write the live checkpoints to a new file and put it in place (atomic rename). Lines not yet handed to
        the OS are dropped: the new file states every live checkpoint as it is now, acks included."""
        self._pending.clear()
        self._torn = False
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for ck in self._cks.values():
                fh.write(self._ck_line(ck) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lines = len(self._cks)

    # ------------------------------------------------------------------ the table

    def __len__(self) -> int:
        return len(self._cks)

    def _put(self, ck: PopCheckpoint) -> None:
        key = ck.key
        self._cks[key] = ck
        self._seq += 1
        heapq.heappush(self._heap, (ck.revive_time, self._seq, key))
        qkey = key[:3]  # (topic, group, queue id)
        end = ck.offsets[-1] + 1 if ck.offsets else ck.start_offset
        if end > self.latest_ends.get(qkey, -1):
            self.latest_ends[qkey] = end

    def get(self, key: CheckpointKey) -> PopCheckpoint | None:
        return self._cks.get(key)

    def all(self) -> list[PopCheckpoint]:
        return list(self._cks.values())

    def latest_end(self, topic: str, group: str, queue_id: int) -> int:
        """Where the newest checkpoint of the queue ends (-1: none since start)."""
        return self.latest_ends.get((topic, group, queue_id), -1)

    def forget_queue(self, topic: str, group: str, queue_id: int) -> None:
        """Drop the remembered end (an offset reset moves the consumer offset back on purpose)."""
        self.latest_ends.pop((topic, group, queue_id), None)

    def _ck_line(self, ck: PopCheckpoint) -> str:
        """The checkpoint's line, numbering it: a compact record, or a JSON line (``log_id`` 0) when its names
        hold a tab or a line break."""
        names = (ck.topic, ck.group, ck.broker_name)
        plain = self._plain.get(names)
        if plain is None:  # asked once per (topic, group, broker): a checkpoint is written per queue a pop reads
            if len(self._plain) >= PLAIN_KEPT:
                self._plain.clear()
            plain = self._plain[names] = plain_names(*names)
        if not plain:
            ck.log_id = 0
            return ck.to_line()
        self._next_id += 1
        ck.log_id = self._next_id
        return ck.to_record()

    def add(self, ck: PopCheckpoint) -> None:
        self._put(ck)
        self._write_line(self._ck_line(ck))

    def ack(self, key: CheckpointKey, offsets: Iterable[int]) -> tuple[PopCheckpoint | None, int]:
        """Ack ``offsets`` in the checkpoint ``key``: (the checkpoint or None, how many were newly acked)."""
        ck = self._cks.get(key)
        if ck is None:
            return None, 0
        mask = 0
        for offset in offsets:  # one mask, one ack_bits: no per-offset ack step (a single ACK_MESSAGE is one)
            i = ck.index_of(offset)
            if i >= 0:
                mask |= 1 << i
        return ck, self.ack_bits(ck, mask)

    def ack_bits(self, ck: PopCheckpoint, mask: int) -> int:
        """Ack the offsets of ``ck`` whose bits ``mask`` sets (bit i: ``ck.offsets[i]``, as in the table); how
        many were newly acked. A batch ack of a pop without a filter comes as such a mask already."""
        newly = ck.ack_bits(mask)
        if newly:
            self._acked(ck, newly)
        return newly.bit_count()

    def _acked(self, ck: PopCheckpoint, newly: int) -> None:
        """Log the bits ``newly`` set in ``ck``: an ack record, or the done record once all are set."""
        if ck.fully_acked:
            self.remove(ck.key)
        elif ck.log_id:
            self._write_line(f"a\t{ck.log_id}\t{newly:x}")
        else:
            self._write({"op": "ack", "k": _key_json(ck.key),
                         "o": [o for i, o in enumerate(ck.offsets) if newly >> i & 1]})

    def remove(self, key: CheckpointKey) -> None:
        ck = self._cks.pop(key, None)
        if ck is None:
            return
        if ck.log_id:
            self._write_line(f"d\t{ck.log_id}")
        else:
            self._write({"op": "del", "k": _key_json(key)})

    def next_due(self) -> int | None:
        while self._heap and self._heap[0][2] not in self._cks:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def due(self, now_ms: int) -> list[PopCheckpoint]:
        """Live checkpoints whose revive time has come, oldest first. They leave the timer (not the table):
        the caller removes each once revived, or puts it back with :meth:`reschedule`."""
        out: dict[CheckpointKey, PopCheckpoint] = {}
        while self._heap and self._heap[0][0] <= now_ms:
            _, _, key = heapq.heappop(self._heap)
            ck = self._cks.get(key)
            if ck is not None:
                out[key] = ck
        return list(out.values())

    def reschedule(self, ck: PopCheckpoint, when_ms: int) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (when_ms, self._seq, ck.key))

    # ------------------------------------------------------------------ durability

    def _write(self, rec: dict[str, Any]) -> None:
        self._write_line(json.dumps(rec, separators=(",", ":")))

    def _write_line(self, line: str) -> None:
        """Keep one line; it reaches the OS at :meth:`flush`: before the answer of the request that wrote it
        (:meth:`durable`), or at the end of this loop turn at the latest. A pop writes a line per queue it
        read and a batch ack one per checkpoint it touched: one write() for all of them, of bytes encoded
        once (a text file's per-line write and buffer were a visible share of what a POP costs the broker)."""
        assert self._fd is not None, "checkpoint log not open"
        self._pending.append(line)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a tool, a test): at once
            self.flush()
        else:
            if self._turn_flush is not loop:
                loop.call_soon(self._flush_turn)
                self._turn_flush = loop
        self._lines += 1
        self._written += 1
        if self._lines > COMPACT_SLACK + 2 * len(self._cks) and self._sync_task is None:
            self._rewrite()
            self._synced = self._written

    def _flush_turn(self) -> None:
        """The flush at the end of the loop turn a line was written in (one is pending on the loop
        ``_turn_flush`` names: the requests of one turn schedule one between them, each answer flushing its own
        lines before that)."""
        self._turn_flush = None
        self.flush()

    def flush(self) -> None:
        """Hand every line written so far to the OS (a killed broker keeps them)."""
        pending = self._pending
        if not pending or self._fd is None:
            return
        data = ("\n".join(pending) + "\n").encode("utf-8")
        if self._torn:  # a failed write left part of a line: end it, so that it cannot swallow the next one
            data = b"\n" + data
        done = 0
        try:
            while done < len(data):
                done += os.write(self._fd, data[done:] if done else data)
        except OSError:
            # A full disk: the lines stay pending, all of them written again by the next flush (replay takes
            # a checkpoint, ack or done record twice as once; a torn line is skipped).
            self._torn = self._torn if done == 0 else data[done - 1] != 0x0A
            raise
        self._torn = False
        pending.clear()

    def durable(self) -> Awaitable[None]:
        """What every POP and ACK answer awaits before it goes out: every line written so far handed to the OS,
        and in SYNC mode fsync'ed (one fsync serves many waiters). In ASYNC mode the lines are with the OS when
        this returns, and the awaitable is done already (no coroutine made per answer)."""
        self.flush()
        if not self._fsync:
            return _HANDED
        return self.sync()

    async def sync(self) -> None:
        """Wait until every line written so far is fsync'ed, whatever the mode (the periodic sync of ASYNC
        mode calls it); the fsync runs in a thread, never on the event loop."""
        target = self._written
        while self._synced < target:
            task = self._sync_task
            if task is None:
                task = self._sync_task = asyncio.get_running_loop().create_task(self._sync())
            await asyncio.shield(task)

    async def _sync(self) -> None:
        upto = self._written
        try:
            self.flush()
            if self._fd is not None:
                await asyncio.to_thread(os.fsync, self._fd)
            self._synced = max(self._synced, upto)
        finally:
            self._sync_task = None
