"""``rmqrun run`` as a ``Type=notify`` service: a fake systemd on a real NOTIFY_SOCKET.

The test binds the datagram socket systemd would, starts ``rmqrun run`` as a
child with ``NOTIFY_SOCKET`` (and ``WATCHDOG_USEC``) set, and checks what
arrives: READY=1 only once the consumer is really registered with the
broker, STATUS= lines, WATCHDOG=1 pings faster than the watchdog period,
and STOPPING=1 when SIGTERM starts the graceful stop, then exit code 0.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import time
from pathlib import Path

from rmqrun.client.instance import ClientInstance
from tests.integration.cli_kit import Child, child_env, embedded_broker, produce, run_args, wait_for

WATCHDOG_USEC = 400_000  # pings expected every 0.2 s


class FakeSystemd:
    """The receiving end of sd_notify: a bound AF_UNIX datagram socket, messages with arrival times."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(("\0" + address[1:]) if address.startswith("@") else address)
        self.sock.settimeout(0.05)
        self.messages: list[tuple[float, dict[str, str]]] = []

    def drain(self) -> list[tuple[float, dict[str, str]]]:
        while True:
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, BlockingIOError):
                return self.messages
            fields = dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)
            self.messages.append((time.monotonic(), fields))

    def first(self, key: str, value: str | None = None) -> dict[str, str] | None:
        for _, fields in self.drain():
            if key in fields and (value is None or fields[key] == value):
                return fields
        return None

    def times(self, key: str) -> list[float]:
        return [t for t, fields in self.drain() if key in fields]

    def close(self) -> None:
        self.sock.close()


def _members(namesrv: str, broker: str, group: str) -> list[str]:
    async def main() -> list[str]:
        inst = ClientInstance(namesrv, instance_name="probe")
        try:
            return await inst.broker.get_consumer_list(broker, group)
        except Exception:
            return []
        finally:
            await inst.close()
    return asyncio.run(main())


def test_ready_status_watchdog_and_stopping(tmp_path: Path) -> None:
    systemd = FakeSystemd(str(tmp_path / "notify.sock"))
    try:
        with embedded_broker(tmp_path) as eb:
            produce(eb.namesrv_address, "SD", 20)
            env = child_env(NOTIFY_SOCKET=systemd.address, WATCHDOG_USEC=str(WATCHDOG_USEC),
                            RMQRUN_STATUS_INTERVAL="0.3")
            with Child(run_args(eb.namesrv_address, "GSD", "SD", "workers.noop:handle", "--workers", "1"),
                       tmp_path, env=env) as child:
                ready = wait_for(lambda: systemd.first("READY", "1"), 30, "READY=1")
                first = systemd.drain()[0][1]
                assert first == {"STATUS": "starting: 1 worker running workers.noop:handle"}, first
                # READY=1 means consuming: the broker already knows this process as a member of the group
                assert _members(eb.namesrv_address, eb.broker_address, "GSD"), "READY before registering"
                assert ready["MAINPID"] == str(child.pid)
                assert ready["STATUS"].startswith("consuming: ")

                wait_for(lambda: len(systemd.times("WATCHDOG")) >= 6, 10, "six WATCHDOG=1 pings")
                pings = systemd.times("WATCHDOG")
                gaps = [b - a for a, b in zip(pings, pings[1:])]
                assert max(gaps) < WATCHDOG_USEC / 1e6, f"a ping came later than the watchdog period: {gaps}"
                # periodic STATUS= lines report progress; all 20 messages show up in one, with no lag left
                wait_for(lambda: any(f.get("STATUS", "").startswith("20 consumed") for _, f in systemd.drain()),
                         10, "STATUS=20 consumed ...")
                status = next(f["STATUS"] for _, f in systemd.drain() if f.get("STATUS", "").startswith("20 consumed"))
                assert re.fullmatch(r"20 consumed \(\d+/s now\), lag 0, 0 failed, \d+ queues?, \d+ batch(es)? in "
                                    r"flight, 1 worker", status), status

                assert systemd.first("STOPPING") is None
                child.signal(signal.SIGTERM)
                assert child.wait(30) == 0
                stopping = systemd.first("STOPPING", "1")
                assert stopping is not None, "no STOPPING=1 on SIGTERM"
                t_stop = next(t for t, f in systemd.drain() if f.get("STOPPING") == "1")
                t_ready = next(t for t, f in systemd.drain() if f.get("READY") == "1")
                assert t_ready < t_stop
    finally:
        systemd.close()


def test_abstract_socket_and_watchdog_pid_of_another_process(tmp_path: Path) -> None:
    """``@name`` is the abstract namespace; WATCHDOG_PID naming someone else means: do not ping."""
    systemd = FakeSystemd(f"@rmqrun-test-{os.getpid()}-{time.monotonic_ns()}")
    try:
        with embedded_broker(tmp_path) as eb:
            produce(eb.namesrv_address, "SD2", 1)
            env = child_env(NOTIFY_SOCKET=systemd.address, WATCHDOG_USEC="200000", WATCHDOG_PID="1")
            with Child(run_args(eb.namesrv_address, "GSD2", "SD2", "workers.noop:handle", "--workers", "1"),
                       tmp_path, env=env) as child:
                wait_for(lambda: systemd.first("READY", "1"), 30, "READY=1 over an abstract socket")
                time.sleep(0.6)
                assert systemd.times("WATCHDOG") == [], "pinged although WATCHDOG_PID is another process"
                child.signal(signal.SIGTERM)
                assert child.wait(30) == 0
                assert systemd.first("STOPPING", "1") is not None
    finally:
        systemd.close()


def test_no_ready_when_the_handler_does_not_load(tmp_path: Path) -> None:
    """systemd must see a failed start, not READY=1 followed by an exit."""
    systemd = FakeSystemd(str(tmp_path / "notify.sock"))
    try:
        with embedded_broker(tmp_path) as eb:
            env = child_env(NOTIFY_SOCKET=systemd.address, WATCHDOG_USEC=str(WATCHDOG_USEC))
            with Child(run_args(eb.namesrv_address, "GSD3", "SD3", "workers.noop:no_such_function",
                                "--workers", "1"), tmp_path, env=env) as child:
                assert child.wait(60) == 3
            assert "no_such_function" in child.stderr
            assert systemd.first("READY") is None
            assert systemd.times("WATCHDOG") == []
    finally:
        systemd.close()
