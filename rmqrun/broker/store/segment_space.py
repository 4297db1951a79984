"""The commit-log segment against the disk: refused at start when one cannot fit, reminded while fenced.

A commit-log segment is written until it is full, and retention never deletes
the one being written. On a disk smaller than one segment (256 MiB by default;
a 64 MiB volume) the broker filled the disk with its first segment, could delete
nothing, refused every write, and said so once. Now:

* a fresh data directory whose disk has less free space than one segment is
  refused at start, naming the sizes and the fix (a smaller ``segment_size``:
  ``rmqrun broker --segment-size``). A directory that has segments already keeps
  its size (the store refuses another), and retention at open may free space, so
  it starts, and the reminder below says what to do;
* while the store refuses writes for lack of space, a line every
  :data:`FENCED_REPORT_S` says so again (how long, and what could be deleted):
  an operator arriving later reads the current state, not one line from hours ago.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from loguru import logger

from .disk import StatVfs
from .errors import DataDirError

KIB = 1024
MIB = 1024 * KIB
#: seconds between two reminders while writes are refused for lack of space
FENCED_REPORT_S = 60.0


#: the smallest segment suggested (a message of up to a quarter of it still fits)
SMALLEST_SUGGESTED = 64 * KIB


def mib(size: int) -> str:
    return f"{size / MIB:.0f} MiB" if size >= MIB else f"{size} bytes"


def flag_size(size: int) -> str:
    """``8MiB``, ``512KiB``: as ``--segment-size`` takes it."""
    return f"{size // MIB}MiB" if size >= MIB and size % MIB == 0 else f"{size // KIB}KiB"


def suggested_segment_size(free: int) -> int | None:
    """A power-of-two segment of at most a quarter of ``free`` (retention needs a full segment behind the one
    being written to delete anything); None when even :data:`SMALLEST_SUGGESTED` does not fit."""
    size = 1 << 40
    while size > free // 4 and size >= SMALLEST_SUGGESTED:
        size //= 2
    return size if size >= SMALLEST_SUGGESTED else None


def check_first_segment_fits(data_dir: Path, segment_size: int, max_message_size: int,
                             statvfs: Callable[[Path], StatVfs]) -> None:
    """Refuse a fresh data directory whose disk cannot hold one commit-log segment (see the module doc)."""
    st = statvfs(data_dir)
    free = st.f_bavail * st.f_frsize
    if segment_size <= free:
        return
    total = st.f_blocks * st.f_frsize
    smaller = suggested_segment_size(free)
    if smaller is None:
        fix = "free space on that disk or use a larger one"
    else:
        # a record must fit in a segment: a smaller segment may need a smaller largest message too
        message = (f" --max-message-size {flag_size(smaller // 4)}" if max_message_size + 8 > smaller else "")
        fix = (f"start it with a smaller segment_size, e.g. rmqrun broker --segment-size {flag_size(smaller)}"
               f"{message} (a quarter of the free space or less, so retention has whole segments to delete)")
    raise DataDirError(data_dir, f"a commit-log segment of {mib(segment_size)} (segment_size) is larger than the "
                                 f"free space of its disk ({mib(free)} free of {mib(total)}): the broker would fill "
                                 f"the disk with one segment it can never delete, then refuse every write; {fix}")


class FencedReport:
    """One line every :data:`FENCED_REPORT_S` while writes are refused for lack of space (the first one is the
    disk-full line itself)."""

    def __init__(self) -> None:
        self._since: float | None = None
        self._last = 0.0

    def note(self, fenced: bool, now: float, data_dir: Path, used: float, segments: int, segment_size: int) -> None:
        if not fenced:
            self._since = None
            return
        if self._since is None:
            self._since, self._last = now, now
            return
        if now - self._last < FENCED_REPORT_S:
            return
        self._last = now
        deletable = ("nothing can be deleted: the only commit-log file is the one being written; free space on "
                     "the disk (or start on a larger one, or with a smaller segment_size on a new data directory)"
                     if segments <= 1 else f"{segments - 1} older commit-log file(s) of {mib(segment_size)} "
                     "may go as retention runs")
        logger.error("disk of {} still {:.0%} used: the store has refused writes for {:.0f} s; {}", data_dir, used,
                     now - self._since, deletable)
