"""The segmented byte space under the commit log and consume queues: its edges, on real files.

Short writes (the kernel may write less than asked: the rest must follow at the
right place), segment files that do not belong (misaligned, after a gap), writes
that would cross a segment end or leave a hole, reads of segments retention
deleted, and destroying the whole space.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from rmqrun.broker.store.disk import Disk
from rmqrun.broker.store.segmented_file import SegmentedFile, segment_name

SIZE = 64


def _space(tmp_path: Path) -> SegmentedFile:
    sf = SegmentedFile(tmp_path / "log", SIZE)
    sf.load()
    return sf


@pytest.mark.parametrize("buffers", [[b"0123456789abcdef"], [b"0123", b"", b"456789", b"abcdef"]],
                         ids=["one-buffer", "several-buffers"])
def test_a_short_write_is_completed_at_the_right_place(tmp_path: Path, buffers: list[bytes]) -> None:
    """The kernel writes at most 5 bytes per call here; every byte must still land once, in order."""
    calls = [0]

    class ShortWrites(Disk):
        def pwrite(self, fd: int, data: bytes, offset: int) -> int:  # type: ignore[override]
            calls[0] += 1
            return os.pwrite(fd, bytes(data)[:5], offset)

        def pwritev(self, fd: int, bufs: list[bytes], offset: int) -> int:  # type: ignore[override]
            calls[0] += 1
            return os.pwrite(fd, b"".join(bytes(b) for b in bufs)[:5], offset)
    sf = SegmentedFile(tmp_path / "log", SIZE, ShortWrites())
    sf.load()
    sf.write(0, [b"head"])
    sf.write(4, buffers)
    assert calls[0] >= 5, "the writes were not cut short"
    assert sf.read(0, 100) == b"head0123456789abcdef"
    assert (tmp_path / "log" / segment_name(0)).read_bytes() == b"head0123456789abcdef"
    sf.release_fds()


def test_files_that_are_misaligned_or_after_a_gap_are_reported_unusable(tmp_path: Path) -> None:
    directory = tmp_path / "log"
    directory.mkdir()
    for start in (0, SIZE, 3 * SIZE, 4 * SIZE):  # a gap at 2 * SIZE: 3 and 4 come after it
        (directory / segment_name(start)).write_bytes(b"x" * SIZE)
    (directory / segment_name(SIZE + 7)).write_bytes(b"y")  # not on a segment boundary
    (directory / "notes.txt").write_text("not a segment")
    sf = SegmentedFile(directory, SIZE)
    unusable = sf.load()
    assert [s.start for s in sf.segments] == [0, SIZE]
    assert sorted(p.name for p in unusable) == sorted(segment_name(s) for s in (SIZE + 7, 3 * SIZE, 4 * SIZE))


def test_a_write_may_neither_cross_a_segment_end_nor_leave_a_hole(tmp_path: Path) -> None:
    sf = _space(tmp_path)
    sf.write(0, [b"a" * 60])
    with pytest.raises(ValueError, match="write of 8 bytes at 60 crosses the segment end"):
        sf.write(60, [b"b" * 8])
    with pytest.raises(ValueError, match=f"segment {3 * SIZE} would leave a gap after 0"):
        sf.write(3 * SIZE, [b"c"])
    assert sf.read(0, SIZE) == b"a" * 60, "a refused write changed nothing"
    sf.release_fds()


def test_reads_of_segments_deleted_by_retention_find_nothing(tmp_path: Path) -> None:
    sf = _space(tmp_path)
    for i in range(3):
        sf.write(i * SIZE, [bytes([65 + i]) * SIZE])
    dropped = sf.drop_head(1)
    assert [s.start for s in dropped] == [0]
    assert sf.read(0, 10) == b"" and sf.read_into(0, 10) == bytearray()
    assert sf.read(SIZE, 4) == b"BBBB" and sf.read_into(SIZE, 4) == bytearray(b"BBBB")
    assert sf.drop_head(0) == []
    assert [s.start for s in sf.drop_head(5)] == [SIZE], "the last segment (being written) is never dropped"
    assert sf.read_into(2 * SIZE + 60, 10) == bytearray(b"CCCC"), "a read stops at the segment's data"
    sf.release_fds()


def test_destroy_removes_every_segment_and_the_directory(tmp_path: Path) -> None:
    sf = _space(tmp_path)
    sf.write(0, [b"z" * SIZE])
    sf.write(SIZE, [b"z"])
    sf.destroy()
    assert not (tmp_path / "log").exists()
    empty = SegmentedFile(tmp_path / "never", SIZE)
    empty.destroy()  # nothing there: no error
    assert not (tmp_path / "never").exists()


def test_reads_racing_with_deletion_never_serve_another_files_bytes(tmp_path: Path) -> None:
    """Readers on other threads hammer the head segments while they are deleted and other files
    are opened (reusing descriptor numbers): each read returns the segment's own bytes or nothing."""
    sf = SegmentedFile(tmp_path / "log", SIZE)
    sf.load()
    rounds = 60
    for i in range(rounds + 1):
        sf.write(i * SIZE, [bytes([65 + i % 26]) * SIZE])
    old = list(sf.segments)
    wrong: list[tuple[int, bytes]] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            for seg in old[:rounds]:
                got = sf.read(seg.start, SIZE)
                if got and got != bytes([65 + seg.start // SIZE % 26]) * SIZE:
                    wrong.append((seg.start, got[:8]))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    others = []
    try:
        for i in range(rounds):
            sf.drop_head(1)
            fd = os.open(tmp_path / f"other-{i}", os.O_RDWR | os.O_CREAT, 0o644)  # may take a freed number
            os.pwrite(fd, b"Z" * SIZE, 0)
            others.append(fd)
    finally:
        stop.set()
        for t in threads:
            t.join()
        for fd in others:
            os.close(fd)
    assert not wrong, wrong[:3]
    assert all(seg.fd is None for seg in old[:rounds]), "a deleted segment's descriptor was left open"
    sf.release_fds()
