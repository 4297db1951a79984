"""A small file system for store tests: real files under a directory, a fake capacity.

:class:`FakeDisk` is handed to ``MessageStore(..., disk=...)``. It keeps the files
real (so recovery, reads and reopening are the real thing) and accounts for space
the way a file system and ``df`` do:

* ``statvfs`` counts every file under its root, in whole blocks, **plus** files
  that were unlinked but are still open (their space comes back only when the last
  descriptor closes), plus ``external`` bytes (another process's filler file),
  minus nothing for ``reserved`` blocks, which are neither free to users nor used;
* a write that does not fit writes the blocks that do and returns short, and the
  next write raises ENOSPC, as a real ``pwrite`` on a full disk does (a torn tail);
* ``fail_errno`` makes every write fail with that error (an I/O error, not space).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

from rmqrun.broker.store.disk import Buffer, Disk


class FakeDisk(Disk):
    def __init__(self, root: Path, capacity: int, *, block: int = 1024, reserved_blocks: int = 0) -> None:
        self.root = Path(root)
        self.block = block
        self.total_blocks = capacity // block
        self.reserved_blocks = reserved_blocks
        #: Bytes something else holds on this file system (a filler); change it freely.
        self.external = 0
        self.fail_errno: int | None = None
        self._fds: set[int] = set()
        #: Every ENOSPC raised, for tests that must see the disk really fill.
        self.enospc = 0

    # -- accounting ------------------------------------------------------------------
    def _blocks(self, size: int) -> int:
        return -(-size // self.block)

    def used_blocks(self) -> int:
        used = self._blocks(self.external)
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                try:
                    used += self._blocks(os.stat(os.path.join(dirpath, name)).st_size)
                except FileNotFoundError:
                    pass
        return used + sum(self._blocks(os.fstat(fd).st_size) for fd in self.held_fds())

    def held_fds(self) -> list[int]:
        """Descriptors of files already unlinked: space ``df`` still counts as used."""
        return [fd for fd in list(self._fds) if os.fstat(fd).st_nlink == 0]

    def statvfs(self, path: object) -> SimpleNamespace:
        used = min(self.used_blocks(), self.total_blocks)
        free = self.total_blocks - used
        return SimpleNamespace(f_bsize=self.block, f_frsize=self.block, f_blocks=self.total_blocks, f_bfree=free,
                               f_bavail=max(0, free - self.reserved_blocks))

    def df_ratio(self) -> float:
        """``df``'s Use% of this file system, computed independently of the store's code."""
        st = self.statvfs(self.root)
        used = st.f_blocks - st.f_bfree
        return -(-used * 100 // (used + st.f_bavail)) / 100 if used + st.f_bavail else 0.0

    # -- the calls the store makes ------------------------------------------------------
    def open(self, path: object, flags: int, mode: int = 0o777) -> int:  # type: ignore[override]
        fd = os.open(path, flags, mode)  # type: ignore[arg-type]
        self._fds.add(fd)
        return fd

    def close(self, fd: int) -> None:  # type: ignore[override]
        self._fds.discard(fd)
        os.close(fd)

    def pwrite(self, fd: int, data: Buffer, offset: int) -> int:  # type: ignore[override]
        if self.fail_errno is not None:
            raise OSError(self.fail_errno, os.strerror(self.fail_errno))
        size = os.fstat(fd).st_size
        want = offset + len(data)
        growth = max(0, self._blocks(want) - self._blocks(size))
        room = self.total_blocks - self.reserved_blocks - self.used_blocks()
        if growth <= room:
            return os.pwrite(fd, data, offset)
        # Fill the blocks that fit (what a real file system does), then report the short write;
        # the caller's next call finds no room at all.
        fits = self._blocks(size) * self.block + max(0, room) * self.block - offset
        if fits <= 0:
            self.enospc += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return os.pwrite(fd, memoryview(data).cast("B")[:fits], offset)

    def pwritev(self, fd: int, buffers: Sequence[Buffer], offset: int) -> int:  # type: ignore[override]
        return self.pwrite(fd, b"".join(buffers), offset)
