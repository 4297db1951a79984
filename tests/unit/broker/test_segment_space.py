"""The segment-size advice and the reminder's rhythm while writes are refused (issue #33, item 11)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from loguru import logger

from rmqrun.broker.store.errors import DataDirError
from rmqrun.broker.store.segment_space import FencedReport, check_first_segment_fits, suggested_segment_size

MIB = 1024 * 1024


def _disk(free: int, total: int = 64 * MIB):  # type: ignore[no-untyped-def]
    return lambda _p: SimpleNamespace(f_frsize=1, f_blocks=total, f_bfree=free, f_bavail=free)


def test_a_64_mib_disk_refuses_the_default_segment_and_suggests_a_quarter_of_its_free_space() -> None:
    with pytest.raises(DataDirError) as err:
        check_first_segment_fits(Path("/d"), 256 * MIB, 4 * MIB, _disk(60 * MIB))
    text = str(err.value)
    assert "a commit-log segment of 256 MiB (segment_size) is larger than the free space of its disk (60 MiB " \
           "free of 64 MiB)" in text
    assert "rmqrun broker --segment-size 8MiB" in text, text
    check_first_segment_fits(Path("/d"), 8 * MIB, 4 * MIB, _disk(60 * MIB))  # fits: no error
    assert "--max-message-size" not in text  # the default 4 MiB fits an 8 MiB segment
    assert suggested_segment_size(60 * MIB) == 8 * MIB
    assert suggested_segment_size(100 * 1024) is None  # nothing useful fits: free space instead


def test_on_a_2_mib_disk_the_advice_lowers_the_largest_message_too() -> None:
    with pytest.raises(DataDirError) as err:
        check_first_segment_fits(Path("/d"), 256 * MIB, 4 * MIB, _disk(2 * MIB, 2 * MIB))
    assert "rmqrun broker --segment-size 512KiB --max-message-size 128KiB" in str(err.value), str(err.value)


def test_the_reminder_comes_once_a_period_while_fenced_and_starts_over_after() -> None:
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO", format="{message}")
    try:
        report = FencedReport()

        def at(now: float, fenced: bool = True) -> None:
            report.note(fenced, now, Path("/d"), 0.95, 1, 256 * MIB)

        at(0.0)       # the disk-full line itself says it: no reminder yet
        at(30.0)
        assert lines == []
        at(60.0)
        at(61.0)
        assert len(lines) == 1 and "refused writes for 60 s" in lines[0], lines
        at(120.0)
        assert len(lines) == 2
        at(130.0, fenced=False)
        at(200.0)     # a new episode: it starts over
        at(250.0)
        assert len(lines) == 2
    finally:
        logger.remove(sink)
