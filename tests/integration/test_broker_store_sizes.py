"""``rmqrun broker``'s store sizes: flags, a segment the disk cannot hold refused at start, a reminder while
writes are refused (issue #33, item 11).

On a 64 MiB volume the default 256 MiB commit-log segment filled the disk, could
not be deleted (it is the one being written), and every write was refused with
one line logged, ever. The CLI runs as a real process; the reminder is watched
on an in-thread broker whose disk reading is the store's seam (as in
``test_broker_retention.py``), with the reminder period shortened.
"""

from __future__ import annotations

import os
import secrets
import signal
from pathlib import Path

import pytest
from loguru import logger

from rmqrun.broker.store import segment_space
from tests.integration.cli_kit import Child, free_port, run_cli
from tests.integration.signals_kit import produce, start_broker, wait_until

pytestmark = pytest.mark.timeout(180)
MIB = 1024 * 1024


def _broker(data: Path, *extra: str) -> list[str]:
    return ["broker", "--data-dir", str(data), "--namesrv-port", str(free_port()), "--broker-port", "0", *extra]


def test_a_segment_larger_than_the_free_space_is_refused_at_start_with_the_fix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    st = os.statvfs(data)
    too_big = st.f_bavail * st.f_frsize + 1024 * MIB  # more than this disk has free, whatever the disk
    done = run_cli(_broker(data, "--segment-size", str(too_big)))
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert line.startswith("rmqrun: error: cannot start the broker: data directory ") and "\n" not in line, line
    assert "(segment_size) is larger than the free space of its disk" in line, line
    assert "rmqrun broker --segment-size " in line, line  # the fix
    assert not (data / "commitlog").exists() or not list((data / "commitlog").iterdir())


def test_bad_sizes_are_refused_naming_the_flag(tmp_path: Path) -> None:
    small = run_cli(_broker(tmp_path / "d1", "--segment-size", "1KiB"))
    assert small.returncode == 2 and "--segment-size=1024 must be >= --max-message-size + 8" in small.stderr, \
        small.stderr
    junk = run_cli(_broker(tmp_path / "d2", "--segment-size", "lots"))
    assert junk.returncode == 2 and "--segment-size" in junk.stderr and "512MiB" in junk.stderr, junk.stderr


def test_the_size_flags_set_the_commit_log_files_and_the_largest_message(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Child(_broker(data, "--segment-size", "1MiB", "--max-message-size", "64KiB"), tmp_path,
               name="broker") as child:
        child.wait_output("RMQRUN_BROKER_READY", 60, stream="stdout")
        namesrv = child.stdout.split("namesrv=")[1].split()[0]
        # random hex: the producer compresses it to about half (some 30 KiB a line): 1.2 MiB in all
        lines = b"".join(secrets.token_hex(30 * 1024).encode() + b"\n" for _ in range(40))
        sent = run_cli(["produce", "--namesrv", namesrv, "--topic", "SIZES"], input=lines)
        assert sent.returncode == 0 and "40 message(s)" in sent.stdout, sent.stdout + sent.stderr
        big = run_cli(["produce", "--namesrv", namesrv, "--topic", "SIZES"],
                      input=secrets.token_hex(150 * 1024).encode() + b"\n")
        assert big.returncode != 0, "a message above --max-message-size 64KiB was stored"
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0
    # the commit log rolled at 1 MiB: its files are named by their start offsets
    assert sorted(p.name for p in (data / "commitlog").iterdir())[:2] == ["00000000000000000000",
                                                                           f"{MIB:020d}"]


def test_while_writes_are_refused_for_lack_of_space_a_line_says_so_every_period(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(segment_space, "FENCED_REPORT_S", 0.3)
    eb = start_broker(tmp_path, segment_size=64 * 1024, max_message_size=1024, clean_resource_interval_ms=100)
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="INFO", format="{level} {message}")
    try:
        eb.broker.store.set_disk_usage(lambda _p: 0.10)
        produce(eb, "FENCE", 4)  # one segment, far from full: nothing retention could delete
        eb.broker.store.set_disk_usage(lambda _p: 0.95)
        reminder = "still 95% used: the store has refused writes for "
        wait_until(lambda: sum(reminder in ln for ln in lines) >= 2, 30, "two reminders")
        first = next(ln for ln in lines if reminder in ln)
        assert first.startswith("ERROR ") and "nothing can be deleted: the only commit-log file is the one being " \
                                              "written" in first, first
        assert sum("above disk_space_warning_level_ratio" in ln for ln in lines) == 1  # the start line, once
        eb.broker.store.set_disk_usage(lambda _p: 0.50)
        wait_until(lambda: any("the store accepts writes again" in ln for ln in lines), 30, "writes accepted")
    finally:
        logger.remove(sink)
        eb.stop_in_thread()
