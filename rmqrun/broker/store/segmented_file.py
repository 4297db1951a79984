"""A byte space split into fixed-size segment files named by their start offset.

Both the commit log and each consume queue are such a space. Files are named by the
20-digit zero-padded offset of their first byte, as in RocketMQ, so the name alone
says where a file belongs and old files can later be dropped from the head.

I/O is ``pwrite``/``pread`` on file descriptors rather than mmap: reads then return
plain ``bytes`` that nothing else references, files can be truncated while readers
hold data, and memory use is bounded by what callers ask for. Files are not
preallocated: a segment's file is exactly as long as what was written to it. Opening,
writing, shortening, closing and unlinking go through a :class:`~.disk.Disk` (the
real ``os`` calls, or a test's fake file system with a capacity).

Threading: appends come from one writer at a time (the owner holds its lock),
``sync`` runs in one background thread at a time, reads may come from anywhere.
Segments are removed from the tail by ``truncate`` (recovery, or rolling back a write
that failed for lack of space) and from the head by ``drop_head`` (retention), both
possibly while readers are active. A deleted file's space comes back only when its
last descriptor is closed, so neither may leave one open for long, and neither may
close one under a read in flight (the number could be reused by another file, and
the read would serve that file's bytes). So every read and fsync *holds* its segment
(a count under a lock) around the system call: removal marks the segment gone,
unlinks the file and closes the descriptor at once if nobody holds it, else the last
holder closes it on release. A reader holding a segment finishes on the unlinked
file (the bytes it asked for, as they were); one that comes to a gone segment later
reads nothing, as if below the minimum, and never reopens (O_CREAT would bring back
an empty file).
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from .disk import REAL_DISK, DiskLike

_NAME = re.compile(r"^\d{20}$")
_IOV_MAX = 1024
Buffer = bytes | bytearray | memoryview


def segment_name(start: int) -> str:
    return f"{start:020d}"


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class Segment:
    start: int
    path: Path
    fd: int | None = field(default=None, repr=False)
    #: Deleted (drop_head, truncate): never reopened (O_CREAT would bring back an empty file).
    gone: bool = False
    #: Reads and fsyncs in flight on ``fd``; a gone segment's descriptor is closed when this drops to 0.
    users: int = 0


class SegmentedFile:
    """Fixed-size segments under one directory; positions are global byte offsets."""

    def __init__(self, directory: Path, segment_size: int, disk: DiskLike = REAL_DISK) -> None:
        self.directory = Path(directory)
        self.segment_size = segment_size
        self.segments: list[Segment] = []
        #: Every byte before this offset has been fsync'ed.
        self.synced_pos = 0
        self.disk = disk
        self._pwrite = disk.pwrite
        self._pwritev = disk.pwritev
        #: Guards descriptors and hold counts; notified when a gone segment's descriptor closes.
        self._fd_lock = threading.Condition(threading.Lock())
        #: Bumped by every truncate: a sync that overlapped one must not claim the bytes written since.
        self._truncations = 0
        self._dirs_to_sync: set[Path] = set()
        #: Makes one segment's written bytes durable (None: ``os.fdatasync``). A seam for
        #: tests, which swap in one that blocks or fails to check what waits on durability.
        self.fsync: Callable[[int], None] | None = None

    # -- loading -------------------------------------------------------------------
    def load(self) -> list[Path]:
        """Find existing segments; returns files that are unusable (misaligned or after a gap).

        The caller decides what to do with those (recovery deletes them: a log is only
        valid up to its first hole).
        """
        self.segments = []
        if not self.directory.is_dir():
            return []
        starts = sorted(int(p.name) for p in self.directory.iterdir() if _NAME.match(p.name))
        unusable: list[Path] = []
        for start in starts:
            path = self.directory / segment_name(start)
            expected = self.segments[-1].start + self.segment_size if self.segments else None
            if start % self.segment_size or (expected is not None and start != expected) or unusable:
                unusable.append(path)
                continue
            self.segments.append(Segment(start, path))
        # Unknown: bytes written before a crash may still sit dirty in the page cache,
        # so the first sync after loading covers every segment.
        self.synced_pos = self.start
        return unusable

    def end_of_files(self) -> int:
        """Offset just past the last byte present in the files (0 when there are none)."""
        if not self.segments:
            return 0
        last = self.segments[-1]
        return last.start + os.stat(last.path).st_size

    @property
    def start(self) -> int:
        segments = self.segments
        return segments[0].start if segments else 0

    def file_size(self, seg: Segment) -> int:
        return os.fstat(self._fd(seg)).st_size if seg.fd is not None else os.stat(seg.path).st_size

    # -- locating --------------------------------------------------------------------
    def segment_start(self, pos: int) -> int:
        return pos - pos % self.segment_size

    def find(self, pos: int) -> Segment | None:
        segments = self.segments  # one snapshot: drop_head may swap the list meanwhile
        if not segments:
            return None
        idx = (pos - segments[0].start) // self.segment_size
        if 0 <= idx < len(segments):
            return segments[idx]
        return None

    def _fd(self, seg: Segment) -> int:
        fd = seg.fd
        if fd is None:
            with self._fd_lock:
                if seg.fd is None:
                    if seg.gone:
                        raise FileNotFoundError(f"segment {seg.path} was deleted by retention")
                    seg.fd = self.disk.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                fd = seg.fd
        return fd

    def _hold(self, seg: Segment) -> int | None:
        """The segment's descriptor, held until :meth:`_release`; None once it is gone and closed."""
        with self._fd_lock:
            if seg.fd is None:
                if seg.gone:
                    return None
                seg.fd = self.disk.open(seg.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            seg.users += 1
            return seg.fd

    def _release(self, seg: Segment) -> None:
        with self._fd_lock:
            seg.users -= 1
            if seg.gone and not seg.users and seg.fd is not None:
                self.disk.close(seg.fd)
                seg.fd = None
                self._fd_lock.notify_all()

    def _retire(self, segments: Sequence[Segment]) -> None:
        """Delete removed segments' files; close each descriptor now, or at its last holder's release."""
        with self._fd_lock:
            for seg in segments:
                seg.gone = True
        for seg in segments:
            self.disk.unlink(seg.path)
        with self._fd_lock:
            for seg in segments:
                if not seg.users and seg.fd is not None:
                    self.disk.close(seg.fd)
                    seg.fd = None

    def wait_released(self, segments: Sequence[Segment], timeout: float) -> bool:
        """Wait until no read holds any of these removed segments (their space is free); False on timeout."""
        with self._fd_lock:
            return self._fd_lock.wait_for(lambda: all(s.fd is None for s in segments), timeout)

    def _create(self, start: int) -> Segment:
        if self.segments and start != self.segments[-1].start + self.segment_size:
            raise ValueError(f"segment {start} would leave a gap after {self.segments[-1].start}")
        if not self.directory.is_dir():
            missing = [self.directory]
            while not missing[-1].parent.exists():
                missing.append(missing[-1].parent)
            self.directory.mkdir(parents=True, exist_ok=True)
            with self._fd_lock:
                self._dirs_to_sync.update(p.parent for p in missing)
        seg = Segment(start, self.directory / segment_name(start))
        self._fd(seg)
        with self._fd_lock:
            # Under the lock: sync() in another thread swaps this set out.
            self._dirs_to_sync.add(self.directory)
        self.segments.append(seg)
        return seg

    # -- I/O -------------------------------------------------------------------------
    def write(self, pos: int, buffers: Sequence[Buffer]) -> None:
        """Write ``buffers`` back to back at ``pos``; they must not cross a segment end."""
        size = self.segment_size
        file_pos = pos % size
        seg = self.find(pos)
        if seg is None:
            seg = self._create(pos - file_pos)
        total = sum(map(len, buffers)) if len(buffers) > 1 else len(buffers[0])
        if file_pos + total > size:
            raise ValueError(f"write of {total} bytes at {pos} crosses the segment end")
        fd = seg.fd if seg.fd is not None else self._fd(seg)
        if pos < self.synced_pos:
            self.synced_pos = pos  # an overwrite (recovery): make the next sync cover it
        # The common case is one call writing everything; loop only on a short write.
        if len(buffers) == 1:
            written = self._pwrite(fd, buffers[0], file_pos)
        else:
            written = self._pwritev(fd, buffers[:_IOV_MAX], file_pos)
        if written != total:
            self._write_rest(fd, file_pos, buffers, written)

    def _write_rest(self, fd: int, file_pos: int, buffers: Sequence[Buffer], written: int) -> None:
        views = [memoryview(b).cast("B") for b in buffers if len(b)]
        while views:
            # Drop what was written; keep the unwritten tail of a partially written buffer.
            while written and views:
                if written >= len(views[0]):
                    written -= len(views[0])
                    file_pos += len(views.pop(0))
                else:
                    views[0] = views[0][written:]
                    file_pos += written
                    written = 0
            if views:
                chunk = views[:_IOV_MAX]
                written = self._pwritev(fd, chunk, file_pos) if len(chunk) > 1 else self._pwrite(fd, chunk[0], file_pos)

    def read(self, pos: int, size: int) -> bytes:
        """Up to ``size`` bytes at ``pos`` from one segment (shorter at the end of data)."""
        seg = self.find(pos)
        if seg is None or size <= 0:
            return b""
        fd = self._hold(seg)
        if fd is None:  # deleted meanwhile: as if already below the minimum
            return b""
        try:
            return os.pread(fd, min(size, seg.start + self.segment_size - pos), pos - seg.start)
        finally:
            self._release(seg)

    def read_into(self, pos: int, size: int) -> bytearray:
        """:meth:`read` into a fresh ``bytearray`` the caller may patch (no extra copy)."""
        seg = self.find(pos)
        if seg is None or size <= 0:
            return bytearray()
        fd = self._hold(seg)
        if fd is None:  # deleted meanwhile
            return bytearray()
        size = min(size, seg.start + self.segment_size - pos)
        buf = bytearray(size)
        try:
            got = os.preadv(fd, [buf], pos - seg.start)
        finally:
            self._release(seg)
        if got < size:
            del buf[got:]
        return buf

    @property
    def truncations(self) -> int:
        """How many truncates ran so far; see :meth:`sync`."""
        return self._truncations

    def sync(self, up_to: int, truncations: int | None = None) -> None:
        """fsync every segment holding bytes in ``[synced_pos, up_to)`` (and new directories).

        ``truncations``: :attr:`truncations` read *before* ``up_to`` was: if a truncate ran
        since, the bytes now below ``up_to`` may have been written after this fsync, so
        ``synced_pos`` is not advanced (the next round covers them).
        """
        if self._dirs_to_sync:
            with self._fd_lock:
                dirs, self._dirs_to_sync = self._dirs_to_sync, set()
            for d in sorted(dirs, key=lambda p: len(p.parts), reverse=True):
                fsync_dir(d)
        if up_to <= self.synced_pos:
            return
        if truncations is None:
            truncations = self._truncations
        pos = self.segment_start(self.synced_pos)
        while pos < up_to:
            seg = self.find(pos)
            fd = self._hold(seg) if seg is not None else None
            if seg is not None and fd is not None:
                try:
                    (self.fsync or os.fdatasync)(fd)
                finally:
                    self._release(seg)
            pos += self.segment_size
        with self._fd_lock:
            if truncations == self._truncations:  # else bytes now at those offsets may postdate the fsync
                self.synced_pos = up_to

    def truncate(self, pos: int) -> None:
        """Drop every byte at or after ``pos``: later segments are deleted, one is shortened."""
        with self._fd_lock:
            self._truncations += 1
            self.synced_pos = min(self.synced_pos, pos)
        keep = self.segments
        cut = len(keep)
        while cut and keep[cut - 1].start >= pos:
            cut -= 1
        removed = keep[cut:]
        if removed:
            self.segments = keep[:cut]
            self._retire(removed)
        seg = self.find(pos)
        if seg is not None and self.file_size(seg) > pos - seg.start:
            fd = self._fd(seg)
            self.disk.ftruncate(fd, pos - seg.start)
            os.fsync(fd)
        if removed and self.directory.is_dir():
            fsync_dir(self.directory)

    def drop_head(self, count: int) -> list[Segment]:
        """Delete the first ``count`` segment files (never the last one); returns them.

        Their descriptors are closed now, or by the last read still holding one (see
        the module docstring): the space is free once :meth:`wait_released` says so.
        """
        count = min(count, len(self.segments) - 1)
        if count <= 0:
            return []
        dropped = self.segments[:count]
        self.segments = self.segments[count:]  # a reader holding the old list finds a gone segment
        self._retire(dropped)
        fsync_dir(self.directory)
        return dropped

    def _close_fd(self, seg: Segment) -> None:
        with self._fd_lock:
            if seg.fd is not None:
                self.disk.close(seg.fd)
                seg.fd = None

    def release_fds(self) -> None:
        """Close every open descriptor (they reopen on demand); only when no thread uses them."""
        for seg in self.segments:
            self._close_fd(seg)

    close = release_fds

    def destroy(self) -> None:
        """Delete all segment files and the directory (if it ends up empty)."""
        self.truncate(self.start if self.segments else 0)
        try:
            self.directory.rmdir()
        except OSError:
            pass
