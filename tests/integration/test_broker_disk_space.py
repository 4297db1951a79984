"""A running broker's disk is what it reports, seen from outside: ``df``, clients over TCP, the CLI.

* ``brokerStatus``/``clusterList``'s ``commitLogDiskRatio`` is the store's reading, measured
  as ``df`` measures it (reserved blocks are not "used");
* messages a group asked for after retention deleted them are counted (and logged);
* on a real small tmpfs (mounted when the tests run as root; skipped, saying so, where mounting
  is refused): forced cleanup frees space ``df`` sees at once and stops at the threshold; a disk
  filled between two checks refuses sends, and once space is back sends are stored again
  without a restart, everything acknowledged still there; a SIGTERM on a full disk is a stop
  that says what it could not save, not "cannot start the broker";
* ``rmqrun broker --log-format json`` writes nothing to stdout: every line it prints is JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.errors import SendFailedError
from rmqrun.client.producer import Producer
from rmqrun.pull import PullStatus
from rmqrun.pull.consumer import PullConsumer
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.errors import BrokerError
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.broker_kit import LOOPS
from tests.integration.cli_kit import Child, child_env, free_port
from tests.integration.signals_kit import produce, queue_max_offsets, start_broker, wait_until

pytestmark = pytest.mark.timeout(180)

KIB, MIB = 1024, 1024 * 1024
EVERY_HOUR = ";".join(f"{h:02d}" for h in range(24))


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("a real small tmpfs needs root to mount (the FakeDisk tests in "
                    "tests/unit/broker/test_store_disk_space.py cover the same behaviour)")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is refused here ({done.stderr.strip() or done.returncode}); "
                    "tests/unit/broker/test_store_disk_space.py covers the same behaviour with a fake file system")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def df(path: Path) -> tuple[int, float]:
    """(used bytes, Use% as df prints it / 100) of the file system holding ``path``."""
    st = os.statvfs(path)
    used = st.f_blocks - st.f_bfree
    return used * st.f_frsize, -(-used * 100 // (used + st.f_bavail)) / 100


def fill_up(path: Path) -> None:
    """Another process filling the disk, fast: write until ENOSPC."""
    with open(path, "wb") as f:
        try:
            while True:
                f.write(b"\0" * 64 * KIB)
                f.flush()
        except OSError:
            pass


def grow_to(path: Path, filler: Path, ratio: float) -> None:
    """Grow ``filler`` until the disk reads ``ratio`` used (as df rounds it)."""
    with open(filler, "ab") as f:
        while df(path)[1] < ratio:
            f.write(b"\0" * 4 * KIB)
            f.flush()


async def send(namesrv: str, topic: str, body: bytes) -> None:
    async with Producer(namesrv, "PG_disk_space", retry_times=0) as producer:
        await producer.send(topic, body, queue=0)


def refused(namesrv: str, topic: str, body: bytes) -> BrokerError:
    with pytest.raises(SendFailedError) as info:
        asyncio.run(send(namesrv, topic, body))
    cause = info.value.__cause__
    assert isinstance(cause, BrokerError), repr(info.value)
    return cause


def dumped(child: Child, what: str) -> AssertionError:
    """A broker that did not do ``what`` in time: its threads' stacks (faulthandler, on SIGABRT) and its log,
    so a wait that ran out says where the broker was, not only that it was late."""
    if child.proc.poll() is None:
        child.proc.send_signal(signal.SIGABRT)
        try:
            child.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
    return AssertionError(f"{what}; the broker's stderr (stacks at the end):\n{child.stderr[-6000:]}")


def ready_namesrv(child: Child, what: str) -> str:
    """Wait for the READY line of a broker started as ``rmqrun broker``; its name server address."""
    try:
        child.wait_output("RMQRUN_BROKER_READY", 60, stream="stdout")
    except AssertionError as exc:
        raise dumped(child, f"{what}: {exc}") from None
    line = next(ln for ln in child.stdout.splitlines() if ln.startswith("RMQRUN_BROKER_READY"))
    return dict(p.split("=", 1) for p in line.split()[1:])["namesrv"]


def pull_all(namesrv: str, group: str, topic: str) -> list[bytes]:
    with PullConsumer(namesrv, group) as pc:
        mq = next(q for q in pc.fetch_subscribe_message_queues(topic) if q.queue_id == 0)
        out: list[bytes] = []
        offset = 0
        while True:
            res = pc.pull(mq, "*", offset, 32)
            if res.status is not PullStatus.FOUND:
                return out
            out += [m.body for m in res.messages]
            offset = res.next_begin_offset


def runtime_info(eb: EmbeddedBroker) -> dict[str, str]:
    """What ``mqadmin brokerStatus`` asks for (GET_BROKER_RUNTIME_INFO)."""
    async def main() -> dict[str, str]:
        conn = await Connection.open(eb.broker_address)
        try:
            resp = await conn.request(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO, {}, None), 10)
            return fastjson.loads(resp.body)["table"]
        finally:
            conn.close()
    return asyncio.run(main())


# --------------------------------------------------------------------------- no mount needed

def test_runtime_info_reports_the_disk_ratio_as_df_does(tmp_path: Path) -> None:
    eb = start_broker(tmp_path)
    try:
        data = eb.config.data_dir
        st = os.statvfs(data)
        used = st.f_blocks - st.f_bfree
        as_df = -(-used * 100 // (used + st.f_bavail)) / 100
        info = runtime_info(eb)
        # (a file written meanwhile may move it by a percent)
        assert abs(float(info["commitLogDiskRatio"]) - as_df) <= 0.011, (info["commitLogDiskRatio"], as_df)
        # It is the reading retention decides on, not a second computation.
        eb.broker.store.set_disk_usage(lambda _p: 0.27)
        info = runtime_info(eb)
        assert info["commitLogDiskRatio"] == info["consumeQueueDiskRatio"] == "0.27"
        assert info[f"commitLogDiskRatio_{data}/commitlog"] == "0.27"
    finally:
        eb.stop_in_thread()


def test_messages_retention_deleted_before_a_group_pulled_them_are_counted(tmp_path: Path) -> None:
    eb = start_broker(tmp_path, segment_size=4096, max_message_size=1024, consume_queue_entries_per_file=8,
                      file_reserved_hours=2 / 3600, delete_when=EVERY_HOUR, clean_resource_interval_ms=200)
    store = eb.broker.store
    try:
        produce(eb, "SKIP", 120)
        maxes = queue_max_offsets(eb, "SKIP")
        wait_until(lambda: len(list((eb.config.data_dir / "commitlog").iterdir())) == 1
                   and store.retention.followed_min == store.commit_log_min_offset, 30, "retention to settle")
        mins = {q: store.min_offset("SKIP", q) for q in maxes}
        assert sum(mins.values()) > 0
        with PullConsumer(eb.namesrv_address, "GSKIP") as pc:
            for _ in range(2):  # asked twice: counted once
                for mq in pc.fetch_subscribe_message_queues("SKIP"):
                    res = pc.pull(mq, "*", 0, 32)
                    assert res.status is PullStatus.OFFSET_ILLEGAL and res.next_begin_offset == mins[mq.queue_id]
        assert store.retention.skipped_messages == sum(mins.values())
    finally:
        eb.stop_in_thread()


def test_json_log_mode_writes_nothing_to_stdout(tmp_path: Path) -> None:
    args = ["broker", "--data-dir", str(tmp_path / "data"), "--namesrv-port", str(free_port()), "--broker-port", "0",
            "--log-format", "json"]
    with Child(args, tmp_path, name="json-broker") as child:
        child.wait_output("name server on", 60)
        record = next(json.loads(ln) for ln in child.stderr.splitlines() if "name server on" in ln)
        extra = record["record"]["extra"]
        assert extra["namesrv"] and extra["broker"] and extra["pid"] == child.pid
        child.signal(signal.SIGTERM)
        assert child.wait(30) == 0
    assert child.stdout == "", child.stdout[:500]
    for line in child.stderr.splitlines():
        json.loads(line)  # every line is one JSON object


# --------------------------------------------------------------------------- a real small tmpfs

def test_on_a_real_tmpfs_forced_cleanup_frees_space_at_once_and_stops_at_the_threshold(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "8m") as small:
        seg = 256 * KIB  # 3.125% of the disk each
        eb = EmbeddedBroker(small / "data", segment_size=seg, max_message_size=64 * KIB,
                            clean_resource_interval_ms=200, flush_mode="async").start_in_thread()
        try:
            body = os.urandom(16 * KIB)  # (random: the producer compresses bodies over 4 KiB)

            async def produce_mib(n: int) -> None:
                async with Producer(eb.namesrv_address, "PG_tmpfs") as producer:
                    for _ in range(n * 64):
                        await producer.send("TMPFS", body, queue=0)
            asyncio.run(produce_mib(4))  # 4 MiB: 16 files, 50% of the disk
            log_dir = small / "data" / "commitlog"
            files = sorted(p.name for p in log_dir.iterdir())
            assert len(files) >= 16
            grow_to(small, small / "filler", 0.87)  # above 85%: one file (3.1%) brings it under, not two
            before, _ = df(small)
            wait_until(lambda: len(list(log_dir.iterdir())) < len(files), 20, "the forced cleanup")
            wait_until(lambda: df(small)[1] <= 0.85, 10, "df to show the space freed")
            after, ratio = df(small)
            left = sorted(p.name for p in log_dir.iterdir())
            assert left == files[1:], f"deleted {len(files) - len(left)} files where one was enough ({ratio})"
            assert before - after >= seg - 16 * KIB, (before, after)
            assert eb.broker.store.retention.last_used <= 0.85
        finally:
            eb.stop_in_thread()


def test_on_a_real_tmpfs_a_fast_fill_refuses_sends_and_they_resume_once_space_is_back(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "small", "4m") as small:
        data = small / "data"
        # One commit-log file, never full here: retention can delete nothing, so every acknowledged
        # message must still be there at the end (a segment bigger than the free space is refused at
        # start: segment_space.py). The periodic check is far off: only the failed write itself can
        # notice the full disk.
        settings = dict(segment_size=3 * MIB, max_message_size=64 * KIB, clean_resource_interval_ms=600_000,
                        flush_mode="async")
        eb = EmbeddedBroker(data, **settings).start_in_thread()  # type: ignore[arg-type]
        acked: list[bytes] = []
        try:
            for i in range(20):
                body = os.urandom(12 * KIB)
                asyncio.run(send(eb.namesrv_address, "FAST", body))
                acked.append(body)
            fill_up(small / "filler")
            err = refused(eb.namesrv_address, "FAST", os.urandom(40 * KIB))
            assert err.code == ResponseCode.SERVICE_NOT_AVAILABLE, err
            store = eb.broker.store
            assert store.disk_full and store.retention.no_space
            log = data / "commitlog" / f"{0:020d}"
            assert log.stat().st_size == store.commit_log_max_offset, "a torn write was left in the log"
            (small / "filler").unlink()
            # No restart: the next sends find the space (within about a second).
            wait_until(lambda: _sends(eb.namesrv_address, b"after"), 20, "sends to be stored again")
            acked.append(b"after")
            assert not store.disk_full
            got = pull_all(eb.namesrv_address, "GFAST", "FAST")
            assert got[:len(acked) - 1] == acked[:-1] and got[-1] == b"after", [len(b) for b in got]
            acked = got
        finally:
            eb.stop_in_thread()
        eb = EmbeddedBroker(data, **settings).start_in_thread()  # type: ignore[arg-type]
        try:
            assert eb.broker.store.recovery is not None and eb.broker.store.recovery.truncated_bytes == 0
            assert pull_all(eb.namesrv_address, "GFAST2", "FAST") == acked
        finally:
            eb.stop_in_thread()


def _sends(namesrv: str, body: bytes) -> bool:
    try:
        asyncio.run(send(namesrv, "FAST", body))
    except SendFailedError:
        return False
    return True


@pytest.mark.parametrize("loop", LOOPS)
def test_on_a_real_tmpfs_sigterm_on_a_full_disk_is_a_stop_not_a_start_failure(tmp_path: Path, loop: str) -> None:
    if loop == "uvloop":
        pytest.importorskip("uvloop", reason="the optional rmqrun[uvloop] extra is not installed")
    with tmpfs(tmp_path / "small", "2m") as small:
        data = small / "data"
        args = ["broker", "--data-dir", str(data), "--namesrv-port", str(free_port()), "--broker-port", "0",
                "--flush", "async", "--segment-size", "1MiB", "--event-loop", loop,
                "--max-message-size", "256KiB"]  # the default would not fit: refused at start
        stacks = child_env(PYTHONFAULTHANDLER="1")  # a wait that runs out dumps the broker's threads
        with Child(args, tmp_path, env=stacks, name="full-broker") as child:
            namesrv = ready_namesrv(child, "the first start")
            asyncio.run(send(namesrv, "TERM", b"before"))
            fill_up(small / "filler")
            with PullConsumer(namesrv, "GTERM") as pc:  # offsets to save at the stop
                mq = next(q for q in pc.fetch_subscribe_message_queues("TERM") if q.queue_id == 0)
                pc.update_consume_offset(mq, 1)
                pc.persist_consume_offsets()
            child.signal(signal.SIGTERM)
            try:
                code = child.wait(30)
            except subprocess.TimeoutExpired:
                raise dumped(child, "the SIGTERM stop on a full disk did not end in 30 s") from None
        err = child.stderr
        assert "cannot start the broker" not in err and "Traceback" not in err, err[-3000:]
        stop_lines = [ln for ln in err.splitlines() if "the broker stopped, but not cleanly" in ln]
        assert len(stop_lines) == 1 and "No space left on device" in stop_lines[0], err[-3000:]
        assert str(data) in stop_lines[0]
        assert code == 1
        (small / "filler").unlink()
        # Nothing acknowledged was lost: the next start finds the message.
        with Child(args, tmp_path, env=stacks, name="full-broker-again") as again:
            namesrv = ready_namesrv(again, "the start after the full-disk stop")
            assert pull_all(namesrv, "GTERM2", "TERM") == [b"before"]
