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
from tests.peers.stub_broker import StubCluster, parse_properties

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
    began = time.monotonic()
    results = cpp.run_producer(f"127.0.0.1:{closed_port}", topic="T_closed", count=3, tags=["TagA"],
                               home=tmp_path, check=False)
    elapsed = time.monotonic() - began
    # Measured: ~15 ms for the send, ~0.2 s for the whole child (connection refused is immediate).
    assert elapsed < 5.0
    assert len(results) == 1  # fail fast: no further sends after the first failure
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
    began = time.monotonic()
    with pytest.raises(CppPeerError) as info:
        cpp.run_producer(f"127.0.0.1:{silent_port}", topic="T", count=1, send_deadline=1.5, home=tmp_path)
    assert 1.5 <= time.monotonic() - began < 10.0
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
    began = time.monotonic()
    assert consumer.stop() == EXIT_OK
    assert time.monotonic() - began < 5.0  # measured ~0.1 s
    done = consumer.lines()[-1]
    assert done["event"] == "done" and done["reason"] == "signal"
    assert not home.exists()  # the temp home of a clean run is removed


@needs_library
def test_waiting_for_messages_from_a_consumer_that_exited_fails_at_once(closed_port: int, tmp_path: Path) -> None:
    consumer = cpp.start_consumer(f"127.0.0.1:{closed_port}", topic="T", expect=1, timeout=0.5, home=tmp_path)
    began = time.monotonic()
    with pytest.raises(CppPeerError, match="exited before 1 successful messages"):
        consumer.wait_ok(1, timeout=30)
    assert time.monotonic() - began < 15.0
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


# ------------------------------------------- end to end, against a stub broker
# tests/peers/stub_broker.py answers just enough of the protocol for the C++
# client to send and receive; it stands in until rmqrun's embedded broker exists.

@pytest.fixture
def stub() -> Iterator[StubCluster]:
    cluster = StubCluster().start()
    yield cluster
    cluster.stop()


@needs_library
def test_produce_reports_every_send_and_the_cpp_header_marks(stub: StubCluster) -> None:
    results = cpp.run_producer(stub.namesrv, topic="T_e2e", count=6, tags=["TagA", "TagB", "TagC"],
                               keys_prefix="k", props={"color": "red"})
    assert [r["index"] for r in results] == list(range(6))
    assert {r["status"] for r in results} == {"OK"}
    # The client spreads sends round-robin over the 4 queues; offset is the queue offset.
    assert [r["offset"] for r in results] == [0, 0, 0, 0, 1, 1]
    sends = stub.seen(10)  # SEND_MESSAGE, not SEND_MESSAGE_V2
    assert len(sends) == 6
    for result, request in zip(results, sends):
        assert (request.language, request.version, request.flag) == ("CPP", 63, 0)
        props = parse_properties(request.ext["properties"])
        assert props["idx"] == str(result["index"]) and props["color"] == "red"
        assert props["KEYS"] == result["keys"] and props["TAGS"] == result["tags"]
        assert props["UNIQ_KEY"] == result["msg_id"]  # the C++ result's msg id is the client-made UNIQ_KEY
        assert request.body == f"cpp-peer #{result['index']}".encode()


@needs_library
def test_orderly_oneway_and_batch_sends(stub: StubCluster) -> None:
    orderly = cpp.run_producer(stub.namesrv, topic="T_mode", count=6, orderly=True, sharding_key_mod=3)
    assert [(r["shard"], r["queue"], r["queue_count"]) for r in orderly] == [(i % 3, i % 3, 4) for i in range(6)]
    assert [(m.queue_id, m.properties["shard"]) for m in stub.queues[("T_mode", 1)]] == [(1, "1"), (1, "1")]

    oneway = cpp.run_producer(stub.namesrv, topic="T_mode", count=2, oneway=True)
    assert [r["status"] for r in oneway] == ["ONEWAY", "ONEWAY"]
    assert {r.flag for r in stub.seen(10)} == {0}  # the C++ "oneway" send still waits for a response

    batch = cpp.run_producer(stub.namesrv, topic="T_batch", count=3, batch=3, tags=["TagA"])
    assert [(r["batch"], r["batch_pos"], r["status"]) for r in batch] == [(0, 0, "OK"), (0, 1, "OK"), (0, 2, "OK")]
    batch_request = stub.seen(10)[-1]
    assert batch_request.ext["batch"] == "1"  # SEND_MESSAGE with a batch body, not SEND_BATCH_MESSAGE
    stored = next(msgs for (topic, _), msgs in stub.queues.items() if topic == "T_batch")
    assert [m.properties["idx"] for m in stored] == ["0", "1", "2"]


