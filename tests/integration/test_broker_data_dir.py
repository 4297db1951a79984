"""``rmqrun broker`` as a real process: data-directory errors, a full disk, the advertised address.

Each unusable data directory must end in one line naming it, a clear exit code (2: change
--data-dir; 1: in use or disk full, the setting itself is fine) and no traceback. A read-only
or full file system is a real tmpfs when the tests run as root (mount is allowed then);
otherwise those cases use chmod or are skipped.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from rmqrun.client.instance import ClientInstance
from rmqrun.pull.consumer import PullConsumer
from tests.integration.cli_kit import Child, free_port, produce, run_cli, wait_for

pytestmark = pytest.mark.timeout(120)


def broker_args(data_dir: Path, *extra: str) -> list[str]:
    return ["broker", "--data-dir", str(data_dir), "--namesrv-port", str(free_port()), "--broker-port", "0", *extra]


def assert_one_line_error(proc: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("rmqrun: error:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
    assert "port" not in errors[0], errors[0]  # not mistaken for a port problem any more


@contextmanager
def tmpfs(path: Path, size: str, *, ro: bool = False) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    opts = f"size={size}" + (",ro" if ro else "")
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs root to mount a small tmpfs")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def ready_line(child: Child) -> dict[str, str]:
    child.wait_output("RMQRUN_BROKER_READY", 60, stream="stdout")
    line = next(ln for ln in child.stdout.splitlines() if ln.startswith("RMQRUN_BROKER_READY"))
    return dict(part.split("=", 1) for part in line.split()[1:])


def test_data_dir_that_is_a_file(tmp_path: Path) -> None:
    f = tmp_path / "data"
    f.write_text("not a directory")
    proc = run_cli(broker_args(f))
    assert_one_line_error(proc, 2, str(f), "not a directory")
    assert f.read_text() == "not a directory"


def test_data_dir_not_writable(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        with tmpfs(tmp_path / "ro", "1m", ro=True) as ro:
            proc = run_cli(broker_args(ro))
    else:
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        proc = run_cli(broker_args(ro))
    assert_one_line_error(proc, 2, str(ro), "not writable")
    # One below it cannot even be created: also named, also exit 2.
    if os.geteuid() == 0:
        with tmpfs(tmp_path / "ro2", "1m", ro=True) as ro2:
            proc = run_cli(broker_args(ro2 / "data"))
        assert_one_line_error(proc, 2, str(ro2 / "data"), "Read-only file system")


def test_second_broker_on_a_data_dir_in_use_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Child(broker_args(data), tmp_path, name="first") as first:
        ready_line(first)
        proc = run_cli(broker_args(data))
        assert_one_line_error(proc, 1, str(data), "in use")
        assert first.proc.poll() is None  # the first broker is untouched
    assert first.proc.returncode == 0


def test_full_disk_at_start(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "256k") as small:
        with open(small / "filler", "wb") as f:
            try:
                f.write(b"\0" * (1 << 20))
            except OSError:
                pass
        proc = run_cli(broker_args(small / "data"))
    assert_one_line_error(proc, 1, str(small / "data"), "No space left on device")


def test_full_disk_while_running_is_logged_once_per_change(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "2m") as small:
        data = small / "data"
        # (the default 256 MiB segment would not fit this disk: refused at start, segment_space.py)
        with Child(broker_args(data, "--flush", "async", "--segment-size", "1MiB",
                                       "--max-message-size", "256KiB"), tmp_path, name="broker") as broker:
            info = ready_line(broker)
            produce(info["namesrv"], "FULL", 4)
            filler = small / "filler"
            with open(filler, "wb") as f:
                try:
                    f.write(b"\0" * (4 << 20))
                except OSError:
                    pass
            # Consumer offsets keep changing while the disk is full: each config flush (every
            # 5 s) fails; today's fix logs that once, not once per flush.
            with PullConsumer(info["namesrv"], "GFULL") as pc:
                mqs = pc.fetch_subscribe_message_queues("FULL")
                deadline = time.monotonic() + 12
                n = 0
                while time.monotonic() < deadline:
                    n += 1
                    for mq in mqs:
                        pc.update_consume_offset(mq, n % 2)
                    pc.persist_consume_offsets()
                    time.sleep(0.5)
                err = broker.stderr
                failures = [ln for ln in err.splitlines() if "failed" in ln and str(data) in ln]
                # Each failing chore (checkpoint, config flush), once, naming the directory.
                chores = [re.search(r"store task (\S+) failed", ln) for ln in failures]
                names = [m.group(1) for m in chores if m]
                assert "config-flush" in names and len(names) == len(set(names)) == len(failures), err[-4000:]
                assert all("No space left on device" in ln for ln in failures), failures
                # The retention check saw the full disk: one warning for the change of state.
                assert sum(f"disk of {data} is" in ln for ln in err.splitlines()) == 1, err[-4000:]
                assert "Traceback" not in err, err[-4000:]
                # Space again: one line says so, and the next flush writes the offsets.
                filler.unlink()
                wait_for(lambda: "works again" in broker.stderr, 20, "the recovery line")
        assert broker.proc.returncode == 0, broker.stderr[-3000:]
        assert "Traceback" not in broker.stderr


def test_advertise_host_is_what_the_name_server_returns(tmp_path: Path) -> None:
    # --advertise-host wins over the bind address (here a loopback alias, so the test stays local).
    with Child(broker_args(tmp_path / "a", "--advertise-host", "127.0.0.3"), tmp_path, name="a") as a:
        info = ready_line(a)
        assert info["broker"].startswith("127.0.0.3:")
        port = info["broker"].rsplit(":", 1)[1]
        namesrv = info["namesrv"]
        assert route_address(namesrv, "TBW102") == f"127.0.0.3:{port}"
    # Without it, a concrete bind address is advertised as itself, and clients reach it there.
    with Child(broker_args(tmp_path / "b", "--host", "127.0.0.2"), tmp_path, name="b") as b:
        info = ready_line(b)
        assert re.fullmatch(r"127\.0\.0\.2:\d+", info["broker"]) and info["namesrv"].startswith("127.0.0.2:")
        produce(info["namesrv"], "ADV", 2)
        assert route_address(info["namesrv"], "ADV") == info["broker"]


def test_bad_advertise_host_is_one_line(tmp_path: Path) -> None:
    proc = run_cli(broker_args(tmp_path / "d", "--advertise-host", "broker.example"))
    assert_one_line_error(proc, 2, "--advertise-host", "broker.example", "IP address")
    proc = run_cli(broker_args(tmp_path / "d", "--delete-when", "4am"))
    assert_one_line_error(proc, 2, "--delete-when", "4am")


def route_address(namesrv: str, topic: str) -> str:
    async def main() -> str:
        inst = ClientInstance(namesrv, instance_name="route-probe")
        try:
            route = await inst.get_route(topic, refresh=True)
            addrs = [bd.master_address for bd in route.broker_datas]
            assert len(addrs) == 1 and addrs[0], route
            return addrs[0]
        finally:
            await inst.close()
    return asyncio.run(main())
