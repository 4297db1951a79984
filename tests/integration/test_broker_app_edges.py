"""The embedded broker's start and stop API when things go wrong: clear errors, nothing left running.

Tests and programs start the broker on their loop, on a private thread, or as a
child process; a port already taken, an unknown setting or a data directory that
cannot be used must come back as an error naming the cause, with the part that
did start shut down again.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from rmqrun.broker.app import BrokerProcess, EmbeddedBroker, make_config


def _taken_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock


def _can_connect(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def test_unknown_settings_are_refused_with_the_valid_ones_listed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown broker setting\(s\) \['flush_dsik'\]; valid: \[.*'flush_mode'"):
        make_config(tmp_path, flush_dsik="sync")
    with pytest.raises(ValueError, match="EmbeddedBroker needs a data_dir"):
        EmbeddedBroker(None)


def test_a_wildcard_host_is_told_to_clients_as_the_advertised_address(tmp_path: Path) -> None:
    eb = EmbeddedBroker(tmp_path, host="0.0.0.0", advertise_host="127.0.0.1")
    assert eb.namesrv_address == f"127.0.0.1:{eb.namesrv.server.port}"


def test_a_name_server_port_in_use_fails_the_start_and_stops_the_broker(tmp_path: Path) -> None:
    taken = _taken_port()
    try:
        port = taken.getsockname()[1]

        async def main() -> None:
            eb = EmbeddedBroker(tmp_path / "a", namesrv_port=port)
            with pytest.raises(OSError):
                await eb.start()
            # the broker part had started first: it is closed again, its port free
            assert eb.broker.server._server is None or not eb.broker.server._server.is_serving()
        asyncio.run(main())

        thread_eb = EmbeddedBroker(tmp_path / "b", namesrv_port=port)
        with pytest.raises(OSError):
            thread_eb.start_in_thread(timeout=30)
        thread_eb.stop_in_thread()  # not running: nothing to do, no error
    finally:
        taken.close()


def test_a_broker_on_a_thread_starts_once_and_stops(tmp_path: Path) -> None:
    eb = EmbeddedBroker(tmp_path)
    eb.stop_in_thread()  # never started: nothing to do
    with eb:
        assert _can_connect(eb.broker_address) and _can_connect(eb.namesrv_address)
        with pytest.raises(RuntimeError, match="already running in a thread"):
            eb.start_in_thread()
    assert not _can_connect(eb.broker_address)


def test_a_broker_process_that_cannot_start_is_reported_with_its_log(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be")
    bp = BrokerProcess(blocker / "data", log_path=tmp_path / "broker.log")
    with pytest.raises(RuntimeError, match="broker process did not become ready within 30"):
        bp.start(timeout=30)
    assert bp.proc is not None and bp.proc.poll() is not None, "the child is gone"
    assert bp.stop() == bp.proc.returncode, "stopping a dead child returns its exit status"