@needs_library
def test_consumer_fails_first_delivery_then_gets_the_retry(stub: StubCluster) -> None:
    cpp.run_producer(stub.namesrv, topic="T_c", count=4, tags=["TagA", "TagB"], body_size=5000)
    # 5000 bytes > the client's 4 KiB compression threshold: stored compressed (sysFlag bit 0).
    assert all(m.sys_flag & 1 and len(m.body) < 5000 for q in stub.queues.values() for m in q)
    with cpp.start_consumer(stub.namesrv, topic="T_c", group="CG_c", tags="TagA || TagB", fail_first=[1],
                            expect=4, timeout=30) as consumer:
        assert consumer.wait(timeout=60) == EXIT_OK
    messages = consumer.messages()
    by_verdict = [(m["properties"]["idx"], m["verdict"], m["reconsume_times"]) for m in messages]
    assert ("1", "RECONSUME_LATER", 0) in by_verdict and ("1", "CONSUME_SUCCESS", 1) in by_verdict
    assert sorted(m["properties"]["idx"] for m in messages if m["verdict"] == "CONSUME_SUCCESS") == ["0", "1", "2", "3"]
    retried = next(m for m in messages if m["reconsume_times"] == 1)
    assert retried["topic"] == "T_c" and retried["properties"]["RETRY_TOPIC"] == "T_c"  # topic restored
    assert retried["body_len"] == 5000 and retried["body"].startswith("cpp-peer #1 ")  # decompressed
    assert consumer.lines()[-1] == {"event": "done", "exit_code": 0, "reason": "expect", "ok_count": 4,
                                    "deliveries": 5, "callback_errors": 0, "expect": 4}

    (send_back,) = stub.seen(36)  # CONSUMER_SEND_MSG_BACK: group, commit-log offset, delayLevel only
    assert set(send_back.ext) - {"AccessKey", "OnsChannel", "Signature"} == {"group", "offset", "delayLevel"}
    heartbeats = [json.loads(r.body) for r in stub.seen(34)]  # the producer's heartbeat may come first
    consumer_data = next(h["consumerDataSet"][0] for h in heartbeats if h.get("consumerDataSet"))
    assert (consumer_data["groupName"], consumer_data["messageModel"]) == ("CG_c", 1)  # CLUSTERING
    subs = {s["topic"]: s["subString"] for s in consumer_data["subscriptionDataSet"]}
    assert subs == {"T_c": "TagA || TagB", "%RETRY%CG_c": "*"}
    assert stub.seen(35) and stub.seen(35)[-1].ext["consumerGroup"] == "CG_c"  # unregistered at shutdown
    assert sum(v for (g, t, _), v in stub.offsets.items() if (g, t) == ("CG_c", "T_c")) == 4


@needs_library
def test_orderly_consumer_locks_queues_and_retries_in_place(stub: StubCluster) -> None:
    cpp.run_producer(stub.namesrv, topic="T_o", count=6, orderly=True, sharding_key_mod=2)
    with cpp.start_consumer(stub.namesrv, topic="T_o", group="CG_o", orderly=True, fail_first=[2], expect=6,
                            timeout=30) as consumer:
        assert consumer.wait(timeout=60) == EXIT_OK
    deliveries = [(m["queue_id"], m["queue_offset"], m["verdict"]) for m in consumer.messages()]
    queue0 = [d for d in deliveries if d[0] == 0]
    # idx 2 is queue 0 offset 1: suspended, then redelivered from the same queue, before offset 2.
    assert queue0 == [(0, 0, "CONSUME_SUCCESS"), (0, 1, "RECONSUME_LATER"), (0, 1, "CONSUME_SUCCESS"),
                      (0, 2, "CONSUME_SUCCESS")]
    assert not stub.seen(36)  # orderly retries stay local: no send-back
    locked = {q["queueId"] for r in stub.seen(41) for q in json.loads(r.body)["mqSet"] if q["topic"] == "T_o"}
    assert locked == {0, 1, 2, 3}
