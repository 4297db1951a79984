"""The C++ client peer harness (tests/peers) before any broker exists.

What can be checked without a broker: the peer's command line, that
librocketmq loads in a child process, that its logs stay out of $HOME, and
that every way of failing to reach a name server ends promptly with a clear
message and the documented exit code, so conformance tests never hang on it.
Only loopback addresses are used.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.peers import cpp
from tests.peers.cpp import (
    EXIT_HUNG, EXIT_OK, EXIT_SEND_FAILED, EXIT_TIMEOUT, EXIT_USAGE, PEER_SCRIPT, CppPeerError,
)

pytestmark = pytest.mark.cpp

needs_library = pytest.mark.skipif(not cpp.cpp_available(), reason=cpp.cpp_unavailable_reason())


def run_peer(*argv: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PEER_SCRIPT), *argv], capture_output=True, text=True,
                          timeout=timeout)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers a byte."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


@pytest.fixture
def real_home_logs() -> Iterator[None]:
    """Fail if the C++ client wrote into the real ~/logs/rocketmq-cpp during the test."""
    logdir = Path(os.path.expanduser("~")) / "logs" / "rocketmq-cpp"
    before = set(logdir.iterdir()) if logdir.is_dir() else set()
    yield
    after = set(logdir.iterdir()) if logdir.is_dir() else set()
    assert after == before, f"the C++ client wrote into the real home: {sorted(after - before)}"


# ------------------------------------------------------------ command line

def test_help_documents_every_subcommand_and_option() -> None:
    top = run_peer("--help")
    assert top.returncode == 0
    assert all(name in top.stdout for name in ("probe", "produce", "consume"))
    produce = run_peer("produce", "--help").stdout
    for option in ("--namesrv", "--group", "--topic", "--count", "--tags", "--keys-prefix", "--prop", "--orderly",
                   "--sharding-key-mod", "--oneway", "--body-size", "--batch", "--send-deadline", "--home"):
        assert option in produce, option
    consume = run_peer("consume", "--help").stdout
    for option in ("--tags", "--orderly", "--fail-first", "--expect", "--timeout", "--broadcasting",
                   "--shutdown-deadline"):
        assert option in consume, option


@pytest.mark.parametrize("argv, complaint", [
    (["produce", "--namesrv", "127.0.0.1:9876", "--group", "G", "--topic", "T"], "--count"),
    (["produce", "--namesrv", "127.0.0.1:9876", "--group", "G", "--topic", "T", "--count", "1", "--prop", "novalue"],
     "expected k=v"),
    (["consume", "--namesrv", "127.0.0.1:9876", "--group", "G", "--topic", "T", "--expect", "many"], "--expect"),
    (["send", "--namesrv", "127.0.0.1:9876"], "invalid choice"),
])
def test_bad_arguments_exit_2_with_the_reason(argv: list[str], complaint: str) -> None:
    proc = run_peer(*argv)
    assert proc.returncode == EXIT_USAGE
    assert complaint in proc.stderr
    assert proc.stdout == ""  # nothing that could be mistaken for a result


@pytest.mark.parametrize("namesrv", ["10.0.0.1:9876", "example.com:9876", "127.0.0.1:9876;192.0.2.1:9876"])
def test_non_loopback_name_servers_are_refused_before_any_connection(namesrv: str) -> None:
    proc = run_peer("produce", "--namesrv", namesrv, "--group", "G", "--topic", "T", "--count", "1")
    assert proc.returncode == EXIT_USAGE
    error = json_lines(proc.stdout)[0]
    assert error["event"] == "error" and "not on loopback" in error["message"]


def test_combining_batch_with_orderly_is_a_usage_error(tmp_path: Path) -> None:
    proc = run_peer("produce", "--namesrv", "127.0.0.1:9876", "--group", "G", "--topic", "T", "--count", "2",
                    "--batch", "2", "--orderly", "--home", str(tmp_path))
    assert proc.returncode == EXIT_USAGE
    assert "--batch cannot be combined" in json_lines(proc.stdout)[0]["message"]


def test_a_library_that_cannot_load_is_reported_with_exit_4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Shadow the real package with one whose import fails the way a missing .so does.
    fake = tmp_path / "shadow" / "rocketmq"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "ffi.py").write_text("raise ImportError('rocketmq dynamic library not found')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "shadow")}
    proc = subprocess.run([sys.executable, str(PEER_SCRIPT), "probe", "--home", str(tmp_path / "home")],
                          capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode == cpp.EXIT_CLIENT_ERROR
    error, done = json_lines(proc.stdout)
    assert error == {"event": "error", "kind": "library", "error_type": "ImportError",
                     "message": "rocketmq dynamic library not found"}
    assert done == {"event": "done", "exit_code": cpp.EXIT_CLIENT_ERROR}

    # The helper turns the same failure into a skip reason instead of an error.
    monkeypatch.setenv("PYTHONPATH", env["PYTHONPATH"])
    cpp._probe.cache_clear()
    try:
        assert cpp.cpp_available() is False
        assert "cannot load" in cpp.cpp_unavailable_reason()
        assert "rocketmq dynamic library not found" in cpp.cpp_unavailable_reason()
    finally:
        cpp._probe.cache_clear()  # the next caller probes the real library again


# ----------------------------------------------------------------- library

@needs_library
def test_library_loads_in_a_child_and_logs_under_the_given_home(tmp_path: Path, real_home_logs: None) -> None:
    proc = run_peer("probe", "--home", str(tmp_path))
    assert proc.returncode == EXIT_OK, proc.stderr
    probe, done = json_lines(proc.stdout)
    assert probe["event"] == "probe" and probe["ok"] is True and probe["missing_symbols"] == []
    assert Path(probe["library"]).name == "librocketmq.so" and Path(probe["library"]).is_file()
    assert probe["home"] == str(tmp_path)
    assert done == {"event": "done", "exit_code": 0}


@needs_library
def test_producer_to_a_closed_port_fails_fast_with_a_clear_error(closed_port: int, tmp_path: Path,
                                                                 real_home_logs: None) -> None:
    results = cpp.run_producer(f"127.0.0.1:{closed_port}", topic="T_closed", count=3, tags=["TagA"],
                               home=tmp_path, check=False)
    # Fail fast: no further sends after the first failure (how fast is the machine's business: measured
    # ~15 ms for the send, ~0.2 s for the whole child, connection refused being immediate).
    assert len(results) == 1
    failed = results[0]
    assert failed["event"] == "send_failed" and failed["index"] == 0 and failed["tags"] == "TagA"
    assert failed["error_type"] == "ProducerSendSyncFailed"
    assert "No route info of this topic: T_closed" in failed["error"]
    log = "\n".join(p.read_text() for p in (tmp_path / "logs" / "rocketmq-cpp").iterdir())
    assert f"can not connect to server:127.0.0.1:{closed_port}" in log


@needs_library
def test_run_producer_raises_with_the_peer_output_and_the_cpp_log(closed_port: int, tmp_path: Path) -> None:
    with pytest.raises(CppPeerError) as info:
        cpp.run_producer(f"127.0.0.1:{closed_port}", topic="T_closed", count=2, orderly=True,
                         sharding_key_mod=2, home=tmp_path)
    assert info.value.returncode == EXIT_SEND_FAILED
    text = str(info.value)
    assert "ProducerSendOrderlyFailed" in text  # the peer's line
    assert "can not connect to server" in text  # the C++ client's own log
    assert [line["event"] for line in info.value.lines] == ["started", "send_failed", "done"]


@needs_library
def test_keep_going_reports_every_message(closed_port: int, tmp_path: Path) -> None:
    results = cpp.run_producer(f"127.0.0.1:{closed_port}", topic="T", count=3, keep_going=True,
                               keys_prefix="k", props={"color": "red"}, home=tmp_path, check=False)
    assert [(r["event"], r["index"], r["keys"]) for r in results] == [
        ("send_failed", 0, "k-0"), ("send_failed", 1, "k-1"), ("send_failed", 2, "k-2")]


@needs_library
def test_producer_blocked_by_a_silent_name_server_is_ended_by_the_watchdog(silent_port: int,
                                                                          tmp_path: Path) -> None:
    # Unchecked, the C++ producer waits 5 s per route query, 12 queries: a 60 s send.
    # Ended by the watchdog (EXIT_HUNG), not by run_producer's own kill (returncode None): no timing needed.
    began = time.monotonic()
    with pytest.raises(CppPeerError) as info:
        cpp.run_producer(f"127.0.0.1:{silent_port}", topic="T", count=1, send_deadline=1.5, home=tmp_path)
    assert time.monotonic() - began >= 1.5  # not before its deadline
    assert info.value.returncode == EXIT_HUNG
    error = next(line for line in info.value.lines if line["event"] == "error")
    assert error["kind"] == "deadline" and error["operation"] == "send #0"


@needs_library
def test_consumer_without_a_name_server_times_out_with_exit_3(closed_port: int, tmp_path: Path,
                                                              real_home_logs: None) -> None:
    consumer = cpp.start_consumer(f"127.0.0.1:{closed_port}", topic="T", group="CG_t", expect=1, timeout=1.0,
                                  home=tmp_path)
    started = consumer.wait_started()
    assert started["group"] == "CG_t" and started["expression"] == "*" and started["pid"] == consumer.pid
    assert consumer.wait(timeout=30) == EXIT_TIMEOUT
    events = [line["event"] for line in consumer.lines()]
    assert events == ["started", "shutdown", "done"]
    assert consumer.lines()[-1]["reason"] == "timeout" and consumer.lines()[-1]["ok_count"] == 0


@needs_library
def test_consumer_stop_shuts_the_client_down_cleanly(closed_port: int) -> None:
    consumer = cpp.start_consumer(f"127.0.0.1:{closed_port}", topic="T", tags="TagA || TagB", orderly=True,
                                  fail_first=[1, 2], timeout=120)
    home = Path(consumer.home)
    consumer.wait_started()
    assert consumer.stop() == EXIT_OK  # measured ~0.1 s
    done = consumer.lines()[-1]
    assert done["event"] == "done" and done["reason"] == "signal"
    assert not home.exists()  # the temp home of a clean run is removed


@needs_library
def test_waiting_for_messages_from_a_consumer_that_exited_fails_at_once(closed_port: int, tmp_path: Path) -> None:
    consumer = cpp.start_consumer(f"127.0.0.1:{closed_port}", topic="T", expect=1, timeout=0.5, home=tmp_path)
    # "exited before": noticed the exit; a wait that missed it would end "still waiting after 120s"
    with pytest.raises(CppPeerError, match="exited before 1 successful messages"):
        consumer.wait_ok(1, timeout=120)
    assert consumer.wait() == EXIT_TIMEOUT


@needs_library
@pytest.mark.slow
def test_consumer_against_a_silent_name_server_blocks_in_start_and_shutdown(silent_port: int,
                                                                            tmp_path: Path) -> None:
    # Measured once by hand: start() 10.0 s, shutdown() 13.0 s. The harness defaults
    # (20 s per native call) must stay above these.
    consumer = cpp.start_consumer(f"127.0.0.1:{silent_port}", topic="T", timeout=0.5, home=tmp_path)
    started = consumer.wait_started(timeout=cpp.START_DEADLINE_S + 5)
    assert 8_000 < started["start_ms"] < cpp.START_DEADLINE_S * 1000
    assert consumer.wait() == EXIT_OK
    shutdown = next(line for line in consumer.lines() if line["event"] == "shutdown")
    assert shutdown["elapsed_ms"] < cpp.SHUTDOWN_DEADLINE_S * 1000
