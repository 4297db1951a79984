"""The file-system calls whose outcome depends on free space, behind one small object.

Segment files are opened, written, shortened, closed and unlinked only through a
:class:`Disk`, and the disk-use reading retention decides on comes from its
``statvfs``. The real one is the ``os`` functions themselves (no extra frame on the
write path); tests hand the store a fake with a capacity, which raises ENOSPC when a
write would not fit and counts a deleted file as used until its last descriptor is
closed, as ``df`` does. That is how "retention frees space as df sees it" and
"writes resume after ENOSPC" are tested without mounting anything.

The small JSON files (checkpoint, offsets, configs) and the lock file do not go
through it: they are rewritten whole and a failure there is already survivable.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Protocol, Sequence

Buffer = bytes | bytearray | memoryview

#: Write errors that mean "no room" (the disk, or this user's quota), not "the disk is broken":
#: the store rolls the failed write back and waits for space instead of fencing itself.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class StatVfs(Protocol):
    f_frsize: int
    f_blocks: int
    f_bfree: int
    f_bavail: int


class Disk:
    """The real file system: each method is the ``os`` call of the same name."""

    open = staticmethod(os.open)
    close = staticmethod(os.close)
    pwrite = staticmethod(os.pwrite)
    pwritev = staticmethod(os.pwritev)
    ftruncate = staticmethod(os.ftruncate)
    statvfs = staticmethod(os.statvfs)

    def unlink(self, path: Path) -> None:
        path.unlink(missing_ok=True)


class DiskLike(Protocol):
    def open(self, path: os.PathLike[str] | str, flags: int, mode: int = ...) -> int: ...
    def close(self, fd: int) -> None: ...
    def pwrite(self, fd: int, data: Buffer, offset: int) -> int: ...
    def pwritev(self, fd: int, buffers: Sequence[Buffer], offset: int) -> int: ...
    def ftruncate(self, fd: int, length: int) -> None: ...
    def statvfs(self, path: os.PathLike[str] | str) -> StatVfs: ...
    def unlink(self, path: Path) -> None: ...


REAL_DISK = Disk()


def used_ratio(st: StatVfs) -> float:
    """The used share of a file system, as ``df`` and RocketMQ compute it.

    Used blocks (``f_blocks - f_bfree``) over used + available-to-users blocks
    (``f_bavail``): blocks reserved for root count as unavailable, so a disk a
    non-root broker can no longer write to reads 100%. Rounded *up* to a whole
    percent, like ``df``'s ``Use%`` and a Java broker's ``getDiskPartitionSpaceUsedPercent``.
    """
    used = st.f_blocks - st.f_bfree
    entire = used + st.f_bavail
    if entire <= 0:
        return 0.0
    return -(-used * 100 // entire) / 100


def is_no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS
